"""Mapping of debate edits onto Stage-1 aspects: direct/fallback/none, fail reasons, warnings."""

import pytest

from debatekit.protocols.patch_debate.mapping import MappingThresholds, build_hints, map_ref, merge, warnings
from debatekit.protocols.patch_debate.types import AspectTuple, ProposedEdit


@pytest.mark.parametrize("ref, term, kind", [
    ("pasta", "pasta", "direct"), ("The Pasta", "pasta", "direct"), ("waiter", "service", "fallback"),
    ("waitress", "service", "fallback"), ("battery life", "battery", "fallback"), ("dessert", None, "none"), ("", None, "none"),
])
def test_map_ref(ref, term, kind):
    assert map_ref(ref, ["pasta", "service", "battery"]) == (term, kind)


def test_map_ref_korean_synonym():
    assert map_ref("직원", ["파스타", "서비스"]) == ("서비스", "fallback")


def E(op, ref, value="", polarity=None, confidence=None):
    return ProposedEdit.model_validate({"op": op, "target": {"aspect_ref": ref, "polarity": polarity},
                                        "value": value, "confidence": confidence})


def test_build_hints_counts_every_edit():
    stage1 = [AspectTuple(term="pasta", polarity="positive"), AspectTuple(term="service", polarity="positive"),
              AspectTuple(term="price", polarity="neutral")]
    turns = [("epm", 1, E("set_polarity", "service", "negative", confidence=0.9)),
             ("tan", 1, E("drop_tuple", "the pasta")),
             ("cj", 1, E("confirm_tuple", "staff")),           # fallback; confirms the current polarity
             ("cj", 1, E("set_polarity", "dessert", "negative"))]
    hints, stats = build_hints(turns, stage1)
    assert [(h.speaker, h.polarity_hint, h.weight, h.mapping) for h in hints["service"]] == [
        ("epm", "negative", 0.9, "direct"), ("cj", "positive", 0.8, "fallback")]
    assert [h.op for h in hints["pasta"]] == ["drop_tuple"] and "price" not in hints
    assert (stats.edits, stats.direct, stats.fallback, stats.none, stats.covered) == (4, 2, 1, 1, 2)
    assert stats.fail_reasons == {"no_aspects": 0, "no_match": 1, "neutral_stance": 1, "fallback_used": 1}
    m = stats.metrics()
    assert m["debate_mapping_coverage"] == pytest.approx(2 / 3) and m["debate_mapping_direct_rate"] == 0.5
    assert m["debate_mapping_none_rate"] == 0.25 and m["debate_fail_no_match_rate"] == 0.25


def test_no_aspects_and_no_edits():
    hints, stats = build_hints([("epm", 1, E("drop_tuple", "x"))], [])
    assert hints == {} and stats.fail_reasons["no_aspects"] == 1 and stats.metrics()["debate_mapping_coverage"] is None
    _, empty = build_hints([], [AspectTuple(term="a", polarity="positive")])
    assert empty.metrics()["debate_mapping_direct_rate"] is None and empty.metrics()["debate_mapping_coverage"] == 0


def test_warnings_have_two_levels_and_configurable_thresholds():
    stage1 = [AspectTuple(term=t, polarity="positive") for t in ("a1", "b2", "c3", "d4")]
    _, stats = build_hints([("epm", 1, E("set_polarity", "a1", "negative")), ("tan", 1, E("drop_tuple", "zz"))], stage1)
    # coverage 0.25 (< 0.3: high), no_match 0.5 (> 0.4: high), neutral 0.0
    assert warnings(stats) == ["high: debate_mapping_coverage=0.25 below 0.3",
                               "high: debate_fail_no_match_rate=0.50 above 0.4"]
    relaxed = MappingThresholds(coverage_warn=0.3, coverage_high=0.1, no_match_warn=0.45, no_match_high=0.9)
    assert warnings(stats, relaxed) == ["warn: debate_mapping_coverage=0.25 below 0.3",
                                        "warn: debate_fail_no_match_rate=0.50 above 0.45"]
    assert warnings(stats, MappingThresholds(coverage_warn=0.2, coverage_high=0.1, no_match_warn=0.6,
                                             no_match_high=0.9)) == []


def test_merge_sums_counts_so_run_rates_weigh_items_by_edits():
    one = [AspectTuple(term="a1", polarity="positive")]
    _, s1 = build_hints([("epm", 1, E("drop_tuple", "a1"))], one)
    _, s2 = build_hints([("epm", 1, E("drop_tuple", "zz")), ("tan", 1, E("drop_tuple", "yy")),
                         ("cj", 1, E("drop_tuple", "a1"))], one)
    total = merge([s1, s2])
    assert (total.edits, total.direct, total.none, total.aspects, total.covered) == (4, 2, 2, 2, 2)
    assert total.metrics()["debate_fail_no_match_rate"] == 0.5 and total.fail_reasons["neutral_stance"] == 2
