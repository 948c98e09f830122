"""One configuration object, end to end: `RunConfig` is what the CLI builds, a grid point and the sweep
notebook carry, and run.json records; its hash stays that of every committed run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from debatekit.records.resume import FIRST_FIELDS, UNHASHED, config_hash
from debatekit.records.schemas import RunConfig

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = sorted(ROOT.glob("results/**/run.json"))


def test_there_are_committed_runs_to_check():
    assert len(COMMITTED) >= 20


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: str(p.parent.relative_to(ROOT / "results")))
def test_a_committed_runs_config_hash_is_unchanged(path):
    """Rebuilt from its run.json, a committed run's configuration hashes as it did when it ran, so it still
    resumes and its sweep point is still found complete."""
    record = json.loads(path.read_text(encoding="utf-8"))
    config = RunConfig(**{**record["config"], "model": record["model"]})
    assert config_hash(config) == record["config_hash"]


def test_the_first_fields_and_the_unhashed_ones_are_settings_of_run_config():
    assert FIRST_FIELDS | UNHASHED <= set(RunConfig.model_fields)


STUDIES = sorted(ROOT.glob("results/studies/*/grid.yaml"))


@pytest.mark.parametrize("grid", STUDIES, ids=lambda p: p.parent.name)
def test_a_committed_studys_points_build_the_configurations_its_runs_recorded(grid, monkeypatch):
    """A grid as users write it (`timeout`, `agents`, `rounds`, protocol parameters beside run settings)
    still makes the very configuration each committed point ran: the same hash, so the study resumes.
    Run, as the studies were, from the repository root."""
    from debatekit import sweep
    from debatekit.sweep.execute import _point_to_folder
    from debatekit.sweep.guard import check_points

    monkeypatch.chdir(ROOT)

    data = sweep.load_grid(grid)
    points = sweep.expand_grid(data)
    ran = 0
    for point, config in zip(points, check_points(points, grid.parent)):
        run = grid.parent / point.id / "run.json"
        if not run.exists():  # a point not run yet
            continue
        record = json.loads(run.read_text(encoding="utf-8"))
        update = {"model": config.model or record["model"]}
        if "plan" in data:  # a study with looks runs each point to its look, not to the plan's limit
            update["limit"] = record["config"]["limit"]
        args = {"config": {"params": config.params}}
        _point_to_folder(args, points, grid.parent)  # a vote naming a debate point runs with that point's folder
        update["params"] = args["config"]["params"]
        assert config_hash(config.model_copy(update=update)) == record["config_hash"], point.id
        ran += 1
    assert ran


NEW_FIELD = '''    probe_setting: int | None = Field(None, ge=1)
    """A setting added by a test, to follow it from the command line to run.json."""

'''
PROBE = r'''
import contextlib, io, json, sys
from pathlib import Path

from debatekit import sweep
from debatekit.cli.app import main
from debatekit.records.resume import config_hash
from debatekit.records.schemas import RunConfig

data, out, notebook = sys.argv[1:4]
helped = io.StringIO()
with contextlib.redirect_stdout(helped), contextlib.suppress(SystemExit):
    main(["run", "--help"])
argv = ["run", "single", "--dataset", data, "--model", "scripted/schema", "--quiet"]
code = main([*argv, "--out", f"{out}/cli", "--probe-setting", "7"])
recorded = json.loads(Path(f"{out}/cli/run.json").read_text())
base = RunConfig(protocol="single", dataset=data, model="scripted/schema")
swept = sweep.run_sweep(notebook, {"parameters": {"protocol": "single", "dataset": data, "model": "scripted/schema",
                                                  "probe_setting": 7}, "points": [{"seed": 0}]},
                        f"{out}/sweep", progress=False)
(point,) = swept.points
print(json.dumps({
    "code": code, "help": helped.getvalue(),
    "cli": recorded, "hash_without": config_hash(base),
    "hash_with": config_hash(base.model_copy(update={"probe_setting": 7})),
    "rehashed": config_hash(RunConfig(**recorded["config"])),
    "unset": config_hash(RunConfig(**{**recorded["config"], "probe_setting": None})),
    "statuses": [r.status for r in swept.results],
    "notebook": json.loads(Path(f"{out}/sweep/{point.id}.ipynb").read_text())["metadata"]["papermill"]["parameters"],
    "sweep": json.loads(Path(f"{out}/sweep/{point.id}/run.json").read_text()),
}))
'''


def test_a_field_added_to_run_config_reaches_the_flag_the_notebook_run_json_and_the_hash(tmp_path):
    """Adding a setting touches RunConfig and nothing else: a copy of the package with one more field
    (and no other edit) has its `debatekit run` flag, passes it from a grid through run_debate.ipynb's
    `config`, records it in run.json and hashes it, while a config that leaves it at its default hashes
    as before."""
    import os
    import shutil
    import subprocess
    import sys

    copy = tmp_path / "pkg"
    shutil.copytree(ROOT / "debatekit", copy / "debatekit", ignore=shutil.ignore_patterns("__pycache__"))
    schemas = copy / "debatekit" / "records" / "schemas.py"
    text = schemas.read_text(encoding="utf-8")
    anchor = "    @property\n    def run_model(self) -> str:"
    assert text.count(anchor) == 1
    schemas.write_text(text.replace(anchor, NEW_FIELD + anchor), encoding="utf-8")
    data = tmp_path / "items.jsonl"
    data.write_text("".join(json.dumps({"id": f"q{i}", "question": f"What is {i}?", "answer": i}) + "\n"
                            for i in (1, 2)))
    env = {**os.environ, "PYTHONPATH": str(copy)}
    done = subprocess.run([sys.executable, "-c", PROBE, str(data), str(tmp_path / "out"),
                           str(ROOT / "notebooks" / "run_debate.ipynb")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert "--probe-setting PROBE_SETTING" in seen["help"] and "a setting added by a test" in seen["help"]
    assert seen["code"] == 0 and seen["cli"]["config"]["probe_setting"] == 7
    assert seen["statuses"] == ["complete"] and seen["notebook"]["config"]["probe_setting"] == 7
    assert seen["sweep"]["config"]["probe_setting"] == 7
    # hashed once set, and a config that leaves it at its default hashes as it did before the field
    base = RunConfig(protocol="single", dataset=str(data), model="scripted/schema")
    assert seen["hash_without"] == config_hash(base) != seen["hash_with"]
    assert seen["cli"]["config_hash"] == seen["rehashed"] == seen["sweep"]["config_hash"] != seen["unset"]
