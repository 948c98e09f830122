"""Reading the number a reply states: a marker's line or a box as the arithmetic it writes, or the
last number of a reply read whole."""

from __future__ import annotations

import re
from fractions import Fraction

from debatekit._base.answer_kinds import numerals
from debatekit.protocols.shared import expression
from debatekit.protocols.shared.extract.markers import Unread, boxes

ASIDE = re.compile(r"\([^()]*(?<![\w\\])[^\W\d_]{2}[^()]*\)")
"""A parenthetical remark in words after an answer (`42 (computed in 3 steps)`): no part of it; a LaTeX
command is no word (`\\left(\\frac{3}{4}\\right)` is arithmetic)."""
BULLET = re.compile(r"[ \t]*(?:[-–•][ \t]+|\d{1,2}[.)][ \t]+(?=[$€£(−-]*\d))")
"""A list bullet or item number opening a marker's line (`- 18`, `1. 18`): no part of the answer."""
CONCLUDES = re.compile(r"[,;]?\s+(?:so|thus|therefore|hence|which\s+(?:gives|makes)|for\s+a\s+total\s+of|"
                       r"giving|making|totall?ing)\b[:\s]*", re.IGNORECASE)
"""Words that lead from working to its result in one line (`2 each, so 8`): the result is read."""
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
"""Where a sentence ends and the next begins: a marker's answer is in its first."""
LIST_ITEM = re.compile(r"^[ \t]*\d+[.)][ \t]+(?=\D)", re.MULTILINE)
NUMBER = re.compile(r"(?:(?<![\d)%])-)?\d+(?:\.\d+)?")
"""A number as a reply read whole writes it; a dash after a digit joins two numbers (`5-10`), no sign."""
_NOT = r"(?:,?\s+|\s*\()(?:and\s+)?not\s+(?:the\s+)?"
_NUM = r"-?\d+(?:\.\d+)?"
NEGATED = re.compile(r"(?<=\d)([^\d\n.;]{0,40}?)" + _NOT + _NUM + r"(?:\s*(?:,|or|nor|and)\s*" + _NUM + r")*\)?")
"""Numbers set against the one before them in its clause ("35 hours, not 45 hours", "18 (not 12)",
"3, not 4 or 5"): none is an answer."""
SET_AGAINST = re.compile(r"\s*(" + _NUM + r")[^\d\n.;]{0,40}?" + _NOT + r"\d")
"""A marker's answer set against another number right away ("the answer is $37.50, not $20")."""


def read_number(segment: str, marked: bool) -> int | float | str | None:
    if marked:
        return _marked_number(segment.strip().split("\n")[0])
    plain = numerals(expression.MINUS.sub("-", segment.replace("$", "")))
    plain = NEGATED.sub(r"\1", LIST_ITEM.sub(" ", plain))
    numbers = list(NUMBER.finditer(plain))
    if not numbers:
        return None
    last = numbers[-1]
    try:
        expression.alone(plain, last.start(), last.end())
    except expression.Ambiguous:
        return None  # `... is 1,5`, `... pays 12 000`, `... takes 5-10`: no reader can tell which number is meant
    if "." not in last.group():  # a whole number exactly, however long (a float rounds it past 2**53)
        return int(last.group())
    value = float(last.group())
    return int(value) if value.is_integer() else value


def _marked_number(line: str) -> int | float | str | None:
    """The number a marker's line (or a box) states: after a list bullet, a box in the line first; the
    last side of an equation (`9 eggs x $2 = $18`: 18), else what follows words that conclude (`2
    each, so 8`: 8), else the arithmetic the line opens with (`42 (computed in 3 steps)`: 42, `25,
    which is 5 squared`: 25, `\\frac{122}{15}`), else, after words, the last it writes (`Janet makes
    $18 every day`), a number set against another dropped (`35 hours, not 45`); `Unread` when it
    writes an expression in an unknown (`2W - 15`) or one past the parser's bounds."""
    line = line[bullet.end():] if (bullet := BULLET.match(line)) else line
    line = SENTENCE_END.split(line, maxsplit=1)[0]  # `35. The other agent got 45, not 35.`: its first sentence
    formula = bool(inner := boxes(line))
    if formula:  # `Gerald runs the 400-meter hurdles in \\boxed{39.6} seconds`: the box
        line = inner[-1]
    line = NEGATED.sub(r"\1", ASIDE.sub(" ", line))
    ambiguous = None
    try:
        for part in _results(line):
            opens = re.match(r"[\s:=~≈$]*(?:(?:approximately|about|around|roughly|exactly)\s+)?[\s$]*"
                             r"(?:[-+−]?\s*[(.\d]|\\[dt]?frac)", part)
            try:
                found = expression.value(part, first=opens is not None, formula=formula)
            except expression.Ambiguous as exc:  # `7 (= 3,5 × 2)`: the line may state its answer elsewhere
                ambiguous = exc
                continue
            if found is not None:
                return as_answer(found)
    except expression.Unreadable as exc:
        raise Unread from exc
    if ambiguous is not None:
        raise Unread from ambiguous
    return None


def _results(line: str) -> list[str]:
    """Where a marker's line states its result, the likeliest first: after its last `=`, after the last
    words that conclude, then the whole line."""
    parts = []
    if "=" in line:
        parts.append(line.rsplit("=", 1)[1])
    if conclusion := list(CONCLUDES.finditer(line)):
        parts.append(line[conclusion[-1].end():])
    return [*parts, line]


def as_answer(value: Fraction) -> int | float | str:
    """An exact number as an answer is stored: a whole number as an int, a decimal as the float it
    writes (`0.75`), another fraction as text (`"122/15"`; `voting.normalize` reads it exactly)."""
    if value.denominator == 1:
        return int(value)
    decimal = float(value)
    return decimal if Fraction(repr(decimal)) == value else f"{value.numerator}/{value.denominator}"
