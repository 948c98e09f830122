"""`debatekit drain FOLDER`: ask the run or sweep writing FOLDER to stop at the next item boundary.

    debatekit drain results/studies/gsm8k

A run folder drains its run; a sweep (or study) folder drains every point: no new debate and no
new point starts, the debates already started finish and are kept, and the run ends
`interrupted` with the reason `drained: ...`. Ctrl-C (or SIGTERM) stops at once instead and
drops the debates in flight, whose calls only the response cache of that machine keeps; draining
loses nothing, which matters when a long study stops at the end of a session on a machine that
will not be there for the next one. The same command with `--resume` (a study: the same command)
continues, and removes the request as it starts.
"""

from __future__ import annotations

import json
from pathlib import Path

from debatekit._base import files
from debatekit._base.signals import DRAIN_FILE


def add(subparsers) -> dict:
    p = subparsers.add_parser("drain", help="let a run or sweep finish the debates it started, then stop")
    p.add_argument("folder", help="a run folder, or a sweep or study folder")
    return {"drain": run}


def run(args) -> int:
    folder = Path(args.folder)
    if not folder.is_dir():
        raise ValueError(f"{folder} is not a folder: name a run folder, or a sweep or study folder")
    is_run = (folder / "run.json").exists()
    if not is_run and not (folder / "sweep.json").exists():
        raise ValueError(f"{folder} holds no run (run.json) and no sweep (sweep.json)")
    ended = _ended(folder / "run.json") if is_run else None
    if ended:
        print(f"{folder}: its run has ended ({ended}): nothing to drain")
        return 0
    files.write_text(folder / DRAIN_FILE, "drain requested by `debatekit drain`\n")
    what = "its run starts" if is_run else "its points start"
    print(f"asked {folder} to drain: {what} no new debate, the debates already started finish, then it stops "
          f"(watch for 'drained' in its output; the same command, with --resume for a run, continues)")
    return 0


def _ended(run_file: Path) -> str | None:
    """The status of a run that has ended (complete, interrupted, failed), or None: running, or not
    yet readable (a run that is starting is asked all the same)."""
    try:
        status = json.loads(run_file.read_text(encoding="utf-8")).get("status")
    except (OSError, ValueError, AttributeError):
        return None
    return status if status in ("complete", "interrupted", "failed") else None
