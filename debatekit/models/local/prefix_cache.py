"""Keeping each conversation's computed prefix between its requests on the local engine.

A debate agent's next prompt begins with its whole earlier conversation; `PrefixCache` sets how
llama.cpp parks and restores such prefixes, and `SlotRouter` sends a conversation back to the idle
slot that still holds it (see `debatekit.models.local.engine.Engine`).
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from debatekit.models.errors import LocalModelError

MAX_DEFAULT_CACHE_RAM_MIB = 8192
DEFAULT_CACHE_RAM_MIB = 2048  # where the memory available cannot be read


def default_ram_mib(available: int | None) -> int:
    """The host prompt cache's default size in MiB: a quarter of the memory `available` (bytes), at
    most 8 GiB; `DEFAULT_CACHE_RAM_MIB` where it cannot be read (None).

    The cache must hold every conversation that a batch of debates has in flight, or each one's
    next round is read again from its first token. A GSM8K study debate (3 agents, 3 rounds)
    carries about 450 tokens of conversation after round 1, 1,700 after round 2 and 2,900 after
    round 3; 12 debates at once keep 36 of them, up to about 100k tokens of the 1.5B model's KV
    state (28 KiB a token: 2.8 GiB), while finished debates' states wait to be evicted. A fixed
    2 GiB (75k tokens) held too few: round-2 calls of that study reused 90 of the 1,305 prompt
    tokens on average, and with 8 GiB 428 of 1,216 over 105 calls (each agent's own round-1 conversation).
    """
    if available is None:
        return DEFAULT_CACHE_RAM_MIB
    return max(1, min(MAX_DEFAULT_CACHE_RAM_MIB, available // 4 // 2**20))


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
        ram_mib: host memory for parked prompts in MiB (0: no cache, -1: no limit); default
            `default_ram_mib`: a quarter of the memory available, at most 8 GiB (about 300k tokens
            of Qwen2.5-1.5B's KV state, 28 KiB a token).
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


def prefix_cache(available: int | None = None) -> PrefixCache:
    """Prefix-cache settings from $DEBATEKIT_LOCAL_CACHE_RAM (MiB; default `default_ram_mib(available)`,
    `available` being the machine's free memory in bytes) and $DEBATEKIT_LOCAL_PREFIX_REUSE (on/off).

    Raises:
        LocalModelError: a value that is not a number of MiB (>= -1) or on/off.
    """
    ram = os.environ.get("DEBATEKIT_LOCAL_CACHE_RAM", "").strip() or str(default_ram_mib(available))
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

    def choose(self, messages: list[dict], pin: bool = True) -> tuple[int | None, int | None]:
        """`(id_slot to ask for or None, slot reserved for the call)`; pair with `release`. `pin`
        False leaves the slot to the server even where an idle one holds the conversation (a
        request whose prompt is parked, `SharedPrefill`, must be placed by the server to restore it)."""
        key = _conversation(messages)
        with self.lock:
            idle = [s for s, busy in enumerate(self.busy) if not busy]
            own = [s for s in idle if pin and self.held[s] and key[:len(self.held[s])] == self.held[s]]
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


@dataclass
class _Group:
    members: int = 1
    ready: threading.Event = field(default_factory=threading.Event)


class SharedPrefill:
    """Reads a long prompt once when several requests send it at the same time.

    ReConcile's agents, or self-consistency's samples, send the very same messages at once with
    other seeds; each lands on a slot of its own and llama.cpp reads the whole prompt in each.
    Here the first of them waits `window_s` for the others; if any came, it sends the prompt
    alone for one token (the prompt is read once, into one slot), then a one-token request of
    its own, whose start makes llama.cpp copy that idle slot's state into its host prompt cache.
    Then all of them go, each placed by the server (not pinned to a slot,
    `SlotRouter.choose(pin=False)`), which restores the parked prompt into the slot it picks.
    A prompt shorter than `min_chars` (all message texts together) goes alone: reading it again
    costs less than the wait. Measured with the 1.5B model: three followers of a 711-token primer
    each read 1 token of it instead of 711 (docs/local-engine.md).
    """

    def __init__(self, min_chars: int = 1000, window_s: float = 0.2, sleep: Callable[[float], None] = time.sleep):
        self.min_chars, self.window_s, self.sleep = min_chars, window_s, sleep
        self.groups: dict[tuple, _Group] = {}
        self.lock = threading.Lock()

    def join(self, messages: list[dict], prime: Callable[[], dict | None],
             cancelled: threading.Event | None = None) -> dict | None:
        """Wait for the request's group to be primed. Returns None where the request goes alone
        (keep routing it as usual); else a dict, with `work` the primer's work (its engine timings)
        for the member that ran it and None for the others. `prime` runs in the first member's
        thread; if it raises, the group goes on unprimed (each member reads the prompt itself)."""
        if sum(len(m.get("content") or "") for m in messages) < self.min_chars:
            return None
        key = _conversation(messages)
        with self.lock:
            group = self.groups.get(key)
            first = group is None
            if first:
                group = self.groups[key] = _Group()
            else:
                group.members += 1
        if not first:
            while not group.ready.wait(0.05):
                if cancelled is not None and cancelled.is_set():
                    break
            return {"work": None}
        self.sleep(self.window_s)
        with self.lock:
            alone = group.members == 1
            if alone:
                del self.groups[key]
        if alone:
            return None
        try:
            work = prime()
        except Exception:  # noqa: BLE001 - the request itself meets, and reports, what went wrong
            return None
        finally:
            with self.lock:
                del self.groups[key]
            group.ready.set()
        return {"work": work}


def _conversation(messages: list[dict]) -> tuple:
    return tuple((m.get("role"), m.get("content")) for m in messages)


_SWITCH = {"on": True, "1": True, "true": True, "yes": True, "off": False, "0": False, "false": False, "no": False}
