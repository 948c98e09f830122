"""`debatekit rescore FOLDER...`: read finished runs again with today's code, without a model.

    debatekit rescore results/studies/gsm8k            # what would change, per run
    debatekit rescore results/studies/gsm8k --write    # and put it in the runs' records

Every debate a run recorded is played back from its recorded replies (`debatekit.sweep.rescore`):
no model is asked. It prints, per run, the debates whose answer changed, the replies read
differently and the debates kept as recorded (not played back whole). A run that comes out the
same is the replay check of a study: same prompts, same numbers. With `--write`, a run writing
in the folder is left alone (its lock is checked); a run that cannot be played back (its
dataset changed, its protocol is not installed) is named and the others go on.
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
    from debatekit.datasets import DatasetError
    from debatekit.models.errors import ModelError, ModelSetupError
    from debatekit.registry import ProtocolError
    from debatekit.sweep.rescore import rescore

    runs = [path for folder in args.folders for path in run_folders(folder)]
    skipped = 0
    for path in runs:
        try:
            print(rescore(path, write=args.write).describe())
        except (RunFolderError, DatasetError, ProtocolError, ModelError, ModelSetupError, ValueError) as exc:
            print(f"skipped {path}: {str(exc).splitlines()[0]}", file=sys.stderr)
            skipped += 1
    return 1 if skipped else 0
