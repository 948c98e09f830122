"""Deterministic contradiction detection over agent reports (arbitration, seed 001, S1.2).

No model call happens here. Two findings of two different reports are about the same metric
when their names match after normalization and their units are convertible; a pair of
same-metric findings is a contradiction of one of four kinds (one per pair, first that applies):

- `value`:  values differ by more than `threshold` (5%) relative, |a - b| / max(|a|, |b|),
  after unit conversion (USD millions vs USD billions, hours vs days), same citation source;
- `source`: the same, with different citation sources;
- `interpretation`: values agree but one reads the metric as improving/increasing and the
  other as declining/decreasing;
- `confidence`: values and interpretation agree, confidences differ by >= `confidence_gap` (0.3).

Severity (documented rule, thresholds in `Rules`): a value or source conflict is `high` when
the relative difference is >= 25%, `medium` when >= 10%, `low` below; an interpretation
conflict is `medium`; a confidence gap is `low`.

Metric-name normalization: case, spacing, punctuation and underscores; parentheses that only
name the unit ("(%)", "(USD m)", "(days)") are dropped; common phrasings are aliased
("q/q", "quarter on quarter" -> qoq; "y/y", "annual" -> yoy; "labor" -> labour; "30yr",
"30-year" -> 30y; "annual recurring revenue" -> arr; ...; extend with `aliases`); plurals are
stemmed. Two names match when they share a content word, the shorter's content words are
all in the longer (or half of all content words are shared), and nothing sets them apart:
a different measure kind (growth / share / margin), a different period basis (qoq vs yoy),
a population qualifier on one side only (youth, female, ...), or different numbers (15y vs
30y). Within a pair of reports each finding is matched at most once, best match first.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from itertools import combinations
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Severity = Literal["high", "medium", "low"]
Kind = Literal["value", "source", "interpretation", "confidence"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Citation(Strict):
    source: str = Field(description="The cited source (a document's source name).")
    date: str = Field(description="The source's date, YYYY-MM-DD.")


class Finding(Strict):
    """One finding of an agent report (seed: metric, value, citation, confidence)."""

    metric: str
    value: float
    unit: str = ""
    period: str = ""
    citation: Citation
    confidence: float = Field(ge=0.0, le=1.0)
    interpretation: str = ""


class Report(Strict):
    agent: str
    findings: list[Finding]


class Contradiction(BaseModel):
    """The seed's Contradiction, plus its kind, the relative difference and the findings."""

    id: str
    metric_name: str
    agent1_name: str
    agent1_value: float
    agent1_citation: str
    agent1_confidence: float
    agent2_name: str
    agent2_value: float
    """In agent 1's unit (converted when the units differ)."""
    agent2_citation: str
    agent2_confidence: float
    severity: Severity
    kind: Kind
    unit: str
    relative_difference: float
    agent1_finding: Finding
    agent2_finding: Finding


@dataclass
class Rules:
    """Detection thresholds (protocol parameters)."""

    threshold: float = 0.05
    confidence_gap: float = 0.3
    high: float = 0.25
    medium: float = 0.10
    aliases: dict[str, str] = field(default_factory=dict)


# --- units --------------------------------------------------------------------------------

SCALES = {"thousand": 1e3, "thousands": 1e3, "k": 1e3, "million": 1e6, "millions": 1e6, "m": 1e6, "mn": 1e6,
          "mio": 1e6, "billion": 1e9, "billions": 1e9, "bn": 1e9, "b": 1e9, "trillion": 1e12, "trillions": 1e12}
TIME = {"minute": 1 / 60, "min": 1 / 60, "hour": 1.0, "hr": 1.0, "h": 1.0, "day": 24.0, "week": 168.0}
UNIT_ALIASES = {"$": "usd", "us$": "usd", "dollar": "usd", "percent": "%", "pct": "%", "per cent": "%",
                "kboe/d": "k boe/d", "mboe/d": "m boe/d", "kb/d": "k b/d"}
UNIT_WORDS = {"%", "usd", "eur", "gbp", "aud", "jpy", "unit", "units", "pp", "bps"} | set(SCALES)


def parse_unit(unit: str) -> tuple[str, float]:
    """(base unit, scale): "USD millions" -> ("usd", 1e6); "days" -> ("hour", 24.0); "%" -> ("%", 1)."""
    text = unit.strip().lower()
    text = UNIT_ALIASES.get(text, text)
    scale, base = 1.0, []
    for word in text.split():
        word = UNIT_ALIASES.get(word, word)
        if word in SCALES and len(text.split()) > 1:
            scale *= SCALES[word]
        else:
            base.append(_stem(word))
    name = " ".join(base)
    if name in TIME:
        return "hour", scale * TIME[name]
    return name, scale


def convert(value: float, from_unit: str, to_unit: str) -> float | None:
    """`value` in `from_unit` expressed in `to_unit`; None when they are not convertible."""
    (a, sa), (b, sb) = parse_unit(from_unit), parse_unit(to_unit)
    return value * sa / sb if a == b else None


def relative_difference(a: float, b: float) -> float:
    """|a - b| / max(|a|, |b|) (0 when both are 0)."""
    top = max(abs(a), abs(b))
    return 0.0 if top == 0 else abs(a - b) / top


# --- metric names -------------------------------------------------------------------------

ALIASES = [  # (regex, replacement), applied in order to the lower-cased name
    (r"annual recurring revenue", "arr"), (r"net revenue retention", "nrr"),
    (r"non[- ]?performing loans?", "npl"), (r"fixed[- ]rate mortgage|fixed mortgage rate|fixed mortgage", "frm"),
    (r"(\d+)\s*-?\s*(?:yr|year)s?\b", r"\1y"), (r"\bfour\b", "4"), (r"\bthree\b", "3"), (r"\btwo\b", "2"),
    (r"q/q|\bqoq\b|quarter[- ]on[- ]quarter|quarter[- ]over[- ]quarter|quarterly change|\bquarterly\b", " qoq "),
    (r"y/y|\byoy\b|year[- ]on[- ]year|year[- ]over[- ]year|\bannual(ly)?\b", " yoy "),
    (r"m/m|\bmom\b|month[- ]on[- ]month", " mom "), (r"w/w|\bwow\b|week[- ]on[- ]week", " wow "),
    (r"year[- ]to[- ]date", " ytd "), (r"\blabor\b", "labour"), (r"r\s*&\s*d", "rnd"), (r"\bchips?\b", "semiconductor"),
    (r"\bbev\b", "ev"), (r"\bspend(ing)?\b|\bexpenditures?\b", "expense"),
]
STOP = {"of", "the", "and", "to", "for", "in", "on", "as", "at", "by", "vs", "with", "a", "an", "from", "over"}
WEAK = {"rate", "ratio", "total", "net", "real", "level", "value", "number", "overall", "amount", "change",
        "average", "figure"}
KINDS = {"growth", "share", "margin"}
PERIODS = {"qoq", "yoy", "mom", "wow", "ytd"}
EXCLUSIVE = {"youth", "female", "male", "women", "men", "core"}


def _stem(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


@dataclass(frozen=True)
class MetricKey:
    """A metric name, normalized: its words in order and the sets the matcher compares."""

    words: tuple[str, ...]
    display: tuple[str, ...]
    content: frozenset[str]
    kinds: frozenset[str]
    periods: frozenset[str]
    exclusive: frozenset[str]
    numbers: frozenset[str]

    @property
    def canonical(self) -> str:
        return "_".join(self.display)


def metric_key(name: str, unit: str = "", aliases: dict[str, str] | None = None) -> MetricKey:
    """Normalize a metric name (see the module docstring); `unit` helps drop "(USD m)"-style parts."""
    text = name.lower().replace("_", " ")
    unit_words = set(re.findall(r"[a-z%$]+", unit.lower())) | UNIT_WORDS

    def keep_paren(match: re.Match) -> str:
        inner = set(re.findall(r"[a-z%$]+", match.group(1))) - {"/"}
        return " " if inner and inner <= unit_words | {"d"} else f" {match.group(1)} "

    text = re.sub(r"\(([^)]*)\)", keep_paren, text)
    for pattern, repl in [*ALIASES, *((re.escape(k.lower()), v.lower()) for k, v in (aliases or {}).items())]:
        text = re.sub(pattern, repl, text)
    display = tuple(w for w in re.findall(r"[a-z0-9]+", text) if w not in STOP)
    words = tuple(_stem(w) for w in display)
    numbers = frozenset(w for w in words if any(c.isdigit() for c in w))
    kinds = frozenset(w for w in words if w in KINDS)
    periods = frozenset(w for w in words if w in PERIODS)
    exclusive = frozenset(w for w in words if w in EXCLUSIVE)
    content = frozenset(words) - WEAK - KINDS - PERIODS
    return MetricKey(words, display, content, kinds, periods, exclusive, numbers)


def metric_match(a: MetricKey, b: MetricKey) -> float | None:
    """How well two normalized names match (higher is better), or None when they are different metrics."""
    if a.kinds != b.kinds or a.exclusive != b.exclusive:
        return None
    if a.periods and b.periods and a.periods != b.periods:
        return None
    if a.numbers and b.numbers and a.numbers != b.numbers:
        return None
    common = a.content & b.content
    if not common:
        return None
    union = a.content | b.content
    shorter = min(a.content, b.content, key=len)
    jaccard = len(common) / len(union)
    if not shorter <= common and jaccard < 0.5:
        return None
    words = set(a.words) | set(b.words)
    return jaccard + 0.01 * len(set(a.words) & set(b.words)) / len(words)


# --- detection ----------------------------------------------------------------------------

POSITIVE = {"improving", "increasing", "rising", "growing", "up", "accelerating"}
NEGATIVE = {"declining", "decreasing", "falling", "worsening", "down", "shrinking", "slowing"}


def interpretations_conflict(a: str, b: str) -> bool:
    a, b = a.strip().lower(), b.strip().lower()
    return (a in POSITIVE and b in NEGATIVE) or (a in NEGATIVE and b in POSITIVE)


def citation_text(finding: Finding) -> str:
    return f"{finding.citation.source} ({finding.citation.date})"


def severity(kind: Kind, rel: float, rules: Rules) -> Severity:
    if kind in ("value", "source"):
        return "high" if rel >= rules.high else "medium" if rel >= rules.medium else "low"
    return "medium" if kind == "interpretation" else "low"


def matched_findings(r1: Report, r2: Report, rules: Rules) -> list[tuple[Finding, Finding, MetricKey, MetricKey]]:
    """Same-metric finding pairs of two reports: convertible units, matching names, one-to-one."""
    keys1 = [metric_key(f.metric, f.unit, rules.aliases) for f in r1.findings]
    keys2 = [metric_key(f.metric, f.unit, rules.aliases) for f in r2.findings]
    candidates = []
    for i, f1 in enumerate(r1.findings):
        for j, f2 in enumerate(r2.findings):
            if convert(1.0, f2.unit, f1.unit) is None:
                continue
            score = metric_match(keys1[i], keys2[j])
            if score is not None:
                candidates.append((-score, i, j))
    used1, used2, pairs = set(), set(), []
    for _, i, j in sorted(candidates):
        if i not in used1 and j not in used2:
            used1.add(i), used2.add(j)
            pairs.append((i, j))
    return [(r1.findings[i], r2.findings[j], keys1[i], keys2[j]) for i, j in sorted(pairs)]


def classify(f1: Finding, f2: Finding, rules: Rules) -> tuple[Kind, float] | None:
    """The contradiction kind of two same-metric findings and their relative difference, or None."""
    v2 = convert(f2.value, f2.unit, f1.unit)
    rel = relative_difference(f1.value, v2)
    if rel > rules.threshold:
        same_source = f1.citation.source.strip().lower() == f2.citation.source.strip().lower()
        return ("value" if same_source else "source"), rel
    if interpretations_conflict(f1.interpretation, f2.interpretation):
        return "interpretation", rel
    if abs(f1.confidence - f2.confidence) >= rules.confidence_gap - 1e-9:
        return "confidence", rel
    return None


def detect(reports: list[Report], rules: Rules | None = None) -> list[Contradiction]:
    """All contradictions between the reports, pair by pair in report order (agent 1 = earlier report)."""
    rules = rules or Rules()
    found: list[Contradiction] = []
    for r1, r2 in combinations(reports, 2):
        if r1.agent == r2.agent:
            continue
        for f1, f2, k1, k2 in matched_findings(r1, r2, rules):
            verdict = classify(f1, f2, rules)
            if verdict is None:
                continue
            kind, rel = verdict
            name = min((k1, k2), key=lambda k: (len(k.words), k.words)).canonical
            found.append(Contradiction(
                id=f"c{len(found) + 1}", metric_name=name,
                agent1_name=r1.agent, agent1_value=f1.value, agent1_citation=citation_text(f1),
                agent1_confidence=f1.confidence,
                agent2_name=r2.agent, agent2_value=_round(convert(f2.value, f2.unit, f1.unit)),
                agent2_citation=citation_text(f2), agent2_confidence=f2.confidence,
                severity=severity(kind, rel, rules), kind=kind, unit=f1.unit,
                relative_difference=round(rel, 4), agent1_finding=f1, agent2_finding=f2))
    return found


def _round(value: float) -> float:
    return float(f"{value:.10g}") if math.isfinite(value) else value
