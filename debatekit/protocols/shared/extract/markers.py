"""Where a reply states its answer: its answer markers, its boxes, the spans it quotes, and
debatekit's own truncation marker, which is never the model's."""

from __future__ import annotations

import re

from debatekit.models.reading import TRUNCATED
from debatekit.protocols.shared import expression

MARKER = re.compile(r"\banswer\s*(?:is\b|:|=)\s*:?(?!\s*X(?:`|,\s*where\b))", re.IGNORECASE)
JUDGED = re.compile(r"\s*(?:not\s+|also\s+)?(?:in)?(?:correct|right|wrong|valid|accurate|flawed)\b(?!\s*[:=])"
                    r"(?![^\n.;]*\d)", re.IGNORECASE)
"""What follows a marker that judges an answer instead of stating one: `answer is correct.`, with no
number in the rest of its clause (`Your answer is correct, 18.` and `The answer is right: 42` state one)."""
BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
BOX = re.compile(r"\\boxed\s*\{")
QUOTED = re.compile(r'"[^"\n]{40,}"|“[^”\n]{40,}”')
"""Words a reply quotes (another agent's sentence, the prompt's), in double quotes on one line: a marker or box
there is not the reply's own. A short quote (`my final line is "Answer: B"`) is the reply's own answer."""
_CUT = re.escape(TRUNCATED).replace(re.escape("{more}"), r"\d+").replace(re.escape("{limit}"), r"\d+")
TRUNCATION, TRUNCATED_END = re.compile(_CUT), re.compile(_CUT + r"\s*\Z")  # debatekit's words, not the model's


class Unread(Exception):
    """The reply names two options where it should name one: it has no answer to read."""


def boxes(text: str, quoted: list[tuple[int, int]] | None = None) -> list[str]:
    """The content of each `\\boxed{...}` of `text` outside its quoted spans, nested braces included
    (`\\boxed{\\frac{122}{15}}`: `\\frac{122}{15}`)."""
    quoted = quoted_spans(text) if quoted is None else quoted
    closes = expression.closing_braces(text) if "\\boxed" in text else {}
    found = []
    for match in BOX.finditer(text):
        content, _ = expression.braced(text, match.end() - 1, closes)
        if content is not None and not inside(match.start(), quoted):
            found.append(content)
    return found


def quoted_spans(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in QUOTED.finditer(text)]


def inside(at: int, spans: list[tuple[int, int]]) -> bool:
    return any(start < at < end for start, end in spans)


def model_text(text: str) -> tuple[str, bool]:
    """`text` without debatekit's truncation markers, and whether it ends with one (its end was cut)."""
    return TRUNCATION.sub("", text), TRUNCATED_END.search(text) is not None


def after_markers(text: str, judged: bool = False, quoted: list[tuple[int, int]] = ()) -> list[str | None]:
    """What follows each answer marker, the last first: the last one's to the end of the text, an
    earlier one's up to the next marker. A marker inside a `quoted` span (another agent's words the
    reply repeats in quotes) is not the reply's. With `judged` (a number is asked for), None for a
    marker that judges an answer ("the general public's answer is correct. ... Seattle has 20 sheep"):
    it states none (an option may be called "right", so a choice keeps it)."""
    matches = [m for m in MARKER.finditer(text) if not inside(m.start(), quoted)]
    ends = [m.start() for m in matches[1:]] + [len(text)]
    return [None if judged and JUDGED.match(text, m.end()) else text[m.end():end]
            for m, end in zip(reversed(matches), reversed(ends))]
