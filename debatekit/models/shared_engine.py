"""One local engine per machine, shared by every process that calls a `local/...` model.

llama.cpp's worker threads wait for each other at every decoding step, so two processes that each
load an engine with a thread per core do not share the cores: one of them starves. Instead, the
first process that needs a local model starts the machine's engine, a small daemon
(`python -m debatekit.models.shared_engine`), and every process on the machine (runs, sweep workers,
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
  then come out of the machine-wide budget, `debatekit.models.cores`).

Wire format: one JSON line per connection each way: `{"op": "chat", "model": NAME, "request": {...},
"pid": N}` -> `{"reply": {...}}` or `{"error": "..."}`; `{"op": "status"}` -> the status dict.
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

from debatekit._base.locking import exclusive
from debatekit.models import local
from debatekit.models.errors import LocalModelError

DEFAULT_IDLE_S = 300.0
START_TIMEOUT_S = 180.0  # loading a model from a cold disk cache
CLIENT_WINDOW_S = 600.0  # a client counts as connected if it sent a request this recently
MAX_IN_FLIGHT = 256  # requests the daemon serves at once (each holds a thread; the engines queue them)
LINE_LIMIT = 1 << 26  # the longest JSON line either side reads (a long conversation and its reply)


class EngineLost(RuntimeError):
    """The shared engine went away before it answered (it crashed or was killed); retry the call."""


def folder() -> Path:
    """Where the machine's engine keeps its socket, lock and log: `$DEBATEKIT_HOME/engine`."""
    return local.home() / "engine"


def mode() -> str:
    """`shared` (default: one engine per machine) or `process` ($DEBATEKIT_LOCAL_ENGINE)."""
    return local.env_choice("DEBATEKIT_LOCAL_ENGINE", ("shared", "process"))


def idle_seconds() -> float:
    return float(os.environ.get("DEBATEKIT_ENGINE_IDLE") or DEFAULT_IDLE_S)


# --- client ---------------------------------------------------------------------------------

async def complete(name: str, request: dict) -> dict:
    """One chat completion of the local model `name`: through the machine's shared engine (default),
    or an engine loaded in this process when $DEBATEKIT_LOCAL_ENGINE is `process`."""
    if mode() == "process":
        return await (await asyncio.to_thread(local.engine, name)).achat(request)
    await asyncio.to_thread(local.ready, name)  # assembled here, so its messages and errors reach this process
    return await achat(name, request)


async def achat(model: str, request: dict) -> dict:
    """One chat completion from the machine's engine, starting it if none is running."""
    reply = await _ask({"op": "chat", "model": model, "request": request, "pid": os.getpid()}, start=True)
    if "error" in reply:
        raise LocalModelError(f"local engine error: {reply['error']}")
    return reply["reply"]


def preflight(names: list[str]) -> None:
    """`local.preflight` (assembled, verified, memory for all) for the local models `names`, counting
    as loaded those the engine the calls go to (the machine's, or this process's) already holds."""
    def loaded() -> set[str]:
        if not names:  # a run on no local model never asks the engine (which may be busy, or hung)
            return set()
        if mode() == "process":
            return {n for n in names if local.model_path(n) in local._engines}
        info = status()
        return set(info["models"]) if info else set()

    local.preflight(names, loaded)


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


async def _ask(message: dict, start: bool) -> dict:
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
        line = await reader.readline()
    except (ConnectionError, asyncio.IncompleteReadError) as exc:
        raise EngineLost(f"the shared local engine stopped mid-call ({type(exc).__name__})") from exc
    finally:
        writer.close()
    if not line.endswith(b"\n"):
        raise EngineLost("the shared local engine stopped mid-call (no reply)")
    return json.loads(line)


def ensure_running(timeout: float = START_TIMEOUT_S) -> None:
    """Start the machine's engine unless one is answering; safe when many processes call it at once."""
    where = folder()
    where.mkdir(parents=True, exist_ok=True)
    with exclusive(where / "start.lock"):
        if _answers(where / "engine.sock"):
            return
        _children[:] = [c for c in _children if c.poll() is None]  # reap engines this process started earlier
        log = open(where / "engine.log", "ab")
        process = subprocess.Popen([sys.executable, "-m", "debatekit.models.shared_engine"], stdin=subprocess.DEVNULL,
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
    return local.engine(model)


class Daemon:
    """Serves chat requests for every local model asked of it, one engine per model, until idle.

    Args:
        make_engine: model name -> an object with `chat(request, cancelled=Event)` and `slots`
            (default: `local.engine`, the in-process xllamacpp engine).
        idle: seconds with nothing in flight before it exits; None: never.
        clock: the monotonic clock (tests pass their own).
    """

    def __init__(self, make_engine: Callable[[str], Any] = _real_engine, idle: float | None = DEFAULT_IDLE_S,
                 clock: Callable[[], float] = time.monotonic):
        self.make_engine, self.idle, self.clock = make_engine, idle, clock
        self.engines: dict[str, Any] = {}
        self.loading = threading.Lock()
        self.in_flight = 0
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
        return {"pid": os.getpid(), "models": sorted(self.engines), "started": self.started,
                "slots": {m: getattr(e, "slots", None) for m, e in self.engines.items()},
                "threads": {m: getattr(e, "threads", None) for m, e in self.engines.items()},
                "speculation": {m: str(getattr(e, "speculation", "off")) for m, e in self.engines.items()},
                "in_flight": self.in_flight, "served": self.served, "completion_tokens": self.completion_tokens,
                "clients": sorted(pid for pid, seen in self.clients.items() if now - seen < CLIENT_WINDOW_S)}

    def _engine(self, model: str):
        with self.loading:
            if model not in self.engines:
                self.engines[model] = self.make_engine(model)
            return self.engines[model]

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        gone = threading.Event()
        try:
            message = json.loads(await reader.readline())
            if message.get("op") == "status":
                answer = self.status()
            else:
                self.in_flight += 1
                self.clients[int(message.get("pid") or 0)] = self.clock()
                watcher = asyncio.ensure_future(_wait_closed(reader, gone))
                try:
                    answer = await asyncio.get_running_loop().run_in_executor(
                        self.pool, self._chat, message["model"], message["request"], gone)
                finally:
                    watcher.cancel()
                    self.in_flight -= 1
                    self.last = self.clock()
            writer.write(json.dumps(answer).encode() + b"\n")
            await writer.drain()
        except (ConnectionError, ValueError, KeyError):
            pass  # the client went away or sent something unreadable: nothing to answer
        finally:
            writer.close()

    def _chat(self, model: str, request: dict, gone: threading.Event) -> dict:
        try:
            reply = self._engine(model).chat(request, cancelled=gone)
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
    daemon = Daemon(make_engine, idle=idle)
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
