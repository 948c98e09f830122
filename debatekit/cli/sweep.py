"""`debatekit sweep NOTEBOOK --grid GRID.yaml --out results/NAME [--workers N] [--executor dask [--scheduler ADDR]]`."""

from __future__ import annotations

import functools
import sys

from debatekit._base.terminal import visible
from debatekit.cli.flags import out_path

RETRY_DEGRADED_HELP = ("also run again the debates that answered although some of their calls failed (degraded), "
                       "in complete points too; their other calls come from the response cache")


def add(subparsers) -> dict:
    p = subparsers.add_parser("sweep", help="run a parameterized notebook once per grid point (papermill)")
    p.add_argument("notebook", help="notebook with a `parameters` cell, e.g. notebooks/run_debate.ipynb (a shipped "
                                    "notebook's name alone finds it in an installed package too)")
    p.add_argument("--grid", required=True, help="grid YAML: parameters, grid (lists), points (explicit)")
    p.add_argument("--out", type=out_path, required=True, help="sweep folder, e.g. results/NAME (a re-run skips complete points)")
    p.add_argument("--workers", type=int, default=1, help="points run at once, each in its own process")
    p.add_argument("--executor", choices=["local", "dask"], default="local",
                   help="where points run: local processes, or a Dask cluster (pip install 'debatekit[dask]')")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="with --executor dask: a running scheduler, e.g. tcp://10.0.0.5:8786 (workers need the "
                        "same paths); default: a LocalCluster of --workers processes on 127.0.0.1")
    p.add_argument("--cell-timeout", type=float, help="seconds a notebook cell may run")
    p.add_argument("--kernel", help="Jupyter kernel name (default: the notebook's)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--retry-degraded", action="store_true", help=RETRY_DEGRADED_HELP)
    p.add_argument("--yes", action="store_true", help="start a large grid (over 200 points to run) without asking")
    return {"sweep": run}


def run(args) -> int:
    from debatekit import sweep
    from debatekit._base import signals
    from debatekit.sweep.guard import announce

    if args.workers < 1:
        raise ValueError(f"--workers must be at least 1, got {args.workers}")
    if args.scheduler and args.executor != "dask":
        raise ValueError("--scheduler needs --executor dask")
    executor = args.executor
    if args.executor == "dask":
        from debatekit.sweep.executors_dask import DaskExecutor

        executor = DaskExecutor(args.workers, scheduler=args.scheduler)
    confirm = functools.partial(announce, yes=args.yes)
    try:
        from debatekit.sweep.shipped import shipped

        result = sweep.run_sweep(shipped(args.notebook), args.grid, args.out, workers=args.workers, executor=executor,
                                 progress=not args.quiet, kernel_name=args.kernel, cell_timeout=args.cell_timeout,
                                 retry_degraded=args.retry_degraded, confirm=confirm)
    except KeyboardInterrupt as exc:
        print(f"debatekit: sweep stopped; complete points are kept in {args.out}: run the same `debatekit sweep` "
              "command again to finish the rest", file=sys.stderr)
        return signals.exit_status(exc)
    counts = {s: sum(r.status == s for r in result.results) for s in ("complete", "skipped", "failed")}
    print(f"{len(result.points)} points: {counts['complete']} run, {counts['skipped']} skipped (complete), "
          f"{counts['failed']} failed; {len(result.summary)} rows in {result.path}/summary.parquet")
    for r in result.failed:
        # a server's error message may hold terminal escapes: printed as text (`visible`), as `run` does
        print(visible(f"FAILED {r.point_id}: {r.error}\n  notebook: {r.notebook}"), file=sys.stderr)
        if r.cell_source:
            print(visible("  cell:\n" + "\n".join(f"    {line}" for line in r.cell_source.splitlines())),
                  file=sys.stderr)
    say_drained(result)
    return 1 if result.failed else 3 if result.drained else 0


def say_drained(result) -> None:
    """One line when points stopped or never started because the sweep was asked to drain."""
    if result.drained:
        print(f"debatekit: drained: {len(result.drained)} point(s) stopped or not started as asked; complete points "
              f"and finished debates are kept: run the same command to continue", file=sys.stderr)

