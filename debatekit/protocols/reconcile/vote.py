"""reconcile's aggregation: confidence recalibration and the confidence-weighted vote (official `utils.py`)."""

from __future__ import annotations

from typing import Any

from debatekit.datasets.voting import normalize

FIRST_VOTE = 1e-5
"""Added once to every distinct answer, as the official code does (it breaks no tie; kept so sums match)."""


def recalibrate(confidence: float | None) -> float:
    """The vote weight of a stated confidence (the paper's recalibration, thresholds of the official code):
    at most 0.6 -> 0.1, below 0.8 -> 0.3, below 0.9 -> 0.5, below 1.0 -> 0.8, 1.0 -> 1.0. A confidence
    not given counts as 0.0, as in the official code."""
    x = 0.0 if confidence is None else confidence
    if x <= 0.6:
        return 0.1
    if x < 0.8:
        return 0.3
    if x < 0.9:
        return 0.5
    if x < 1.0:
        return 0.8
    return 1.0


def weighted_vote(answers: dict[str, Any], confidences: dict[str, float | None]) -> tuple[Any, dict[str, float]]:
    """The answer with the largest sum of recalibrated confidences, and each answer's sum.

    Agents without an answer (None) do not vote. Ties go to the answer given first in agent order
    (Python's `max` over answers in the order they were first given, as in the official code).

    Returns:
        (winner or None when nobody answered, {answer as text: weight sum}).
    """
    sums: dict[Any, float] = {}
    shown: dict[Any, Any] = {}
    for agent, answer in answers.items():
        if answer is None:
            continue
        key = normalize(answer)
        if key not in sums:
            sums[key], shown[key] = FIRST_VOTE, answer
        sums[key] += recalibrate(confidences.get(agent))
    if not sums:
        return None, {}
    best = max(sums, key=sums.get)
    return shown[best], {str(shown[k]): v for k, v in sums.items()}
