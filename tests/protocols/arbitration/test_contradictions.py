"""Contradiction detection, checks and consensus (pure logic, table-driven)."""

import json
from pathlib import Path

import pytest

from debatekit.protocols.arbitration.scoring import TruthEntry, score_resolutions
from debatekit.protocols.arbitration.consensus import build_consensus, check
from debatekit.protocols.arbitration.contradictions import (Report, Rules, convert, detect, metric_key, metric_match,
                                                 parse_unit)

DATASET = Path(__file__).resolve().parents[3] / "datasets" / "metric_reports.jsonl"


def finding(metric="Unemployment rate", value=0.10, unit="%", source="GCC-STAT", date="2024-05-01",
            confidence=0.9, interpretation="stable", period="2024-Q1"):
    return {"metric": metric, "value": value, "unit": unit, "period": period,
            "citation": {"source": source, "date": date}, "confidence": confidence,
            "interpretation": interpretation}


def reports(*per_agent):
    return [Report(agent=f"agent{i + 1}", findings=fs) for i, fs in enumerate(per_agent)]


@pytest.mark.parametrize("a, b, same", [
    ("Operating Margin", "operating margin (%)", True),             # case, unit in parentheses
    ("net income", "Net  Income (USD m)", True),                    # spacing, unit words
    ("qatar_unemployment_rate", "Qatar unemployment rate", True),   # underscores
    ("Labour force participation rate", "labor force participation (%)", True),
    ("GDP growth (q/q)", "Real GDP growth, quarter on quarter", True),
    ("GDP growth (q/q)", "GDP growth (y/y)", False),                # period basis differs
    ("Employment growth (q/q)", "GDP growth (q/q)", False),         # nothing in common but "growth"
    ("Unemployment rate", "Youth unemployment rate (16-24)", False),
    ("30-year fixed mortgage rate", "30yr FRM (%)", True),
    ("15-year fixed mortgage rate", "30yr FRM (%)", False),         # different numbers
    ("Online share of sales", "Online sales growth", False),       # different measure kind
    ("Annual Recurring Revenue", "ARR (USD m)", True),
    ("R&D expenses", "R&D spend", True),
    ("Time to hire (median)", "time-to-hire", True),
    ("Trade balance", "Exports", False),
])
def test_metric_names_match_after_normalization(a, b, same):
    assert (metric_match(metric_key(a), metric_key(b)) is not None) is same


@pytest.mark.parametrize("value, src, dst, expected", [
    (2.84, "USD billions", "USD millions", 2840.0),
    (2840, "USD millions", "USD billions", 2.84),
    (2, "days", "hours", 48.0),
    (9.6, "million passengers", "passengers", 9.6e6),
    (312, "kboe/d", "kboe/d", 312.0),
    (5, "%", "USD", None),
])
def test_unit_conversion(value, src, dst, expected):
    got = convert(value, src, dst)
    assert got == pytest.approx(expected) if expected is not None else got is None


def test_parse_unit_keeps_plain_units():
    assert parse_unit("%") == ("%", 1.0) and parse_unit("USD millions") == ("usd", 1e6)


@pytest.mark.parametrize("f1, f2, kind, severity", [
    # same metric, values > 5% apart, same source: a value conflict; 20% -> medium (the seed's example)
    (finding(value=0.10), finding(metric="unemployment rate (%)", value=0.125, confidence=0.85), "value", "medium"),
    (finding(value=0.10), finding(value=0.12, source="World Bank"), "source", "medium"),
    (finding(value=10), finding(value=14, source="World Bank"), "source", "high"),       # 28.6% -> high
    (finding(value=10), finding(value=10.8), "value", "low"),                             # 7.4% -> low
    (finding(value=6.1), finding(value=6.2), None, None),                                 # near miss: 1.6%
    (finding(value=100), finding(value=95.5), None, None),                                # 4.5%: not > 5%
    (finding(metric="R&D expenses", value=2840, unit="USD millions"),
     finding(metric="R&D spend", value=2.84, unit="USD billions"), None, None),          # equal after units
    (finding(metric="Revenue", value=2840, unit="USD millions"),
     finding(metric="Revenue", value=3.2, unit="USD billions"), "value", "medium"),      # 11.25% after units
    (finding(interpretation="improving"), finding(interpretation="declining"), "interpretation", "medium"),
    (finding(interpretation="increasing"), finding(interpretation="stable"), None, None),
    (finding(confidence=0.9), finding(confidence=0.5), "confidence", "low"),
    (finding(confidence=0.9), finding(confidence=0.75), None, None),
    (finding(metric="Unemployment rate"), finding(metric="Youth unemployment rate", value=0.39), None, None),
])
def test_detection_kinds_and_severity(f1, f2, kind, severity):
    found = detect(reports([f1], [f2]))
    if kind is None:
        assert found == []
    else:
        (c,) = found
        assert (c.kind, c.severity) == (kind, severity)
        assert c.agent1_name == "agent1" and c.agent2_name == "agent2"


def test_contradiction_has_the_seed_fields_and_converted_values():
    (c,) = detect(reports([finding(metric="Net income", value=812, unit="USD millions")],
                          [finding(metric="net income (USD bn)", value=0.744, unit="USD billions",
                                   source="Reuters")]))
    assert c.metric_name == "net_income" and c.agent1_value == 812 and c.agent2_value == pytest.approx(744)
    assert c.agent1_citation == "GCC-STAT (2024-05-01)" and c.agent2_confidence == 0.9
    assert c.relative_difference == pytest.approx(0.0837, abs=1e-4) and c.unit == "USD millions"


def test_three_agents_give_one_contradiction_per_pair():
    found = detect(reports([finding(value=5.6)], [finding(value=5.0)], [finding(value=6.3)]))
    assert [(c.agent1_name, c.agent2_name) for c in found] == [
        ("agent1", "agent2"), ("agent1", "agent3"), ("agent2", "agent3")]


def test_thresholds_are_configurable():
    pair = reports([finding(value=100)], [finding(value=97)])
    assert detect(pair) == [] and len(detect(pair, Rules(threshold=0.02))) == 1


def test_detection_matches_the_dataset_truth_exactly():
    for line in DATASET.read_text().splitlines():
        item = json.loads(line)
        found = detect([Report(**r) for r in item["reports"]])
        got = sorted((c.agent1_name, c.agent2_name, c.kind) for c in found)
        assert got == sorted((*t["agents"], t["kind"]) for t in item["truth"]), item["id"]


# --- checks and consensus -----------------------------------------------------------------

def verdict(resolution, value=None, citation=None, confidence=0.9, action=None):
    action = action or {"agent1_correct": "use_agent1", "agent2_correct": "use_agent2",
                        "both_valid": "use_both", "neither_valid": "flag_for_review"}[resolution]
    return {"resolution": resolution, "explanation": "because", "recommended_value": value,
            "recommended_citation": citation, "confidence": confidence, "action": action}


SIMPLE = reports([finding(value=0.10)], [finding(value=0.12, source="World Bank", confidence=0.85)])


@pytest.mark.parametrize("reply, flagged, reason", [
    (verdict("agent1_correct", 0.10, "GCC-STAT (2024-05-01)"), False, None),
    (verdict("agent1_correct", 0.10, "GCC-STAT"), False, None),
    (verdict("agent2_correct", 0.12, "[World Bank, 2024-05-01]"), False, None),
    (verdict("both_valid"), False, None),
    (verdict("agent1_correct", 0.11, "GCC-STAT"), True, "hallucinated_value"),       # not a report's value
    (verdict("agent1_correct", 0.10, "IMF Article IV"), True, "hallucinated_citation"),
    (verdict("agent1_correct", 0.10, action="use_agent2"), True, "inconsistent_action"),
    (verdict("neither_valid"), True, "arbitrator_flagged"),
    (None, True, "arbitrator_failed"),
])
def test_checks_reject_values_and_citations_not_in_the_reports(reply, flagged, reason):
    (c,) = detect(SIMPLE)
    a = check(c, reply)
    assert (a.flagged, a.flag_reason) == (flagged, reason)
    assert (a.action == "flag_for_review") is flagged


THREE = reports([finding(value=6.8, confidence=0.88)], [finding(value=11.2, confidence=0.7)],
                [finding(value=4.1, confidence=0.55, source="Broker note")])


@pytest.mark.parametrize("replies, outcome, kept, flagged", [
    # two agents
    ([verdict("agent1_correct")], "accepted", ["agent1"], 0),
    ([verdict("both_valid")], "both_valid", ["agent1", "agent2"], 0),
    ([verdict("neither_valid")], "no_valid_value", [], 1),
    # three agents: majority for agent1, the wrong pair flagged by the arbitrator itself
    ([verdict("agent1_correct"), verdict("agent1_correct"), verdict("neither_valid")], "accepted", ["agent1"], 1),
    # a cycle (1 beats 2, 3 beats 1, 2 beats 3) with equal confidence: a split, all flagged
    ([verdict("agent1_correct"), verdict("agent2_correct"), verdict("agent1_correct")], "split", [], 3),
    # the same cycle, but the verdicts for agent3 are more confident: agent3 wins by weight
    ([verdict("agent1_correct", confidence=0.5), verdict("agent2_correct", confidence=0.9),
      verdict("agent2_correct", confidence=0.9)], "accepted", ["agent3"], 0),
    # 1 and 2 both valid (e.g. net vs gross), 3 wrong against both: keep both with context
    ([verdict("both_valid"), verdict("agent1_correct"), verdict("agent1_correct")], "both_valid",
     ["agent1", "agent2"], 0),
])
def test_consensus_weights_verdicts_by_confidence(replies, outcome, kept, flagged):
    rs = SIMPLE if len(replies) == 1 else THREE
    found = detect(rs)
    checked = [check(c, r) for c, r in zip(found, replies)]
    result = build_consensus(rs, found, checked)
    (group,) = result.groups
    assert (group["outcome"], group["kept"]) == (outcome, kept)
    assert result.flagged_for_review == flagged and result.resolved_contradictions == len(found) - flagged


def test_adjusted_reports_take_the_winners_value_and_keep_the_original():
    found = detect(SIMPLE)
    result = build_consensus(SIMPLE, found, [check(found[0], verdict("agent1_correct", 0.10))])
    loser = result.adjusted_reports[1]["findings"][0]
    assert loser["value"] == 0.10 and loser["citation"]["source"] == "GCC-STAT"
    assert loser["debate"]["status"] == "replaced" and loser["debate"]["original"]["value"] == 0.12
    assert result.adjusted_reports[0]["findings"][0]["debate"]["status"] == "accepted"
    assert "accepted over agent2" in result.consensus_narrative


def test_both_valid_keeps_both_with_context():
    found = detect(SIMPLE)
    result = build_consensus(SIMPLE, found, [check(found[0], verdict("both_valid"))])
    first, second = (r["findings"][0] for r in result.adjusted_reports)
    assert (first["value"], second["value"]) == (0.10, 0.12)
    assert first["debate"]["status"] == "kept_with_context" and "0.12" in first["debate"]["context"]


def test_scoring_is_positional_like_the_truth():
    found = detect(THREE)
    truth = [TruthEntry(metric="unemployment_rate", agents=["agent2", "agent3"], kind="source",
                        expected_resolution="agent2_correct", expected_value=4.1,
                        expected_action="use_agent2", correct_agent="agent3")]
    replies = [verdict("agent1_correct"), verdict("agent1_correct"), verdict("agent2_correct")]
    checked = [check(c, r) for c, r in zip(found, replies)]
    scores = score_resolutions(truth, found, checked)
    assert scores["matched"] == 1 and scores["resolution_accuracy"] == 1.0
    assert scores["detection_precision"] == round(1 / 3, 4) and scores["detection_recall"] == 1.0
