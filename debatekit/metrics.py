"""Pure functions over answers: equality, majority vote, bootstrap confidence intervals."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any, Iterable, Sequence

import numpy as np


def normalize(answer: Any) -> Any:
    """A comparable form of an answer: numbers as floats, text stripped and lower-cased."""
    if isinstance(answer, bool) or answer is None:
        return answer
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


def bootstrap_ci(values: Sequence[float], n_boot: int = 2000, level: float = 0.95, seed: int = 0
                 ) -> tuple[float, float, float]:
    """Mean and percentile bootstrap interval of `values` (over items). NaNs are dropped."""
    data = np.asarray([v for v in values if v is not None and not _isnan(v)], dtype=float)
    if data.size == 0:
        return (math.nan, math.nan, math.nan)
    if data.size == 1:
        return (float(data[0]),) * 3
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, data.size, size=(n_boot, data.size))].mean(axis=1)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(data.mean()), float(low), float(high)


def _isnan(v: Any) -> bool:
    return isinstance(v, float) and math.isnan(v)
