"""`debatekit pack FOLDER...`: gzip the call events of finished runs, for committing them.

    debatekit pack results/studies/gsm8k

A run's `events.jsonl` holds every call with the messages the agent was shown: a 100-item debate
run is megabytes of repeated text. Packing writes it as `events.jsonl.gz` (about a tenth of the
size) and removes the plain file; a line no reader reads (garbled: kept as it was; torn by a
kill: left out) is counted on stderr. Everything that reads a run (tables, `debatekit show`, the
study notebook, `--resume`) reads either. A sweep or study folder packs each of its runs. A run
writing in a folder keeps it as it is (its lock is checked), so packing is safe beside a study.
"""

from __future__ import annotations

import sys

from debatekit.records.trace import RunFolder, RunFolderError, run_folders


def add(subparsers) -> dict:
    p = subparsers.add_parser("pack", help="gzip the call events of runs (a run, sweep or study folder) for committing")
    p.add_argument("folders", nargs="+", metavar="FOLDER", help="a run folder, or a sweep or study folder")
    return {"pack": run}


def run(args) -> int:
    runs = [path for folder in args.folders for path in run_folders(folder)]
    busy = 0
    for path in runs:
        try:
            packed = RunFolder(path).pack()
        except RunFolderError as exc:  # in use by a run (its process named), or a packed file damaged
            reason = str(exc).split("; wait for it")[0]
            print(f"skipped {path}: {reason}; pack it again once that is settled", file=sys.stderr)
            busy += 1
            continue
        before, after = packed.before, packed.after
        print(f"{path}: events {before / 1e6:.2f} MB -> {after / 1e6:.2f} MB" if before != after else
              f"{path}: already packed ({after / 1e6:.2f} MB)")
        if damage := packed.damage():
            print(f"{path}: {damage} (no reader reads them)", file=sys.stderr)
    return 1 if busy else 0
