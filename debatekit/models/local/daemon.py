"""The machine's engine itself: a daemon serving every process's chat requests for the local models
(`python -m debatekit.models.local.daemon`, started by `shared.ensure_running`).

It holds one engine per model asked of it, keeps each engine's slots busy with all clients' calls,
tells a queued call how many calls of other processes are ahead of it and when it starts, refuses a
client of another wire version, and exits after `$DEBATEKIT_ENGINE_IDLE` seconds with nothing in
flight. The client side, the wire format and discovery are in `debatekit.models.local.shared`.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

from debatekit.models.local import engine as local
from debatekit.models.local import fair
from debatekit.models.local.shared import (CLIENT_WINDOW_S, DEFAULT_IDLE_S, HEARTBEAT_S, LINE_LIMIT, MAX_IN_FLIGHT, WIRE,
                                           folder, heartbeat_seconds, identity, idle_seconds)


def _real_engine(model: str):
    """The daemon's engine of `model`: `slots()` plus `spare_slots()`, so that another process's calls
    find a free slot while one process fills its `slots()`."""
    return local.engine(model, spare=local.spare_slots())


class Daemon:
    """Serves chat requests for every local model asked of it, one engine per model, until idle.

    Args:
        make_engine: model name -> an object with `chat(request, cancelled=Event)` and `slots`
            (default: `local.engine`, the in-process xllamacpp engine).
        idle: seconds with nothing in flight before it exits; None: never.
        clock: the monotonic clock (tests pass their own).
    """

    def __init__(self, make_engine: Callable[[str], Any] = _real_engine, idle: float | None = DEFAULT_IDLE_S,
                 clock: Callable[[], float] = time.monotonic, heartbeat: float = HEARTBEAT_S):
        self.make_engine, self.idle, self.clock, self.heartbeat = make_engine, idle, clock, heartbeat
        self.engines: dict[str, Any] = {}
        self.admissions: dict[str, fair.Admission] = {}
        self.preempted = 0  # generations stopped to give their slot to another process (`fair`)
        self.loading = threading.Lock()
        self.in_flight = 0
        self.calls: dict[int, int] = {}  # arrival number -> client pid, of the calls in flight
        self.queue: set[int] = set()  # arrival numbers of the calls not yet started
        self.arrivals = 0
        self.served = 0
        self.completion_tokens = 0
        self.clients: dict[int, float] = {}
        self.started = time.time()
        self.last = clock()
        # one thread per request in flight: a call queued on its engine (its slots busy, or waiting its turn
        # with DEBATEKIT_LOCAL_MIX=turns) holds its thread, so asyncio's default pool (cores + 4) could
        # leave the slots of a second model idle
        self.pool = ThreadPoolExecutor(max_workers=MAX_IN_FLIGHT, thread_name_prefix="debatekit-daemon")

    def status(self) -> dict:
        now = self.clock()
        return {**identity(), "pid": os.getpid(), "models": sorted(self.engines), "started": self.started,
                "slots": {m: getattr(e, "slots", None) for m, e in self.engines.items()},
                "threads": {m: getattr(e, "threads", None) for m, e in self.engines.items()},
                "speculation": {m: str(getattr(e, "speculation", "off")) for m, e in self.engines.items()},
                "in_flight": self.in_flight, "queued": len(self.queue), "served": self.served,
                "preempted": self.preempted, "fair": fair.enabled(),
                "completion_tokens": self.completion_tokens, "work": self.work(),
                "clients": sorted(pid for pid, seen in self.clients.items() if now - seen < CLIENT_WINDOW_S)}

    def _engine(self, model: str):
        with self.loading:
            if model not in self.engines:
                self.engines[model] = self.make_engine(model)
            return self.engines[model]

    def work(self, model: str | None = None) -> int:
        """An engine's progress count (tokens it generated for anyone; all engines' for None): it grows
        while the engine makes way. A call queued on one model's engine is excused only by that one."""
        engines = list(self.engines.values()) if model is None else [self.engines.get(model)]
        return sum(getattr(engine, "work", 0) for engine in engines)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        gone = threading.Event()
        try:
            message = json.loads(await reader.readline())
            if message.get("op") == "status":
                answer = self.status()
            elif message.get("wire") != WIRE:
                answer = {"error": _client_refusal(message)}
            else:
                answer = await self._serve_chat(message, reader, writer, gone)
            writer.write(json.dumps({**answer, "wire": WIRE}).encode() + b"\n")
            await writer.drain()
        except (ConnectionError, ValueError, KeyError):
            pass  # the client went away or sent something unreadable: nothing to answer
        finally:
            writer.close()

    async def _serve_chat(self, message: dict, reader, writer, gone: threading.Event) -> dict:
        """Run one chat on its engine; while it is queued, tell the client each `heartbeat` seconds
        how many calls of other processes that came before it are still in flight (generating or
        queued: what it waits behind), and tell it once when it starts."""
        loop = asyncio.get_running_loop()
        model, request, pid = message["model"], message["request"], int(message.get("pid") or 0)  # before any count
        self.in_flight += 1
        self.clients[pid] = self.clock()
        self.arrivals += 1
        ticket = self.arrivals
        self.calls[ticket] = pid
        self.queue.add(ticket)
        started, requeued = asyncio.Event(), asyncio.Event()

        def on_start() -> None:  # from the engine's thread
            loop.call_soon_threadsafe(started.set)

        def on_requeue() -> None:  # from the engine's thread: its slot was taken back (`fair`)
            def waiting_again() -> None:  # one callback, in order with `on_start`'s: a rerun's start is kept
                started.clear()
                requeued.set()

            loop.call_soon_threadsafe(waiting_again)

        watcher = asyncio.ensure_future(_wait_closed(reader, gone))
        chat = loop.run_in_executor(self.pool, self._chat, model, request, gone, on_start, on_requeue, pid, ticket)
        starting, requeuing = asyncio.ensure_future(started.wait()), asyncio.ensure_future(requeued.wait())
        told_start = False
        try:
            while not chat.done():
                if told_start:  # running: nothing to report unless it is put back in the queue
                    await asyncio.wait({chat, requeuing}, return_when=asyncio.FIRST_COMPLETED)
                else:
                    await asyncio.wait({chat, starting}, timeout=self.heartbeat, return_when=asyncio.FIRST_COMPLETED)
                if chat.done():
                    break
                if requeued.is_set():  # waiting again: the heartbeat lines resume, then `started` once more
                    requeued.clear()
                    starting.cancel()
                    starting, requeuing = asyncio.ensure_future(started.wait()), asyncio.ensure_future(requeued.wait())
                    told_start = False
                    self.queue.add(ticket)
                elif started.is_set():
                    if not told_start:
                        self.queue.discard(ticket)
                        told_start = True
                        writer.write(json.dumps({"started": True, "wire": WIRE}).encode() + b"\n")
                        await writer.drain()
                    continue
                ahead = sum(1 for t, p in list(self.calls.items()) if t < ticket and p != pid)
                writer.write(json.dumps({"waiting": {"ahead": ahead, "work": self.work(model)}, "wire": WIRE}).encode()
                             + b"\n")
                await writer.drain()
            return await chat
        finally:
            if not chat.done():
                gone.set()  # the client is gone (or its line could not be written): stop the generation
            self.queue.discard(ticket)
            self.calls.pop(ticket, None)
            starting.cancel()
            requeuing.cancel()
            watcher.cancel()
            self.in_flight -= 1
            self.last = self.clock()

    def _seats(self, model: str, engine: Any) -> fair.Admission:
        with self.loading:
            if model not in self.admissions:
                self.admissions[model] = fair.Admission(getattr(engine, "slots", None) or 1, fair=fair.enabled())
            return self.admissions[model]

    def _chat(self, model: str, request: dict, gone: threading.Event, on_start: Callable[[], None],
              on_requeue: Callable[[], None], pid: int, ticket: int) -> dict:
        """Run one call on a slot its process is given (`fair.Admission`); a call whose slot is taken
        back for another process is queued again and generated afresh."""
        try:
            engine = self._engine(model)
            seats = self._seats(model, engine)
            seat = seats.enter(pid, ticket, gone)
            try:
                while seat is not None:
                    try:
                        reply = engine.chat(request, cancelled=seat, started=on_start)
                    except Exception:
                        if not seat.preempted.is_set() or gone.is_set():
                            raise
                    else:
                        if not seat.preempted.is_set() or gone.is_set() or not _cut(reply):
                            break  # a reply complete before its slot was asked back is kept
                    self.preempted += 1
                    on_requeue()
                    seat = seats.requeue(seat)
            finally:
                seats.leave(seat)
            if seat is None:
                return {"error": "LocalModelError: the caller went away before its call started"}
        except Exception as exc:  # noqa: BLE001 - sent back to the client, which raises it there
            return {"error": f"{type(exc).__name__}: {exc}"}
        self.served += 1
        self.completion_tokens += (reply.get("usage") or {}).get("completion_tokens", 0)
        return {"reply": reply}

    def idle_for(self) -> float:
        return 0.0 if self.in_flight else self.clock() - self.last

    async def serve(self, where: Path, ready: Callable[[], None] = lambda: None) -> None:
        path = where / "engine.sock"
        path.unlink(missing_ok=True)  # we hold engine.lock: any socket file left is stale
        server = await asyncio.start_unix_server(self.handle, str(path), limit=LINE_LIMIT)
        ready()
        try:
            while self.idle is None or self.idle_for() < self.idle:
                await asyncio.sleep(min(1.0, self.idle or 1.0))
        finally:
            server.close()
            path.unlink(missing_ok=True)


def _client_refusal(message: dict) -> str:
    """What the daemon answers a client of another wire version (an older or newer debatekit)."""
    mine = identity()
    return (f"this machine's local engine (pid {os.getpid()}) is debatekit {mine['version']} at {mine['install']}, "
            f"engine wire {WIRE}, and this client speaks wire {message.get('wire') or 1}: stop the engine with "
            f"`kill {os.getpid()}` and run again, or let it finish its work (it stops when idle)")


def _cut(reply: dict) -> bool:
    """Whether a generation was stopped from outside (no finish reason: the stream was left)."""
    choices = reply.get("choices") or [{}]
    return choices[0].get("finish_reason") is None


async def _wait_closed(reader: asyncio.StreamReader, gone: threading.Event) -> None:
    """Set `gone` when the client closes its end (it was cancelled or killed) so generation stops."""
    try:
        await reader.read(1)
    except ConnectionError:
        pass
    gone.set()


def host(make_engine: Callable[[str], Any], idle: float | None) -> bool:
    """Be the machine's engine until idle (None: until interrupted); False at once if another
    process already is (it holds `engine.lock`)."""
    where = folder()
    where.mkdir(parents=True, exist_ok=True)
    lock = open(where / "engine.lock", "a")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        return False
    daemon = Daemon(make_engine, idle=idle, heartbeat=heartbeat_seconds())
    print(f"[{time.strftime('%H:%M:%S')}] shared engine {os.getpid()} listening on {where / 'engine.sock'}",
          file=sys.stderr, flush=True)
    try:
        asyncio.run(daemon.serve(where))
    finally:
        print(f"[{time.strftime('%H:%M:%S')}] shared engine {os.getpid()} stopped after {daemon.served} requests",
              file=sys.stderr, flush=True)
        lock.close()
    return True


def main() -> int:
    """Run the machine's engine until idle; exits 0 at once if another one holds the lock."""
    if not host(_backend(), idle_seconds()):
        print("another shared engine is running", file=sys.stderr)
    return 0


def _backend() -> Callable[[str], Any]:
    """The engine factory: `local.engine`, or `$DEBATEKIT_ENGINE_BACKEND` (`module:function`, for tests)."""
    spec = os.environ.get("DEBATEKIT_ENGINE_BACKEND")
    if not spec:
        return _real_engine
    import importlib

    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


if __name__ == "__main__":
    sys.exit(main())
