"""Pure rules of the dynamics protocol: table-driven."""

import pytest

from debatekit.protocols.dynamics.rules import (
    BreakerLimits, Stance, Thresholds, breaker, content_words, convergence, council_verdict, escalate,
    fallback_synthesis, option_letter, stance_hash)

OPTIONS = ["Sign the 36-month renewal", "Take the 12-month bridge and migrate", "Migrate before March"]


@pytest.mark.parametrize("value, letter", [
    ("B", "B"), ("b", "B"), ("B)", "B"), ("Option C: migrate", "C"), ("(A)", "A"),
    ("Take the 12-month bridge and migrate", "B"), ("take the 12-month bridge", "B"),
    ("D", None), ("", None), (None, None), ("something unrelated entirely", None),
])
def test_option_letter_normalizes_recommendations(value, letter):
    assert option_letter(value, OPTIONS) == letter


def stance(agent, rec="A", premises=("contract ends in March",), risks=("cost",), timing="next_quarter", conf=80):
    return Stance(agent, rec, content_words(premises), frozenset(risks), timing, conf)


@pytest.mark.parametrize("b, score, divergent", [
    (stance("y"), 100.0, []),
    (stance("y", rec="B"), 75.0, ["recommendation"]),
    (stance("y", rec="B", timing="later"), 50.0, ["recommendation", "timing"]),
    (stance("y", rec="B", timing="later", risks=("legal",)), 25.0, ["recommendation", "risks", "timing"]),
    (stance("y", rec="B", timing="later", risks=("legal",), premises=("hiring freeze",)), 0.0, list(
        ("recommendation", "premises", "risks", "timing"))),
    (stance("y", premises=("the contract ends in March 2026",)), 100.0, []),  # paraphrase still overlaps
    (stance("y", risks=("cost", "legal")), 100.0, []),  # jaccard 0.5 >= 0.5
    (stance("y", risks=("cost", "legal", "people")), 75.0, ["risks"]),
])
def test_convergence_counts_the_four_points_of_a_pair(b, score, divergent):
    result = convergence([stance("x"), b])
    assert result.score == score and result.divergent == divergent


def test_convergence_over_three_agents_counts_every_pair():
    result = convergence([stance("x"), stance("y"), stance("z", rec="B")])
    # 3 pairs x 4 points = 12; recommendation agrees in 1 pair of 3 -> 10 of 12
    assert result.score == pytest.approx(83.3) and result.points["recommendation"] == pytest.approx(1 / 3)
    assert result.conflicts == [["x", "z"], ["y", "z"]] and result.consensus == ["premises", "risks", "timing"]


def test_empty_premises_or_risks_are_no_agreement():
    empty = convergence([stance("x", premises=(), risks=()), stance("y", premises=(), risks=())])
    assert empty.score == 50.0 and empty.divergent == ["premises", "risks"]


def test_convergence_needs_two_positions_and_a_recommendation():
    assert convergence([stance("x")]).score is None
    assert convergence([stance("x", rec=None), stance("y", rec=None)]).points["recommendation"] == 0.0


def test_positions_hash_ignores_premise_wording_and_agent_order():
    a = [stance("x"), stance("y", rec="B")]
    b = [stance("y", rec="B", premises=("other words",)), stance("x", conf=10)]
    assert stance_hash(a) == stance_hash(b)
    assert stance_hash(a) != stance_hash([stance("x"), stance("y", rec="C")])


LIMITS = BreakerLimits()  # the seed's: 3 rounds, 5 iterations, 2 refinements, 300 s, loop = 2 equal hashes


@pytest.mark.parametrize("state, reason", [
    (dict(rounds=1, iterations=1, refinements=0, elapsed=10, hashes=["a"]), None),
    (dict(rounds=2, iterations=2, refinements=0, elapsed=10, hashes=["a", "b"]), None),
    (dict(rounds=3, iterations=3, refinements=1, elapsed=10, hashes=["a", "b", "c"]), "max_rounds"),
    (dict(rounds=2, iterations=5, refinements=0, elapsed=10, hashes=["a", "b"]), "max_iterations"),
    (dict(rounds=2, iterations=2, refinements=2, elapsed=10, hashes=["a", "b"]), "max_refinements"),
    (dict(rounds=1, iterations=1, refinements=0, elapsed=300, hashes=["a"]), "total_timeout"),
    (dict(rounds=2, iterations=2, refinements=0, elapsed=10, hashes=["a", "a"]), "loop"),
    (dict(rounds=3, iterations=3, refinements=1, elapsed=10, hashes=["a", "b", "a"]), "max_rounds"),  # not consecutive
    (dict(rounds=3, iterations=5, refinements=2, elapsed=301, hashes=["a", "a", "a"]), "total_timeout"),  # first wins
    (dict(rounds=3, iterations=3, refinements=2, elapsed=10, hashes=["a", "a", "a"]), "loop"),
])
def test_circuit_breaker_triggers(state, reason):
    assert breaker(**state, limits=LIMITS) == reason


def test_loop_repeats_is_configurable():
    limits = BreakerLimits(max_rounds=9, loop_repeats=3)
    assert breaker(rounds=2, iterations=2, refinements=0, elapsed=0, hashes=["a", "a"], limits=limits) is None
    assert breaker(rounds=3, iterations=3, refinements=1, elapsed=0, hashes=["a", "a", "a"], limits=limits) == "loop"


CALM = dict(confidence=80, convergence=100.0, value_at_risk=50_000, reversible=True)


@pytest.mark.parametrize("change, to, reason", [
    ({}, "none", None),
    ({"convergence": None}, "none", None),  # single agent: no convergence to judge
    ({"convergence": 50.0}, "council", "convergence 50 < 70"),
    ({"confidence": 65}, "council", "confidence 65 < 70"),
    ({"critical_divergence": True}, "council", "critical divergence"),
    ({"value_at_risk": 100_001}, "council", "value at risk 100001 > 100000"),
    ({"value_at_risk": 100_000}, "none", None),
    ({"reversible": False}, "council", "irreversible decision"),
    ({"breaker": "loop", "convergence": 50.0}, "council", "impasse (loop detected)"),
    ({"confidence": 49}, "human", "confidence 49 < 50"),
    ({"confidence": 50}, "council", "confidence 50 < 70"),
    ({"breaker": "max_iterations"}, "human", "circuit breaker: max_iterations"),
    ({"out_of_scope": True}, "human", "out of scope"),
    ({"catastrophic": True, "reversible": False}, "human", "catastrophic risk"),
])
def test_escalation_paths(change, to, reason):
    result = escalate(**{**CALM, **change})
    assert result.to == to
    assert (reason in result.reasons) if reason else result.reasons == []


def test_escalation_thresholds_are_configuration():
    t = Thresholds(emit=90, human=20, value_at_risk=1e9)
    assert escalate(**{**CALM, "confidence": 85}, t=t).to == "council"
    assert escalate(**{**CALM, "confidence": 30, "value_at_risk": 5e8}, t=t).reasons == ["confidence 30 < 90"]


@pytest.mark.parametrize("votes, verdict", [
    ([("A", 80), ("A", 80), ("A", 80)], ("A", 80.0)),
    ([("A", 90), ("A", 90), ("B", 90)], ("A", 60.0)),
    ([("A", 80), ("A", 80), ("B", 90)], ("A", 53.3)),
    ([("A", 90), (None, 0), (None, 0)], ("A", 30.0)),
    ([(None, 0), (None, 0), (None, 0)], (None, 0.0)),
])
def test_council_verdict_counts_all_seats(votes, verdict):
    assert council_verdict(votes, 3) == verdict


def test_fallback_synthesis_takes_the_majority_and_the_lower_confidence():
    assert fallback_synthesis([stance("x", conf=80), stance("y", conf=60), stance("z", rec="B")], 50.0) == ("A", 50.0)
    assert fallback_synthesis([stance("x", conf=40)], None) == ("A", 40.0)
    assert fallback_synthesis([], None) == (None, 0.0)
