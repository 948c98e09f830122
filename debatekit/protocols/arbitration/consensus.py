"""Arbitration verdicts -> checked resolutions -> consensus and adjusted reports (seed 001, S1.3-S1.4).

Pure logic, no model call:

- `check`: the "no hallucination" rule. A recommended value must be one of the two findings'
  values (in either unit) and a recommended citation must name one of their citations; else the
  verdict is kept for the record but its action becomes `flag_for_review`. A failed call, an
  action the arbitrator itself set to `flag_for_review`, and an action that contradicts the
  resolution (agent1_correct with use_agent2) are flagged too.
- `build_consensus`: contradictions that share a finding form a group (a 3-way conflict is one
  group of three pairwise contradictions). Each accepted verdict votes with its confidence as
  weight: the winner gets support, the loser opposition; both_valid supports both; neither_valid
  opposes both. Agents with more support than opposition are kept; of kept agents whose findings
  still conflict, only the highest net support survives (a tie is a split). The group's outcome is
  accepted when the verdicts that agree with it carry a strict majority of the weight; otherwise
  it is a split and every contradiction of the group is flagged for human review. Several kept
  agents linked by both_valid are all kept, with context.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any, Literal

from pydantic import BaseModel

from debatekit.protocols.arbitration.contradictions import Contradiction, Finding, Report, citation_text, convert

Resolution = Literal["agent1_correct", "agent2_correct", "both_valid", "neither_valid"]
Action = Literal["use_agent1", "use_agent2", "use_both", "flag_for_review"]
ACTION_OF = {"agent1_correct": "use_agent1", "agent2_correct": "use_agent2", "both_valid": "use_both",
             "neither_valid": "flag_for_review"}


class Arbitration(BaseModel):
    """One contradiction's verdict after the checks; `action` is final, `arbitrator_action` as given."""

    contradiction_id: str
    metric_name: str
    agent1_name: str
    agent2_name: str
    kind: str
    severity: str
    resolution: Resolution | None = None
    explanation: str = ""
    recommended_value: float | None = None
    recommended_citation: str | None = None
    confidence: float = 0.0
    arbitrator_action: Action | None = None
    action: Action = "flag_for_review"
    flagged: bool = True
    flag_reason: str | None = None
    """arbitrator_failed | hallucinated_value | hallucinated_citation | inconsistent_action |
    arbitrator_flagged | split | no_valid_value | no_verdict; None when resolved."""


class ConsensusResult(BaseModel):
    """The seed's ConsensusResult, plus the per-group outcomes."""

    resolved_contradictions: int
    flagged_for_review: int
    consensus_narrative: str
    adjusted_reports: list[dict]
    groups: list[dict] = []


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)


def _norm(text: str) -> str:
    return " ".join("".join(c if c.isalnum() else " " for c in text.lower()).split())


def allowed_values(c: Contradiction) -> list[float]:
    """The values a verdict may recommend: both findings' values, as reported and converted."""
    f1, f2 = c.agent1_finding, c.agent2_finding
    return [f1.value, f2.value, c.agent2_value, convert(f1.value, f1.unit, f2.unit) or f1.value]


def check(c: Contradiction, verdict: dict | None, error: str | None = None) -> Arbitration:
    """Apply the checks to an arbitrator verdict (None: the call failed)."""
    base = Arbitration(contradiction_id=c.id, metric_name=c.metric_name, agent1_name=c.agent1_name,
                       agent2_name=c.agent2_name, kind=c.kind, severity=c.severity)
    if verdict is None:
        return base.model_copy(update={"flag_reason": "arbitrator_failed", "explanation": error or ""})
    a = base.model_copy(update={k: verdict.get(k) for k in (
        "resolution", "explanation", "recommended_value", "recommended_citation") if k in verdict})
    a.confidence = min(1.0, max(0.0, float(verdict.get("confidence") or 0.0)))
    a.arbitrator_action = verdict.get("action")
    value, cite = a.recommended_value, (a.recommended_citation or "").strip()
    sources = [_norm(f.citation.source) for f in (c.agent1_finding, c.agent2_finding)]
    citations = [_norm(citation_text(f)) for f in (c.agent1_finding, c.agent2_finding)]
    if value is not None and not any(_close(value, v) for v in allowed_values(c)):
        reason = "hallucinated_value"
    elif cite and cite.lower() not in ("null", "none") and not (
            _norm(cite) in citations or any(s and s in _norm(cite) for s in sources)):
        reason = "hallucinated_citation"
    elif a.arbitrator_action == "flag_for_review":
        reason = "arbitrator_flagged"
    elif a.resolution is not None and a.arbitrator_action != ACTION_OF[a.resolution]:
        reason = "inconsistent_action"
    else:
        reason = None
    a.flag_reason = reason
    a.flagged = reason is not None
    a.action = "flag_for_review" if a.flagged else a.arbitrator_action
    return a


def groups_of(contradictions: list[Contradiction]) -> list[list[int]]:
    """Indices of contradictions grouped by shared findings (union-find over (agent, finding))."""
    parent: dict[Any, Any] = {}

    def find(x):
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for c in contradictions:
        k1 = (c.agent1_name, c.agent1_finding.model_dump_json())
        k2 = (c.agent2_name, c.agent2_finding.model_dump_json())
        parent[find(k1)] = find(k2)
    by_root: dict[Any, list[int]] = defaultdict(list)
    for i, c in enumerate(contradictions):
        by_root[find((c.agent1_name, c.agent1_finding.model_dump_json()))].append(i)
    return list(by_root.values())


def decide(group: list[Contradiction], verdicts: list[Arbitration]) -> tuple[str, set[str]]:
    """A group's outcome (accepted | both_valid | split | no_valid_value | no_verdict) and the agents kept."""
    support: dict[str, float] = defaultdict(float)
    oppose: dict[str, float] = defaultdict(float)
    agents = {a for c in group for a in (c.agent1_name, c.agent2_name)}
    votes = [(c, v) for c, v in zip(group, verdicts) if v.resolution and v.flag_reason not in (
        "arbitrator_failed", "hallucinated_value", "hallucinated_citation", "inconsistent_action")]
    for c, v in votes:
        w = max(v.confidence, 1e-3)
        win, lose = {"agent1_correct": ([c.agent1_name], [c.agent2_name]),
                     "agent2_correct": ([c.agent2_name], [c.agent1_name]),
                     "both_valid": ([c.agent1_name, c.agent2_name], []),
                     "neither_valid": ([], [c.agent1_name, c.agent2_name])}[v.resolution]
        for a in win:
            support[a] += w
        for a in lose:
            oppose[a] += w
    if not votes:
        return "no_verdict", set()
    kept = {a for a in agents if support[a] > oppose[a]}
    if any(support[a] == oppose[a] and support[a] > 0 for a in agents):
        return "split", set()
    both = {frozenset((c.agent1_name, c.agent2_name)) for c, v in votes if v.resolution == "both_valid"}
    conflict = {frozenset((c.agent1_name, c.agent2_name)) for c in group} - both
    if any(frozenset((a, b)) in conflict for a in kept for b in kept if a < b):
        net = {a: support[a] - oppose[a] for a in kept}
        top = max(net.values())
        kept = {a for a in kept if net[a] == top}
        if len(kept) > 1:
            return "split", set()
    if not kept:
        return "no_valid_value", set()
    agree = total = 0.0
    for c, v in votes:
        w = max(v.confidence, 1e-3)
        total += w
        in1, in2 = c.agent1_name in kept, c.agent2_name in kept
        agree += w * {"agent1_correct": in1 and not in2, "agent2_correct": in2 and not in1,
                      "both_valid": in1 and in2, "neither_valid": not in1 and not in2}[v.resolution]
    if agree <= total / 2:
        return "split", set()
    return ("both_valid" if len(kept) > 1 else "accepted"), kept


def build_consensus(reports: list[Report], contradictions: list[Contradiction],
                    verdicts: list[Arbitration]) -> ConsensusResult:
    """The seed's consensus: counts, a narrative, and the reports with the outcomes applied.

    Flags the contradictions of split or no-valid-value groups in `verdicts` (in place).
    """
    adjusted = [r.model_dump(mode="json") for r in reports]
    index = {(r["agent"], Finding(**f).model_dump_json()): f for r in adjusted for f in r["findings"]}
    lines, groups = [], []
    for members in groups_of(contradictions):
        group = [contradictions[i] for i in members]
        outcome, kept = decide(group, [verdicts[i] for i in members])
        if outcome in ("split", "no_valid_value", "no_verdict"):
            for i in members:
                if not verdicts[i].flagged or verdicts[i].flag_reason == "arbitrator_flagged":
                    verdicts[i].flagged, verdicts[i].flag_reason = True, outcome
                    verdicts[i].action = "flag_for_review"
        findings = _group_findings(group)
        _adjust(index, findings, outcome, kept)
        lines.append(_narrative(group[0].metric_name, findings, outcome, kept))
        groups.append({"metric_name": group[0].metric_name, "contradictions": [c.id for c in group],
                       "outcome": outcome, "kept": sorted(kept)})
    flagged = sum(v.flagged for v in verdicts)
    narrative = " ".join(lines) if lines else "No contradictions detected; the reports agree."
    return ConsensusResult(resolved_contradictions=len(verdicts) - flagged, flagged_for_review=flagged,
                           consensus_narrative=narrative, adjusted_reports=adjusted, groups=groups)


def _group_findings(group: list[Contradiction]) -> dict[str, Finding]:
    found: dict[str, Finding] = {}
    for c in group:
        found.setdefault(c.agent1_name, c.agent1_finding)
        found.setdefault(c.agent2_name, c.agent2_finding)
    return found


def _describe(agent: str, f: Finding) -> str:
    return f"{agent} {f.value:g} {f.unit} for {f.period} [{f.citation.source}, {f.citation.date}]".replace("  ", " ")


def _adjust(index: dict, findings: dict[str, Finding], outcome: str, kept: set[str]) -> None:
    winner = next(iter(kept)) if outcome == "accepted" else None
    for agent, f in findings.items():
        target = index[(agent, f.model_dump_json())]
        original = {k: target[k] for k in ("value", "unit", "period", "citation", "confidence", "interpretation")}
        if outcome in ("split", "no_valid_value", "no_verdict"):
            target["debate"] = {"status": "flagged_for_review", "outcome": outcome}
        elif agent in kept:
            others = [_describe(a, g) for a, g in findings.items() if a in kept and a != agent]
            target["debate"] = {"status": "accepted" if outcome == "accepted" else "kept_with_context",
                                "context": ("also valid: " + "; ".join(others)) if others else ""}
        elif winner is not None:
            w = findings[winner]
            target.update({"value": w.value, "unit": w.unit, "period": w.period,
                           "citation": w.citation.model_dump(), "confidence": w.confidence,
                           "interpretation": w.interpretation})
            target["debate"] = {"status": "replaced", "by": winner, "original": original}
        else:
            target["debate"] = {"status": "rejected", "kept": sorted(kept)}


def _narrative(metric: str, findings: dict[str, Finding], outcome: str, kept: set[str]) -> str:
    if outcome == "accepted":
        (winner,) = kept
        others = ", ".join(a for a in findings if a != winner)
        return f"{metric}: {_describe(winner, findings[winner])} accepted over {others}."
    if outcome == "both_valid":
        shown = "; ".join(_describe(a, f) for a, f in findings.items() if a in kept)
        dropped = [a for a in findings if a not in kept]
        tail = f" ({', '.join(dropped)} rejected)" if dropped else ""
        return f"{metric}: both valid in context: {shown}{tail}."
    listed = "; ".join(_describe(a, f) for a, f in findings.items())
    why = {"split": "the arbitration was split", "no_valid_value": "no reported value was found valid",
           "no_verdict": "no usable verdict (failed or rejected arbitration)"}[outcome]
    return f"{metric}: flagged for human review, {why}: {listed}."
