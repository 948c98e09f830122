"""When a debate stops: the stop reasons every protocol shares, and the stop rules `Debate.rounds` asks.

A stop rule reads the round history and returns a stop reason, or None to go on:

    reason = await debate.rounds(step, max_rounds=3, stop=[agreement, plateau("score", 0.01)])
"""

from __future__ import annotations

from typing import Callable

from debatekit.datasets.voting import answers_equal
from debatekit.records.schemas import RoundRecord

StopRule = Callable[[list[RoundRecord]], str | None]
"""A stop rule: the round history in, a stop reason (or None) out."""

STOP_REASONS = {
    "max_rounds": "the round ceiling was reached",
    "timeout": "the debate's time limit ran out",
    "budget": "the debate's token budget was spent",
    "agreement": "every agent gave the same answer",
    "plateau": "the tracked score improved less than the minimum",
    "consensus": "the agents' top answers agree (protocol's own test)",
    "converged": "the protocol's convergence checks hold",
}
"""The stop reasons the engine and the protocols share; a protocol declares its own
(`@protocol(stop_reasons=...)`: dynamics' circuit-breaker triggers, arbitration's
complete/skipped) only for what none of these says."""


def agreement(history: list[RoundRecord]) -> str | None:
    """Stop when every agent of the latest round gave the same (non-missing) answer."""
    if not history:
        return None
    answers = list(history[-1].answers.values())
    if len(answers) >= 2 and all(a is not None for a in answers) and all(
            answers_equal(a, answers[0]) for a in answers[1:]):
        return "agreement"
    return None


def plateau(key: str, min_delta: float) -> StopRule:
    """Stop when `extra[key]` of the latest round improved less than `min_delta` on the previous."""

    def rule(history: list[RoundRecord]) -> str | None:
        if len(history) < 2:
            return None
        before, now = history[-2].extra.get(key), history[-1].extra.get(key)
        if before is None or now is None:
            return None
        return "plateau" if now - before < min_delta else None

    return rule
