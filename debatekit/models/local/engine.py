"""The embedded engine: an xllamacpp server loaded in-process, one per model and process.

`engine()` loads one xllamacpp server per model and process (lazily) with several parallel slots,
so concurrent agent calls are batched by llama.cpp rather than queued. The model files are
`weights`; the settings read from the environment are `settings`.

This module does not import litellm: the gateway wraps `achat` as a litellm provider.
"""

from __future__ import annotations

import asyncio
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from debatekit.models import repetition
from debatekit.models.errors import LocalModelError
from debatekit.models.local import cores
from debatekit.models.local import speculation as speculating
from debatekit.models.local.prefix_cache import (DEFAULT_CACHE_RAM_MIB, PrefixCache, SharedPrefill, SlotRouter,  # noqa: F401
                                           prefix_cache)
from debatekit.models.local import settings, weights

_STARTING = threading.local()
"""The `started` callback of the call the current thread runs (`Engine.chat`), read when its first token comes."""


class Engine:
    """One xllamacpp server loaded in-process with `slots` parallel sequences."""

    def __init__(self, path: Path, slots: int, ctx_per_slot: int | None = None, *, port: int = 0,
                 host: str = "127.0.0.1", alias: str | None = None, cache: PrefixCache | None = None,
                 threads: int | None = None, turns: cores.Turns | None = None,
                 speculation: speculating.Speculation | None = None, front: Path | None = None):
        """`threads`: default the process's claim (`cores.claim`). `turns`: the engines it takes
        turns with; default: none, it generates beside the process's other engines (measured
        fastest on 2 cores), or all of them (`TURNS`) with $DEBATEKIT_LOCAL_MIX=turns.
        `speculation`: default $DEBATEKIT_LOCAL_SPECULATION (`speculation.speculation`).
        `front`: a folder whose `index.html` answers `GET /` over HTTP instead of llama.cpp's web
        UI, which answers a client that does not accept gzip (curl) with a 415."""
        try:
            import xllamacpp
        except ImportError as exc:
            raise LocalModelError(
                "the local model needs xllamacpp: pip install 'debatekit[local]'"
            ) from exc
        params = xllamacpp.CommonParams()
        params.model.path = str(path)
        params.n_parallel = slots
        params.n_ctx = (ctx_per_slot or settings.ctx()) * slots
        if settings.batch():  # prompt tokens read per step: fewer lets the other slots' decoding and new calls in sooner
            params.n_batch = settings.batch()
            params.n_ubatch = min(params.n_ubatch, settings.batch())
        threads = threads or claim_threads()
        params.cpuparams.n_threads = threads
        params.cpuparams_batch.n_threads = threads
        params.warmup = False
        params.verbosity = -1
        self.cache = cache or prefix_cache(settings.mem_available())
        self.cache.apply(params)
        self.speculation = speculation or speculating.speculation()
        draft = None
        if self.speculation.kind == "draft":
            weights.ready(self.speculation.draft)
            draft = str(weights.model_path(self.speculation.draft))
        self.speculation.apply(params, draft)
        # xllamacpp also serves OpenAI-compatible routes over HTTP (`debatekit serve` fixes the port)
        params.port, params.hostnames = port, [host]
        if front is not None:
            params.public_path = str(front)
        if alias:
            params.model_alias = {alias}
        self.path, self.slots, self.threads = path, slots, threads
        self.turns = turns or (TURNS if settings.mix() == "turns" else cores.Turns())
        self.in_flight, self._count = 0, threading.Lock()  # generations running or queued on the engine's threads
        self.work = 0  # tokens streamed for any caller: a waiting caller sees the engine make way
        self.router = SlotRouter(slots) if self.cache.reuse else None
        # identical prompts sent together are read once: needs the host cache to hand the state on
        self.shared = SharedPrefill() if self.router is not None and self.cache.ram_mib != 0 else None
        self.server = xllamacpp.Server(params)
        # handle_chat_completions blocks its thread: one thread per slot keeps every slot busy.
        self.pool = ThreadPoolExecutor(max_workers=slots, thread_name_prefix="debatekit-local")

    @property
    def address(self) -> str:
        """The HTTP address the engine listens on, e.g. http://127.0.0.1:8765."""
        return self.server.listening_address

    def chat(self, request: dict, cancelled: threading.Event | None = None,
             started: Callable[[], None] | None = None) -> dict:
        """One OpenAI-style chat completion (blocking), on the slot holding its prefix if any;
        generation stops at the next token once `cancelled` is set (its caller went away).
        `started` is called once, when its first token comes (it waited for a slot until then)."""
        with self._count:
            self.in_flight += 1
        try:
            with self.turns.turn(id(self)):
                if cancelled is not None and cancelled.is_set():  # its caller left while it waited its turn
                    raise LocalModelError("local engine: the caller went away before its turn")
                _STARTING.call = started
                try:
                    return self._chat(request, cancelled)
                finally:
                    _STARTING.call = None
        finally:
            with self._count:
                self.in_flight -= 1

    def _chat(self, request: dict, cancelled: threading.Event | None = None) -> dict:
        if self.router is None:
            return self._streamed(request, cancelled)
        shared = None
        if self.shared is not None:
            shared = self.shared.join(request["messages"], lambda: self._prime(request, cancelled), cancelled)
        reply = self._routed(request, cancelled, pin=shared is None)
        if shared is not None and shared["work"]:
            _charge(reply, shared["work"])
        return reply

    def _routed(self, request: dict, cancelled: threading.Event | None = None, pin: bool = True) -> dict:
        slot, reserved = self.router.choose(request["messages"], pin=pin)
        routed = {**request, "verbose": True, **({} if slot is None else {"id_slot": slot})}
        used, held = None, None
        try:
            reply = self._streamed(routed, cancelled)
            used = (reply.pop("__verbose", None) or {}).get("id_slot")
            text = reply["choices"][0]["message"].get("content") or ""
            held = [*request["messages"], {"role": "assistant", "content": text}]
            return reply
        finally:
            self.router.release(reserved, used, held)

    def _prime(self, request: dict, cancelled: threading.Event | None = None) -> dict:
        """Read `request`'s prompt into a slot (a one-token reply), then start a one-token request
        of its own so that llama.cpp parks that idle slot's state in its host prompt cache
        (`SharedPrefill`). Returns the prompt reading of the two, added up (`prompt_n`, `prompt_ms`)."""
        started, _STARTING.call = getattr(_STARTING, "call", None), None  # the primer is not the call's start
        try:
            primer = self._routed({**request, "max_tokens": 1}, cancelled)
            nudge = self._routed({"messages": [{"role": "user", "content": "."}], "max_tokens": 1,
                                  "temperature": 0.0}, cancelled, pin=False)
        finally:
            _STARTING.call = started
        return {key: sum((reply.get("timings") or {}).get(key) or 0 for reply in (primer, nudge))
                for key in ("prompt_n", "prompt_ms")}

    def _streamed(self, request: dict, cancelled: threading.Event | None = None) -> dict:
        """One completion, streamed so that a reply repeating itself is stopped (`repetition.LoopWatch`,
        finish_reason "loop"); returned in the shape of a non-streamed reply (usage, timings, slot)."""
        if cancelled is not None and cancelled.is_set():  # asked back before a prompt token was read
            raise LocalModelError("local engine: the call was stopped before it started")
        watch, chunks = repetition.LoopWatch(), []
        started = getattr(_STARTING, "call", None)

        def on_chunk(chunk) -> bool:
            nonlocal started
            try:
                if cancelled is not None and cancelled.is_set():
                    return True
                chunks.append(chunk)
                self.work += 1
                if started is not None:
                    started, call = None, started
                    call()
                delta = ((chunk.get("choices") or [{}])[0].get("delta") or {}).get("content") or ""
                return watch.feed(delta) if delta else False
            except Exception:  # noqa: BLE001 - an exception must not cross into llama.cpp's thread
                return True

        streamed = {**request, "stream": True, "timings_per_token": True, "stream_options": {"include_usage": True}}
        returned = self.server.handle_chat_completions(streamed, on_chunk)
        if isinstance(returned, dict) and "error" in returned:  # refused before streaming (a prompt too long, say)
            return self._checked(returned)
        return self._checked(_assembled(chunks, watch))

    @staticmethod
    def _checked(reply: dict) -> dict:
        if "error" in reply and "choices" not in reply:
            raise LocalModelError(f"local engine error: {reply['error']}")
        return reply

    async def achat(self, request: dict) -> dict:
        return await asyncio.get_running_loop().run_in_executor(self.pool, self.chat, request)


def _charge(reply: dict, work: dict) -> None:
    """Count the prompt reading of a shared prompt's primer (`SharedPrefill`) in the reply of the
    request that ran it: the engine read that prompt once, and the trace says so once."""
    timings = reply.setdefault("timings", {})
    read = int(work.get("prompt_n") or 0)
    timings["prompt_n"] = (timings.get("prompt_n") or 0) + read
    timings["prompt_ms"] = (timings.get("prompt_ms") or 0.0) + (work.get("prompt_ms") or 0.0)
    timings["cache_n"] = max(0, (timings.get("cache_n") or 0) - read)
    details = (reply.get("usage") or {}).get("prompt_tokens_details")
    if isinstance(details, dict) and details.get("cached_tokens") is not None:
        details["cached_tokens"] = max(0, details["cached_tokens"] - read)


def _assembled(chunks: list, watch: "repetition.LoopWatch") -> dict:
    """A non-streamed reply built from streamed chunks (a stopped loop keeps two copies of its span)."""
    error = next((c["error"] for c in chunks if isinstance(c, dict) and "error" in c), None)
    if error is not None:
        return {"error": error}
    text, finish, timings, usage, verbose = watch.text, None, {}, None, None
    for chunk in chunks:
        choice = (chunk.get("choices") or [{}])[0]
        finish = choice.get("finish_reason") or finish
        timings = chunk.get("timings") or timings
        usage = chunk.get("usage") or usage
        verbose = chunk.get("__verbose") or verbose
    if watch.start is not None:
        text, finish = repetition.trimmed(text, watch.start), "loop"
    if usage is None:  # stopped before the last chunk: count what the engine reported so far
        cached = timings.get("cache_n", 0)
        usage = {"prompt_tokens": timings.get("prompt_n", 0) + cached, "prompt_tokens_details": {"cached_tokens": cached},
                 "completion_tokens": timings.get("predicted_n", 0)}
    reply = {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
             "usage": usage, "timings": timings}
    if verbose is not None:
        reply["__verbose"] = verbose
    return reply


def claim_threads(advice: str = "") -> int:
    """Threads for an engine loaded in this process, out of the machine-wide budget (`cores.claim`)."""
    return cores.claim(settings.home() / "engine" / "threads", advice)


def busy() -> bool:
    """Whether a loaded engine is still generating: a call whose caller was cancelled (Ctrl-C, a
    timeout) runs on until llama.cpp finishes it, and Python waits for those threads at exit."""
    return any(e.in_flight for e in _engines.values())


_engines: dict[Path, Engine] = {}
_lock = threading.Lock()
TURNS = cores.Turns()  # with DEBATEKIT_LOCAL_MIX=turns, the engines of this process take turns on its threads
SPARE_SLOTS = 2


def spare_slots() -> int:
    """Slots the machine's shared engine keeps beyond `slots()`: $DEBATEKIT_LOCAL_SPARE_SLOTS, default
    `SPARE_SLOTS` (2). A process sends at most `slots()` calls at once, so one long run never fills
    them, and a second process's calls start at once instead of waiting for a slot to free (a
    long generation holds its slot for minutes on 2 cores)."""
    return int(os.environ.get("DEBATEKIT_LOCAL_SPARE_SLOTS") or SPARE_SLOTS)


def unload() -> bool:
    """Drop this process's engines and give their threads back (`cores.release_all`), so that an
    engine loaded later, in this process or in the machine's shared engine, gets the cores again.
    Does nothing while one of them is still generating (`busy()`): its threads are in use. True
    when unloaded."""
    with _lock:
        if busy():
            return False
        _engines.clear()
        cores.release_all()
    return True


def engine(name: str = weights.DEFAULT_LOCAL, advice: str = "", spare: int = 0) -> Engine:
    """The process's engine for a local model, loaded on first use (assembling weights if needed)
    with `slots()` + `spare` slots; `advice` ends the warning printed if other processes' engines
    hold every core (`cores.claim`)."""
    path = weights.model_path(name)
    with _lock:
        if path not in _engines:
            weights.ready(name)
            _engines[path] = Engine(path, settings.slots() + spare, threads=claim_threads(advice))
        return _engines[path]
