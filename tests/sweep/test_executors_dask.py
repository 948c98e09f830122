"""The Dask executor: a LocalCluster runs sweep points like the local executor, resume across executors."""

import json

import pandas as pd
import pytest

pytest.importorskip("distributed")

from debatekit import sweep  # noqa: E402
from debatekit.sweep.executors_dask import DaskExecutor  # noqa: E402
from tests.dask_helpers import finish_or_die  # noqa: E402
from tests.sweep_helpers import NOTEBOOK, scripted_grid  # noqa: E402

# differ between two runs of the same configuration: ids of the run, how long it took, and which
# point of a sweep paid for a model call and which found it in the shared cache (execution order)
VOLATILE = {"run_id", "debate_id", "wall_s", "provider_calls", "cache_hits"}


def test_a_lost_worker_fails_only_its_point(tmp_path):
    import dask

    tasks = [{"point_id": name, "output": str(tmp_path / f"{name}.json")} for name in ("a", "dies", "b")]
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        results = list(DaskExecutor(2).map_unordered(finish_or_die, tasks))
    status = {r.point_id: r.status for r in results}
    assert status == {"a": "complete", "b": "complete", "dies": "failed"}
    assert "KilledWorker" in next(r.error for r in results if r.point_id == "dies")
    assert json.loads((tmp_path / "a.json").read_text())["status"] == "complete"  # finished points stay
    assert json.loads((tmp_path / "b.json").read_text())["status"] == "complete"
    assert not (tmp_path / "dies.json").exists()


def test_no_tasks_starts_no_cluster():
    assert list(DaskExecutor(2).map_unordered(finish_or_die, [])) == []


def test_an_unreachable_scheduler_is_a_named_error():
    tasks = [{"point_id": "a", "output": "/dev/null"}]
    with pytest.raises(ValueError, match="127.0.0.1:9"):
        list(DaskExecutor(1, scheduler="tcp://127.0.0.1:9", connect_timeout=3).map_unordered(finish_or_die, tasks))


def _comparable(frame: pd.DataFrame) -> pd.DataFrame:
    keep = [c for c in frame.columns if c not in VOLATILE]
    order = [c for c in ("point_id", "item_id", "round", "agent") if c in frame]
    return frame[keep].sort_values(order).reset_index(drop=True)


@pytest.fixture(scope="module")
def two_sweeps(tmp_path_factory):
    """The same 2x2 grid (agents x rounds, scripted model, 2 items) on the local executor and on Dask."""
    root = tmp_path_factory.mktemp("dask-sweep")
    grid = scripted_grid(root, grid={"agents": [1, 2], "rounds": [1, 2]})
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        mp.setenv("DEBATEKIT_CACHE_DIR", str(root / "cache-local"))  # no reply cached by the other sweep
        local = sweep.run_sweep(NOTEBOOK, grid, root / "local", workers=2, progress=False)
        mp.setenv("DEBATEKIT_CACHE_DIR", str(root / "cache-dask"))
        dask = sweep.run_sweep(NOTEBOOK, grid, root / "dask", workers=2, executor="dask", progress=False)
        # resume across executors: each folder is complete for the other executor too
        dask_on_local = sweep.run_sweep(NOTEBOOK, grid, root / "local", workers=2, executor="dask", progress=False)
        local_on_dask = sweep.run_sweep(NOTEBOOK, grid, root / "dask", workers=2, progress=False)
    return root, local, dask, dask_on_local, local_on_dask


def test_dask_sweep_matches_the_local_summary(two_sweeps):
    root, local, dask, _, _ = two_sweeps
    assert [r.status for r in dask.results] == ["complete"] * 4, [r.error for r in dask.results]
    assert [r.status for r in local.results] == ["complete"] * 4, [r.error for r in local.results]
    assert len(dask.summary) == 8
    assert sorted(p.name for p in (root / "dask").iterdir()) == sorted(p.name for p in (root / "local").iterdir())
    pd.testing.assert_frame_equal(_comparable(dask.summary), _comparable(local.summary))
    rounds = [_comparable(sweep.load(root / name).rounds) for name in ("local", "dask")]
    assert len(rounds[0]) == int((local.summary["rounds_used"] * local.summary["agents"]).sum()) > 0
    pd.testing.assert_frame_equal(rounds[0], rounds[1])


def test_resume_works_across_executors(two_sweeps):
    _, local, dask, dask_on_local, local_on_dask = two_sweeps
    assert [r.status for r in dask_on_local.results] == ["skipped"] * 4
    assert [r.status for r in local_on_dask.results] == ["skipped"] * 4
    pd.testing.assert_frame_equal(_comparable(dask_on_local.summary), _comparable(local.summary))
    pd.testing.assert_frame_equal(_comparable(local_on_dask.summary), _comparable(dask.summary))


def test_scheduler_needs_the_dask_executor(tmp_path, capsys):
    from debatekit.cli import app as cli

    argv = ["sweep", str(NOTEBOOK), "--grid", str(tmp_path / "g.yaml"), "--out", str(tmp_path / "o"),
            "--scheduler", "tcp://127.0.0.1:9"]
    assert cli.main(argv) == 2
    assert "--scheduler needs --executor dask" in capsys.readouterr().err
