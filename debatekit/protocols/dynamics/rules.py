"""Pure rules of the debate-dynamics protocol (seed 003): convergence, circuit breaker, escalation.

No model calls here; `dynamics.py` feeds these functions with structured positions.

- Convergence (S3.2): for every pair of agents, four agreement points (same recommendation,
  premises, risks, timing); score = agreeing points / all points * 100.
- Circuit breaker (S3.3): total time, iterations, loop (same positions hash in consecutive
  rounds), refinements, rounds; the first that fires names the reason.
- Escalation (S3.6): emit, council (3 members) or human, with every reason that applied.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from itertools import combinations
from typing import Iterable, Literal

from debatekit._base.answer_kinds import LETTERS

POINTS = ("recommendation", "premises", "risks", "timing")
STOPWORDS = frozenset(
    "a an and are as at be by for from has have in is it its of on or that the this to was we will with "
    "our not no if than then so be can should would more less over under into within".split())


@dataclass(frozen=True)
class Stance:
    """The comparable part of one agent's position."""

    agent: str
    recommendation: str | None
    premises: frozenset[str]
    risks: frozenset[str]
    timing: str | None
    confidence: float = 0.0


def option_letter(value: str | None, options: list[str]) -> str | None:
    """Normalize a recommendation to an option letter: `B`, `b)`, `Option B: ...` or the option's text."""
    if not value or not options:
        return None
    letters = LETTERS[: len(options)]
    text = value.strip()
    match = re.match(r"^(?:option\s+)?\(?([A-Za-z])\)?(?:$|[\s).:,-])", text, re.IGNORECASE)
    if match and match.group(1).upper() in letters:
        return match.group(1).upper()
    lowered = [o.lower() for o in options]
    close = difflib.get_close_matches(text.lower(), lowered, n=1, cutoff=0.6)
    if close:
        return letters[lowered.index(close[0])]
    contained = [i for i, o in enumerate(lowered) if len(text) >= 8 and (o in text.lower() or text.lower() in o)]
    return letters[contained[0]] if len(contained) == 1 else None


def content_words(texts: Iterable[str]) -> frozenset[str]:
    """Lower-case content words of some texts (stop words and 1-letter words dropped, plural s cut)."""
    words = set()
    for text in texts:
        for w in re.findall(r"[a-z0-9$%.-]+", (text or "").lower()):
            w = w.strip(".-")
            if len(w) > 1 and w not in STOPWORDS:
                words.add(w[:-1] if w.endswith("s") and len(w) > 3 else w)
    return frozenset(words)


def jaccard(a: frozenset, b: frozenset) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


@dataclass
class Convergence:
    """Convergence of one round: the score and, per point, the share of agreeing pairs."""

    score: float | None
    points: dict[str, float] = field(default_factory=dict)
    agents: list[str] = field(default_factory=list)
    conflicts: list[list[str]] = field(default_factory=list)

    @property
    def consensus(self) -> list[str]:
        return [p for p, share in self.points.items() if share == 1.0]

    @property
    def divergent(self) -> list[str]:
        return [p for p, share in self.points.items() if share < 1.0]


def agreement(a: Stance, b: Stance, premise_overlap: float, risk_overlap: float) -> dict[str, bool]:
    """Which of the four points two stances agree on."""
    return {
        "recommendation": a.recommendation is not None and a.recommendation == b.recommendation,
        "premises": bool(a.premises and b.premises) and jaccard(a.premises, b.premises) >= premise_overlap,
        "risks": bool(a.risks and b.risks) and jaccard(a.risks, b.risks) >= risk_overlap,
        "timing": a.timing is not None and a.timing == b.timing,
    }


def convergence(stances: list[Stance], premise_overlap: float = 0.25, risk_overlap: float = 0.5) -> Convergence:
    """Score = agreeing points / all points * 100 over every pair; None with fewer than 2 stances."""
    pairs = list(combinations(stances, 2))
    if not pairs:
        return Convergence(None, agents=[s.agent for s in stances])
    agreed = Counter()
    conflicts = []
    for a, b in pairs:
        points = agreement(a, b, premise_overlap, risk_overlap)
        agreed.update(p for p, ok in points.items() if ok)
        if not points["recommendation"]:
            conflicts.append([a.agent, b.agent])
    shares = {p: agreed[p] / len(pairs) for p in POINTS}
    score = 100.0 * sum(agreed.values()) / (len(POINTS) * len(pairs))
    return Convergence(round(score, 1), shares, [s.agent for s in stances], conflicts)


def stance_hash(stances: list[Stance]) -> str:
    """Hash of the normalized positions (recommendation, risks, timing per agent) for loop detection."""
    data = sorted((s.agent, s.recommendation, sorted(s.risks), s.timing) for s in stances)
    return hashlib.sha256(json.dumps(data).encode()).hexdigest()[:16]


@dataclass
class BreakerLimits:
    """The seed's circuit-breaker limits (S3.3)."""

    max_rounds: int = 3
    max_iterations: int = 5
    max_refinements: int = 2
    total_timeout: float = 300.0
    loop_repeats: int = 2


BreakerReason = Literal["total_timeout", "max_iterations", "loop", "max_refinements", "max_rounds"]


def breaker(*, rounds: int, iterations: int, refinements: int, elapsed: float, hashes: list[str],
            limits: BreakerLimits) -> BreakerReason | None:
    """The circuit-breaker trigger that fires after a round without convergence, if any.

    Args:
        rounds: rounds completed (positions, rebuttals, refinements).
        iterations: round attempts, including void ones (fewer than 2 usable positions) that
            were run again.
        refinements: refinement rounds completed (round 3 onward).
        elapsed: seconds since the debate began.
        hashes: the positions hash of each completed round, in order.
    """
    if elapsed >= limits.total_timeout:
        return "total_timeout"
    if iterations >= limits.max_iterations:
        return "max_iterations"
    tail = hashes[-limits.loop_repeats:]
    if len(hashes) >= limits.loop_repeats >= 2 and len(set(tail)) == 1:
        return "loop"
    if refinements >= limits.max_refinements:
        return "max_refinements"
    if rounds >= limits.max_rounds:
        return "max_rounds"
    return None


@dataclass
class Thresholds:
    """The seed's escalation thresholds (S3.6), in percent, and the value-at-risk limit."""

    convergence: float = 70.0
    emit: float = 70.0
    human: float = 50.0
    council: float = 60.0
    value_at_risk: float = 100_000.0


@dataclass
class Escalation:
    to: Literal["none", "council", "human"]
    reasons: list[str]


def escalate(*, confidence: float, convergence: float | None, critical_divergence: bool = False,
             value_at_risk: float | None = None, reversible: bool | None = None, breaker: str | None = None,
             out_of_scope: bool = False, catastrophic: bool = False,
             t: Thresholds = Thresholds()) -> Escalation:
    """Where a synthesis goes (S3.6): human triggers first, then council triggers, else emit."""
    human = [why for why, fired in (
        (f"confidence {confidence:g} < {t.human:g}", confidence < t.human),
        ("circuit breaker: max_iterations", breaker == "max_iterations"),
        ("out of scope", out_of_scope),
        ("catastrophic risk", catastrophic)) if fired]
    if human:
        return Escalation("human", human)
    council = [why for why, fired in (
        (f"convergence {convergence:g} < {t.convergence:g}" if convergence is not None else "",
         convergence is not None and convergence < t.convergence),
        (f"confidence {confidence:g} < {t.emit:g}", confidence < t.emit),
        ("critical divergence", critical_divergence),
        (f"value at risk {value_at_risk:g} > {t.value_at_risk:g}" if value_at_risk is not None else "",
         value_at_risk is not None and value_at_risk > t.value_at_risk),
        ("irreversible decision", reversible is False),
        ("impasse (loop detected)", breaker == "loop")) if fired]
    return Escalation("council", council) if council else Escalation("none", [])


def council_verdict(votes: list[tuple[str | None, float]], size: int) -> tuple[str | None, float]:
    """The council's recommendation (majority) and confidence: the majority's confidence summed
    over all `size` seats, so absent or dissenting members lower it (3 x 80 agreeing = 80)."""
    present = [(rec, conf) for rec, conf in votes if rec is not None]
    if not present or size < 1:
        return None, 0.0
    top = Counter(rec for rec, _ in present).most_common(1)[0][0]
    return top, round(sum(conf for rec, conf in present if rec == top) / size, 1)


def fallback_synthesis(stances: list[Stance], score: float | None) -> tuple[str | None, float]:
    """A synthesis from the current state, without a model: the majority recommendation and the
    lower of the agents' mean confidence and the convergence."""
    if not stances:
        return None, 0.0
    top = Counter(s.recommendation for s in stances if s.recommendation).most_common(1)
    mean = sum(s.confidence for s in stances) / len(stances)
    return (top[0][0] if top else None), round(min(mean, score if score is not None else mean), 1)
