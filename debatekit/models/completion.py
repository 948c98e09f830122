"""What one logical model call came to (`Completion`), and how its replies' usage adds up.

A `Gateway.complete()` call (all its attempts, repair rounds and cache look-ups) ends as one
`Completion`: the text read, the parsed object, tokens, cost, engine time, and the faults met on
the way, which the engine counts into a debate's usage and records on the call's event.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from debatekit.models.errors import TRANSIENT


@dataclass
class Completion:
    """The outcome of one logical call (all its attempts, repairs and cache look-ups)."""

    model: str
    text: str = ""
    parsed: BaseModel | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0  # prompt tokens the provider reused from its prompt cache
    prompt_seconds: float = 0.0  # engine time on the prompt (local engine only; 0 when unknown)
    generation_seconds: float = 0.0  # engine time generating the reply (local engine only)
    cost: float | None = 0.0
    latency: float = 0.0
    calls: int = 0
    cache_hits: int = 0
    faults: list[str] = field(default_factory=list)
    error: str | None = None
    error_kind: str | None = None
    repairs: list[dict] = field(default_factory=list)
    """Each reply that could not be read and was asked again: its text, the error and the repair prompt."""
    replies: list[dict] = field(default_factory=list)
    """Each reply received (from the cache too), in order: its cache key and usage (`reply_record`)."""
    cut_off: int = 0
    """Replies that stopped at the token limit (`finish_reason` "length", or every allowed token used
    where the provider gives no reason), read or not."""
    echo: bool = False
    """The answer read is the prompt's own text repeated: the reply's answer line is a line of the prompt,
    and the reply's own words give no answer (`output.echoed`)."""

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def cache_hit(self) -> bool:
        """True when every reply came from the cache (no provider call made)."""
        return self.calls == 0 and self.cache_hits > 0

    @property
    def parse_failures(self) -> int:
        return self.faults.count("parse")

    @property
    def cut_off_unread(self) -> int:
        """Parse failures of a reply cut off at the token limit (`cut_off` counts every cut-off reply)."""
        return self.faults.count("cut_off")

    @property
    def loops(self) -> int:
        """Parse failures of a reply that repeated itself until stopped."""
        return self.faults.count("loop")

    @property
    def retries(self) -> int:
        return sum(1 for f in self.faults if f in TRANSIENT)

    @property
    def timeouts(self) -> int:
        return self.faults.count("timeout")


def add_usage(done: Completion, reply: dict, timed: bool = True) -> None:
    """Add a reply's tokens, cost and (when `timed`: not a cached reply) engine time to `done`;
    one reply of unknown cost makes the call's cost unknown (None)."""
    done.prompt_tokens += reply.get("prompt_tokens", 0)
    done.completion_tokens += reply.get("completion_tokens", 0)
    done.cached_tokens += reply.get("cached_tokens", 0)
    if timed:
        done.prompt_seconds += reply.get("prompt_seconds", 0.0)
        done.generation_seconds += reply.get("generation_seconds", 0.0)
    if done.cost is not None:
        done.cost = None if reply.get("cost") is None else done.cost + reply["cost"]


def token_count(value: Any) -> int | None:
    """A token count a provider reported: a whole number of at least 0 (None and 0 are 0), else None."""
    if value is None:
        return 0
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or value != int(value):
        return None
    return int(value)
