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
def test_a_committed_studys_points_build_the_configurations_its_runs_recorded(grid):
    """A grid as users write it (`timeout`, `agents`, `rounds`, protocol parameters beside run settings)
    still makes the very configuration each committed point ran: the same hash, so the study resumes."""
    from debatekit import sweep
    from debatekit.sweep.guard import check_points

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
        assert config_hash(config.model_copy(update=update)) == record["config_hash"], point.id
        ran += 1
    assert ran
