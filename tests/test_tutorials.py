"""Each tutorial opens with a dry run on `scripted/schema`, and every dry run works as printed.

A dry run is a ```bash block right after a `<!-- dry-run: PATH ... -->` comment that names what the
block must leave behind (glob patterns, relative to the folder it runs in). The test pastes the block
into `bash -e` in an empty temporary folder and changes nothing in it; only the `debatekit` it finds
differs from a reader's: a small script first on PATH runs `sys.executable -m debatekit.cli` with this
checkout first on PYTHONPATH, so the block exercises this checkout rather than whatever is installed.
`DEBATEKIT_MODEL` names a scripted model that does not exist, so a block that forgets `--model` fails
at once instead of loading the local model.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TUTORIALS = ["first-debate", "comparing", "own-dataset", "own-protocol", "sweeps"]
MARKED = re.compile(r"<!-- dry-run: (?P<expects>[^>]*?) -->\n```bash\n(?P<code>.*?)```", re.S)


def dry_runs(name: str) -> list[tuple[list[str], str]]:
    """The marked blocks of a tutorial: (paths they must leave behind, bash code)."""
    text = (ROOT / "docs" / "tutorials" / f"{name}.md").read_text()
    return [(m["expects"].split(), m["code"]) for m in MARKED.finditer(text)]


BLOCKS = [pytest.param(name, i, expects, code, id=f"{name}-{i + 1}")
          for name in TUTORIALS for i, (expects, code) in enumerate(dry_runs(name))]


@pytest.mark.parametrize("name", TUTORIALS)
def test_the_tutorial_opens_with_a_dry_run(name):
    text = (ROOT / "docs" / "tutorials" / f"{name}.md").read_text()
    assert dry_runs(name), f"{name}.md has no block marked <!-- dry-run: ... -->"
    first_block = text.index("```")
    assert text[:first_block].rstrip().endswith("-->") and "<!-- dry-run:" in text[:first_block], \
        f"{name}.md's first code block is not its dry run"


@pytest.mark.parametrize(("name", "index", "expects", "code"), BLOCKS)
def test_the_dry_run_runs_offline_and_leaves_its_files(name, index, expects, code, tmp_path):
    for line in code.splitlines():
        if line.startswith("debatekit run "):
            assert "--model scripted/schema" in line, line
    assert "scripted/schema" in code and "results/" not in code
    assert expects, "the marker names no file to expect"

    shims, work = tmp_path / "bin", tmp_path / "work"
    shims.mkdir()
    work.mkdir()
    shim = shims / "debatekit"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m debatekit.cli "$@"\n')
    shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
    env = {**os.environ, "PATH": f"{shims}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           "DEBATEKIT_MODEL": "scripted/no-model-named-in-the-dry-run"}
    proc = subprocess.run(["bash", "-e", "-c", code], cwd=work, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    for pattern in expects:
        assert list(work.glob(pattern)), f"{pattern} missing after {name}.md's dry run"
    assert [p.name for p in work.iterdir()] == ["runs"], "a dry run writes under runs/ only"
    records = list(work.glob("runs/**/run.json"))
    assert records
    for record in records:
        assert json.loads(record.read_text())["model"] == "scripted/schema", record
