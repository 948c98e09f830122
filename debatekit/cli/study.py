"""`debatekit study GRID`: a study in one command: the sweep, the study notebook over it, its report.

    debatekit study results/studies/gsm8k/grid.yaml

runs (or resumes) every point of the grid into the grid's folder with `notebooks/run_debate.ipynb`,
executes `notebooks/study.ipynb` over that folder into `study.ipynb` beside it, and exports that to
a self-contained `report.html` (and, with `--png`, the two headline figures as PNG). Interrupted,
the same command continues: complete points are skipped, a point cut short resumes its run, and
calls already made are served from the response cache, so a finished study re-runs with zero model
calls and prints the same numbers. `--status` runs nothing and prints how far each point has got
and the hours left at the rate it last ran (`debatekit.sweep.progress`); `--report-only` runs no
model and writes the notebook and report over the runs as they stand (a study part-way, each
configuration on the items it has finished), and rebuilds a sweep folder's `summary.parquet` and
`rounds.parquet` from the points complete now. Each point found complete when the command ends
has its call events packed (`debatekit pack`), so that a study folder stays small enough to commit.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from debatekit.cli.flags import out_path

import yaml

from debatekit._base.terminal import visible


def add(subparsers) -> dict:
    from debatekit.cli.sweep import RETRY_DEGRADED_HELP

    p = subparsers.add_parser("study", help="run a study grid, its study notebook and report, resumably")
    p.add_argument("grid", help="grid YAML, e.g. results/studies/gsm8k/grid.yaml")
    p.add_argument("--out", type=out_path, help="study folder (default: the grid's folder)")
    p.add_argument("--workers", type=int, default=1, help="points run at once (keep 1 on a local model)")
    p.add_argument("--png", action="store_true", help="also write the headline figures as PNG (kaleido + chromium)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--retry-degraded", action="store_true", help=RETRY_DEGRADED_HELP)
    p.add_argument("--status", action="store_true",
                   help="run nothing: print each point's items done, accuracy so far, rate and hours left")
    p.add_argument("--report-only", action="store_true",
                   help="run no model: write the study notebook and report over the runs as they stand, "
                        "and the sweep's tables over its complete points")
    p.add_argument("--register", action="store_true",
                   help="register the grid's `plan` (registration.json beside it) before any point runs; run nothing")
    p.add_argument("--model", help="run every point on this model instead of the grid's (with --out: the study's "
                                    "design in a folder of its own), e.g. openai/gpt-4o-mini")
    p.add_argument("--api-base", help="with --model: its OpenAI-compatible server, e.g. http://localhost:8000/v1")
    p.add_argument("--api-key-env", help="with --model: the environment variable holding its API key")
    p.add_argument("--set", action="append", default=[], dest="sets", metavar="KEY=VALUE",
                   help="a protocol parameter for every point whose protocol has it (with --out); repeatable")
    p.add_argument("--estimate", action="store_true",
                   help="run each point on 10 items outside the study's sample, in a scratch folder, and print the "
                        "projected completion tokens and busy hours per configuration and look; keep nothing")
    return {"study": run}


def run(args) -> int:
    from debatekit import sweep
    from debatekit._base.extras import need
    from debatekit.sweep.shipped import notebooks_dir

    grid = Path(args.grid)
    if not grid.is_file():
        raise ValueError(f"grid {grid} does not exist")
    out = Path(args.out) if args.out else grid.parent
    grid = retarget(grid, out, args)
    if args.status:
        from debatekit.sweep import progress

        print(progress.describe(progress.progress(grid, out)))
        return 0
    if args.register:
        from debatekit.sweep import plan as planning

        record = planning.register(grid, out)
        print(f"registered the plan of {grid} (sha256 {record['plan_sha256'][:12]}, commit "
              f"{(record['git_commit'] or 'unknown')[:7]}) in {grid.parent / planning.REGISTRATION}; nothing run")
        return 0
    if args.estimate:
        from debatekit.sweep import plan as planning

        table = planning.estimate(grid, progress=not args.quiet)
        print(f"projected from {planning.ESTIMATE_ITEMS} items per configuration outside the study's sample "
              "(nothing kept):")
        print(table.to_string(index=False, formatters={"completion_tokens": "{:,.0f}".format,
                                                       "busy_h": "{:.2f}".format}))
        return 0
    need("papermill", "notebooks", "debatekit study")
    if args.report_only:
        if (out / "sweep.json").exists():  # a point finished since the sweep last ended is counted too
            sweep.collect(out)
        notebook = write_study(out, png=args.png)
        print(f"study notebook {notebook}; report {out / 'report.html'} (no point run)")
        return 0
    from debatekit.sweep.grid import load_grid, study_plan

    plan = study_plan(load_grid(grid))
    if plan is not None:
        say_registration(grid)
    for look, extent in enumerate(plan["looks"] if plan else [None], start=1):
        try:
            result = sweep.run_sweep(notebooks_dir() / "run_debate.ipynb", grid, out, workers=args.workers,
                                     progress=not args.quiet, retry_degraded=args.retry_degraded, extent=extent)
        except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM: a study resumes by its own command, not --resume
            from debatekit._base import signals

            print(f"debatekit: study stopped; complete points and finished debates are kept in {out}: run the same "
                  f"`debatekit study` command again to continue", file=sys.stderr)
            return signals.exit_status(exc)
        if result.failed or result.drained or plan is None:
            break
        if decided(out, plan, look):
            break
    pack_complete(grid, out)
    for r in result.failed:
        print(visible(f"FAILED {r.point_id}: {r.error}\n  notebook: {r.notebook}"), file=sys.stderr)
    if result.failed:
        print(f"debatekit: {len(result.failed)} point(s) failed; run the same command again to retry them",
              file=sys.stderr)
        return 1
    if result.drained:
        from debatekit.cli.sweep import say_drained

        say_drained(result)
        return 3
    notebook = write_study(out, png=args.png)
    print(f"{len(result.points)} points in {out}; study notebook {notebook}; report {out / 'report.html'}")
    return 0


def retarget(grid: Path, out: Path, args) -> Path:
    """The grid to run: `grid`, or with --model, --api-base, --api-key-env or --set the same design with
    them applied (`sweep.grid.retargeted`), written as `out/grid.yaml` with a line saying where from."""
    from debatekit.cli.app import _parse_set
    from debatekit.sweep.grid import load_grid, retargeted

    run = {k: v for k, v in (("model", args.model), ("api_base", args.api_base),
                             ("api_key_env", args.api_key_env)) if v}
    sets = _parse_set(args.sets)
    if not run and not sets:
        return grid
    if "model" not in run and run:
        raise ValueError("--api-base and --api-key-env go with --model")
    if out.resolve() == grid.parent.resolve():
        raise ValueError(f"--model and --set run the design of {grid} anew: give --out, a folder other than "
                         f"{grid.parent}")
    data = retargeted(load_grid(grid), run, sets)
    out.mkdir(parents=True, exist_ok=True)
    target = out / "grid.yaml"
    changes = " ".join([*(f"--{k.replace('_', '-')} {v}" for k, v in run.items()), *(f"--set {s}" for s in args.sets)])
    target.write_text(f"# the design of {grid} with {changes} (debatekit study)\n"
                      + yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return target


def say_registration(grid: Path) -> None:
    """One line on stderr when the plan was not registered, and one per way it changed since it was."""
    from debatekit.sweep import plan as planning

    if planning.registration(grid) is None:
        print(f"debatekit: the plan of {grid} is not registered (`debatekit study {grid} --register` before any "
              "point runs); the report will say so", file=sys.stderr)
    for line in planning.deviations(grid):
        print(f"debatekit: the plan deviates from its registration: {line}", file=sys.stderr)


def decided(out: Path, plan: dict, look: int) -> bool:
    """Test the primary comparison at this look, record it in looks.json, say it; True when it decides."""
    from debatekit.sweep import plan as planning

    found = planning.evaluate(out, plan, look)
    planning.record_look(out, found, plan)
    primary = plan["primary"]
    print(f"look {look} of {len(plan['looks'])} ({found.pairs} items): {primary['config']} - {primary['against']} "
          f"{found.difference:+.2f}, z {found.z:+.2f} (boundary {found.efficacy_boundary:.2f}), TOST "
          f"{min(found.tost_low, found.tost_high):.2f} (boundary {found.equivalence_boundary:.2f}): {found.decision}")
    return found.decision in ("different", "equivalent")


def pack_complete(grid: Path, out: Path) -> None:
    """Pack the call events of each point that has finished every item (`debatekit pack`)."""
    from debatekit.records.trace import RunFolder, RunFolderError
    from debatekit.sweep import progress

    try:
        points = progress.progress(grid, out)
    except (RunFolderError, OSError, ValueError) as exc:  # a damaged run folder: the study's own lines come first
        print(f"debatekit: nothing packed: {exc}", file=sys.stderr)
        return
    for point in points.itertuples():
        if point.state == "complete":
            try:
                damage = RunFolder(out / point.point).pack().damage()
            except (RunFolderError, OSError) as exc:  # a run of it goes on elsewhere, a full disk: packs next time
                print(f"debatekit: {point.point} not packed: {exc}", file=sys.stderr)
                continue
            if damage:
                print(f"debatekit: {point.point} packed; its events had {damage}", file=sys.stderr)


def write_study(out: Path, png: bool = False) -> Path:
    """Execute the study notebook over the folder `out` and export it as `out/report.html`."""
    from debatekit.sweep import report
    from debatekit.sweep.execute import run_notebook
    from debatekit.sweep.shipped import notebooks_dir

    notebooks = notebooks_dir()
    notebook, fresh = out / "study.ipynb", out / ".study-new.ipynb"
    # relative to the notebook's working folder, so that a committed notebook names no machine's paths
    where = os.path.relpath(out.resolve(), notebooks)
    try:
        run_notebook(notebooks / "study.ipynb", fresh, cwd=str(notebooks),
                     parameters={"sweep_dir": where, "png_dir": where if png else None})
        if (out / "report.html").exists() and report.same_notebook(fresh, notebook):
            return notebook  # nothing it shows changed: a re-run leaves the files as they were
        os.replace(fresh, notebook)
    finally:
        fresh.unlink(missing_ok=True)
    report.write_notebook_html(notebook, out / "report.html")
    return notebook
