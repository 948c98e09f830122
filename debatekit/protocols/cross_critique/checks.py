"""Pure checks of the cross-critique protocol (seed 000): evidence, guards, convergence, escalation.

Everything here works on plain values and duck-typed claims / critiques (objects with the
seed's fields), so it is tested table-driven without a model.

Answer change (S0.6 "< 15%") is `1 - difflib.SequenceMatcher(None, a, b).ratio()` over the
lower-cased word tokens of the `answer` field of two consecutive rounds: an order-aware
token similarity, 0.0 for an unchanged answer, 1.0 for a completely new one.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any, Iterable

SEVERE = ("CRITICAL", "MAJOR")
NORM_TYPES = ("conflict", "domain_mismatch")  # critiques about a conflict of norms / domains
EVIDENCE_TYPES = ("evidence_gap",)


@dataclass
class Open:
    """A critique standing in the debate: who raised it, on whom, and the critique itself."""

    critic: str
    target: str
    critique: Any  # has id, target_claim_id, issue_type, severity, suggested_fix


def tokens(text: str) -> list[str]:
    return re.findall(r"\w+", (text or "").lower())


def answer_change(before: str | None, after: str | None) -> float | None:
    """Share of the answer that changed between two rounds (word-level difflib), None if unknown."""
    if before is None or after is None:
        return None
    a, b = tokens(before), tokens(after)
    if not a and not b:
        return 0.0
    return round(1.0 - difflib.SequenceMatcher(None, a, b, autojunk=False).ratio(), 4)


# --- evidence -----------------------------------------------------------------------------

def normalize_id(cited: str) -> str:
    """`[p1]`, ` P1 `, `"P1".` -> `P1`: brackets, quotes and spaces dropped, ids compared upper-cased."""
    return re.sub(r"^[\[\(\s'\"]+|[\]\)\s'\".,;:]+$", "", str(cited)).upper()


def evidence_gaps(agent: str, round: int, claims: Iterable[Any], valid: set[str],
                  known_rules: set[str] = frozenset()) -> list[dict]:
    """Citations the engine cannot resolve: an id not in the item's context or fired rules.

    `valid` holds the passage ids and the ids of the rules that fired on the item; a rule id
    that exists in the rule set but did not fire is reported as `rule_not_applicable`.
    """
    valid_n = {normalize_id(v) for v in valid}
    rules_n = {normalize_id(r) for r in known_rules}
    gaps = []
    for claim in claims:
        if not claim.evidence:
            gaps.append({"agent": agent, "round": round, "claim_id": claim.id, "cited": None,
                         "kind": "no_evidence"})
        for cited in claim.evidence:
            key = normalize_id(cited)
            if key not in valid_n:
                gaps.append({"agent": agent, "round": round, "claim_id": claim.id, "cited": cited,
                             "kind": "rule_not_applicable" if key in rules_n else "unknown_id"})
    return gaps


def supported(claim: Any, valid: set[str]) -> bool:
    """A claim is supported when at least one cited id resolves to the item's evidence."""
    valid_n = {normalize_id(v) for v in valid}
    return any(normalize_id(c) in valid_n for c in claim.evidence)


def unsupported_share(claims: list[Any], valid: set[str]) -> float:
    """Share of claims without resolvable evidence (0.0 for no claims)."""
    return sum(not supported(c, valid) for c in claims) / len(claims) if claims else 0.0


# --- guards (S0.8) ------------------------------------------------------------------------

def critique_problems(critiques: list[Any], round: int, min_critiques: int) -> list[str]:
    """Guard breaches of one critique set: too few critiques in round 1, fixes missing."""
    problems = []
    if round == 1 and len(critiques) < min_critiques:
        problems.append(f"too_few_critiques: {len(critiques)} < {min_critiques}")
    missing = [c.id for c in critiques if not (c.suggested_fix or "").strip()]
    if missing:
        problems.append(f"missing_suggested_fix: {', '.join(missing)}")
    return problems


# --- convergence (S0.6) -------------------------------------------------------------------

def convergence(open_critiques: list[Open], changes: dict[str, float | None], *, max_major: int = 1,
                max_change: float = 0.15, mode: str = "any") -> dict:
    """The three S0.6 criteria on the standing critiques and the last answer changes.

    - `few_severe`: no CRITICAL and at most `max_major` MAJOR critiques;
    - `no_domain_conflict`: no CRITICAL/MAJOR critique of type conflict or domain_mismatch;
    - `stable`: every agent's answer changed less than `max_change` and no CRITICAL is open.

    The seed ends the debate when one criterion holds (`mode="any"`); `mode="all"` needs all.
    """
    severities = [o.critique.severity for o in open_critiques]
    critical, major = severities.count("CRITICAL"), severities.count("MAJOR")
    conflicts = sum(o.critique.issue_type in NORM_TYPES and o.critique.severity in SEVERE for o in open_critiques)
    known = [c for c in changes.values() if c is not None]
    largest = max(known) if known else None
    criteria = {
        "few_severe": critical == 0 and major <= max_major,
        "no_domain_conflict": conflicts == 0,
        "stable": bool(changes) and len(known) == len(changes) and largest < max_change and critical == 0,
    }
    combine = any if mode == "any" else all
    return {**criteria, "converged": combine(criteria.values()), "critical": critical, "major": major,
            "domain_conflicts": conflicts, "max_change": largest}


# --- escalation (S0.7) --------------------------------------------------------------------

def escalation(open_critiques: list[Open], changes: dict[str, float | None], unsupported: dict[str, float], *,
               converged: bool, ended: str, last_round: int, max_unsupported: float = 0.3,
               max_change: float = 0.15) -> list[dict]:
    """The S0.7 triggers that hold at the end of a debate, each `{trigger, detail}`.

    A hard contradiction is mutual: each agent of a pair holds a standing MAJOR/CRITICAL
    conflict (or domain_mismatch) critique on the other and neither changed its answer in the
    last revision (change < `max_change`).

    Args:
        open_critiques: the critiques still standing (the last critique round).
        changes: each agent's answer change in the last revision.
        unsupported: each agent's share of final claims without resolvable evidence.
        converged: whether the last convergence check held.
        ended: why the rounds ended (converged, max_rounds, timeout, budget).
        last_round: the round the debate ended in.
    """
    found = []
    for o in open_critiques:
        c = o.critique
        if c.severity != "CRITICAL":
            continue
        if c.issue_type in EVIDENCE_TYPES:
            found.append({"trigger": "critical_evidence_validity",
                          "detail": f"{o.critic} on {o.target} {c.target_claim_id}: {c.id}"})
        elif c.issue_type in NORM_TYPES:
            found.append({"trigger": "critical_norm_conflict",
                          "detail": f"{o.critic} on {o.target} {c.target_claim_id}: {c.id}"})
    conflicting = {(o.critic, o.target): o.critique.id for o in open_critiques
                   if o.critique.issue_type in NORM_TYPES and o.critique.severity in SEVERE}
    for (critic, target), cid in conflicting.items():
        held = [changes.get(a) for a in (critic, target)]
        if critic < target and (target, critic) in conflicting and all(h is not None and h < max_change for h in held):
            found.append({"trigger": "hard_contradiction",
                          "detail": f"{critic} and {target} hold conflicting answers ({cid} and "
                                    f"{conflicting[(target, critic)]}) and neither revised"})
    for agent, share in unsupported.items():
        if share > max_unsupported:
            found.append({"trigger": "unsupported_claims",
                          "detail": f"{agent}: {share:.0%} of claims without evidence (> {max_unsupported:.0%})"})
    if not converged:
        what = f"after R{last_round}" if ended == "max_rounds" else f"({ended} in R{last_round})"
        found.append({"trigger": "no_convergence", "detail": f"no convergence {what}"})
    return found


# --- debate summary (S0.9) ----------------------------------------------------------------

def summarize(query: str, answers: dict[str, Any], open_critiques: list[Open], valid: set[str],
              gaps: list[dict]) -> dict:
    """`debate_summary.json`: conflicts, agreed claims and disputed claims of the final answers.

    A final claim is disputed when a standing CRITICAL/MAJOR critique targets it, agreed when
    no such critique targets it and its evidence resolves; the rest are unsupported.
    """
    severe = {(o.target, o.critique.target_claim_id): o for o in open_critiques if o.critique.severity in SEVERE}
    agreed, disputed, unsupported_claims = [], [], []
    for agent, output in answers.items():
        for claim in (output.claims if output else []):
            row = {"agent": agent, "claim_id": claim.id, "statement": claim.statement,
                   "evidence": list(claim.evidence)}
            if (agent, claim.id) in severe:
                o = severe[(agent, claim.id)]
                disputed.append({**row, "by": o.critic, "severity": o.critique.severity,
                                 "issue_type": o.critique.issue_type, "critique": o.critique.description})
            elif supported(claim, valid):
                agreed.append(row)
            else:
                unsupported_claims.append(row)
    conflicts = [{"critic": o.critic, "target": o.target, "claim_id": o.critique.target_claim_id,
                  "issue_type": o.critique.issue_type, "severity": o.critique.severity,
                  "description": o.critique.description, "suggested_fix": o.critique.suggested_fix}
                 for o in open_critiques if o.critique.issue_type in NORM_TYPES or o.critique.severity == "CRITICAL"]
    return {"query": query, "conflicts": conflicts, "agreed_claims": agreed, "disputed_claims": disputed,
            "unsupported_claims": unsupported_claims, "evidence_gaps": gaps}
