"""Comparing answers: equality (exact for integers and fractions, numeric within `DECIMAL_TOL` for
decimals, case-insensitive for text), majority vote, agreement."""

from __future__ import annotations

import math
import random
from collections import Counter
from fractions import Fraction
from typing import Any, Iterable, Sequence

from debatekit._base.answer_kinds import TRUTH_WORDS, numerals

DECIMAL_TOL = Fraction(1, 10**9)
"""How far apart two numbers may be and still be one answer, when one of them is not a whole number
(0.1 + 0.2 against 0.3). Whole numbers (and a fraction against a whole number) compare exactly:
1000000001 is not 1000000000."""


def normalize(answer: Any) -> Any:
    """A comparable form of an answer: a number as an exact `Fraction` (a decimal as the decimal it
    is written as, 2.5 as 5/2), text stripped and lower-cased, a boolean as "yes"/"no" (a dataset's
    `true`, boolean or written `"true"`, is the yes of a yes/no answer); a number written as text
    is read as `numerals` writes it plainly (`"1,250"`, `"1 000"`); `"1,5"`, a decimal comma or a
    list, stays text."""
    if answer is None:
        return None
    if isinstance(answer, bool):
        return "yes" if answer else "no"
    if isinstance(answer, (int, Fraction)):
        return Fraction(answer)
    if isinstance(answer, float):
        return Fraction(repr(answer)) if math.isfinite(answer) else answer
    if isinstance(answer, str):
        text = answer.strip().lower()
        if text in TRUTH_WORDS:
            return TRUTH_WORDS[text]
        number = _number(numerals(text))
        return number if number is not None else " ".join(text.split())
    return answer


def _number(text: str) -> Fraction | None:
    """The exact value of a plain numeral (`42`, `-3.5`, `2.5e6`, `3/4`), else None."""
    try:
        value = Fraction(text)
    except (ValueError, ZeroDivisionError, OverflowError):
        return None
    return value if text and text.lower() not in ("nan", "inf", "-inf", "infinity") else None


def answers_equal(a: Any, b: Any) -> bool:
    """Whether two answers are the same: exactly for whole numbers and fractions, within
    `DECIMAL_TOL` where one is a decimal that is not whole, case-insensitively for text."""
    x, y = normalize(a), normalize(b)
    if isinstance(x, Fraction) and isinstance(y, Fraction):
        if x == y:
            return True
        if x.denominator == 1 and y.denominator == 1:
            return False
        return abs(x - y) <= DECIMAL_TOL
    return x == y


def majority(answers: Iterable[Any], tie_break: str | None = None) -> Any:
    """The most common non-missing answer, None if none. A tie goes to the answer seen first (agent 1,
    sample 1: the rule every committed run used), or, with `tie_break` (a seed: any text), to one of
    the tied answers drawn by a `random.Random(tie_break)`, the same draw every time for one seed."""
    present = [a for a in answers if a is not None]
    if not present:
        return None
    tied = tied_answers(present)
    if tie_break is None or len(tied) == 1:
        return tied[0]
    return random.Random(tie_break).choice(tied)


def tied_answers(answers: Iterable[Any]) -> list[Any]:
    """The answers that share the largest count (one of each, in the order first seen); [] if none."""
    present = [a for a in answers if a is not None]
    counts = Counter(normalize(a) for a in present)
    best = max(counts.values(), default=0)
    out, seen = [], set()
    for a in present:
        key = normalize(a)
        if counts[key] == best and key not in seen:
            seen.add(key)
            out.append(a)
    return out


def agreement_rate(answers: Sequence[Any]) -> float | None:
    """Share of agents that gave the majority answer (1.0 means all agree)."""
    present = [a for a in answers if a is not None]
    if not present:
        return None
    top = majority(present)
    return sum(answers_equal(a, top) for a in present) / len(answers)
