"""Map debate edits onto Stage-1 aspects: aspect hints, mapping metrics and warnings (seed 002, 4 and 9).

Each edit's `target.aspect_ref` is matched against the Stage-1 aspect terms:
`direct` (same normalized term), `fallback` (a synonym, or one term contains the other) or
`none`. Mapped edits become aspect hints `{speaker, op, weight, polarity_hint, mapping}`,
which the debate override weighs. Fail reasons per edit: `no_aspects` (Stage 1 found none),
`no_match`, `neutral_stance` (mapped, but no positive/negative signal), `fallback_used`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Literal

from pydantic import BaseModel

from debatekit.protocols.patch_debate.types import AspectTuple, ProposedEdit, normalize_term

DEFAULT_WEIGHT = 0.8  # an edit without a confidence (the seed's weight for a non pro/con stance)
FAIL_REASONS = ("no_aspects", "no_match", "neutral_stance", "fallback_used")

# Synonym groups (the seed's resources/patterns; English and Korean review vocabulary).
SYNONYMS: list[set[str]] = [
    {"service", "staff", "waiter", "waitress", "server", "servers", "서비스", "직원", "종업원", "응대", "사장님"},
    {"price", "prices", "cost", "value", "bill", "가격", "값", "가성비"},
    {"food", "dish", "dishes", "meal", "음식", "요리", "맛"},
    {"drinks", "drink", "cocktail", "cocktails", "wine", "beer", "coffee", "음료", "커피"},
    {"ambience", "ambiance", "atmosphere", "decor", "vibe", "music", "분위기", "인테리어", "음악"},
    {"battery", "battery life", "배터리"},
    {"screen", "display", "화면", "디스플레이"},
    {"sound", "speaker", "speakers", "audio", "음질", "소리", "스피커"},
    {"camera", "photos", "pictures", "카메라", "사진"},
    {"delivery", "shipping", "배송", "배달"},
    {"wait", "waiting", "wait time", "대기", "웨이팅"},
    {"portion", "portions", "양"},
]


class Hint(BaseModel):
    """One speaker's signal about one Stage-1 aspect."""

    speaker: str
    round: int | None = None
    op: str
    weight: float
    polarity_hint: str | None = None
    mapping: Literal["direct", "fallback"]


class MappingStats(BaseModel):
    """How the debate's edits mapped onto the Stage-1 aspects."""

    aspects: int = 0
    edits: int = 0
    direct: int = 0
    fallback: int = 0
    none: int = 0
    covered: int = 0
    fail_reasons: dict[str, int] = {r: 0 for r in FAIL_REASONS}

    def metrics(self) -> dict[str, float | None]:
        """The seed's metric names; rates over edits, coverage over Stage-1 aspects (None: undefined)."""
        rate = (lambda n: n / self.edits) if self.edits else (lambda n: None)
        return {
            "debate_mapping_coverage": self.covered / self.aspects if self.aspects else None,
            "debate_mapping_direct_rate": rate(self.direct),
            "debate_mapping_fallback_rate": rate(self.fallback),
            "debate_mapping_none_rate": rate(self.none),
            **{f"debate_fail_{r}_rate": rate(self.fail_reasons[r]) for r in FAIL_REASONS},
        }


@dataclass(frozen=True)
class MappingThresholds:
    """Warning levels (seed: debate_thresholds.json): coverage warns when low, the others when high."""

    coverage_warn: float = 0.6
    coverage_high: float = 0.3
    no_match_warn: float = 0.2
    no_match_high: float = 0.4
    neutral_warn: float = 0.4
    neutral_high: float = 0.7


def map_ref(ref: str, terms: Iterable[str]) -> tuple[str | None, str]:
    """The Stage-1 term `ref` refers to and how: (term, direct|fallback) or (None, none)."""
    terms = list(terms)
    key = normalize_term(ref)
    if not key:
        return None, "none"
    for term in terms:
        if normalize_term(term) == key:
            return term, "direct"
    group = next((g for g in SYNONYMS if key in {normalize_term(s) for s in g}), set())
    group_keys = {normalize_term(s) for s in group}
    for term in terms:
        other = normalize_term(term)
        if other in group_keys or (min(len(key), len(other)) >= 2 and (key in other or other in key)):
            return term, "fallback"
    return None, "none"


def build_hints(turns: Iterable[tuple[str, int | None, ProposedEdit]], stage1: list[AspectTuple]
                ) -> tuple[dict[str, list[Hint]], MappingStats]:
    """Aspect hints per Stage-1 term from the speakers' edits, and the mapping statistics."""
    terms = [t.term for t in stage1]
    polarity_of = {t.term: t.polarity for t in stage1}
    hints: dict[str, list[Hint]] = {}
    stats = MappingStats(aspects=len(terms))
    for speaker, round_no, edit in turns:
        stats.edits += 1
        term, kind = map_ref(edit.target.aspect_ref, terms)
        if not terms:
            stats.none += 1
            stats.fail_reasons["no_aspects"] += 1
            continue
        if term is None:
            stats.none += 1
            stats.fail_reasons["no_match"] += 1
            continue
        setattr(stats, kind, getattr(stats, kind) + 1)
        if kind == "fallback":
            stats.fail_reasons["fallback_used"] += 1
        polarity = _polarity_hint(edit, polarity_of[term])
        if polarity not in ("positive", "negative"):
            stats.fail_reasons["neutral_stance"] += 1
        weight = DEFAULT_WEIGHT if edit.confidence is None else edit.confidence
        hints.setdefault(term, []).append(Hint(speaker=speaker, round=round_no, op=edit.op, weight=weight,
                                               polarity_hint=polarity, mapping=kind))
    stats.covered = len(hints)
    return hints, stats


def _polarity_hint(edit: ProposedEdit, current: str) -> str | None:
    if edit.op == "set_polarity":
        value = (edit.value or edit.target.polarity or "").lower()
        return value or None
    if edit.op == "confirm_tuple":
        return edit.target.polarity or current
    return None


def merge(stats: Iterable[MappingStats]) -> MappingStats:
    """Summed counts of several items' statistics (run-level metrics are computed from these)."""
    total = MappingStats()
    for s in stats:
        for key in ("aspects", "edits", "direct", "fallback", "none", "covered"):
            setattr(total, key, getattr(total, key) + getattr(s, key))
        total.fail_reasons = {r: total.fail_reasons[r] + s.fail_reasons.get(r, 0) for r in FAIL_REASONS}
    return total


def warnings(stats: MappingStats, thresholds: MappingThresholds = MappingThresholds()) -> list[str]:
    """Warning lines for metrics past their thresholds (`high` is the stronger level)."""
    m = stats.metrics()
    out = []
    checks = [("debate_mapping_coverage", thresholds.coverage_warn, thresholds.coverage_high, "below"),
              ("debate_fail_no_match_rate", thresholds.no_match_warn, thresholds.no_match_high, "above"),
              ("debate_fail_neutral_stance_rate", thresholds.neutral_warn, thresholds.neutral_high, "above")]
    for key, warn, high, side in checks:
        value = m[key]
        if value is None:
            continue
        past = (lambda limit: value < limit) if side == "below" else (lambda limit: value > limit)
        level = "high" if past(high) else "warn" if past(warn) else None
        if level:
            limit = high if level == "high" else warn
            out.append(f"{level}: {key}={value:.2f} {side} {limit}")
    return out
