"""Sweeps: grid expansion, papermill execution in processes, failure isolation, skip on re-run, retries."""

import json
from pathlib import Path

import nbformat
import pandas as pd
import pytest

from debatekit import sweep
from debatekit.sweep import SweepError, expand_grid
from tests.sweep_helpers import NOTEBOOK, InProcess, scripted_grid

# --- grid expansion -----------------------------------------------------------------------

def test_grid_is_the_product_of_lists_over_fixed_parameters():
    points = expand_grid({"parameters": {"dataset": "arithmetic", "limit": 5},
                          "grid": {"agents": [1, 3], "rounds": [1, 2, 3]}})
    assert len(points) == 6
    assert points[0].parameters == {"dataset": "arithmetic", "limit": 5, "agents": 1, "rounds": 1}
    assert {(p.parameters["agents"], p.parameters["rounds"]) for p in points} == {
        (a, r) for a in (1, 3) for r in (1, 2, 3)}
    assert points[0].id.startswith("agents1-rounds1-") and len({p.id for p in points}) == 6


def test_explicit_points_scalars_and_duplicates():
    points = expand_grid({"parameters": {"protocol": "society_of_mind"}, "grid": {"agents": [2], "seed": 7},
                          "points": [{"protocol": "single"}, {"agents": 2, "seed": 7}]})
    assert [p.parameters for p in points] == [{"protocol": "society_of_mind", "agents": 2, "seed": 7},
                                              {"protocol": "single"}]
    assert points[1].id.startswith("single-")


def test_ids_are_stable():
    grid = {"grid": {"agents": [1, 3]}}
    assert [p.id for p in expand_grid(grid)] == [p.id for p in expand_grid(grid)]


def test_debates_at_once_is_not_part_of_a_points_identity():
    """Raising `concurrency` part way through a long study keeps every point's folder and run."""
    grid = {"parameters": {"dataset": "gsm8k", "limit": 100}, "points": [{"protocol": "single"}, {"protocol": "mad"}]}
    before = expand_grid(grid)
    after = expand_grid({**grid, "parameters": {**grid["parameters"], "concurrency": 12}})
    assert [(p.id, p.digest) for p in after] == [(p.id, p.digest) for p in before]
    assert after[0].parameters["concurrency"] == 12  # still passed to the notebook
    # two points that differ only in speed are one point
    assert len(expand_grid({"protocol": "single", "concurrency": [4, 12]})) == 1


def test_a_bare_mapping_is_a_grid():
    assert len(expand_grid({"agents": [1, 2], "rounds": [1, 2]})) == 4


@pytest.mark.parametrize("grid, message", [
    ({"grid": {"agents": []}}, "no points"),
    ({"parameters": {"limit": 3}}, "no points"),
    ({"grid": {}, "points": []}, "no points"),
    ({"grid": {"agents": [1]}, "sweeps": 2}, "unknown key"),
    ({"grid": {"out_dir": ["x"]}}, "sets itself"),
    ({"points": ["agents=3"]}, "not a mapping"),
])
def test_bad_grids_are_named_errors(grid, message):
    with pytest.raises(SweepError, match=message):
        expand_grid(grid)


def test_grid_file_errors(tmp_path):
    with pytest.raises(SweepError, match="cannot read"):
        sweep.load_grid(tmp_path / "missing.yaml")
    (tmp_path / "g.yaml").write_text("- 1\n- 2\n")
    with pytest.raises(SweepError, match="mapping"):
        sweep.load_grid(tmp_path / "g.yaml")


# --- retries and failures of one point (papermill replaced in-process) ----------------------

def _task(tmp_path):
    return {"notebook": str(NOTEBOOK), "output": str(tmp_path / "p.ipynb"), "point_id": "p", "point_hash": "h",
            "parameters": {"summary_path": str(tmp_path / "p.json"), "out_dir": str(tmp_path / "p")},
            "kernel_name": None, "cwd": str(tmp_path), "cell_timeout": None}


def test_a_kernel_start_failure_is_retried_once(tmp_path, monkeypatch):
    import papermill

    calls = []

    def flaky(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("Kernel didn't respond in 60 seconds")
        Path(kwargs["parameters"]["summary_path"]).write_text(json.dumps({"status": "complete"}))

    monkeypatch.setattr(papermill, "execute_notebook", flaky)
    result = sweep.execute_point(_task(tmp_path))
    assert result.status == "complete" and result.attempts == 2 and len(calls) == 2
    assert json.loads((tmp_path / "p.json").read_text())["point_hash"] == "h"


def test_a_kernel_that_never_starts_fails_the_point_after_two_attempts(tmp_path, monkeypatch):
    import papermill

    def dead(*args, **kwargs):
        raise RuntimeError("Kernel died before replying to kernel_info")

    monkeypatch.setattr(papermill, "execute_notebook", dead)
    result = sweep.execute_point(_task(tmp_path))
    assert result.status == "failed" and result.attempts == 2 and "Kernel died" in result.error


def test_a_cell_error_is_not_retried_and_names_the_cell(tmp_path, monkeypatch):
    import papermill
    from papermill.exceptions import PapermillExecutionError

    calls = []

    def broken(*args, **kwargs):
        calls.append(1)
        raise PapermillExecutionError(cell_index=3, exec_count=2, source="x = 1\nraise ValueError('bad')",
                                      ename="ValueError", evalue="bad", traceback=[])

    monkeypatch.setattr(papermill, "execute_notebook", broken)
    result = sweep.execute_point(_task(tmp_path))
    assert len(calls) == 1 and result.status == "failed" and result.cell == 3
    assert result.error == "cell 3: ValueError: bad" and "raise ValueError" in result.cell_source


def test_a_notebook_that_records_no_summary_fails(tmp_path, monkeypatch):
    import papermill

    monkeypatch.setattr(papermill, "execute_notebook", lambda *a, **k: None)
    result = sweep.execute_point(_task(tmp_path))
    assert result.status == "failed" and "record_point" in result.error


def test_a_drained_sweep_starts_no_new_point_and_a_drained_run_is_not_a_failure(tmp_path, monkeypatch):
    import papermill
    from papermill.exceptions import PapermillExecutionError

    from debatekit._base.signals import DRAIN_FILE

    started = []

    def drained_run(*args, **kwargs):
        started.append(1)
        raise PapermillExecutionError(cell_index=2, exec_count=1, source="result = sweep.run_point(...)",
                                      ename="Drained", evalue="drained: the debates already started finished, "
                                      "4 item(s) left for --resume", traceback=[])

    monkeypatch.setattr(papermill, "execute_notebook", drained_run)
    result = sweep.execute_point(_task(tmp_path))  # the point running when the request came
    assert result.status == "drained" and "4 item(s)" in result.error and started == [1]
    (tmp_path / DRAIN_FILE).write_text("")
    result = sweep.execute_point(_task(tmp_path))  # a later point of the same sweep
    assert result.status == "drained" and result.error.startswith("not started") and started == [1]


def test_a_new_sweep_clears_an_old_request_to_drain(tmp_path, monkeypatch):
    import papermill

    from debatekit._base.signals import DRAIN_FILE

    ran = []
    monkeypatch.setattr(papermill, "execute_notebook", lambda *a, **k: ran.append(1))
    out = tmp_path / "sweep"
    out.mkdir()
    (out / DRAIN_FILE).write_text("")
    result = sweep.run_sweep(NOTEBOOK, {"protocol": "single", "dataset": "arithmetic", "limit": 1}, out,
                             executor=InProcess(), progress=False)
    assert ran == [1] and not (out / DRAIN_FILE).exists()  # the point ran (and, recording nothing, failed)
    assert [r.status for r in result.results] == ["failed"]


# --- a real sweep: papermill in worker processes ------------------------------------------

@pytest.fixture(scope="module")
def real_sweep(tmp_path_factory):
    """run_debate.ipynb over 3 points (scripted model), one of which fails in its kernel (a dataset
    file with a broken row: a missing file is refused before any kernel starts); then run again."""
    root = tmp_path_factory.mktemp("sweep")
    (root / "broken.jsonl").write_text('{"id": "q1", "question": \n')
    grid = scripted_grid(root, grid={"agents": [1, 2]}, points=[{"dataset": str(root / "broken.jsonl")}])
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DEBATEKIT_CACHE_DIR", str(root / "cache"))
        mp.chdir(root)
        first = sweep.run_sweep(NOTEBOOK, grid, root / "out", workers=2, progress=False)
        again = sweep.run_sweep(NOTEBOOK, grid, root / "out", workers=2, progress=False)
    return root, first, again


def test_failed_point_is_reported_with_its_cell_and_the_others_complete(real_sweep):
    root, first, _ = real_sweep
    status = {r.point_id: r.status for r in first.results}
    assert sorted(status.values()) == ["complete", "complete", "failed"]
    failed = first.failed[0]
    assert "DatasetError" in failed.error and "broken.jsonl" in failed.error
    assert "sweep.run_point" in failed.cell_source and failed.cell is not None
    assert json.loads((root / "out" / "failures.json").read_text())[0]["point_id"] == failed.point_id


def test_summary_has_one_row_per_point_and_item_with_provenance(real_sweep):
    root, first, _ = real_sweep
    summary = pd.read_parquet(root / "out" / "summary.parquet")
    assert len(summary) == 4 and sorted(summary["agents"].unique()) == [1, 2]
    for col in ("point_id", "item_id", "correct", "config_hash", "model", "seed", "debatekit_version",
                "git_commit", "completion_tokens"):
        assert col in summary
    assert set(summary["model"]) == {"scripted/schema"} and summary["config_hash"].nunique() == 2
    rounds = sweep.load(root / "out").rounds  # one row per point, item, round and agent
    assert len(rounds) == int((summary["rounds_used"] * summary["agents"]).sum())
    assert set(rounds["point_id"]) == set(summary["point_id"])


def test_executed_notebook_records_its_parameters(real_sweep):
    root, first, _ = real_sweep
    done = next(r for r in first.results if r.status == "complete")
    nb = nbformat.read(done.notebook, as_version=4)
    params = nb.metadata["papermill"]["parameters"]
    assert params["config"]["model"] == "scripted/schema" and params["config"]["params"]["agents"] in (1, 2)
    assert params["summary_path"].endswith(f"{done.point_id}.json")


def test_rerun_skips_complete_points_and_retries_the_failed_one(real_sweep):
    _, first, again = real_sweep
    status = {r.point_id: r.status for r in again.results}
    assert sorted(status.values()) == ["failed", "skipped", "skipped"]
    assert status[first.failed[0].point_id] == "failed"
    assert len(again.summary) == len(first.summary)


def test_a_sweep_prints_no_kernel_start_warnings_over_its_progress(tmp_path, monkeypatch, capfd):
    monkeypatch.setenv("DEBATEKIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    done = sweep.run_sweep(NOTEBOOK, scripted_grid(tmp_path, grid={"agents": [1]}), tmp_path / "out", workers=1,
                           progress=False)
    assert [r.status for r in done.results] == ["complete"]
    lines = [line for line in capfd.readouterr().err.splitlines() if line.strip()]
    assert not any("IPKernelApp" in line or "without encryption" in line for line in lines), lines[-10:]
    assert not any("KeyboardInterrupt" in line for line in lines), lines[-10:]


def test_a_clean_sweep_shuts_its_kernels_down_without_interrupting_them(tmp_path, monkeypatch, capfd):
    """papermill shuts a kernel down right after the reply to its last request; the interrupt that
    jupyter_client sends first could land inside that request's handler (often, on a busy machine),
    and ipykernel then logged `KeyboardInterrupt caught in kernel` after every point that went well."""
    import signal

    from debatekit.sweep import execute

    asked, sent = [], []

    class Watched(execute.quiet_kernel_manager()):
        async def _async_interrupt_kernel(self):
            asked.append("in shutdown" if self.shutting_down else "running")
            await super()._async_interrupt_kernel()

        async def _async_signal_kernel(self, signum):
            sent.append(signum)
            await super()._async_signal_kernel(signum)

    monkeypatch.setattr(execute, "quiet_kernel_manager", lambda: Watched)
    monkeypatch.setenv("DEBATEKIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    grid = {"parameters": {"protocol": "single", "dataset": "arithmetic", "limit": 1, "model": "scripted/schema"},
            "grid": {"seed": [0, 1]}}
    done = sweep.run_sweep(NOTEBOOK, grid, tmp_path / "out", executor=InProcess(), progress=False)
    assert [r.status for r in done.results] == ["complete", "complete"]
    assert asked == ["in shutdown"] * 2 and signal.SIGINT not in sent  # each point's kernel, left alone
    assert "KeyboardInterrupt" not in capfd.readouterr().err


def test_point_kernels_talk_over_unix_sockets_so_two_starting_at_once_never_share_a_port(tmp_path, monkeypatch):
    """Over TCP a kernel binds ports its manager picked and released a moment before; a second kernel
    starting in that moment could take one (`Address already in use`, a dead point and a traceback)."""
    import os

    from debatekit.sweep import execute

    seen = []

    class Watched(execute.quiet_kernel_manager()):
        async def _async_launch_kernel(self, kernel_cmd, **kw):
            seen.append((self.transport, json.loads(open(self.connection_file).read())["transport"], self.ip))
            return await super()._async_launch_kernel(kernel_cmd, **kw)

    monkeypatch.setattr(execute, "quiet_kernel_manager", lambda: Watched)
    monkeypatch.setenv("DEBATEKIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    grid = {"parameters": {"protocol": "single", "dataset": "arithmetic", "limit": 1, "model": "scripted/schema"},
            "grid": {"seed": [0]}}
    done = sweep.run_sweep(NOTEBOOK, grid, tmp_path / "out", executor=InProcess(), progress=False)
    assert [r.status for r in done.results] == ["complete"]
    assert [s[:2] for s in seen] == [("ipc", "ipc")]
    # sockets named for this kernel alone, not `kernel-ipc-N` in the folder points share
    assert Path(seen[0][2]).is_absolute() and seen[0][2] != Watched().ip
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / ("long" * 30)))  # no Unix socket path that long
    assert execute.kernel_transport() == "tcp"
    monkeypatch.setattr(os, "name", "nt")
    assert execute.kernel_transport() == "tcp"


def test_a_points_rounds_reach_dynamics_as_max_rounds_like_the_cli(tmp_path):
    config = sweep.point_config({"protocol": "dynamics", "dataset": "decisions", "limit": 1, "model": "scripted/schema",
                                 "rounds": 2})
    result = sweep.run_point(config, str(tmp_path / "dyn"), progress=False)
    assert result.record.status == "complete" and result.record.config.params == {"max_rounds": 2}
    (debate,) = result.debates
    assert 1 <= len(debate.rounds) <= 2


def test_a_points_rounds_for_a_protocol_without_rounds_is_named(tmp_path):
    from debatekit.registry import ProtocolError

    config = sweep.point_config({"protocol": "single", "dataset": "arithmetic", "limit": 1, "model": "scripted/schema",
                                 "rounds": 2})
    with pytest.raises(ProtocolError, match="rounds"):
        sweep.run_point(config, str(tmp_path / "s"), progress=False)


def test_a_second_sweep_on_the_same_folder_is_refused_up_front(tmp_path, monkeypatch, capsys):
    import fcntl
    import os

    from debatekit.cli.app import main

    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    grid = tmp_path / "grid.yaml"
    grid.write_text("parameters: {protocol: single, dataset: arithmetic, limit: 1, model: scripted/schema}\n"
                    "grid: {seed: [0, 1]}\n")
    holder = os.open(out / ".lock", os.O_RDWR | os.O_CREAT)  # another sweep, running
    fcntl.flock(holder, fcntl.LOCK_EX)
    os.pwrite(holder, b"4242\n", 0)
    try:
        code = main(["sweep", str(NOTEBOOK), "--grid", str(grid), "--out", str(out), "--yes", "--quiet"])
    finally:
        os.close(holder)
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.count("\n") == 0 and f"sweep folder {out} is in use by process 4242" in err
    assert sorted(p.name for p in out.iterdir()) == [".lock"]  # nothing run, nothing written


def test_a_failed_points_error_is_printed_with_its_terminal_escapes_as_text(tmp_path, monkeypatch, capsys):
    from debatekit.cli.app import main
    from debatekit.sweep.execute import SweepResult
    from debatekit.sweep.results import PointResult

    hostile = "server said \x1b]0;pwned\x07\x1b[2J\x1b[31mretry\x1b[0m"
    failed = PointResult("p1", "failed", "p1.ipynb", error=hostile, cell=3, cell_source="run(\x1b[2J)")
    monkeypatch.setattr(sweep, "run_sweep", lambda *a, **k: SweepResult(tmp_path, [], [failed], pd.DataFrame()))
    grid = tmp_path / "grid.yaml"
    grid.write_text("grid: {seed: [0]}\n")
    assert main(["sweep", str(NOTEBOOK), "--grid", str(grid), "--out", str(tmp_path / "out"), "--yes"]) == 1
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err
    assert "server said \\x1b]0;pwned\\x07\\x1b[2J\\x1b[31mretry" in err and "run(\\x1b[2J)" in err


def test_a_grid_without_limit_runs_every_item_whatever_the_notebooks_default(tmp_path, monkeypatch):
    """run_debate.ipynb's parameters cell says `"limit": 3`; a grid that names no limit gets all items."""
    import papermill

    assert '"limit": 3,' in "".join(nbformat.read(NOTEBOOK, as_version=4).cells[1].source)
    given = []
    monkeypatch.setattr(papermill, "execute_notebook", lambda nb, out, parameters=None, **k: given.append(parameters))
    monkeypatch.chdir(tmp_path)
    sweep.run_sweep(NOTEBOOK, {"points": [{"protocol": "single", "dataset": "arithmetic"},
                                          {"protocol": "single", "dataset": "arithmetic", "limit": 2}]},
                    tmp_path / "out", executor=InProcess(), progress=False)
    assert sorted(p["config"].get("limit", 0) for p in given) == [0, 2]  # left out: RunConfig's default, every item


def test_what_a_cell_prints_is_one_output_however_long_it_takes_between_lines(tmp_path):
    """ipykernel sends printed text every 0.2 s: a cell that printed, computed and printed again was
    one output on a quiet machine and two on a busy one, so a study run again with nothing new
    rewrote its notebook and report (a `</div>` nested otherwise). Text around a display keeps its place."""
    import nbformat

    from debatekit.sweep import execute

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import time\nfrom IPython.display import HTML, display\nprint('first')\ntime.sleep(0.6)\n"
        "print('second')\ndisplay(HTML('<b>table</b>'))\nprint('third\\r')\ntime.sleep(0.6)\nprint('fourth')")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, tmp_path / "in.ipynb")
    execute.run_notebook(tmp_path / "in.ipynb", tmp_path / "out.ipynb", cwd=str(tmp_path))
    outputs = nbformat.read(tmp_path / "out.ipynb", as_version=4).cells[0].outputs
    assert [(o.output_type, o.get("text")) for o in outputs] == [
        ("stream", "first\nsecond\n"), ("display_data", None), ("stream", "third\r\nfourth\n")]
