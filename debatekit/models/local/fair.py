"""Which calls run on a shared engine's slots when several processes use it at once.

On two cores llama.cpp's throughput is about flat in the number of sequences it decodes together
(22.1 completion tokens a second with 2 in flight, 21.9 with 10: `benchmarks/results/
concurrent_runs_unequal.json`), so a process gets the engine in proportion to the sequences it has
running. Left to arrival order, a long run holding eight slots leaves a two-call run a fifth of the
engine. Here each process runs at most as many calls as the others: with several processes in
flight, the limit is the smallest of their demands (calls running or waiting), at most an equal
split of the slots, and at least one. A process that arrives while others run more than that takes
their youngest generations back (they are stopped and queued again at the front of their process's
line: the tokens they had made are lost, the fewest there are to lose); otherwise a process's
waiting calls are admitted when it is under the limit and a slot is free, the process with the
fewest running first, then by arrival.

A process alone gets every slot, as before. `$DEBATEKIT_ENGINE_FAIR=off` keeps arrival order with
no limit (on a machine where throughput grows with the batch, fairness costs throughput while two
processes share the engine).
"""

from __future__ import annotations

import itertools
import os
import threading
from collections import Counter
from dataclasses import dataclass, field


def enabled() -> bool:
    """Whether processes share the engine by the limit above: $DEBATEKIT_ENGINE_FAIR (default on)."""
    return os.environ.get("DEBATEKIT_ENGINE_FAIR", "on").strip().lower() not in ("off", "0", "false", "no")


@dataclass(eq=False)
class Seat:
    """One call's place: waiting, or running on a slot (`admitted` > 0, in admission order).
    `preempted` is set when it must give its slot back. The seat is its generation's `cancelled`."""

    pid: int
    ticket: int
    gone: threading.Event
    preempted: threading.Event = field(default_factory=threading.Event)
    admitted: int = 0

    def is_set(self) -> bool:
        """For the engine's `cancelled`: the caller left, or the slot was taken back."""
        return self.gone.is_set() or self.preempted.is_set()


class Admission:
    """The seats of one engine of `capacity` slots.

    Args:
        capacity: sequences the engine decodes at once (its slots).
        fair: limit each process as the module says; False: arrival order, no limit.
        poll: seconds between checks of a waiting call's `gone` (set by another thread).
    """

    def __init__(self, capacity: int, fair: bool = True, poll: float = 0.1):
        self.capacity, self.fair, self.poll = max(1, capacity), fair, poll
        self._lock = threading.Condition()
        self._running: list[Seat] = []
        self._waiting: list[Seat] = []
        self._order = itertools.count(1)

    def enter(self, pid: int, ticket: int, gone: threading.Event) -> Seat | None:
        """Block until the call has a slot; None if its caller went away first."""
        seat = Seat(pid, ticket, gone)
        with self._lock:
            arriving = all(s.pid != pid for s in self._running + self._waiting)
            self._waiting.append(seat)
            if arriving and self.fair:
                self._take_back()
            return self._wait(seat)

    def requeue(self, seat: Seat) -> Seat | None:
        """A preempted call gives its slot back and waits for another (its arrival order kept)."""
        with self._lock:
            self._running.remove(seat)
            seat.preempted.clear()
            seat.admitted = 0
            self._waiting.append(seat)
            return self._wait(seat)

    def leave(self, seat: Seat | None) -> None:
        if seat is None:
            return
        with self._lock:
            if seat in self._running:
                self._running.remove(seat)
            self._admit()

    def limit(self) -> int:
        """The most calls one process may run now."""
        demand = Counter(s.pid for s in self._running + self._waiting)
        if not self.fair or len(demand) < 2:
            return self.capacity
        return max(1, min(min(demand.values()), self.capacity // len(demand)))

    def counts(self) -> dict[int, tuple[int, int]]:
        """pid -> (running, waiting), for status and tests."""
        with self._lock:
            pids = {s.pid for s in self._running + self._waiting}
            return {pid: (sum(s.pid == pid for s in self._running), sum(s.pid == pid for s in self._waiting))
                    for pid in sorted(pids)}

    def _wait(self, seat: Seat) -> Seat | None:
        while True:
            self._admit()
            if seat.admitted:
                return seat
            if seat.gone.is_set():  # `_admit` dropped it from the line
                return None
            self._lock.wait(self.poll)

    def _running_counts(self) -> Counter:
        return Counter(s.pid for s in self._running if not s.preempted.is_set())

    def _admit(self) -> None:
        self._waiting = [s for s in self._waiting if not s.gone.is_set() or s.admitted]
        while self._waiting and len(self._running) < self.capacity:
            if not self.fair:
                seat = min(self._waiting, key=lambda s: s.ticket)
            else:
                limit, running = self.limit(), self._running_counts()
                eligible = [s for s in self._waiting if running[s.pid] < limit]
                if not eligible:
                    break
                seat = min(eligible, key=lambda s: (running[s.pid], s.ticket))
            self._waiting.remove(seat)
            seat.admitted = next(self._order)
            self._running.append(seat)
        self._lock.notify_all()

    def _take_back(self) -> None:
        """A process arrived: every process over the new limit gives back its youngest slots."""
        limit = self.limit()
        for pid, count in self._running_counts().items():
            mine = sorted((s for s in self._running if s.pid == pid and not s.preempted.is_set()),
                          key=lambda s: s.admitted, reverse=True)
            for seat in mine[:max(0, count - limit)]:
                seat.preempted.set()
