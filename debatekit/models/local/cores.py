"""The machine's cores as a budget shared by the local engines of all its processes.

Between processes: a process that loads an engine claims threads in a folder of claims (one file
per process, holding its thread count); its first engine gets the cores that live processes have
not claimed, at least one, so that the sum over processes stays within the cores wherever it can.
`$DEBATEKIT_LOCAL_THREADS` overrides the budget.

Inside a process: several engines (one per local model, for a debate that mixes models) all use
the process's threads. By default they generate at the same moment; `$DEBATEKIT_LOCAL_MIX=turns`
makes them take turns instead (`Turns`: an engine generates while no other engine of the process
does, its concurrent calls batched together). Measured on 2 cores (`python -m benchmarks
two_models`: rounds of two 1.5B calls and one 0.5B call), generating at the same moment made 15.4
and 16.6 completion tokens a second in two runs, taking turns 13.8 and 14.3, and halving the
threads of each 10.6: unlike two processes (issue 27), two engines of one process do not starve
each other.
"""

from __future__ import annotations

import os
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Hashable, Iterator

from debatekit._base.locking import exclusive


def claim(where: Path, advice: str = "") -> int:
    """Threads for an engine loaded in this process: $DEBATEKIT_LOCAL_THREADS, else the cores that
    engines of other live processes on this machine have not claimed (at least 1), recorded in
    `where` (one file per process) so that the sum over processes stays within the cores. A second
    engine of the same process gets the process's claim again: the engines of one process share it.
    `advice` ends the warning printed when other processes hold every core (what would avoid it)."""
    forced = os.environ.get("DEBATEKIT_LOCAL_THREADS")
    if forced:
        return int(forced)
    total = max(1, os.cpu_count() or 1)
    where.mkdir(parents=True, exist_ok=True)
    with exclusive(where.parent / "threads.lock"):
        mine = where / str(os.getpid())
        if _claimed.get(where) is not None and _claimed[where][0] == os.getpid():
            return _claimed[where][1]
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
                  f"thread{advice}", file=sys.stderr)
        mine.write_text(str(threads))
        _claimed[where] = (os.getpid(), threads)
    return threads


_claimed: dict[Path, tuple[int, int]] = {}  # claims folder -> (pid, threads) this process holds (a fork re-claims)


def release(where: Path) -> None:
    """Give back this process's claim in `where`, once it holds no engine any more: engines other
    processes load from then on get its cores again. A claim left by a process that lives on with
    no engine (a test session that loaded one) would otherwise hold them until that process exits."""
    if not where.is_dir():
        return
    with exclusive(where.parent / "threads.lock"):
        (where / str(os.getpid())).unlink(missing_ok=True)
        _claimed.pop(where, None)


def release_all() -> None:
    """Give back every claim this process made, wherever it made it (`release`)."""
    for where, (pid, _) in list(_claimed.items()):
        if pid == os.getpid():
            release(where)


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


class Turns:
    """The engines of one process take turns on its threads.

    A call of engine E enters `turn(E)` for its whole generation and waits for E's turn. When the
    turn is free it goes to the engine of the oldest waiting call, and every call of that engine
    already waiting goes with it (llama.cpp batches them on its slots), whatever the order in which
    the two engines' calls arrived. A call of the engine holding the turn that arrives later goes at
    once unless a call of another engine is waiting since before it; then it waits for the next
    turn. The turn is free again when the last running call of its holder ends. So calls of one
    engine still run in parallel, two engines never decode at the same moment, and neither starves.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._next = 0  # the next ticket
        self._waiting: dict[int, Hashable] = {}  # ticket -> engine
        self._batch = 0  # tickets below this, of the holder, joined the turn when it was handed over
        self.holder: Hashable | None = None  # the engine whose calls are running, None when none is
        self.running = 0
        self._last: Hashable | None = None
        self.handovers = 0  # times the turn passed from one engine to another (for benchmarks and tests)

    @contextmanager
    def turn(self, engine: Hashable) -> Iterator[None]:
        with self._cond:
            ticket, self._next = self._next, self._next + 1
            self._waiting[ticket] = engine
            try:
                while not self._may_go(ticket, engine):
                    self._cond.wait()
            finally:  # also when the wait is interrupted (KeyboardInterrupt): the ticket must not linger
                del self._waiting[ticket]
                self._cond.notify_all()
            if self.holder is None:
                self.holder, self._batch = engine, self._next
                if self._last is not None and self._last != engine:
                    self.handovers += 1
                self._last = engine
            self.running += 1
        try:
            yield
        finally:
            with self._cond:
                self.running -= 1
                if self.running == 0:
                    self.holder = None
                self._cond.notify_all()

    def _may_go(self, ticket: int, engine: Hashable) -> bool:
        if self.holder is None:
            return self._waiting[min(self._waiting)] == engine  # the engine of the oldest waiting call
        if self.holder != engine:
            return False
        return ticket < self._batch or not any(t < ticket and e != engine for t, e in self._waiting.items())
