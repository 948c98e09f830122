"""Comparing answers: equality (numeric or case-insensitive), majority vote, agreement."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any, Iterable, Sequence


def normalize(answer: Any) -> Any:
    """A comparable form of an answer: numbers as floats, text stripped and lower-cased, a boolean
    as "yes"/"no" (a dataset's `true` is the yes of a yes/no answer)."""
    if answer is None:
        return None
    if isinstance(answer, bool):
        return "yes" if answer else "no"
    if isinstance(answer, (int, float)):
        return float(answer)
    if isinstance(answer, str):
        text = answer.strip().lower()
        try:
            return float(text.replace(",", ""))
        except ValueError:
            return " ".join(text.split())
    return answer


def answers_equal(a: Any, b: Any) -> bool:
    """Whether two answers are the same (numerically for numbers, case-insensitive for text)."""
    x, y = normalize(a), normalize(b)
    if isinstance(x, float) and isinstance(y, float):
        return math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-9)
    return x == y


def majority(answers: Iterable[Any]) -> Any:
    """The most common non-missing answer; ties go to the answer seen first. None if none."""
    present = [a for a in answers if a is not None]
    if not present:
        return None
    counts = Counter(normalize(a) for a in present)
    best = max(counts.values())
    return next(a for a in present if counts[normalize(a)] == best)


def agreement_rate(answers: Sequence[Any]) -> float | None:
    """Share of agents that gave the majority answer (1.0 means all agree)."""
    present = [a for a in answers if a is not None]
    if not present:
        return None
    top = majority(present)
    return sum(answers_equal(a, top) for a in present) / len(answers)
