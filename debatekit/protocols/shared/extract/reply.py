"""A reply's final answer of its kind (`extract`), and whether it was copied from the prompt (`copied_answer`,
`echoed`)."""

from __future__ import annotations

import re
from typing import Any

from debatekit._base.answer_kinds import TRUTH_WORDS, first_of_same
from debatekit.protocols.shared.expression import Ambiguous
from debatekit.protocols.shared.extract.confidences import beside_confidence, stated_confidences
from debatekit.protocols.shared.extract.markers import (BOX, BOXED, MARKER, Unread, after_markers, boxes, inside,
                                                        model_text, quoted_spans)
from debatekit.protocols.shared.extract.numeric import read_number
from debatekit.protocols.shared.extract.options import declines, declines_at_end, plain_math, read_choice

MULTIPLIED = re.compile(r"(?<=[\d)])\s*\*\s*(?=[\d(])")
"""A `*` between two numbers: a multiplication, not markdown emphasis."""
YES_NO = re.compile(r"\b(yes|no|true|false)\b", re.IGNORECASE)
_TRUTH = r"\b(?:yes|no|true|false)\b"
BOTH = re.compile(_TRUTH + r"[ \t]*(?:,?[ \t]*or|and|nor|/)[ \t]*" + _TRUTH, re.IGNORECASE)
"""Both answers named (`yes or no`, `true/false`, `yes and no`): neither is given."""
NOT_A_TRUTH = re.compile(r"\bno(?=[ \t]+(?:doubt|matter|longer|one|more|less|other|need)\b)", re.IGNORECASE)
"""A `no` that is no answer (`No doubt, yes`, `yes, but no longer`)."""
ALONE_YES_NO = re.compile(r"\b(yes\b|no\b(?![ \t]+[^\W\d_]))", re.IGNORECASE)
"""A yes, or a no that stands alone (`No.`, `the answer is "no"`), in prose; a `no` before a word is a
determiner (`no copyright`, `no need`)."""
NEGATED_TRUTH = re.compile(r"\bnot[ \t]+(yes|no|true|false)\b", re.IGNORECASE)
"""A negated answer: after a marker `not true` says no, `not false` yes, `not yes` nothing."""


def extract(kind: str, text: str, choices: list[str] | None = None, marked_only: bool = False,
            confident: bool = False) -> Any:
    """The final answer of `kind` in a free-text reply, or None if there is none; with `marked_only`
    (a reply cut off before its end) only a marker's segment or a box is read, never the whole reply;
    with `confident` (the reply was asked for a confidence too), a number it would read that the
    reply states as its confidence is looked for again beside the confidence (`beside_confidence`)."""
    text, cut = model_text(text)
    marked_only = marked_only or cut
    if confident:
        found = extract(kind, text, choices, marked_only)
        if isinstance(found, (int, float)) and found in stated_confidences(text):
            return extract(kind, beside_confidence(text), choices, marked_only)
        return found
    numbers = kind in ("integer", "number")
    clean = MULTIPLIED.sub(" × ", text) if numbers else text  # `9 * 2 = 18` is arithmetic, `**18**` emphasis
    clean = clean.replace("*", " ").replace("\\(", " ").replace("\\)", " ")
    if kind == "choice":
        clean = plain_math(clean)
    finder = {"integer": read_number, "number": read_number, "yesno": _yes_no, "text": _text,
              "choice": lambda segment, marked: read_choice(segment, marked, choices or [])}[kind]
    quoted = quoted_spans(clean)
    boxed = boxes(clean, quoted)
    if numbers:  # a box is read as the formula it is: its words are unknowns
        boxed = [f"\\boxed{{{content}}}" for content in boxed]
    last, *earlier = after_markers(clean, judged=numbers, quoted=quoted) or [None]
    try:
        for k, segment in enumerate((last, boxed[-1] if boxed else None, *earlier)):
            if segment is None:
                continue
            if kind in ("integer", "number", "choice") and declines(_first_line(segment), choices or [], numbers):
                return None  # the reply's latest statement of its answer declines: it has none
            try:
                found = finder(segment, True)
            except Unread as exc:
                after = boxes(segment) if k == 0 and numbers and isinstance(exc.__cause__, Ambiguous) else []
                if not after:
                    raise
                # `The answer is: she leaves at 3:30 PM.` then `\boxed{150}`: the box after the marker states it
                found = finder(f"\\boxed{{{after[-1]}}}", True)
            if found is not None:
                return first_of_same(found, choices) if kind == "choice" else found
        if marked_only or kind in ("integer", "number", "choice") and declines_at_end(clean):
            return None
        found = finder(clean.replace("\\boxed", " "), False)
        return first_of_same(found, choices) if kind == "choice" else found
    except Unread:
        return None


def _first_line(segment: str) -> str:
    return segment.strip().split("\n")[0]


ECHO_MIN_CHARS = 20
"""Lines shorter than this (`Answer: E`, `A) prepare`) are too common to tell a copy from the agent's own words."""


def echoed(kind: str, text: str, shown: list[dict], choices: list[str] | None = None) -> bool:
    """Whether a reply's answer is an echo: the line it is read from is copied (`copied_answer`), and
    the reply without the copied lines gives no answer, read as any reply is: the agent took its answer
    from what it was shown and said nothing of its own to back it."""
    own = copied_answer(text, shown)
    return own is not None and extract(kind, own, choices) is None


def copied_answer(text: str, shown: list[dict]) -> str | None:
    """Where the line a reply's answer is read from (the last marker's, else the last box's) sits in a
    block of lines copied verbatim from the messages the agent was `shown` (at least one of them
    `ECHO_MIN_CHARS` long), the rest of the reply: its own words; None where that line is its own."""
    text = model_text(text)[0]
    prompt = {line.strip() for m in shown if m.get("role") != "assistant" and isinstance(m.get("content"), str)
              for line in m["content"].split("\n")}  # its own earlier reply is its own
    lines = text.split("\n")
    at = _answer_line(text)
    if at is None or lines[at].strip() not in prompt:
        return None
    block = {at}
    for step in (-1, 1):  # the copied lines around the answer line, blank lines included
        k = at + step
        while 0 <= k < len(lines) and (not lines[k].strip() or lines[k].strip() in prompt):
            block.add(k)
            k += step
    if max(len(lines[k].strip()) for k in block) < ECHO_MIN_CHARS:
        return None
    return "\n".join(line for k, line in enumerate(lines) if k not in block)


def _answer_line(text: str) -> int | None:
    """The index of the line an answer is read from first: the last marker's outside quotes, else the last box's."""
    clean = text.replace("*", " ")
    quoted = quoted_spans(clean)
    marks = [m.start() for m in MARKER.finditer(clean) if not inside(m.start(), quoted)]
    marks = marks or [m.start() for m in BOX.finditer(clean) if not inside(m.start(), quoted)]
    return clean.count("\n", 0, marks[-1]) if marks else None


def _yes_no(segment: str, marked: bool) -> str | None:
    segment = BOTH.sub(" ", NOT_A_TRUTH.sub(" ", segment))  # `yes and no one disagrees`: yes
    # after a marker `not true` answers no; in prose (`which is not true`) it judges a claim, and answers nothing
    segment = NEGATED_TRUTH.sub(lambda m: {"true": " no ", "false": " yes "}.get(m[1].lower(), " ") if marked else " ",
                                segment)
    # in prose a `no` before a word is a determiner (`no copyright`): only one standing alone answers
    words = [w.lower() for w in (YES_NO if marked else ALONE_YES_NO).findall(segment)]
    if not words:
        return None
    word = words[0] if marked else words[-1]
    return TRUTH_WORDS.get(word, word)


def _text(segment: str, marked: bool) -> str | None:
    segment = BOXED.sub(r"\1", segment)  # `Answer: \boxed{Paris}` answers Paris
    lines = [line.strip() for line in segment.strip().split("\n") if line.strip()]
    if not lines:
        return None
    if not marked and BARE_MARKER.fullmatch(lines[-1]):
        return None  # `Answer:` with nothing after it: the reply meant to give an answer and gave none
    return (lines[0] if marked else lines[-1]).strip(" .") or None


BARE_MARKER = re.compile(r"\W*(?:final\s+)?answer\s*(?:is|:|=)?\s*:?\W*", re.IGNORECASE)
