"""The timeout of one call attempt, which a queue can hold off while it is making way.

A call's timeout guards a generation that makes no progress. On a shared engine a call may first
wait its turn behind other processes' calls; that wait is not a stall, so it must not use up the
timeout. The gateway gives each attempt a `Watch` (reachable as `current()` from the provider that
runs it) and awaits the attempt with `watched`:

- `waiting(ahead, engine_work)`: the call is queued, `ahead` calls of other processes before it; while
  the engine's work count (tokens it produced for anyone) keeps growing, the deadline moves on with
  it. An engine that stops producing anything still lets the deadline pass.
- `started()`: generation of this call began: the timeout counts from now, once, and no later
  report moves it again (a generation that stalls times out).

A provider that reports nothing (an API, a scripted model) keeps the plain timeout from the start.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from typing import Any, Awaitable, Callable

_CURRENT: contextvars.ContextVar["Watch | None"] = contextvars.ContextVar("debatekit_watch", default=None)


class Watch:
    """The deadline of one call attempt.

    Args:
        timeout: seconds the attempt may take once it is not waiting in a queue that moves.
        clock: the monotonic clock (tests pass their own).
    """

    def __init__(self, timeout: float, clock: Callable[[], float] = time.monotonic):
        self.timeout, self.clock = timeout, clock
        self.deadline = clock() + timeout
        self.is_started = False
        self.ahead: int | None = None  # calls of other processes before this one, while it waits
        self._work: Any = None

    def waiting(self, ahead: int, engine_work: Any = None) -> None:
        """The call is queued behind `ahead` calls of other processes; `engine_work` is the engine's
        progress count: a count that moved since the last report pushes the deadline back (the first
        report counts as a move; no count, as none)."""
        if self.is_started:  # its slot was given to another process: it waits again, from now
            self.is_started = False
            self.deadline = self.clock() + self.timeout
        self.ahead = ahead
        if engine_work is not None and engine_work != self._work:
            self.deadline = self.clock() + self.timeout
        self._work = engine_work

    def started(self) -> None:
        """This call's generation began: `timeout` seconds from now, and no more extensions."""
        if not self.is_started:
            self.is_started, self.ahead = True, None
            self.deadline = self.clock() + self.timeout

    @property
    def note(self) -> str | None:
        """What the call waits for, in words, while it waits behind other processes; else None."""
        if self.is_started or not self.ahead:
            return None
        return f"waiting for the engine: {self.ahead} call{'s' if self.ahead != 1 else ''} of other processes ahead"


def current() -> Watch | None:
    """The watch of the call attempt running in this task, if the gateway set one."""
    return _CURRENT.get()


async def watched(make: Callable[[], Awaitable[Any]], watch: Watch, poll: float = 0.5) -> Any:
    """Await `make()` under `watch`: raise TimeoutError (cancelling it) once the watch's deadline
    passes; the deadline may move while it runs. `poll`: the longest sleep between checks."""
    token = _CURRENT.set(watch)
    try:
        task = asyncio.ensure_future(make())  # copies the context: the provider sees `watch`
    finally:
        _CURRENT.reset(token)
    try:
        while True:
            left = watch.deadline - watch.clock()
            if left <= 0:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                raise TimeoutError("no reply within the call timeout")
            done, _ = await asyncio.wait({task}, timeout=min(left, poll))
            if done:
                return task.result()
    except BaseException:
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        raise
