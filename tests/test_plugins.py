"""Protocols from outside debatekit: a file by path, an installed package's entry point, clashes,
broken plugins, provenance in run.json, and `debatekit new protocol`."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from debatekit import registry
from debatekit.cli.app import main

ROOT = Path(__file__).resolve().parent.parent
TUTORIAL = (ROOT / "docs" / "tutorials" / "own-protocol.md").read_text()


@pytest.fixture(autouse=True)
def fresh_registry(monkeypatch):
    """Plugins registered by a test leave the registry as it was."""
    monkeypatch.setattr(registry, "_protocols", dict(registry.available()))
    monkeypatch.setattr(registry, "_loaded", set(registry._loaded))


def readme_pair(folder: Path) -> Path:
    """The tutorial's two-agent example, saved as a file outside the package."""
    code = re.search(r"## A protocol file.*?```python\n(.*?)```", TUTORIAL, re.S).group(1)
    path = folder / "my_protocols.py"
    path.write_text(code)
    return path


def test_the_tutorial_example_runs_from_a_file_by_path_with_its_provenance(tmp_path, capsys):
    path = readme_pair(tmp_path)
    assert main(["run", f"{path}:pair", "--dataset", "arithmetic", "--limit", "2", "--model", "scripted/schema",
                 "--rounds", "2", "--out", str(tmp_path / "run"), "--quiet"]) == 0
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    assert record["protocol_source"] == {"kind": "file", "path": str(path.resolve()),
                                         "sha256": __import__("hashlib").sha256(path.read_bytes()).hexdigest()}
    assert len((tmp_path / "run" / "debates.jsonl").read_text().splitlines()) == 2
    builtin = tmp_path / "b"
    assert main(["run", "single", "--dataset", "arithmetic", "--limit", "1", "--model", "scripted/schema",
                 "--out", str(builtin), "--quiet"]) == 0
    assert json.loads((builtin / "run.json").read_text())["protocol_source"] == {
        "kind": "builtin", "module": "debatekit.protocols.baselines"}


def test_a_sweep_grid_names_a_protocol_file_relative_to_the_grid(tmp_path):
    from debatekit import sweep

    folder = tmp_path / "study"
    folder.mkdir()
    readme_pair(folder)
    grid = folder / "grid.yaml"
    grid.write_text(yaml.safe_dump({"parameters": {"dataset": "arithmetic", "limit": 2, "model": "scripted/schema"},
                                    "points": [{"protocol": "./my_protocols.py:pair", "rounds": 2}]}))
    result = sweep.run_sweep(ROOT / "notebooks" / "run_debate.ipynb", grid, tmp_path / "out", progress=False)
    assert [r.status for r in result.results] == ["complete"], result.results
    (run_json,) = (tmp_path / "out").rglob("run.json")
    assert json.loads(run_json.read_text())["protocol_source"]["path"] == str((folder / "my_protocols.py").resolve())


def _package(site: Path, name: str, module_text: str, entry: str) -> None:
    """A throwaway installed package: its module and a dist-info with a debatekit.protocols entry point."""
    (site / name).mkdir(parents=True)
    (site / name / "__init__.py").write_text("")
    (site / name / "protocols.py").write_text(textwrap.dedent(module_text))
    info = site / f"{name}-0.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.3\n")
    (info / "entry_points.txt").write_text(f"[debatekit.protocols]\n{entry}\n")


PACKAGED = """
from debatekit.engine import Outcome
from debatekit.protocols.shared.answers import first_messages, spec_for
from debatekit.registry import protocol


@protocol("echo_pair")
def echo_pair(temperature: float = 0.0):
    \"\"\"One agent answers; a packaged plugin.\"\"\"

    async def run(item, debate):
        spec = spec_for(item)
        (turn,) = await debate.gather([debate.ask("a", first_messages(spec, item.question), spec.output,
                                                  phase="answer", round=1, temperature=temperature)])
        debate.record_round(1, {"a": turn.parsed.answer if turn.ok else None})
        return Outcome(final_answer=turn.parsed.answer if turn.ok else None)

    return run
"""


def test_an_installed_packages_entry_point_is_listed_and_runs_end_to_end(tmp_path, monkeypatch, capsys):
    _package(tmp_path / "site", "pluginpkg", PACKAGED, "echo_pair = pluginpkg.protocols:echo_pair")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    registry._loaded.discard("plugins")
    assert main(["protocols"]) == 0
    listed = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("echo_pair"))
    assert "package pluginpkg 0.3 (echo_pair = pluginpkg.protocols:echo_pair)" in listed
    assert main(["run", "echo_pair", "--dataset", "arithmetic", "--limit", "2", "--model", "scripted/schema",
                 "--out", str(tmp_path / "run"), "--quiet"]) == 0
    source = json.loads((tmp_path / "run" / "run.json").read_text())["protocol_source"]
    assert source == {"kind": "package", "package": "pluginpkg", "version": "0.3",
                      "entry_point": "echo_pair = pluginpkg.protocols:echo_pair"}


def test_a_plugin_that_fails_to_import_is_one_warning_line_not_a_crash(tmp_path, monkeypatch, capsys):
    _package(tmp_path / "site", "brokenpkg", "import no_such_module_anywhere\n", "broken = brokenpkg.protocols:x")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    registry._loaded.discard("plugins")
    assert main(["protocols"]) == 0
    captured = capsys.readouterr()
    assert "single" in captured.out
    (line,) = [line for line in captured.err.splitlines() if "broken" in line]
    assert line.startswith("debatekit: warning: plugin 'broken' (package brokenpkg 0.3") and "ModuleNotFoundError" in line


def test_a_name_clash_with_a_built_in_is_an_error_naming_both(tmp_path, capsys):
    path = tmp_path / "clash.py"
    path.write_text("from debatekit.registry import protocol\n\n@protocol('single')\ndef single():\n"
                    "    '''Not the built-in.'''\n    return None\n")
    assert main(["run", f"{path}:single", "--dataset", "arithmetic", "--limit", "1", "--model", "scripted/schema",
                 "--out", str(tmp_path / "r")]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert f"protocol 'single' from file {path}" in line and "built in (debatekit.protocols.baselines)" in line


@pytest.mark.parametrize("reference, message", [
    ("missing.py:pair", "protocol file 'missing.py' does not exist"),
    ("{readme}:nothere", "registers no protocol 'nothere'; it registers 'pair'"),
    ("{readme}:pari", "registers no protocol 'pari'; it registers 'pair'; did you mean 'pair'?"),
])
def test_a_bad_file_reference_is_one_clear_line(tmp_path, capsys, reference, message):
    reference = reference.format(readme=readme_pair(tmp_path))
    assert main(["run", reference, "--dataset", "arithmetic", "--model", "scripted/schema"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert message in line


def test_new_protocol_writes_a_two_agent_starting_point_whose_test_passes(tmp_path, capsys):
    assert main(["new", "protocol", "duo", "--dir", str(tmp_path / "mine")]) == 0
    assert "debatekit run" in capsys.readouterr().out
    test = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path / "mine")],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert test.returncode == 0 and "1 passed" in test.stdout, test.stdout + test.stderr
    assert main(["new", "protocol", "duo", "--dir", str(tmp_path / "mine")]) == 2  # never overwrites
    assert main(["new", "protocol", "not-a-name"]) == 2


def test_new_protocol_help_is_the_help_of_new_protocol(capsys):
    with pytest.raises(SystemExit) as done:
        main(["new", "protocol", "--help"])
    out = capsys.readouterr().out
    assert done.value.code == 0
    assert out.startswith("usage: debatekit new protocol") and "--dir" in out and "NAME.py" in out


def test_a_resume_after_the_protocol_file_changed_is_refused_unless_allowed_and_then_both_are_kept(tmp_path, capsys):
    path = readme_pair(tmp_path)
    out = tmp_path / "run"
    args = ["run", f"{path}:pair", "--dataset", "arithmetic", "--model", "scripted/schema", "--rounds", "2",
            "--out", str(out), "--quiet"]
    assert main([*args, "--limit", "2"]) == 0
    first = __import__("hashlib").sha256(path.read_bytes()).hexdigest()
    path.write_text(path.read_text() + "\n# edited after the run began\n")
    second = __import__("hashlib").sha256(path.read_bytes()).hexdigest()
    capsys.readouterr()
    assert main([*args, "--limit", "3", "--resume"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "the code of protocol" in err and "--allow-protocol-change" in err
    assert len((out / "debates.jsonl").read_text().splitlines()) == 2  # nothing ran with the new code
    assert main([*args, "--limit", "3", "--resume", "--allow-protocol-change"]) == 0
    record = json.loads((out / "run.json").read_text())
    assert [(v["sha256"], v["from_resume"]) for v in record["protocol_versions"]] == [(first, 0), (second, 1)]
    assert record["protocol_source"]["sha256"] == second and len(record["resumes"]) == 1
    assert main([*args, "--limit", "3", "--allow-protocol-change"]) == 2  # the flag belongs to --resume
