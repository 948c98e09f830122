"""Parameter sweeps: expand a grid, execute a parameterized notebook per point with papermill, aggregate.

    from debatekit import sweep
    result = sweep.run_sweep("notebooks/run_debate.ipynb", "grid.yaml", "results/NAME", workers=2)
    result.failed                    # points that failed, with the failing cell
    data = sweep.load("results/NAME")  # .summary (one row per point and item), .rounds, .points

A grid file (YAML):

    parameters: {protocol: society_of_mind, dataset: arithmetic, limit: 10}   # every point
    grid: {agents: [1, 3], rounds: [1, 2, 3]}                               # cartesian product
    points: [{protocol: single}, {protocol: self_consistency, samples: 6}]  # explicit extra points

The sweep folder holds `<point-id>.ipynb` (the executed notebook, parameters in its
metadata), `<point-id>.json` (the sidecar the notebook writes: summary and provenance),
`<point-id>/` (the point's run folder), `sweep.json`, `summary.parquet` and `rounds.parquet`.
A point whose sidecar says complete is skipped on a re-run. Points run in worker processes
(papermill is not thread-safe); they share the response cache (one sqlite file), and since
every call's seed derives from the run seed, item, agent and round, points that share a
configuration prefix (same agents, fewer rounds) reuse each other's model calls.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Protocol

import pandas as pd
import yaml

SIDECAR_VERSION = 1
RESERVED = {"out_dir", "summary_path"}
GRID_KEYS = {"parameters", "grid", "points"}


class SweepError(ValueError):
    """A grid or sweep folder that cannot be used; the message says why."""


@dataclass(frozen=True)
class Point:
    """One configuration of a sweep: its id (a file name) and its notebook parameters."""

    id: str
    parameters: dict = field(hash=False)

    @property
    def digest(self) -> str:
        return params_hash(self.parameters)


@dataclass
class PointResult:
    point_id: str
    status: str  # complete | skipped | failed
    notebook: str
    error: str | None = None
    cell: int | None = None
    cell_source: str | None = None
    attempts: int = 0
    wall_s: float = 0.0


@dataclass
class SweepResult:
    path: Path
    points: list[Point]
    results: list[PointResult]
    summary: pd.DataFrame

    @property
    def failed(self) -> list[PointResult]:
        return [r for r in self.results if r.status == "failed"]


# --- grids ----------------------------------------------------------------------------------

def params_hash(parameters: dict) -> str:
    return hashlib.sha256(json.dumps(parameters, sort_keys=True, default=str).encode()).hexdigest()[:8]


def load_grid(path: Path | str) -> dict:
    """Read a grid YAML file."""
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise SweepError(f"cannot read grid {path}: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise SweepError(f"grid {path} is not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise SweepError(f"grid {path} must be a mapping with `parameters`, `grid` and/or `points`")
    return data


def expand_grid(grid: dict) -> list[Point]:
    """The points of a grid: the product of `grid` lists plus explicit `points`, each over `parameters`.

    A mapping without any of the keys `parameters`, `grid`, `points` is read as `grid`.
    A scalar in `grid` is a one-value list. Duplicate points are kept once.

    Raises:
        SweepError: unknown top-level keys, malformed sections, or no points at all.
    """
    if not GRID_KEYS & set(grid):
        grid = {"grid": grid}
    unknown = sorted(set(grid) - GRID_KEYS)
    if unknown:
        raise SweepError(f"grid has unknown key(s) {', '.join(unknown)}; use parameters, grid, points")
    fixed, axes, explicit = grid.get("parameters") or {}, grid.get("grid") or {}, grid.get("points") or []
    if not isinstance(fixed, dict) or not isinstance(axes, dict) or not isinstance(explicit, list):
        raise SweepError("grid: `parameters` and `grid` must be mappings, `points` a list of mappings")
    for key in RESERVED & (set(fixed) | set(axes) | {k for p in explicit if isinstance(p, dict) for k in p}):
        raise SweepError(f"grid sets {key!r}, which the sweep sets itself")
    points: list[dict] = []
    if axes:
        names = list(axes)
        values = [v if isinstance(v, list) else [v] for v in axes.values()]
        points += [{**fixed, **dict(zip(names, combo))} for combo in itertools.product(*values)]
    for i, extra in enumerate(explicit):
        if not isinstance(extra, dict):
            raise SweepError(f"grid: point {i + 1} is not a mapping: {extra!r}")
        points.append({**fixed, **extra})
    if not points:
        raise SweepError("the grid has no points: give `grid` lists with at least one value each, or `points`")
    unique = list({params_hash(p): p for p in points}.values())
    varying = [k for k in dict.fromkeys(k for p in unique for k in p)
               if len({json.dumps(p.get(k), sort_keys=True, default=str) for p in unique}) > 1]
    return [Point(point_id(p, varying), p) for p in unique]


def point_id(parameters: dict, varying: Iterable[str]) -> str:
    """A readable, stable file name: the varying values, then a hash of all parameters."""
    parts = []
    for key in varying:
        if key in parameters:
            value = parameters[key]
            text = value if isinstance(value, str) else json.dumps(value, default=str)
            parts.append(text if key == "protocol" else f"{key}{text}")
    name = "-".join(parts)
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:80]
    return f"{name}-{params_hash(parameters)}" if name else params_hash(parameters)


# --- executors ------------------------------------------------------------------------------

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
        with ProcessPoolExecutor(max_workers=min(self.workers, len(tasks)),
                                 mp_context=multiprocessing.get_context("spawn")) as pool:
            for future in as_completed([pool.submit(fn, t) for t in tasks]):
                yield future.result()


def _dask_executor(workers: int = 1) -> Executor:
    """A LocalCluster of `workers` processes (debatekit.executors_dask; needs `debatekit[dask]`)."""
    from debatekit.executors_dask import DaskExecutor

    return DaskExecutor(workers)


EXECUTORS: dict[str, Callable[[int], Executor]] = {"local": LocalExecutor, "dask": _dask_executor}


# --- running --------------------------------------------------------------------------------

def notebook_parameters(notebook: Path | str) -> set[str]:
    """Names declared in the notebook's `parameters`-tagged cell."""
    import papermill

    return set(papermill.inspect_notebook(str(notebook)))


def _notebook_args(point: Point, declared: set[str], out: Path) -> dict:
    params, extra = {}, {}
    for key, value in point.parameters.items():
        (params if key in declared else extra)[key] = value
    if extra:
        if "extra" not in declared:
            raise SweepError(f"point {point.id}: the notebook has no parameter {', '.join(map(repr, extra))}")
        params["extra"] = {**(params.get("extra") or {}), **extra}
    params["out_dir"] = _rel(out / point.id)
    params["summary_path"] = _rel(out / f"{point.id}.json")
    return params


def _rel(path: Path) -> str:
    """The path relative to the working directory (the kernels' too) when below it, else absolute."""
    path = path.resolve()
    return str(path.relative_to(Path.cwd())) if path.is_relative_to(Path.cwd()) else str(path)


def is_complete(out: Path | str, point: Point) -> bool:
    """Whether `out` holds a complete result of `point` (its sidecar, for these very parameters)."""
    return is_complete_sidecar(Path(out) / f"{point.id}.json", point.digest)


def run_sweep(notebook: Path | str, grid: dict | Path | str, out: Path | str, *, workers: int = 1,
              executor: Executor | str = "local", progress: bool = True, kernel_name: str | None = None,
              cell_timeout: float | None = None) -> SweepResult:
    """Execute `notebook` once per grid point into `out`, skipping complete points, then aggregate.

    Args:
        notebook: a notebook with a `parameters` cell that writes its sidecar (`record_point`).
        grid: a grid mapping or the path of a grid YAML file (see module docstring).
        out: the sweep folder (created).
        workers: points run at once.
        executor: "local" (a process pool), "dask" (a Dask LocalCluster; `executors_dask.DaskExecutor`
            for a running scheduler) or any object with `map_unordered(fn, tasks)`.
        kernel_name: Jupyter kernel (default: the notebook's).
        cell_timeout: seconds a cell may run (default: no limit).

    Returns:
        The points, one `PointResult` each (failed ones carry the failing cell), and the summary table.
    """
    from tqdm.auto import tqdm

    notebook, out = Path(notebook), Path(out)
    if not notebook.exists():
        raise SweepError(f"notebook {notebook} does not exist")
    grid_data = grid if isinstance(grid, dict) else load_grid(grid)
    points = expand_grid(grid_data)
    declared = notebook_parameters(notebook)
    missing = {"out_dir", "summary_path"} - declared
    if missing:
        raise SweepError(f"notebook {notebook} must declare {', '.join(sorted(missing))} in its parameters cell")
    out.mkdir(parents=True, exist_ok=True)
    tasks, results = [], []
    for point in points:
        args = _notebook_args(point, declared, out)
        if is_complete(out, point):
            results.append(PointResult(point.id, "skipped", str(out / f"{point.id}.ipynb")))
        else:
            tasks.append({"notebook": str(notebook.resolve()), "output": str((out / f"{point.id}.ipynb").resolve()),
                          "point_id": point.id, "point_hash": point.digest, "parameters": args,
                          "kernel_name": kernel_name, "cwd": os.getcwd(), "cell_timeout": cell_timeout})
    _write_meta(out, notebook, grid_data, points)
    runner = EXECUTORS[executor](workers) if isinstance(executor, str) else executor
    bar = tqdm(total=len(points), initial=len(results), desc="sweep", unit="point", disable=not progress)
    try:
        for result in runner.map_unordered(execute_point, tasks):
            results.append(result)
            bar.update(1)
            if result.status == "failed":
                bar.write(f"point {result.point_id} failed: {result.error}")
            bar.set_postfix(failed=sum(r.status == "failed" for r in results), refresh=False)
    finally:
        bar.close()
    order = {p.id: i for i, p in enumerate(points)}
    results.sort(key=lambda r: order[r.point_id])
    (out / "failures.json").write_text(json.dumps([asdict(r) for r in results if r.status == "failed"], indent=2))
    summary = collect(out)
    return SweepResult(out, points, results, summary)


def execute_point(task: dict) -> PointResult:
    """Run one point's notebook with papermill (in a worker process); never raises.

    A cell error fails the point with that cell; any other failure (a kernel that did not
    start or died) is retried once.
    """
    import papermill
    from papermill.exceptions import PapermillExecutionError

    start, error = time.monotonic(), None
    sidecar = Path(task["cwd"]) / task["parameters"]["summary_path"]
    for attempt in (1, 2):
        if sidecar.exists():
            sidecar.unlink()  # a stale sidecar must not make a failed run look complete
        try:
            papermill.execute_notebook(
                task["notebook"], task["output"], parameters=task["parameters"], progress_bar=False,
                kernel_name=task["kernel_name"], cwd=task["cwd"], execution_timeout=task["cell_timeout"],
                request_save_on_cell_execute=False)
        except PapermillExecutionError as exc:
            source = (exc.source or "").strip().splitlines()
            return PointResult(task["point_id"], "failed", task["output"],
                               error=f"cell {exc.cell_index}: {exc.ename}: {exc.evalue}", cell=exc.cell_index,
                               cell_source="\n".join(source[:6]), attempts=attempt,
                               wall_s=round(time.monotonic() - start, 2))
        except Exception as exc:  # noqa: BLE001 - kernel start races and deaths: retried once
            error = f"{type(exc).__name__}: {exc}"
            continue
        if not _stamp(sidecar, task["point_hash"]):
            return PointResult(task["point_id"], "failed", task["output"], attempts=attempt,
                               error="the notebook finished without recording a complete summary (record_point)",
                               wall_s=round(time.monotonic() - start, 2))
        return PointResult(task["point_id"], "complete", task["output"], attempts=attempt,
                           wall_s=round(time.monotonic() - start, 2))
    return PointResult(task["point_id"], "failed", task["output"], error=f"kernel: {error}", attempts=2,
                       wall_s=round(time.monotonic() - start, 2))


def _stamp(sidecar: Path, digest: str) -> bool:
    """Mark a sidecar the notebook wrote as this point's result; False if it is missing or incomplete."""
    try:
        data = json.loads(sidecar.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if data.get("status") != "complete":
        return False
    sidecar.write_text(json.dumps({**data, "point_hash": digest}, indent=2, default=str), encoding="utf-8")
    return True


def is_complete_sidecar(path: Path, digest: str) -> bool:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return data.get("status") == "complete" and data.get("point_hash") == digest


def _write_meta(out: Path, notebook: Path, grid: dict, points: list[Point]) -> None:
    from debatekit import __version__
    from debatekit.trace import git_commit

    meta = {"notebook": str(notebook), "grid": grid, "debatekit_version": __version__, "git_commit": git_commit(),
            "points": [{"id": p.id, "hash": p.digest, "parameters": p.parameters} for p in points]}
    (out / "sweep.json").write_text(json.dumps(meta, indent=2, default=str))


# --- inside the notebook --------------------------------------------------------------------

def run_point(protocol: str, dataset: str, out_dir: str, *, limit: int | None = None, model: str | None = None,
              seed: int = 0, concurrency: int = 4, call_timeout: float = 120.0, progress: bool = True,
              api_base: str | None = None, model_options: dict | None = None, max_tokens: int | None = None,
              **params):
    """Run one configuration into `out_dir` (resuming it if a previous attempt was cut short).

    `params` are protocol parameters; None values mean "the protocol's default". A non-None
    parameter the protocol does not have is an error. `api_base` (and any other litellm
    arguments in `model_options`) go with `model`, e.g. an OpenAI-compatible server such as
    `debatekit serve`; an `openai/` model with an `api_base` and no `api_key` gets a placeholder
    key (never $OPENAI_API_KEY).
    """
    from debatekit import registry
    from debatekit.gateway import default_model
    from debatekit.runner import run
    from debatekit.schemas import RunConfig

    given = {k: v for k, v in params.items() if v is not None}
    spec = registry.get(protocol)
    spec.validate(given)
    options = dict(model_options or {})
    if api_base:
        options["api_base"] = api_base
        if (model or "").startswith("openai/") and "api_key" not in options:
            # the OpenAI client insists on a key; never send $OPENAI_API_KEY to another server
            options["api_key"] = "none"
    extra = {"max_tokens": max_tokens} if max_tokens else {}
    config = RunConfig(protocol=protocol, dataset=dataset, limit=limit, model=model, params=given, seed=seed,
                       concurrency=concurrency, call_timeout=call_timeout, **extra,
                       model_options={model or default_model(): options} if options else {})
    return run(config, out_dir, resume=True, progress=progress)


def record_point(summary_path: str | None, result, parameters: dict) -> dict:
    """Write the sidecar the sweep reads: status, parameters, run folder, summary, provenance.

    `parameters` are the notebook's parameters (the sweep then stamps the point's hash on
    the file). With no `summary_path` (an interactive run) nothing is written.
    """
    point = {k: v for k, v in parameters.items() if k not in RESERVED}
    record = result.record
    where = Path(result.path).resolve()
    if summary_path:  # relative to the sidecar, so a sweep folder can move
        where = Path(os.path.relpath(where, Path(summary_path).resolve().parent))
    data = {"sidecar_version": SIDECAR_VERSION, "status": record.status, "parameters": point,
            "run_path": str(where), "run_id": record.run_id,
            "config_hash": record.config_hash, "model": record.model, "seed": record.config.seed,
            "protocol": record.config.protocol, "dataset": record.dataset.name,
            "debatekit_version": record.debatekit_version, "git_commit": record.git_commit,
            "summary": record.summary}
    if summary_path:
        Path(summary_path).write_text(json.dumps(data, indent=2, default=str), encoding="utf-8")
    return data


# --- results --------------------------------------------------------------------------------

@dataclass
class SweepData:
    path: Path
    summary: pd.DataFrame
    rounds: pd.DataFrame
    points: list[dict]


def collect(out: Path | str) -> pd.DataFrame:
    """Build `summary.parquet` (one row per point and item) and `rounds.parquet` from the complete points."""
    from debatekit import analysis, registry

    out = Path(out)
    meta = json.loads((out / "sweep.json").read_text(encoding="utf-8"))
    summary, rounds = [], []
    for entry in meta["points"]:
        sidecar = out / f"{entry['id']}.json"
        if not is_complete_sidecar(sidecar, entry["hash"]):
            continue
        side = json.loads(sidecar.read_text(encoding="utf-8"))
        run_path = out / side["run_path"]
        run_path = run_path if (run_path / "run.json").exists() else out / entry["id"]
        tables = analysis.load_runs([run_path])
        spec_defaults = registry.get(side["protocol"]).defaults()
        params = {**spec_defaults, **{k: v for k, v in entry["parameters"].items() if v is not None}}
        columns = {"point_id": entry["id"], **{k: _cell(v) for k, v in params.items()},
                   "protocol": side["protocol"], "dataset": side["dataset"], "model": side["model"],
                   "seed": side["seed"], "config_hash": side["config_hash"],
                   "debatekit_version": side["debatekit_version"], "git_commit": side["git_commit"]}
        debates = tables.debates.drop(columns=["protocol", "model", "config_hash"], errors="ignore")
        summary.append(debates.assign(**_no_clash(columns, debates)))
        keep = {k: v for k, v in columns.items() if k in ("point_id", "protocol", "seed", *params)}
        rounds.append(tables.rounds.assign(**_no_clash(keep, tables.rounds)))
    frame = _tidy(pd.concat(summary, ignore_index=True) if summary else pd.DataFrame())
    _write_table(_tidy(pd.concat(rounds, ignore_index=True) if rounds else pd.DataFrame()), out / "rounds")
    _write_table(frame, out / "summary")
    return frame


def _no_clash(columns: dict, frame: pd.DataFrame) -> dict:
    """Parameter columns named like a column of the table (e.g. `answer`) get a `param_` prefix."""
    return {(f"param_{k}" if k in frame.columns else k): v for k, v in columns.items()}


def _cell(value: Any) -> Any:
    return json.dumps(value) if isinstance(value, (list, dict)) else value


def _tidy(frame: pd.DataFrame) -> pd.DataFrame:
    """Answers as text (their types differ between items), so the table stores in parquet."""
    for col in ("final_answer", "truth", "answer", "majority"):
        if col in frame:
            frame[col] = frame[col].map(lambda v: None if v is None else str(v))
    return frame


def _write_table(frame: pd.DataFrame, stem: Path) -> None:
    try:
        frame.to_parquet(stem.with_suffix(".parquet"), index=False)
    except ImportError:
        frame.to_csv(stem.with_suffix(".csv"), index=False)


def _read_table(stem: Path) -> pd.DataFrame:
    if stem.with_suffix(".parquet").exists():
        return pd.read_parquet(stem.with_suffix(".parquet"))
    if stem.with_suffix(".csv").exists():
        return pd.read_csv(stem.with_suffix(".csv"))
    raise SweepError(f"{stem.parent} has no {stem.name}.parquet or .csv: not a sweep folder (run `debatekit sweep`)")


def load(out: Path | str) -> SweepData:
    """Load a sweep folder's tables (summary per point and item, rounds per point, item, round and agent)."""
    out = Path(out)
    if not (out / "sweep.json").exists():
        raise SweepError(f"{out} is not a sweep folder (no sweep.json)")
    meta = json.loads((out / "sweep.json").read_text(encoding="utf-8"))
    return SweepData(out, _read_table(out / "summary"), _read_table(out / "rounds"), meta["points"])
