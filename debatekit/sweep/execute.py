"""Executing a sweep: one papermill run per point, in worker processes or on Dask, skipping complete points."""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import os
import signal
import time
import uuid
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Protocol

import pandas as pd

from debatekit._base import files
from debatekit._base.extras import need
from debatekit._base.signals import DRAIN_FILE, die_with_parent, stop_process_tree
from debatekit._base.terminal import visible
from debatekit.sweep.grid import Point, SweepError, expand_grid, load_grid, reused_point
from debatekit.sweep.guard import check_points, estimate_seconds
from debatekit.sweep.point import degraded_debates, is_complete_sidecar, items_done, stamp, unanswered_debates
from debatekit.sweep.results import PointResult
from debatekit.sweep.tables import collect


@dataclass
class SweepResult:
    path: Path
    points: list[Point]
    results: list[PointResult]
    summary: pd.DataFrame

    @property
    def failed(self) -> list[PointResult]:
        return [r for r in self.results if r.status == "failed"]

    @property
    def drained(self) -> list[PointResult]:
        """Points stopped, or never started, because the sweep was asked to drain (`debatekit drain`)."""
        return [r for r in self.results if r.status == "drained"]


class Executor(Protocol):
    """Runs `fn(task)` for each task somewhere and yields results as they finish."""

    def map_unordered(self, fn: Callable[[Any], Any], tasks: list) -> Iterator[Any]: ...


class LocalExecutor:
    """A pool of worker processes on this machine (spawned, so no thread or cwd state is shared)."""

    def __init__(self, workers: int = 1):
        self.workers = max(1, workers)

    def map_unordered(self, fn, tasks):
        import multiprocessing

        if not tasks:
            return
        pool = ProcessPoolExecutor(max_workers=min(self.workers, len(tasks)),
                                   mp_context=multiprocessing.get_context("spawn"), initializer=_start_worker,
                                   initargs=(os.getpid(),))
        try:
            for future in as_completed([pool.submit(fn, t) for t in tasks]):
                yield future.result()
        except BaseException:  # Ctrl-C, SIGTERM: queued points are dropped, running ones (and kernels) ended
            workers = list(getattr(pool, "_processes", None) or {})
            pool.shutdown(wait=False, cancel_futures=True)
            stop_process_tree(workers)
            raise
        pool.shutdown()


def _start_worker(sweep_pid: int) -> None:
    """Workers ignore the terminal's Ctrl-C: the sweep process decides, and ends them with their kernels.
    And they die with the sweep (`die_with_parent`): a sweep killed outright (SIGKILL, an OOM kill)
    leaves no worker running its points unsupervised, nor holding their run folders; each kernel
    then ends too, as ipykernel does when its parent is gone."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent(sweep_pid)


def _dask_executor(workers: int = 1) -> Executor:
    """A LocalCluster of `workers` processes (debatekit.sweep.executors_dask; needs `debatekit[dask]`)."""
    from debatekit.sweep.executors_dask import DaskExecutor

    return DaskExecutor(workers)


EXECUTORS: dict[str, Callable[[int], Executor]] = {"local": LocalExecutor, "dask": _dask_executor}


# --- running --------------------------------------------------------------------------------

def notebook_parameters(notebook: Path | str) -> set[str]:
    """Names declared in the notebook's `parameters`-tagged cell."""
    import papermill

    return set(papermill.inspect_notebook(str(notebook)))


def _notebook_args(point: Point, config, out: Path) -> dict:
    """The notebook's parameters for a point: its `RunConfig` (`point.point_config`) as one dict of the
    settings the grid gives (the others are the run's defaults, so a grid with no limit runs every item
    whatever the notebook's own `config` says), its run folder and its sidecar."""
    return {"config": config.model_dump(mode="json", exclude_unset=True), "out_dir": _rel(out / point.id),
            "summary_path": _rel(out / f"{point.id}.json")}


def _point_to_folder(args: dict, points: list[Point], out: Path) -> None:
    """A `reuse` parameter that names another point's protocol (a vote reusing a debate's round-1
    answers, `self_consistency(reuse=...)`) becomes that point's run folder, which its id fixes.

    Raises:
        SweepError: no point, or more than one, runs that protocol (`grid.reused_point`).
    """
    params = args["config"].get("params") or {}
    if (named := reused_point(params.get("reuse"), points)) is not None:
        args["config"] = {**args["config"], "params": {**params, "reuse": _rel(out / named.id)}}


def _rel(path: Path) -> str:
    """The path relative to the working directory (the kernels' too) when below it, else absolute."""
    path = path.resolve()
    return str(path.relative_to(Path.cwd())) if path.is_relative_to(Path.cwd()) else str(path)


def is_complete(out: Path | str, point: Point) -> bool:
    """Whether `out` holds a complete result of `point` (its sidecar, for these very parameters)."""
    return is_complete_sidecar(Path(out) / f"{point.id}.json", point.digest)


@contextlib.contextmanager
def sweep_lock(out: Path) -> Iterator[None]:
    """Hold the sweep folder as its only writer (an `flock` on its `.lock`, which names this process)
    for the block.

    Raises:
        SweepError: another sweep holds it; the message gives that process's id.
    """
    try:
        fd = files.open_nofollow(out / ".lock", os.O_RDWR | os.O_CREAT)
    except files.LinkRefused as exc:
        raise SweepError(str(exc)) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            raise SweepError(f"sweep folder {out} is in use by process {holder} (another sweep writes there); "
                             "wait for it to end, or use another --out") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        yield
    finally:
        os.close(fd)


def run_sweep(notebook: Path | str, grid: dict | Path | str, out: Path | str, *, workers: int = 1,
              executor: Executor | str = "local", progress: bool = True, kernel_name: str | None = None,
              cell_timeout: float | None = None, retry_degraded: bool = False,
              confirm: Callable[[int, int, float | None], bool] | None = None, extent: int | None = None) -> SweepResult:
    """Execute `notebook` once per grid point into `out`, skipping complete points, then aggregate.

    Args:
        notebook: a notebook whose `parameters` cell declares `config` (a point's `RunConfig` as a dict),
            `out_dir` and `summary_path`, and that writes its sidecar (`record_point`), as run_debate.ipynb does.
        grid: a grid mapping or the path of a grid YAML file (see module docstring).
        out: the sweep folder (created).
        workers: points run at once.
        executor: "local" (a process pool), "dask" (a Dask LocalCluster; `executors_dask.DaskExecutor`
            for a running scheduler) or any object with `map_unordered(fn, tasks)`.
        kernel_name: Jupyter kernel (default: the notebook's).
        cell_timeout: seconds a cell may run (default: no limit).
        retry_degraded: also run again the complete points that have degraded debates (answered although
            some of their calls failed), each with its notebook's `retry_degraded` parameter set, so that
            only those debates run again; a retry that fails keeps the point's complete result. The
            notebook must declare the parameter (run_debate.ipynb does), degraded debates or not.
        confirm: called with (points to run, points complete, estimated seconds or None) once every point
            is checked and before any runs; False ends the sweep with a SweepError, nothing started.
        extent: run each point only this far (a look of a study's plan): its config's `limit` is
            this, a point is complete once its run has this many items, and a later sweep with a larger
            extent resumes it; the point's id and digest stay its grid's (its `limit` the plan's last look).

    Returns:
        The points, one `PointResult` each (failed ones carry the failing cell), and the summary table.
    """
    from tqdm.auto import tqdm

    need("papermill", "notebooks", "debatekit sweep")
    need("pyarrow", "notebooks", "debatekit sweep")
    notebook, out = Path(notebook), Path(out)
    if not notebook.exists():
        raise SweepError(f"notebook {notebook} does not exist")
    grid_data = grid if isinstance(grid, dict) else load_grid(grid)
    points = expand_grid(grid_data)
    base = None if isinstance(grid, dict) else Path(grid).resolve().parent  # protocol files are relative to it
    configs = check_points(points, base)
    declared = notebook_parameters(notebook)
    missing = {"config", "out_dir", "summary_path"} - declared
    if missing:
        raise SweepError(f"notebook {notebook} must declare {', '.join(sorted(missing))} in its parameters cell")
    if retry_degraded and "retry_degraded" not in declared:
        raise SweepError(f"notebook {notebook} has no parameter retry_degraded: it cannot run degraded debates again")
    out.mkdir(parents=True, exist_ok=True)
    with sweep_lock(out):  # one sweep writes in a folder at a time
        (out / DRAIN_FILE).unlink(missing_ok=True)  # a new start runs; an old request to drain is spent
        tasks, results = [], []
        for point, config in zip(points, configs):
            args = _notebook_args(point, config, out)
            _point_to_folder(args, points, out)
            if retry_degraded:
                args["retry_degraded"] = True
            sidecar = out / f"{point.id}.json"
            complete = is_complete(out, point)
            if extent is not None:
                args["config"] = {**args["config"], "limit": extent}
                complete = complete and items_done(sidecar) >= extent
            # a complete point with unanswered debates is run again (it resumes: only those are retried)
            if complete and not unanswered_debates(sidecar) and not (retry_degraded and degraded_debates(sidecar)):
                results.append(PointResult(point.id, "skipped", str(out / f"{point.id}.ipynb")))
            else:
                tasks.append({"notebook": str(notebook.resolve()), "output": str((out / f"{point.id}.ipynb").resolve()),
                              "point_id": point.id, "point_hash": point.digest, "parameters": args,
                              "kernel_name": kernel_name, "cwd": os.getcwd(), "cell_timeout": cell_timeout,
                              "was_complete": complete})
        if confirm is not None and not confirm(len(tasks), len(results), estimate_seconds(out, len(tasks), workers)):
            raise SweepError(f"sweep not started: {len(tasks)} points not confirmed (--yes starts without asking)")
        write_meta(out, notebook, grid_data, points)
        runner = EXECUTORS[executor](workers) if isinstance(executor, str) else executor
        bar = tqdm(total=len(points), initial=len(results), desc="sweep", unit="point", disable=not progress)
        try:
            for result in runner.map_unordered(execute_point, tasks):
                results.append(result)
                bar.update(1)
                if result.status == "failed":
                    bar.write(visible(f"point {result.point_id} failed: {result.error}"))
                bar.set_postfix(failed=sum(r.status == "failed" for r in results), refresh=False)
        finally:
            bar.close()
        order = {p.id: i for i, p in enumerate(points)}
        results.sort(key=lambda r: order[r.point_id])
        failures = [asdict(r) for r in results if r.status == "failed"]
        files.write_text(out / "failures.json", json.dumps(failures, indent=2))
        summary = collect(out)
        return SweepResult(out, points, results, summary)


def execute_point(task: dict) -> PointResult:
    """Run one point's notebook with papermill (in a worker process); never raises.

    A cell error fails the point with that cell; any other failure (a kernel that did not
    start or died) is retried once. A point that was complete (run again for its degraded debates)
    keeps its complete sidecar unless the new run records one.
    """
    sidecar = Path(task["cwd"]) / task["parameters"]["summary_path"]
    kept = sidecar.read_bytes() if task.get("was_complete") and sidecar.exists() else None
    result = _execute(task, sidecar)
    if kept is not None and result.status != "complete":
        files.write_bytes(sidecar, kept)
    return result


def _execute(task: dict, sidecar: Path) -> PointResult:
    from papermill.exceptions import PapermillExecutionError

    start, error = time.monotonic(), None
    if (Path(task["output"]).parent / DRAIN_FILE).exists():
        return PointResult(task["point_id"], "drained", task["output"], error="not started: the sweep was asked to drain")
    for attempt in (1, 2):
        if sidecar.exists():
            sidecar.unlink()  # a stale sidecar must not make a failed run look complete
        try:
            run_notebook(
                task["notebook"], task["output"], parameters=task["parameters"],
                kernel_name=task["kernel_name"], cwd=task["cwd"], execution_timeout=task["cell_timeout"],
                request_save_on_cell_execute=False,
                # ipykernel warns on every start that loopback TCP is unencrypted: one line per
                # point over the progress bar; kernel errors still print
                extra_arguments=["--IPKernelApp.log_level=ERROR"])
        except PapermillExecutionError as exc:
            if exc.ename == "Drained":  # its run finished the debates it had started, and stopped
                return PointResult(task["point_id"], "drained", task["output"], error=exc.evalue, attempts=attempt,
                                   wall_s=round(time.monotonic() - start, 2))
            source = (exc.source or "").strip().splitlines()
            return PointResult(task["point_id"], "failed", task["output"],
                               error=f"cell {exc.cell_index}: {exc.ename}: {exc.evalue}", cell=exc.cell_index,
                               cell_source="\n".join(source[:6]), attempts=attempt,
                               wall_s=round(time.monotonic() - start, 2))
        except Exception as exc:  # noqa: BLE001 - kernel start races and deaths: retried once
            error = f"{type(exc).__name__}: {exc}"
            continue
        if not stamp(sidecar, task["point_hash"]):
            return PointResult(task["point_id"], "failed", task["output"], attempts=attempt,
                               error="the notebook finished without recording a complete summary (record_point)",
                               wall_s=round(time.monotonic() - start, 2))
        return PointResult(task["point_id"], "complete", task["output"], attempts=attempt,
                           wall_s=round(time.monotonic() - start, 2))
    return PointResult(task["point_id"], "failed", task["output"], error=f"kernel: {error}", attempts=2,
                       wall_s=round(time.monotonic() - start, 2))


def run_notebook(notebook: Path | str, output: Path | str, **papermill_options: Any) -> Any:
    """papermill's `execute_notebook` as debatekit runs every notebook: quiet kernel shutdown, no
    progress bar, and what a cell printed in one go kept as one output.

    ipykernel sends printed text every 0.2 s, so a cell that printed, computed and printed again gave
    one output on a quiet machine and two on a busy one: the same results written as a different
    notebook and report, and a re-run that should leave the files alone rewrote them. Neighbouring
    outputs of one stream are joined; text printed around a figure or table stays on its side of it.
    """
    import nbformat
    import papermill

    nb = papermill.execute_notebook(str(notebook), str(output), progress_bar=False,
                                    kernel_manager_class=quiet_kernel_manager(), **papermill_options)
    if nb is not None and join_split_prints(nb):
        files.write_text(Path(output), nbformat.writes(nb))
    return nb


def join_split_prints(nb: Any) -> bool:
    """Join each cell's neighbouring outputs of the same stream (stdout, stderr) into one, in place;
    whether any were."""
    joined = False
    for cell in nb.get("cells", []):
        outputs = []
        for out in cell.get("outputs", []):
            last = outputs[-1] if outputs else None
            if last is not None and out.get("output_type") == last.get("output_type") == "stream" \
                    and out.get("name") == last.get("name"):
                last["text"] = _text(last["text"]) + _text(out["text"])
                joined = True
            else:
                outputs.append(out)
        if "outputs" in cell:
            cell["outputs"] = outputs
    return joined


def _text(text: str | list[str]) -> str:
    return text if isinstance(text, str) else "".join(text)


@functools.cache
def quiet_kernel_manager() -> type:
    """jupyter_client's kernel manager, less the interrupt it sends a kernel before shutting it down.

    papermill asks the kernel for its info once the last cell is done, and shuts it down as soon as
    the reply comes; the SIGINT of that shutdown can reach the kernel before it has left the handler
    that sent the reply (on a busy machine it often does), and ipykernel then logs `KeyboardInterrupt
    caught in kernel` after a point that went well. A kernel papermill shuts down has nothing running
    to interrupt; a cell that runs past `--cell-timeout` is still interrupted (that is not a shutdown).
    """
    from jupyter_client import AsyncKernelManager
    from traitlets import default

    class QuietKernelManager(AsyncKernelManager):
        async def _async_interrupt_kernel(self) -> None:
            if not self.shutting_down:
                await super()._async_interrupt_kernel()

        @default("transport")
        def _transport_default(self) -> str:
            return kernel_transport()

        @default("ip")
        def _ip_default(self) -> str:
            # jupyter_client would name the sockets `kernel-ipc-N` in the working folder when it
            # asks before the connection file is named: two points sharing a folder would then
            # share sockets. Each manager gets its own name in the runtime folder.
            if self.transport != "ipc":
                return super()._ip_default()
            from jupyter_core.paths import jupyter_runtime_dir

            os.makedirs(jupyter_runtime_dir(), exist_ok=True)
            return os.path.join(jupyter_runtime_dir(), f"debatekit-{uuid.uuid4().hex[:16]}-ipc")

    return QuietKernelManager


def kernel_transport() -> str:
    """How a point's kernel talks to its sweep: Unix sockets where the platform has them.

    Over TCP, jupyter_client picks five free ports, closes them and hands their numbers to the
    kernel, which binds them a moment later; a second kernel starting in that moment (two workers,
    or a test beside the sweep) can take one of them, and the kernel dies with `Address already in
    use`. Unix sockets are files, each kernel's under a name of its own, so no two kernels share
    one. TCP stays where there are no Unix sockets, or where the runtime folder's path is too long
    for one (about 100 bytes).
    """
    if os.name != "posix":
        return "tcp"
    from jupyter_core.paths import jupyter_runtime_dir

    longest = os.path.join(jupyter_runtime_dir(), "debatekit-" + "0" * 16 + "-ipc-99")
    return "ipc" if len(longest.encode()) < 100 else "tcp"


def write_meta(out: Path, notebook: Path, grid: dict, points: list[Point]) -> None:
    from debatekit import __version__
    from debatekit.records.trace import git_commit

    meta = {"notebook": _rel(Path(notebook)), "grid": grid, "debatekit_version": __version__, "git_commit": git_commit(),
            "points": [{"id": p.id, "hash": p.digest, "parameters": p.parameters} for p in points]}
    text = json.dumps(meta, indent=2, default=str)
    try:
        known = json.loads((out / "sweep.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        known = None
    unchanged = ("notebook", "git_commit")  # where it was run from, not what it is: a re-run leaves the file alone
    if isinstance(known, dict) and json.loads(text) | {k: known.get(k) for k in unchanged} == known:
        return
    files.write_text(out / "sweep.json", text)
