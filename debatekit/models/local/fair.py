"""Which calls run on a shared engine's slots when several processes use it at once.

On two cores llama.cpp's throughput is about flat in the number of sequences it decodes together
(22.1 completion tokens a second with 2 in flight, 21.9 with 10: `benchmarks/results/
concurrent_runs_unequal.json`), so a process gets the engine in proportion to the sequences it has
running. Left to arrival order, a long run holding eight slots leaves a two-call run a fifth of the
engine. Here each process runs at most as many calls as the others: with several processes in
flight, the limit is the smallest of their demands (calls running or waiting), at most an equal
split of the slots, and at least one. Waiting calls are admitted when their process is under the
limit and a slot is free, the process with the fewest running first, then by arrival.

A process that arrives (no call in flight for `rest` seconds) while another runs more than the
limit takes back that one's youngest generations, once the calls it sent together have come
(`settle` seconds): they stop at the next token and wait again in their process's line, then
generate afresh (the tokens they had made are lost, the fewest there are to lose). A call is taken
back at most once, so every call finishes; a reply that was complete when it was asked back is kept.

A process alone gets every slot, as before. `$DEBATEKIT_ENGINE_FAIR=off` keeps arrival order with
no limit (on a machine where throughput grows with the batch, fairness costs throughput while two
processes share the engine).
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable


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
    taken_back: int = 0

    def is_set(self) -> bool:
        """For the engine's `cancelled`: the caller left, or the slot was taken back."""
        return self.gone.is_set() or self.preempted.is_set()


class Admission:
    """The seats of one engine of `capacity` slots.

    Args:
        capacity: sequences the engine decodes at once (its slots).
        fair: limit each process as the module says; False: arrival order, no limit.
        poll: seconds between checks of a waiting call's `gone` (set by another thread).
        rest: seconds without a call in flight after which a process's next call is an arrival.
        settle: seconds after an arrival before slots are taken back for it (0: at once).
        clock: the monotonic clock (tests pass their own).
    """

    def __init__(self, capacity: int, fair: bool = True, poll: float = 0.1, rest: float = 2.0, settle: float = 0.25,
                 clock: Callable[[], float] = time.monotonic):
        self.capacity, self.fair, self.poll, self.rest, self.settle = max(1, capacity), fair, poll, rest, settle
        self.clock = clock
        self._lock = threading.Condition()
        self._running: list[Seat] = []
        self._waiting: list[Seat] = []
        self._order = itertools.count(1)
        self._last: dict[int, float] = {}  # pid -> when its last call left

    def enter(self, pid: int, ticket: int, gone: threading.Event) -> Seat | None:
        """Block until the call has a slot; None if its caller went away first."""
        seat = Seat(pid, ticket, gone)
        with self._lock:
            active = any(s.pid == pid for s in self._running + self._waiting)
            arriving = self.fair and not active and self.clock() - self._last.get(pid, float("-inf")) >= self.rest
            self._waiting.append(seat)
            if arriving and not gone.is_set():
                if self.settle > 0:  # the calls it sent together come first: the limit counts them all
                    timer = threading.Timer(self.settle, self.take_back)
                    timer.daemon = True
                    timer.start()
                else:
                    self.take_back()
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
            if not any(s.pid == seat.pid for s in self._running + self._waiting):
                self._last[seat.pid] = self.clock()
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

    def take_back(self) -> None:
        """Every process over the limit gives back its youngest slots, of calls never taken back before."""
        with self._lock:
            limit = self.limit()
            for pid, count in self._running_counts().items():
                mine = sorted((s for s in self._running if s.pid == pid and not s.preempted.is_set()),
                              key=lambda s: s.admitted, reverse=True)
                over = max(0, count - limit)
                for seat in [s for s in mine if not s.taken_back][:over]:
                    seat.taken_back += 1
                    seat.preempted.set()

    def _wait(self, seat: Seat) -> Seat | None:
        while True:
            self._admit()
            if seat.admitted:
                return seat
            if seat.gone.is_set():
                if seat in self._waiting:
                    self._waiting.remove(seat)
                return None
            self._lock.wait(self.poll)

    def _running_counts(self) -> Counter:
        return Counter(s.pid for s in self._running if not s.preempted.is_set())

    def _admit(self) -> None:
        """Seat waiting calls on free slots; wakes the waiters only when it seated one."""
        self._waiting = [s for s in self._waiting if not s.gone.is_set()]
        seated = False
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
            seated = True
        if seated:
            self._lock.notify_all()
