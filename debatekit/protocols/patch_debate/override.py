"""Debate override (seed 002, 5.1): move aspect polarities toward a clear debate signal.

Per Stage-1 aspect with hints: pos_score and neg_score are the summed weights of the
positive and negative hints; total = pos + neg.

- total < min_total                      -> skipped_low_signal
- |pos - neg| < min_margin               -> skipped_conflict
- the aspect has no tuple                -> added with the debate's polarity (applied)
- confidence >= min_target_conf and the
  tuple already has the debate's polarity -> skipped_already_confident
- otherwise                              -> polarity set to the debate's (applied), logged
                                            as DEBATE_OVERRIDE
An applied tuple gets confidence max(its own, min_target_conf).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from pydantic import BaseModel

from debatekit.protocols.patch_debate.mapping import Hint
from debatekit.protocols.patch_debate.types import AspectTuple, locate, normalize_term

OUTCOMES = ("applied", "skipped_low_signal", "skipped_conflict", "skipped_already_confident")


@dataclass(frozen=True)
class OverrideThresholds:
    """The seed's debate_override_thresholds.json."""

    min_total: float = 1.6
    min_margin: float = 0.8
    min_target_conf: float = 0.7


class OverrideDecision(BaseModel):
    aspect: str
    pos_score: float
    neg_score: float
    outcome: str
    before: str | None = None
    after: str | None = None


class OverrideResult(BaseModel):
    tuples: list[AspectTuple]
    decisions: list[OverrideDecision]
    log: list[str]
    """correction_applied_log lines: `DEBATE_OVERRIDE aspect: before -> after (pos=.., neg=..)`."""

    def stats(self) -> dict[str, float | int | None]:
        """The seed's counters, prefixed `debate_override_`, and the already-confident rate."""
        counts = {f"debate_override_{o}": sum(d.outcome == o for d in self.decisions) for o in OUTCOMES}
        n = len(self.decisions)
        counts["debate_override_skipped_already_confident_rate"] = (
            counts["debate_override_skipped_already_confident"] / n if n else None)
        return counts


def apply_override(tuples: Iterable[AspectTuple], hints: dict[str, list[Hint]], *, text: str | None = None,
                   thresholds: OverrideThresholds = OverrideThresholds()) -> OverrideResult:
    """Apply the debate override to a copy of `tuples` (pure)."""
    out = [t.model_copy() for t in tuples]
    decisions, log = [], []
    for aspect, aspect_hints in hints.items():
        pos = _score(aspect_hints, "positive")
        neg = _score(aspect_hints, "negative")
        target = "positive" if pos > neg else "negative"
        existing = next((t for t in out if normalize_term(t.term) == normalize_term(aspect)), None)
        before = existing.polarity if existing else None
        if _lt(pos + neg, thresholds.min_total):
            outcome = "skipped_low_signal"
        elif _lt(abs(pos - neg), thresholds.min_margin):
            outcome = "skipped_conflict"
        elif existing is None:
            outcome = "applied"
            out.append(AspectTuple(term=aspect, polarity=target, confidence=thresholds.min_target_conf,
                                   span=locate(aspect, text) if text else None, source="debate_override"))
        elif not _lt(existing.confidence, thresholds.min_target_conf) and existing.polarity == target:
            outcome = "skipped_already_confident"
        else:
            outcome = "applied"
            existing.polarity, existing.source = target, "debate_override"
            existing.confidence = max(existing.confidence, thresholds.min_target_conf)
        after = target if outcome == "applied" else before
        if outcome == "applied":
            log.append(f"DEBATE_OVERRIDE {aspect}: {before or 'absent'} -> {target} (pos={pos:.2f}, neg={neg:.2f})")
        decisions.append(OverrideDecision(aspect=aspect, pos_score=round(pos, 6), neg_score=round(neg, 6),
                                          outcome=outcome, before=before, after=after))
    return OverrideResult(tuples=out, decisions=decisions, log=log)


def _score(hints: list[Hint], polarity: str) -> float:
    return sum(h.weight for h in hints if h.polarity_hint == polarity)


def _lt(a: float, b: float) -> bool:
    """a < b, ignoring float noise (0.9 + 0.7 counts as 1.6)."""
    return round(a - b, 9) < 0
