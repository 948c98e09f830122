"""`debatekit compare RUN_DIR RUN_DIR ... [--baseline NAME]`: paired comparison of finished runs."""

from __future__ import annotations

import sys
from pathlib import Path


def add(subparsers) -> dict:
    p = subparsers.add_parser("compare", help="compare run folders on their shared items, each against the first")
    p.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run folders of the same dataset (two or more)")
    p.add_argument("--baseline", help="the run to compare against, by its label (protocol); default the first")
    return {"compare": run}


def run(args) -> int:
    from debatekit._base.terminal import visible
    from debatekit.analysis import load_runs
    from debatekit.analysis.decompose import across_runs, format_across
    from debatekit.analysis.paired import compare_runs, format_comparison, run_labels
    from debatekit.cli.show import state_line
    from debatekit.records.trace import RunFolder

    if len(args.runs) < 2:
        raise ValueError("compare needs at least two run folders")
    for path in args.runs:
        if not (Path(path) / "run.json").exists():
            raise ValueError(f"{path} is not a run folder (no run.json)")
    records = [RunFolder(path).read_run() for path in args.runs]
    datasets = {r.dataset.sha256 for r in records}
    if len(datasets) > 1:
        raise ValueError("the runs used different datasets (" + ", ".join(
            sorted({f"{r.dataset.name}" for r in records})) + "): nothing to pair")
    tables = load_runs(args.runs)
    unfinished = [path for path, r in zip(args.runs, records) if r.run_id not in set(tables.debates.get("run_id", []))]
    if unfinished:
        raise ValueError(f"{', '.join(map(str, unfinished))}: no finished debate yet, nothing to compare")
    for path, record in zip(args.runs, records):
        shown = (tables.debates["run_id"] == record.run_id).sum()
        note = state_line(path, record, int(shown)).strip()
        if note:
            print(visible(f"note: {note}"), file=sys.stderr)
    labels = run_labels(records)
    table = compare_runs(tables, records, baseline=args.baseline, labels=labels)
    if table["pairs"].sum() == 0:
        raise ValueError("the runs share no item that both answered: nothing to pair")
    print(visible(format_comparison(table)))
    stages = format_across(across_runs(tables, labels, table["baseline"].iloc[0]))
    if stages:
        print("\n" + visible(stages))
    return 0
