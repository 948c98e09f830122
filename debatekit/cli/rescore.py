"""`debatekit rescore FOLDER...`: read finished runs again with today's code, without a model.

    debatekit rescore results/studies/gsm8k            # what would change, per run
    debatekit rescore results/studies/gsm8k --write    # and put it in the runs' records

Every debate a run recorded is played back from its recorded replies (`debatekit.sweep.rescore`):
zero model calls. It prints, per run, the debates whose answer changed, the replies read
differently and the debates that could not be played back whole (they keep their records).
A run that comes out the same is the replay check of a study: same prompts, same numbers.
A run writing in the folder is left alone (its lock is checked).
"""

from __future__ import annotations

import sys

from debatekit.records.trace import RunFolderError, run_folders


def add(subparsers) -> dict:
    p = subparsers.add_parser("rescore", help="read finished runs again from their recorded replies (no model)")
    p.add_argument("folders", nargs="+", metavar="FOLDER", help="a run folder, or a sweep or study folder")
    p.add_argument("--write", action="store_true",
                   help="put the new readings and answers in the runs' records (the work done is kept)")
    return {"rescore": run}


def run(args) -> int:
    from debatekit.sweep.rescore import rescore

    runs = [path for folder in args.folders for path in run_folders(folder)]
    busy = 0
    for path in runs:
        try:
            print(rescore(path, write=args.write).describe())
        except RunFolderError as exc:
            print(f"skipped {path}: {exc}", file=sys.stderr)
            busy += 1
    return 1 if busy else 0
