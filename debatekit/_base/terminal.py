"""Text from a dataset, a model or a run folder, made safe to print on a terminal.

A question, a reply or an item id may hold terminal escape sequences (a window-title change, a
screen clear, colours, a carriage return that overwrites the line, a bidi override that reorders
it). Printed raw, the terminal would obey them. `visible` writes each such character as its
escape (`\\x1b`, `\\x07`, `\\u202e`) instead, keeping newlines and tabs, as `less` and `rich` do.
Every command that prints such text passes it through `visible`.
"""

from __future__ import annotations

import re

CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""C0 controls but newline and tab, DEL, C1 controls (one of them starts a sequence by itself),
and the bidirectional marks and overrides."""


def visible(text: str) -> str:
    """`text` with its control characters written out as escapes, so that printing it runs nothing."""
    return CONTROL.sub(_escape, text)


def _escape(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
