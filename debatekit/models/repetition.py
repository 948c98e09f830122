"""Loops: a reply that repeats one span over and over until its token limit.

Small models sometimes fall into a loop (the same line of algebra, the same sentence) and write it
until `max_tokens` runs out; the reply never reaches its answer and costs the whole limit. A reply
is looping when its tail is periodic: the last `MIN_REPEATS` copies or more of one span of at least
`MIN_PERIOD` characters, covering at least `MIN_CHARS` characters, are identical. Whitespace counts,
case counts; a near-repeat (a counter that goes up) is not a loop here.

The thresholds were chosen on the committed runs' replies (`benchmarks/loops.py` reruns the
calibration): none of the replies that finished by themselves is periodic at these settings, while
most replies cut off at the limit are.

`LoopWatch` is fed a reply as it streams (the local engine stops the generation when it fires);
`loop_start` answers the same question for a finished text (any provider's cut-off reply).
"""

from __future__ import annotations

MIN_PERIOD = 4
"""Shortest repeated span, in characters (a run of one symbol is found as a span of four)."""
MAX_PERIOD = 400
"""Longest repeated span looked for, in characters (about a paragraph)."""
MIN_REPEATS = 4
"""Copies of the span in a row that make a loop."""
MIN_CHARS = 240
"""Characters the repeated copies must cover together (a short span needs more copies)."""
CHECK_EVERY = 16
"""`LoopWatch` looks at the tail after this many new characters (cheap, and early enough)."""


def loop_start(text: str) -> int | None:
    """Where the looping tail of `text` begins (the index of its first repeated copy), or None.

    The tail is looping when, for some period p in [MIN_PERIOD, MAX_PERIOD], the last
    max(MIN_REPEATS, ceil(MIN_CHARS / p)) copies of p characters are identical. The start is then
    pushed back over as many further copies (and a partial one) as precede them.
    """
    size = len(text)
    for period in range(MIN_PERIOD, min(MAX_PERIOD, size // MIN_REPEATS) + 1):
        copies = max(MIN_REPEATS, -(-MIN_CHARS // period))
        span = period * copies
        if span > size:
            continue
        unit = text[size - period:]
        if text[size - span:] != unit * copies:
            continue
        start = size - span
        while start >= period and text[start - period:start] == unit:
            start -= period
        while start > 0 and text[start - 1] == text[start - 1 + period]:
            start -= 1
        return start
    return None


class LoopWatch:
    """Watches a streamed reply; `feed(delta)` returns True once the reply is looping."""

    def __init__(self, check_every: int = CHECK_EVERY):
        self.parts: list[str] = []
        self.size = 0
        self.checked = 0
        self.check_every = check_every
        self.start: int | None = None

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def feed(self, delta: str) -> bool:
        """Add the next piece of the reply; True when its tail has become a loop."""
        if self.start is not None:
            return True
        self.parts.append(delta)
        self.size += len(delta)
        if self.size - self.checked < self.check_every or self.size < MIN_CHARS:
            return False
        self.checked = self.size
        text = self.text
        self.parts = [text]
        self.start = loop_start(text)
        return self.start is not None


def trimmed(text: str, start: int, keep: int = 2) -> str:
    """`text` cut after `keep` copies of its loop (the reader sees that it looped, not 500 copies)."""
    period = _period_at(text, start)
    return text[: start + keep * period] if period else text


def _period_at(text: str, start: int) -> int | None:
    tail = text[start:]
    for period in range(MIN_PERIOD, min(MAX_PERIOD, len(tail) // 2) + 1):
        if tail[period:] == tail[: len(tail) - period]:
            return period
    return None
