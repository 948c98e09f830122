"""The machine's cores as a budget shared by the local engines of all its processes.

An engine loaded in a process claims threads in a folder of claims (one file per process,
holding its thread count); a new engine gets the cores that live processes have not claimed, at
least one, so that the sum over engines stays within the cores wherever it can.
`$DEBATEKIT_LOCAL_THREADS` overrides the budget.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def claim(where: Path) -> int:
    """Threads for an engine loaded in this process: $DEBATEKIT_LOCAL_THREADS, else the cores that
    engines of other live processes on this machine have not claimed (at least 1), recorded in
    `where` (one file per process) so that the sum over engines stays within the cores."""
    forced = os.environ.get("DEBATEKIT_LOCAL_THREADS")
    if forced:
        return int(forced)
    import fcntl

    total = max(1, os.cpu_count() or 1)
    where.mkdir(parents=True, exist_ok=True)
    with open(where.parent / "threads.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        used = 0
        for entry in where.glob("*"):
            pid = int(entry.name) if entry.name.isdigit() else -1
            if pid == os.getpid():
                continue
            if not _alive(pid):
                entry.unlink(missing_ok=True)
                continue
            used += int(entry.read_text() or 0)
        threads = max(1, total - used)
        if used >= total:
            print(f"[debatekit] warning: local engines of other processes hold all {total} cores; this one gets 1 "
                  f"thread (set DEBATEKIT_LOCAL_ENGINE=shared to share one engine)", file=sys.stderr)
        mine = where / str(os.getpid())
        mine.write_text(str(threads + (int(mine.read_text() or 0) if mine.exists() else 0)))
    return threads


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
