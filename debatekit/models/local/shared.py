"""One local engine per machine, shared by every process that calls a `local/...` model.

llama.cpp's worker threads wait for each other at every decoding step, so two processes that each
load an engine with a thread per core do not share the cores: one of them starves. Instead, the
first process that needs a local model starts the machine's engine, a small daemon
(`python -m debatekit.models.local.daemon`), and every process on the machine (runs, sweep workers,
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
import time
from pathlib import Path
from typing import Any, Callable

import debatekit
from debatekit._base.locking import exclusive
from debatekit.models import watch
from debatekit.models.errors import LocalModelError
from debatekit.models.local import engine as local
from debatekit.models.local import settings, weights

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
    return settings.home() / "engine"


SHARE_ADVICE = " (DEBATEKIT_LOCAL_ENGINE=process loads an engine in each process; unset, they share one)"
"""How an engine loaded for `process` mode ends the warning that other processes hold every core."""


def mode() -> str:
    """`shared` (default: one engine per machine) or `process` ($DEBATEKIT_LOCAL_ENGINE)."""
    return settings.env_choice("DEBATEKIT_LOCAL_ENGINE", ("shared", "process"))


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
    await asyncio.to_thread(weights.ready, name)  # assembled here, so its messages and errors reach this process
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
    """`weights.preflight` (assembled, verified, memory for all) for the local models `names`, counting
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
            return {n for n in names if weights.model_path(n) in local._engines}
        info = status()
        check(info)
        seen.append(info)
        return set(info["models"]) if info else set()

    weights.preflight(names, loaded, spare=0 if mode() == "process" else local.spare_slots())
    if not names:
        return None
    if mode() == "process":
        return f"local engine: in this process ({os.getpid()}), debatekit {debatekit.__version__}"
    if seen and seen[0] is None:
        mine = identity()
        return (f"local engine: none running; the first call not in the cache starts one (debatekit "
                f"{mine['version']} at {mine['install']}, wire {WIRE})")
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
        process = subprocess.Popen([sys.executable, "-m", "debatekit.models.local.daemon"], stdin=subprocess.DEVNULL,
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


def owner() -> int | None:
    """The pid of the running shared engine, or None."""
    info = status()
    return info.get("pid") if info else None
