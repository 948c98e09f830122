"""Pure checks of cross_critique: answer change, evidence gaps, guards, convergence, escalation."""

from types import SimpleNamespace as NS

import pytest

from debatekit.protocols.cross_critique import checks as checks
from debatekit.protocols.cross_critique.checks import Open


def claim(id, *evidence):
    return NS(id=id, statement=f"claim {id}", evidence=list(evidence))


def open_(critic, target, severity, issue="logic_gap", fix="fix it", id="K1", claim="C1"):
    return Open(critic, target, NS(id=id, target_claim_id=claim, issue_type=issue, severity=severity,
                                   description="d", suggested_fix=fix))


@pytest.mark.parametrize("before, after, expected", [
    ("the kaum keeps the sawah", "the kaum keeps the sawah", 0.0),
    ("The kaum keeps the sawah.", "the KAUM keeps the sawah", 0.0),  # case and punctuation ignored
    ("a b c d e f g h i j", "a b c d e f g h i k", 0.1),
    ("a b c d", "w x y z", 1.0),
    (None, "a", None),
    ("", "", 0.0),
])
def test_answer_change(before, after, expected):
    assert checks.answer_change(before, after) == (expected if expected is None else pytest.approx(expected))


@pytest.mark.parametrize("cited, kind", [
    ("P1", None), ("[p1]", None), (" P2 ", None), ("R-MIN-1", None),
    ("P9", "unknown_id"), ("R-BAL-1", "rule_not_applicable"), ("KUHPerdata 830", "unknown_id"),
])
def test_evidence_gaps(cited, kind):
    gaps = checks.evidence_gaps("NLA", 1, [claim("C1", cited)], {"P1", "P2", "R-MIN-1"}, {"R-MIN-1", "R-BAL-1"})
    assert [g["kind"] for g in gaps] == ([kind] if kind else [])


def test_claim_without_evidence_is_a_gap_and_unsupported():
    claims = [claim("C1"), claim("C2", "P1"), claim("C3", "P7")]
    assert [g["kind"] for g in checks.evidence_gaps("ALA", 2, claims, {"P1"})] == ["no_evidence", "unknown_id"]
    assert checks.unsupported_share(claims, {"P1"}) == pytest.approx(2 / 3)
    assert checks.unsupported_share([], {"P1"}) == 0.0


@pytest.mark.parametrize("n, fixes, round, expected", [
    (3, ["a", "b", "c"], 1, []),
    (2, ["a", "b"], 1, ["too_few_critiques: 2 < 3"]),
    (2, ["a", "b"], 2, []),  # the minimum applies to round 1 only
    (3, ["a", "", " "], 1, ["missing_suggested_fix: K2, K3"]),
    (0, [], 1, ["too_few_critiques: 0 < 3"]),
])
def test_critique_problems(n, fixes, round, expected):
    critiques = [NS(id=f"K{i + 1}", suggested_fix=fixes[i]) for i in range(n)]
    assert checks.critique_problems(critiques, round, 3) == expected


MINOR = open_("NLA", "ALA", "MINOR")
MAJOR = open_("NLA", "ALA", "MAJOR")
MAJOR_CONFLICT = open_("NLA", "ALA", "MAJOR", "conflict")
CRITICAL = open_("NLA", "ALA", "CRITICAL", "logic_gap")
STABLE, MOVED = {"NLA": 0.05, "ALA": 0.1}, {"NLA": 0.5, "ALA": 0.1}


@pytest.mark.parametrize("standing, changes, mode, criteria, converged", [
    ([MINOR, MINOR, MAJOR], MOVED, "any", (True, True, False), True),
    ([MAJOR, MAJOR], MOVED, "any", (False, True, False), True),
    ([MAJOR_CONFLICT, MAJOR], MOVED, "any", (False, False, False), False),
    ([MAJOR_CONFLICT, MAJOR], STABLE, "any", (False, False, True), True),
    ([CRITICAL], STABLE, "any", (False, True, False), True),  # stability does not count with a CRITICAL
    ([CRITICAL, MAJOR_CONFLICT], STABLE, "any", (False, False, False), False),
    ([MINOR], {"NLA": 0.05, "ALA": None}, "any", (True, True, False), True),  # unknown change: not stable
    ([MINOR], {}, "all", (True, True, False), False),
    ([MINOR], STABLE, "all", (True, True, True), True),
])
def test_convergence(standing, changes, mode, criteria, converged):
    state = checks.convergence(standing, changes, mode=mode)
    assert (state["few_severe"], state["no_domain_conflict"], state["stable"]) == criteria
    assert state["converged"] is converged


def triggers(standing, changes=MOVED, unsupported=None, converged=True, ended="converged"):
    found = checks.escalation(standing, changes, unsupported or {}, converged=converged, ended=ended, last_round=3)
    return [t["trigger"] for t in found]


@pytest.mark.parametrize("standing, kwargs, expected", [
    ([MINOR, MAJOR], {}, []),
    ([open_("ALA", "NLA", "CRITICAL", "evidence_gap")], {}, ["critical_evidence_validity"]),
    ([open_("ALA", "NLA", "CRITICAL", "domain_mismatch")], {}, ["critical_norm_conflict"]),
    ([CRITICAL], {}, []),  # a CRITICAL logic gap alone is not an S0.7 trigger
    ([MAJOR_CONFLICT, open_("ALA", "NLA", "MAJOR", "conflict")], {"changes": STABLE}, ["hard_contradiction"]),
    ([MAJOR_CONFLICT, open_("ALA", "NLA", "MAJOR", "conflict")], {}, []),  # one side moved
    ([MAJOR_CONFLICT], {"changes": STABLE}, []),  # one-way: no contradiction between the two
    ([], {"unsupported": {"NLA": 0.31, "ALA": 0.3}}, ["unsupported_claims"]),
    ([], {"converged": False, "ended": "max_rounds"}, ["no_convergence"]),
])
def test_escalation(standing, kwargs, expected):
    assert triggers(standing, **kwargs) == expected


def test_no_convergence_detail_names_the_round_and_the_cause():
    (found,) = checks.escalation([], {}, {}, converged=False, ended="max_rounds", last_round=3)
    assert found["detail"] == "no convergence after R3"
    (found,) = checks.escalation([], {}, {}, converged=False, ended="timeout", last_round=2)
    assert found["detail"] == "no convergence (timeout in R2)"


def test_summary_sorts_final_claims_into_agreed_disputed_unsupported():
    answers = {"NLA": NS(claims=[claim("C1", "P1"), claim("C2", "P1"), claim("C3")]), "ALA": None}
    standing = [open_("ALA", "NLA", "MAJOR", "conflict", claim="C2"), open_("ALA", "NLA", "MINOR", claim="C1")]
    summary = checks.summarize("q?", answers, standing, {"P1"}, [])
    assert [c["claim_id"] for c in summary["agreed_claims"]] == ["C1"]
    assert [(c["claim_id"], c["by"], c["severity"]) for c in summary["disputed_claims"]] == [("C2", "ALA", "MAJOR")]
    assert [c["claim_id"] for c in summary["unsupported_claims"]] == ["C3"]
    assert [c["claim_id"] for c in summary["conflicts"]] == ["C2"] and summary["query"] == "q?"
