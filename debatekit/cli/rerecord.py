"""`debatekit rerecord FOLDER...`: keep recorded runs current with today's prompts and readers.

    debatekit rerecord results/examples/judge_refine-incidents          # record again what is stale
    debatekit rerecord results/examples --check                         # only say what is stale

Each run's debates are run again by today's code, every call whose prompt the run recorded
answered with its recorded reply (`debatekit.sweep.rerecord`). Only the prompts the run did not
record are asked of its model, so recording a run again after one prompt changed costs that
prompt's calls, and after a reader changed, none. A stale run is replaced by the new recording;
a current one is left as it is. The committed example runs are checked this way by the tests.
"""

from __future__ import annotations

import sys

from debatekit.records.trace import RunFolderError, run_folders


def add(subparsers) -> dict:
    p = subparsers.add_parser("rerecord", help="record finished runs again where today's code asks or reads "
                                               "otherwise (the model answers only what is new)")
    p.add_argument("folders", nargs="+", metavar="FOLDER", help="a run folder, or a folder of runs")
    p.add_argument("--check", action="store_true", help="say which runs are stale and why; ask no model, write nothing")
    return {"rerecord": run}


def run(args) -> int:
    from debatekit.datasets import DatasetError
    from debatekit.models.errors import ModelError, ModelSetupError
    from debatekit.registry import ProtocolError
    from debatekit.sweep.rerecord import rerecord

    stale = failed = 0
    for path in [path for folder in args.folders for path in run_folders(folder)]:
        try:
            result = rerecord(path, ask_model=not args.check)
        except (RunFolderError, DatasetError, ProtocolError, ModelError, ModelSetupError, ValueError) as exc:
            print(f"skipped {path}: {str(exc).splitlines()[0]}", file=sys.stderr)
            failed += 1
            continue
        print(result.describe())
        stale += result.stale and not result.written
    return 1 if failed or stale else 0
