"""The embedded engine's settings, read from the environment: where debatekit keeps its caches, each
slot's context, the prompt batch, the number of slots, and how a process's engines share its threads."""

from __future__ import annotations

import os
from pathlib import Path

from debatekit.models.errors import LocalModelError


def home() -> Path:
    """Folder for debatekit's caches (models, responses): $DEBATEKIT_HOME or ~/.cache/debatekit."""
    return Path(os.environ.get("DEBATEKIT_HOME") or Path.home() / ".cache" / "debatekit")


def cache_dir() -> Path:
    """Folder of the response cache: $DEBATEKIT_CACHE_DIR or `home()`."""
    return Path(os.environ.get("DEBATEKIT_CACHE_DIR") or home())


KV_BYTES_PER_TOKEN = 32 * 1024  # an upper bound for the embedded models' f16 KV cache (1.5B: 28 KiB, 0.5B: 12 KiB)


def mem_available() -> int | None:
    """MemAvailable from /proc/meminfo in bytes, None where it cannot be read."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


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
