"""`debatekit sweep/study --retry-degraded`: a complete point whose run kept degraded debates (answered
although some calls failed) runs again, and only those debates rerun (the rest of the run is kept)."""

from __future__ import annotations

import json

import pytest

from debatekit import sweep
from debatekit.cli.app import main
from debatekit.sweep import SweepError
from tests.sweep_helpers import NOTEBOOK, InProcess, scripted_grid


def _mark_degraded(out, point_id: str, item: str) -> str:
    """Make the point's last record of `item` degraded, and its sidecar count it, as a run whose call
    failed would have left them. Returns the degraded debate's id."""
    debates = out / point_id / "debates.jsonl"
    rows = [json.loads(line) for line in debates.read_text().splitlines()]
    row = next(r for r in reversed(rows) if r["item_id"] == item)
    row["status"] = "degraded"
    debates.write_text("".join(json.dumps(r) + "\n" for r in rows))
    sidecar = out / f"{point_id}.json"
    data = json.loads(sidecar.read_text())
    data["summary"]["degraded"] = 1
    sidecar.write_text(json.dumps(data))
    return row["debate_id"]


@pytest.fixture
def degraded_sweep(tmp_path, monkeypatch):
    monkeypatch.setenv("DEBATEKIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    grid = scripted_grid(tmp_path, points=[{"agents": 2}])
    out = tmp_path / "out"
    first = sweep.run_sweep(NOTEBOOK, grid, out, progress=False)
    (point,) = first.points
    return grid, out, point.id, _mark_degraded(out, point.id, "q2")


def _statuses(run_dir) -> dict[str, list[str]]:
    seen: dict[str, list[str]] = {}
    for line in (run_dir / "debates.jsonl").read_text().splitlines():
        row = json.loads(line)
        seen.setdefault(row["item_id"], []).append(row["status"])
    return seen


def test_a_plain_rerun_keeps_the_degraded_point_and_retry_degraded_runs_only_its_degraded_debate(degraded_sweep):
    grid, out, point_id, _ = degraded_sweep
    plain = sweep.run_sweep(NOTEBOOK, grid, out, progress=False)
    assert [r.status for r in plain.results] == ["skipped"]
    assert _statuses(out / point_id) == {"q1": ["ok"], "q2": ["degraded"]}

    again = sweep.run_sweep(NOTEBOOK, grid, out, progress=False, retry_degraded=True)
    assert [r.status for r in again.results] == ["complete"]
    # q1 was not run again; q2 was, from the response cache, and answered with every call this time
    assert _statuses(out / point_id) == {"q1": ["ok"], "q2": ["degraded", "ok"]}
    assert json.loads((out / f"{point_id}.json").read_text())["summary"]["degraded"] == 0
    done = sweep.run_sweep(NOTEBOOK, grid, out, progress=False, retry_degraded=True)  # nothing degraded is left
    assert [r.status for r in done.results] == ["skipped"]


def test_the_sweep_command_takes_retry_degraded(degraded_sweep, tmp_path):
    grid, out, point_id, _ = degraded_sweep
    (tmp_path / "grid.json").write_text(json.dumps(grid))
    argv = ["sweep", str(NOTEBOOK), "--grid", str(tmp_path / "grid.json"), "--out", str(out), "--quiet"]
    assert main([*argv, "--retry-degraded"]) == 0
    assert _statuses(out / point_id)["q2"] == ["degraded", "ok"]


def test_a_notebook_that_cannot_retry_is_named_before_any_point_runs(degraded_sweep, tmp_path):
    import nbformat

    grid, out, _, _ = degraded_sweep
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    cell = next(c for c in notebook.cells if "parameters" in c.metadata.get("tags", []))
    cell.source = "\n".join(line for line in cell.source.splitlines() if not line.startswith("retry_degraded"))
    older = tmp_path / "older.ipynb"
    nbformat.write(notebook, older)
    with pytest.raises(SweepError, match="older.ipynb has no parameter retry_degraded"):
        sweep.run_sweep(older, grid, out, progress=False, retry_degraded=True)


def test_a_retry_that_fails_keeps_the_points_complete_result(degraded_sweep, monkeypatch):
    import papermill

    grid, out, point_id, _ = degraded_sweep
    sidecar = (out / f"{point_id}.json").read_text()

    def kernel_dies(*args, **kwargs):
        raise RuntimeError("Kernel died before replying to kernel_info")

    monkeypatch.setattr(papermill, "execute_notebook", kernel_dies)
    again = sweep.run_sweep(NOTEBOOK, grid, out, progress=False, retry_degraded=True, executor=InProcess())
    assert [r.status for r in again.results] == ["failed"]
    assert (out / f"{point_id}.json").read_text() == sidecar  # still complete: its debates still count
    assert len(again.summary) == 2


def test_a_grid_may_not_set_retry_degraded():
    with pytest.raises(SweepError, match="grid sets 'retry_degraded', which the sweep sets itself \\(--retry-degraded\\)"):
        sweep.expand_grid({"parameters": {"protocol": "single", "retry_degraded": True}})


def _mark_unanswered(out, point_id: str, item: str) -> None:
    """Make the point's record of `item` failed (its calls failed: no answer) and its sidecar count it."""
    debates = out / point_id / "debates.jsonl"
    rows = [json.loads(line) for line in debates.read_text().splitlines()]
    row = next(r for r in reversed(rows) if r["item_id"] == item)
    row.update(status="error", error="server: injected", final_answer=None, correct=None, score=None)
    debates.write_text("".join(json.dumps(r) + "\n" for r in rows))
    sidecar = out / f"{point_id}.json"
    data = json.loads(sidecar.read_text())
    data["summary"]["failed"] = 1
    sidecar.write_text(json.dumps(data))


def test_a_complete_point_with_an_unanswered_debate_is_run_again_and_only_that_debate_retried(tmp_path, monkeypatch):
    monkeypatch.setenv("DEBATEKIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    grid = scripted_grid(tmp_path, points=[{"agents": 2}])
    out = tmp_path / "out"
    (point,) = sweep.run_sweep(NOTEBOOK, grid, out, progress=False).points
    _mark_unanswered(out, point.id, "q2")
    again = sweep.run_sweep(NOTEBOOK, grid, out, progress=False)  # a plain rerun: no flag needed
    assert [r.status for r in again.results] == ["complete"]
    assert _statuses(out / point.id) == {"q1": ["ok"], "q2": ["error", "ok"]}
    assert json.loads((out / f"{point.id}.json").read_text())["summary"]["failed"] == 0
    done = sweep.run_sweep(NOTEBOOK, grid, out, progress=False)
    assert [r.status for r in done.results] == ["skipped"]
