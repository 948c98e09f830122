"""Stopping cleanly: SIGTERM (a batch scheduler's stop, `kill PID`) is handled like Ctrl-C.

`debatekit` installs `on_sigterm` for every command: the signal raises `Terminated`, a
`KeyboardInterrupt`, so every path that saves work on Ctrl-C saves it on SIGTERM too, and the
command exits 143 instead of 130. `stop_process_tree` ends worker processes and everything they
started (a sweep point's Jupyter kernel runs in its own session, out of reach of the terminal's
Ctrl-C), so that no process is left behind.

`kill -USR1 PID` makes a command print every thread's stack to its stderr and go on, to see where
one that will not stop (or will not progress) is waiting. Only the command's own process has the
handler: its workers and kernels would end on SIGUSR1, so signal its PID, not its process group.

Draining is the gentle stop: `DRAIN_FILE` in a run's folder (or in the sweep folder above it) makes
the run start no new debate and end, once the debates it started finish, with `Drained`.
"""

from __future__ import annotations

import asyncio
import ctypes
import faulthandler
import os
import signal
import sys
import threading
import time
from pathlib import Path


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived; handled wherever Ctrl-C is."""


PR_SET_PDEATHSIG = 1
"""prctl's option number on Linux."""
DRAIN_FILE = ".drain"
"""A file that asks a run (in its folder) or a sweep (in the sweep folder) to drain: start no new
debate or point, let those already started finish, and stop; `debatekit drain FOLDER` writes it,
and the next run or sweep in that folder removes it as it starts."""


class Drained(Exception):
    """A run stopped because it was asked to drain (`DRAIN_FILE`): what it started, it finished."""


def draining(folder: Path) -> bool:
    """Whether the run in `folder` is asked to drain: the file is in its folder or, for a point of
    a sweep, in the sweep's folder above it."""
    return (folder / DRAIN_FILE).exists() or (folder.parent / DRAIN_FILE).exists()


def on_sigterm(signum, frame) -> None:
    """Signal handler: raise `Terminated` in the main thread."""
    raise Terminated()


def install() -> None:
    """Handle SIGTERM like SIGINT, and dump every thread's stack to stderr on SIGUSR1 (only the main
    thread can: elsewhere this does nothing)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, on_sigterm)
        if hasattr(signal, "SIGUSR1") and _has_fileno(sys.__stderr__):  # the process's own fd 2, never a
            faulthandler.register(signal.SIGUSR1, file=sys.__stderr__, all_threads=True)  # capture's file


def _has_fileno(stream) -> bool:
    try:
        stream.fileno()
    except (AttributeError, OSError, ValueError):  # None (no console), or a stream without a file
        return False
    return True


class SigtermCancels:
    """While a coroutine runs, SIGTERM cancels its task, as `asyncio.run` does on Ctrl-C (raising
    `Terminated` at an arbitrary point of the loop would leave tasks with unretrieved errors).

    Outside the main thread (a notebook's run thread) no handler can be installed: the thread that
    waits for the run passes its stop on with `relay`.
    """

    def __init__(self):
        self.fired = False
        self._task, self._loop, self._handled = asyncio.current_task(), None, False
        self._previous = signal.getsignal(signal.SIGTERM)
        try:
            self._loop = asyncio.get_running_loop()
            self._loop.add_signal_handler(signal.SIGTERM, self._fire)
            self._handled = True
        except (ValueError, RuntimeError, NotImplementedError):
            if self._loop is not None:
                _relays[threading.get_ident()] = self

    def _fire(self) -> None:
        self.fired = True
        if self._task is not None:
            self._task.cancel()

    def stop(self, sigterm: bool) -> None:
        """Cancel the task from another thread: as SIGTERM would (`fired`), or as Ctrl-C."""
        if self._task is not None:
            try:
                self._loop.call_soon_threadsafe(self._fire if sigterm else self._task.cancel)
            except RuntimeError:  # the loop closed meanwhile: the run is over
                pass

    def close(self) -> None:
        """Give SIGTERM back to the handler it had before."""
        _relays.pop(threading.get_ident(), None)
        if self._handled:
            self._loop.remove_signal_handler(signal.SIGTERM)
            signal.signal(signal.SIGTERM, self._previous)
            self._handled = False


_relays: dict[int, SigtermCancels] = {}
"""The runs in threads other than the main one, by thread id: where `relay` finds them."""


def relay(thread: threading.Thread, stop: KeyboardInterrupt) -> bool:
    """Stop the run in `thread` as `stop` (Ctrl-C, or `Terminated`) stopped the thread waiting for
    it; False when the thread runs none (yet, or any more)."""
    cancels = _relays.get(thread.ident)
    if cancels is not None:
        cancels.stop(isinstance(stop, Terminated))
    return cancels is not None


def wait_stopping(thread: threading.Thread, done: threading.Event) -> None:
    """Wait for `thread`, which runs a debatekit run and sets `done` as it ends, and stop the run if
    Ctrl-C or SIGTERM arrives meanwhile (SIGTERM raises `Terminated` here while it waits, in the
    main thread only): the run ends as it would in a command, its run.json saying why, and the
    signal is raised again once the run is over. A Jupyter kernel's interrupt (SIGINT), or a sweep
    ending a point's kernel (SIGTERM), so leaves no debate running behind the notebook and no
    run.json saying "running".

    A second Ctrl-C or SIGTERM, once the run was told to stop, stops the waiting instead (a run
    that will not end must not hold a notebook forever). It waits on `done`, not on
    `thread.join()`: before Python 3.13, a join cut short by a signal can mark the thread stopped
    while it still runs.
    """
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, on_sigterm) if main else None
    stop, relayed = None, False
    try:
        while not done.is_set():
            try:
                if stop is not None and not relayed:
                    relayed = relay(thread, stop)
                # never an unbounded wait: a signal the kernel hands to another thread only sets a flag,
                # and a main thread asleep on a lock would not run its handler until woken (a hang
                # of test_runner's notebook-signal test, seen in sessions 15 and 17)
                done.wait(0.25 if stop is None else 0.05)
            except KeyboardInterrupt as exc:
                if relayed:  # asked twice: a run that will not end must not hold the caller forever
                    print("debatekit: no longer waiting; the run is still stopping in its thread", file=sys.stderr)
                    raise
                stop = stop or exc
    finally:
        if main:
            signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)
    thread.join()
    if stop is not None:
        raise stop


def exit_status(exc: KeyboardInterrupt) -> int:
    """128 + the signal: 143 for SIGTERM, 130 for SIGINT."""
    return 128 + (signal.SIGTERM if isinstance(exc, Terminated) else signal.SIGINT)


def stop_reason(exc: BaseException, sigterm: bool = False) -> str:
    """What stopped a run, for run.json (`sigterm`: a `SigtermCancels` fired)."""
    if isinstance(exc, Drained):
        return str(exc)
    if sigterm or isinstance(exc, Terminated):
        return "stopped by SIGTERM"
    if isinstance(exc, KeyboardInterrupt) or type(exc).__name__ == "CancelledError":
        return "stopped by SIGINT (Ctrl-C)"
    if isinstance(exc, OSError):  # a failed write: its message names the file
        return str(exc)
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".rstrip(": ")


def _children() -> dict[int, list[int]]:
    """Every process's children, by parent pid, read from /proc ({} elsewhere)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        ppid = int(text.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(stat.parent.name))
    return children


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (children, grandchildren, ...), read from /proc; [] elsewhere."""
    return [p for p, depth in _depths([pid]).items() if depth]


def _depths(pids: list[int]) -> dict[int, int]:
    """`pids` and every process below them, each with its depth under them (0 for one of `pids`
    that is below none of the others), read from /proc in one pass."""
    children, depth = _children(), {}
    todo = [(pid, 0) for pid in pids]
    while todo:
        pid, level = todo.pop()
        if depth.get(pid, -1) >= level:
            continue
        depth[pid] = level
        todo.extend((child, level + 1) for child in children.get(pid, []))
    return depth


def stop_process_tree(pids: list[int], grace: float = 3.0) -> None:
    """SIGTERM `pids` and everything below them, deepest first, each level given up to `grace`
    seconds to go before the level above it is signalled; then SIGKILL what is left.

    Children go before their parents: a Jupyter kernel whose parent (a sweep's worker) dies exits
    within a second (ipykernel's parent poller calls `os._exit`), which could cut short the run it
    is stopping before that run has written "interrupted" to its run.json; with its parent still
    there, the kernel gets its whole grace, and the worker, seeing the cell stopped, shuts it down.
    A pid given that is below another one given (a kernel beside its worker) keeps its depth.
    """
    shielded = threading.current_thread() is threading.main_thread()
    if shielded:  # a second Ctrl-C must not cut the clean-up short and leave kernels behind
        previous = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        depths = _depths(pids)
        victims = list(depths)
        for level in sorted(set(depths.values()), reverse=True):
            group = [pid for pid in victims if depths[pid] == level]
            for pid in group:
                _send(pid, signal.SIGTERM)
            _wait_gone(group, grace)
        for pid in victims:
            _send(pid, signal.SIGKILL)
        _wait_gone(victims, grace)
    finally:
        if shielded:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def _wait_gone(pids: list[int], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(_alive(pid) for pid in pids):
        time.sleep(0.05)


def _send(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def die_with_parent(parent: int) -> None:
    """Have the kernel send this process SIGTERM when `parent` (the process that started it) dies, on
    Linux (`prctl(PR_SET_PDEATHSIG)`); elsewhere nothing. If the parent is already gone (it died
    before this call), the process ends now."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
            return
    except (OSError, AttributeError):  # no libc prctl: not Linux
        return
    if os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGTERM)
