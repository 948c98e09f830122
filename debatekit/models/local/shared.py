"""One local engine per machine, shared by every process that calls a `local/...` model.

llama.cpp's worker threads wait for each other at every decoding step, so two processes that each
load an engine with a thread per core do not share the cores: one of them starves. Instead, the
first process that needs a local model starts the machine's engine, a small daemon
(`python -m debatekit.models.local.shared`), and every process on the machine (runs, sweep workers,
papermill kernels, the test suite) sends its requests to it over a Unix socket in the cache
folder (`$DEBATEKIT_HOME/engine/`). The daemon holds the loaded models, batches all clients'
requests on its slots and keeps each conversation's prefix (`local.SlotRouter`), as an engine
loaded in-process does.

- Discovery: the daemon holds an exclusive `flock` on `engine.lock` for its whole life and listens
  on `engine.sock`; a socket that refuses connections while nobody holds the lock is stale and
  is replaced. Two processes that start at the same moment serialise on `start.lock`, so one
  daemon starts.
- Lifetime: the daemon is its own session (it outlives the client that started it) and exits
  after `$DEBATEKIT_ENGINE_IDLE` seconds (default 300) with no request in flight.
- Failure: a client whose connection ends without a reply raises `EngineLost`, which the gateway
  classifies as a transient server fault and retries (starting a new daemon if the old one died):
  a crashed engine costs a retry, never a scored item. A client that goes away mid-call stops its
  generation at the next token.
- `$DEBATEKIT_LOCAL_ENGINE=process` keeps the engine in the calling process instead (its threads
  then come out of the machine-wide budget, `debatekit.models.local.cores`).

- Waiting: a call queued behind other calls is told so while it waits (the calls of other processes
  ahead of it, the engine's work count), and then when its generation starts; the client hands that
  to the call's `watch.Watch`, so time spent in the queue is not counted against its timeout while
  the engine makes progress, and a progress line can say what the call waits for.
- Versions: every line the daemon writes carries its wire version (`WIRE`); a client refuses an
  engine of another wire version (an engine another debatekit install started) with one line naming
  it and how to stop it, and the daemon refuses such a client the same way.

Wire format: one JSON line from the client, `{"op": "chat", "model": NAME, "request": {...}, "pid": N,
"wire": W}`; the daemon answers with lines `{"waiting": {"ahead": N, "work": W}}` (each second while it
is queued), `{"started": true}` (once), then `{"reply": {...}}` or `{"error": "..."}`. `{"op":
"status"}` -> the status dict (`describe` puts it in words).
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

import debatekit
from debatekit._base.locking import exclusive
from debatekit.models import watch
from debatekit.models.errors import LocalModelError
from debatekit.models.local import engine as local

DEFAULT_IDLE_S = 300.0
START_TIMEOUT_S = 180.0  # loading a model from a cold disk cache
CLIENT_WINDOW_S = 600.0  # a client counts as connected if it sent a request this recently
MAX_IN_FLIGHT = 256  # requests the daemon serves at once (each holds a thread; the engines queue them)
LINE_LIMIT = 1 << 26  # the longest JSON line either side reads (a long conversation and its reply)
HEARTBEAT_S = 1.0  # how often a queued call is told that it still waits
WIRE = 2
"""The version of what client and daemon say to each other; bumped whenever either side changes it."""


class EngineLost(RuntimeError):
    """The shared engine went away before it answered (it crashed or was killed); retry the call."""


class EngineIncompatible(LocalModelError):
    """The running shared engine speaks another wire version: another debatekit install started it."""


def folder() -> Path:
    """Where the machine's engine keeps its socket, lock and log: `$DEBATEKIT_HOME/engine`."""
    return local.home() / "engine"


SHARE_ADVICE = " (DEBATEKIT_LOCAL_ENGINE=process loads an engine in each process; unset, they share one)"
"""How an engine loaded for `process` mode ends the warning that other processes hold every core."""


def mode() -> str:
    """`shared` (default: one engine per machine) or `process` ($DEBATEKIT_LOCAL_ENGINE)."""
    return local.env_choice("DEBATEKIT_LOCAL_ENGINE", ("shared", "process"))


def idle_seconds() -> float:
    return float(os.environ.get("DEBATEKIT_ENGINE_IDLE") or DEFAULT_IDLE_S)


def heartbeat_seconds() -> float:
    """How often a queued call hears from the daemon: $DEBATEKIT_ENGINE_HEARTBEAT, default `HEARTBEAT_S`
    (well below any call timeout: a wait is only excused while its reports keep coming)."""
    return float(os.environ.get("DEBATEKIT_ENGINE_HEARTBEAT") or HEARTBEAT_S)


# --- client ---------------------------------------------------------------------------------

async def complete(name: str, request: dict) -> dict:
    """One chat completion of the local model `name`: through the machine's shared engine (default),
    or an engine loaded in this process when $DEBATEKIT_LOCAL_ENGINE is `process`."""
    if mode() == "process":
        return await (await asyncio.to_thread(local.engine, name, SHARE_ADVICE)).achat(request)
    await asyncio.to_thread(local.ready, name)  # assembled here, so its messages and errors reach this process
    return await achat(name, request)


async def achat(model: str, request: dict) -> dict:
    """One chat completion from the machine's engine, starting it if none is running. While the call
    waits behind others, and when it starts, the call's `watch.current()` (if any) is told."""
    reply = await _ask({"op": "chat", "model": model, "request": request, "pid": os.getpid(), "wire": WIRE},
                       start=True, on_line=_progress(watch.current()))
    if reply.get("wire") != WIRE:  # an engine started by another install: say whose, from its status
        try:
            info = await asyncio.wait_for(_ask({"op": "status"}, start=False), STATUS_TIMEOUT_S)
        except (OSError, EngineLost, ValueError):
            info = {}
        raise EngineIncompatible(refusal(info))
    if "error" in reply:
        raise LocalModelError(f"local engine error: {reply['error']}")
    return reply["reply"]


def _progress(call_watch: "watch.Watch | None") -> Callable[[dict], None]:
    def on_line(line: dict) -> None:
        if call_watch is None:
            return
        if "waiting" in line:
            call_watch.waiting(int(line["waiting"].get("ahead") or 0), line["waiting"].get("work"))
        elif line.get("started"):
            call_watch.started()

    return on_line


def identity() -> dict:
    """Who this process is, as an engine it starts would describe itself: wire and debatekit version,
    the installed package's folder, the interpreter."""
    return {"wire": WIRE, "version": debatekit.__version__, "install": str(Path(debatekit.__file__).parent),
            "python": sys.executable}


def refusal(engine: dict) -> str:
    """The one line refusing an engine of another wire version: who it is and how to stop it."""
    pid = engine.get("pid")
    who = (f"debatekit {engine.get('version', 'unknown version')} at {engine.get('install', 'an unknown install')}"
           if engine.get("wire") else "an older debatekit")
    mine = identity()
    stop = f"stop it with `kill {pid}`" if pid else f"stop the process holding {folder() / 'engine.lock'}"
    return (f"the machine's local engine{f' (pid {pid})' if pid else ''} was started by {who}, which speaks "
            f"engine wire {engine.get('wire') or 1}; this is debatekit {mine['version']} at {mine['install']} "
            f"(wire {WIRE}): {stop} and run again, or let it finish its work (it stops when idle)")


def check(info: dict | None) -> None:
    """Raise `EngineIncompatible` if the engine described by `info` (a status) speaks another wire."""
    if info and not info.get("unresponsive") and info.get("wire") != WIRE:
        raise EngineIncompatible(refusal(info))


def describe(info: dict | None) -> str:
    """The engine a status reports, in one line: process, debatekit version and install, models, clients."""
    if info is None:
        return (f"local engine: not running (mode {mode()}; the first local call starts it, "
                f"it stops after {idle_seconds():.0f} s idle)")
    if info.get("unresponsive"):
        return (f"local engine: not answering (no reply to a status request in {STATUS_TIMEOUT_S:.0f} s: "
                f"its process is stopped or hung; see {folder() / 'engine.log'})")
    def of(key: str, model: str) -> Any:
        return (info.get(key) or {}).get(model, "?")

    models = ", ".join(f"{m} ({of('slots', m)} slots, {of('threads', m)} threads, speculation "
                       f"{(info.get('speculation') or {}).get(m, 'off')})" for m in info.get("models", [])
                       ) or "none loaded yet"
    clients = info.get("clients", [])
    others = [pid for pid in clients if pid != os.getpid()]
    up = f"up {time.time() - info['started']:.0f} s" if info.get("started") else "up ?"
    return (f"local engine: pid {info.get('pid', '?')}, debatekit {info.get('version', '?')} at "
            f"{info.get('install', '?')} (wire {info.get('wire') or 1}), {up}; models: {models}; "
            f"{len(clients)} client(s) in the last 10 min ({len(others)} other process(es)), "
            f"{info.get('in_flight', 0)} call(s) in flight, {info.get('served', 0)} served "
            f"({info.get('completion_tokens', 0)} completion tokens)")


def preflight(names: list[str]) -> str | None:
    """`local.preflight` (assembled, verified, memory for all) for the local models `names`, counting
    as loaded those the engine the calls go to (the machine's, or this process's) already holds.
    Returns the line naming the engine that will serve them (None for a run on no local model).

    Raises:
        EngineIncompatible: the machine's engine was started by a debatekit of another wire version.
    """
    seen: list[dict | None] = []

    def loaded() -> set[str]:
        if not names:  # a run on no local model never asks the engine (which may be busy, or hung)
            return set()
        if mode() == "process":
            return {n for n in names if local.model_path(n) in local._engines}
        info = status()
        check(info)
        seen.append(info)
        return set(info["models"]) if info else set()

    local.preflight(names, loaded)
    if not names:
        return None
    if mode() == "process":
        return f"local engine: in this process ({os.getpid()}), debatekit {debatekit.__version__}"
    if seen and seen[0] is None:
        mine = identity()
        return (f"local engine: none running; this run starts one (debatekit {mine['version']} at "
                f"{mine['install']}, wire {WIRE})")
    return describe(seen[0] if seen else status())


STATUS_TIMEOUT_S = 5.0
"""How long a status request waits for the engine's reply: a stopped (SIGSTOP) or hung engine
accepts the connection and never answers, and asking must not hang with it."""


def status(timeout: float | None = None) -> dict | None:
    """What the running engine reports (pid, models, slots, clients, requests in flight), or None
    when none is running; `{"unresponsive": True, "models": []}` when one holds the socket but does
    not answer within `timeout` seconds (default `STATUS_TIMEOUT_S`)."""
    try:
        return asyncio.run(asyncio.wait_for(_ask({"op": "status"}, start=False), timeout or STATUS_TIMEOUT_S))
    except TimeoutError:  # before OSError, of which it is a subclass
        return {"unresponsive": True, "models": []}
    except (OSError, EngineLost):
        return None


async def _ask(message: dict, start: bool, on_line: Callable[[dict], None] = lambda line: None) -> dict:
    """Send `message`, hand each progress line to `on_line`, return the last line (the answer)."""
    path = folder() / "engine.sock"
    try:
        reader, writer = await asyncio.open_unix_connection(str(path), limit=LINE_LIMIT)
    except OSError:
        if not start:
            raise
        await asyncio.to_thread(ensure_running)
        reader, writer = await asyncio.open_unix_connection(str(path), limit=LINE_LIMIT)
    try:
        writer.write(json.dumps(message).encode() + b"\n")
        await writer.drain()
        while True:
            line = await reader.readline()
            if not line.endswith(b"\n"):
                raise EngineLost("the shared local engine stopped mid-call (no reply)")
            answer = json.loads(line)
            if set(answer) - {"waiting", "started", "wire"}:  # the answer, not a line about the wait
                return answer
            on_line(answer)
    except (ConnectionError, asyncio.IncompleteReadError) as exc:
        raise EngineLost(f"the shared local engine stopped mid-call ({type(exc).__name__})") from exc
    finally:
        writer.close()


def ensure_running(timeout: float = START_TIMEOUT_S) -> None:
    """Start the machine's engine unless one is answering; safe when many processes call it at once."""
    where = folder()
    where.mkdir(parents=True, exist_ok=True)
    with exclusive(where / "start.lock"):
        if _answers(where / "engine.sock"):
            return
        _children[:] = [c for c in _children if c.poll() is None]  # reap engines this process started earlier
        log = open(where / "engine.log", "ab")
        process = subprocess.Popen([sys.executable, "-m", "debatekit.models.local.shared"], stdin=subprocess.DEVNULL,
                                   stdout=log, stderr=log, start_new_session=True, env=os.environ.copy())
        log.close()
        _children.append(process)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if _answers(where / "engine.sock"):
                return
            if process.poll() is not None and not _held(where / "engine.lock"):
                tail = (where / "engine.log").read_text(errors="replace").strip().splitlines()[-1:] or ["?"]
                raise EngineLost(f"the shared local engine did not start: {tail[0]} (log: {where / 'engine.log'})")
            time.sleep(0.05)
        raise EngineLost(f"the shared local engine did not answer within {timeout:.0f} s (log: {where / 'engine.log'})")


_children: list[subprocess.Popen] = []


def _answers(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(path))
            return True
        except OSError:
            return False


def _held(path: Path) -> bool:
    """Whether some live process holds the lock file (a killed holder releases it)."""
    try:
        with open(path, "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(f, fcntl.LOCK_UN)
            return False
    except BlockingIOError:
        return True
    except OSError:
        return False


# --- daemon ---------------------------------------------------------------------------------

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
                "completion_tokens": self.completion_tokens, "work": self.work(),
                "clients": sorted(pid for pid, seen in self.clients.items() if now - seen < CLIENT_WINDOW_S)}

    def _engine(self, model: str):
        with self.loading:
            if model not in self.engines:
                self.engines[model] = self.make_engine(model)
            return self.engines[model]

    def work(self) -> int:
        """The engines' progress count (tokens generated for anyone): it grows while they make way."""
        return sum(getattr(engine, "work", 0) for engine in list(self.engines.values()))

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
        pid = int(message.get("pid") or 0)
        self.in_flight += 1
        self.clients[pid] = self.clock()
        self.arrivals += 1
        ticket = self.arrivals
        self.calls[ticket] = pid
        self.queue.add(ticket)
        started = asyncio.Event()

        def on_start() -> None:  # from the engine's thread
            loop.call_soon_threadsafe(started.set)

        watcher = asyncio.ensure_future(_wait_closed(reader, gone))
        chat = loop.run_in_executor(self.pool, self._chat, message["model"], message["request"], gone, on_start)
        starting = asyncio.ensure_future(started.wait())
        told_start = False
        try:
            while not chat.done():
                await asyncio.wait({chat, starting}, timeout=self.heartbeat, return_when=asyncio.FIRST_COMPLETED)
                if chat.done():
                    break
                if started.is_set():
                    if not told_start:
                        self.queue.discard(ticket)
                        told_start = True
                        writer.write(json.dumps({"started": True, "wire": WIRE}).encode() + b"\n")
                        await writer.drain()
                    await asyncio.wait({chat})
                    break
                ahead = sum(1 for t, p in list(self.calls.items()) if t < ticket and p != pid)
                writer.write(json.dumps({"waiting": {"ahead": ahead, "work": self.work()}, "wire": WIRE}).encode()
                             + b"\n")
                await writer.drain()
            return await chat
        finally:
            self.queue.discard(ticket)
            self.calls.pop(ticket, None)
            starting.cancel()
            watcher.cancel()
            self.in_flight -= 1
            self.last = self.clock()

    def _chat(self, model: str, request: dict, gone: threading.Event, on_start: Callable[[], None]) -> dict:
        try:
            reply = self._engine(model).chat(request, cancelled=gone, started=on_start)
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


def owner() -> int | None:
    """The pid of the running shared engine, or None."""
    info = status()
    return info.get("pid") if info else None


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
