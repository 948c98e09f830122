"""Debate override: each of the four outcomes, thresholds at their edges."""

import pytest

from debatekit.protocols.patch_debate.mapping import Hint
from debatekit.protocols.patch_debate.override import OverrideThresholds, apply_override
from debatekit.protocols.patch_debate.types import AspectTuple


def hints(*signs):
    return [Hint(speaker=f"s{i}", op="set_polarity", weight=w, polarity_hint=p, mapping="direct")
            for i, (p, w) in enumerate(signs)]


def tup(polarity, conf):
    return AspectTuple(term="service", polarity=polarity, confidence=conf, span=(4, 11))


# (name, tuples, hints, outcome, polarity after, confidence after)
CASES = [
    ("low signal", [tup("positive", 0.5)], hints(("negative", 0.8), ("negative", 0.7)),
     "skipped_low_signal", "positive", 0.5),
    ("conflict", [tup("positive", 0.5)], hints(("negative", 1.0), ("negative", 0.7), ("positive", 1.0)),
     "skipped_conflict", "positive", 0.5),
    ("already confident", [tup("negative", 0.7)], hints(("negative", 0.8), ("negative", 0.8)),
     "skipped_already_confident", "negative", 0.7),
    ("applied: flips a confident tuple", [tup("positive", 0.95)], hints(("negative", 0.9), ("negative", 0.7)),
     "applied", "negative", 0.95),
    ("applied: same polarity, low confidence raised", [tup("negative", 0.4)], hints(("negative", 0.8), ("negative", 0.8)),
     "applied", "negative", 0.7),
    ("applied: missing aspect is added", [], hints(("positive", 1.0), ("positive", 0.6)), "applied", "positive", 0.7),
    ("neutral hints carry no signal", [tup("positive", 0.5)], hints(("neutral", 1.0), ("neutral", 1.0), (None, 1.0)),
     "skipped_low_signal", "positive", 0.5),
]


@pytest.mark.parametrize("name, before, aspect_hints, outcome, polarity, conf", CASES, ids=[c[0] for c in CASES])
def test_outcomes(name, before, aspect_hints, outcome, polarity, conf):
    result = apply_override(before, {"service": aspect_hints}, text="The service was slow.")
    (decision,) = result.decisions
    assert decision.outcome == outcome
    (after,) = result.tuples
    assert (after.polarity, after.confidence) == (polarity, conf)
    assert result.stats()[f"debate_override_{outcome}"] == 1
    assert bool(result.log) == (outcome == "applied")
    if outcome == "applied":
        assert result.log[0].startswith("DEBATE_OVERRIDE service:") and after.source == "debate_override"
        assert after.span == (4, 11)


def test_counters_over_several_aspects_and_configurable_thresholds():
    tuples = [AspectTuple(term="food", polarity="positive", confidence=0.9), tup("positive", 0.5)]
    h = {"food": hints(("positive", 0.9), ("positive", 0.9)), "service": hints(("negative", 0.9))}
    stats = apply_override(tuples, h).stats()
    assert stats == {"debate_override_applied": 0, "debate_override_skipped_low_signal": 1,
                     "debate_override_skipped_conflict": 0, "debate_override_skipped_already_confident": 1,
                     "debate_override_skipped_already_confident_rate": 0.5}
    loose = apply_override(tuples, h, thresholds=OverrideThresholds(min_total=0.5, min_margin=0.5))
    assert loose.stats()["debate_override_applied"] == 1
    assert [t.polarity for t in loose.tuples] == ["positive", "negative"]
    assert tuples[1].polarity == "positive"  # input untouched


def test_no_hints_no_decisions():
    result = apply_override([tup("positive", 0.5)], {})
    assert result.decisions == [] and result.stats()["debate_override_skipped_already_confident_rate"] is None
