"""Moderator rules Z, B, M, C, A, D, E: table-driven, one case per branch and block reason."""

import pytest

from debatekit.protocols.patch_debate.moderator import (ModeratorThresholds, Signal, ValidatorSignal, aggregate_atsa,
                                      infer_label_from_debate, moderate, span_iou)
from debatekit.protocols.patch_debate.types import AspectTuple


def S(label, conf, span=(0, 10)):
    return Signal(label=label, confidence=conf, span=span)


def V(label, conf, *issues):
    return ValidatorSignal(suggested_label=label, confidence=conf, issues=[{"type": t, "severity": s} for t, s in issues])


# (name, kwargs, label, confidence, applied_rules, rationale fragment, flags subset)
CASES = [
    ("Z both confidences 0", dict(stage1_ate=S("positive", 0), stage1_atsa=S("positive", 0.9),
                                   stage2_ate=S("negative", 0)),
     "neutral", 0.0, ["Z"], "RuleZ: insufficient signal (both confidences 0).", {}),
    ("Z no stage2 counts as 0", dict(stage1_ate=S("positive", 0), stage1_atsa=S("positive", 0.9)),
     "neutral", 0.0, ["Z"], "RuleZ", {}),
    ("B no stage2 keeps stage1", dict(stage1_ate=S("positive", 0.8), stage1_atsa=S("positive", 0.8)),
     "positive", 0.8, ["A"], "RuleA", {"rule_b_applied": False}),
    ("B stage2 preferred", dict(stage1_ate=S("positive", 0.7), stage1_atsa=S("positive", 0.7, (0, 3)),
                                stage2_ate=S("positive", 0.6), stage2_atsa=S("positive", 0.6, (20, 30))),
     "positive", 0.6, ["B"], "RuleB: Stage2 preferred.", {"rule_b_applied": True}),
    ("B drop>=0.2 keeps stage1 (0.7-0.5 is 0.2 despite float noise)",
     dict(stage1_ate=S("negative", 0.7), stage1_atsa=S("negative", 0.7), stage2_ate=S("negative", 0.5),
          stage2_atsa=S("negative", 0.5)),
     "negative", 0.7, ["B"], "RuleB: Stage2 drop>=0.2; keep Stage1.",
     {"stage2_rejected_due_to_confidence": True, "rule_b_applied": True}),
    ("M conflicting stage labels -> mixed", dict(stage1_ate=S("positive", 0.6), stage1_atsa=S("mixed", 0.6),
                                                  stage2_ate=S("negative", 0.7), stage2_atsa=S("mixed", 0.5)),
     "mixed", 0.6, ["B", "M", "A"], "RuleM: conflicting stage1/stage2 labels -> mixed.", {}),
    ("C critical issue vetoes", dict(stage1_ate=S("positive", 0.9), stage1_atsa=S("negative", 0.9),
                                     validator=V("negative", 0.3, ("negation", "low"))),
     "negative", 0.9, ["C", "A"], "RuleC: Validator critical veto.", {"validator_override_applied": True}),
    ("C severity high is critical", dict(stage1_ate=S("positive", 0.9), stage1_atsa=S("negative", 0.9),
                                         validator=V("negative", 0.3, ("other", "high"))),
     "negative", 0.9, ["C", "A"], "RuleC", {"validator_override_applied": True}),
    ("C confident validator without critical issue", dict(stage1_ate=S("positive", 0.6), stage1_atsa=S("neutral", 0.6),
                                                          validator=V("neutral", 0.6)),
     "neutral", 0.6, ["C", "A"], "RuleC", {"validator_override_applied": True}),
    ("C not confident enough, no critical issue", dict(stage1_ate=S("positive", 0.8), stage1_atsa=S("positive", 0.8),
                                                       validator=V("negative", 0.5, ("other", "low"))),
     "positive", 0.8, ["A"], "RuleA", {"validator_override_applied": False}),
    ("A aligned span averages confidences", dict(stage1_ate=S("positive", 0.9), stage1_atsa=S("positive", 0.5, (0, 10)),
                                                 stage2_ate=S("positive", 0.8), stage2_atsa=S("positive", 0.6, (0, 9))),
     "positive", 0.7, ["B", "A"], "RuleA: IoU>=0.8 span aligned.", {}),
    ("A blocked below IoU 0.8", dict(stage1_ate=S("positive", 0.9), stage1_atsa=S("positive", 0.5, (0, 10)),
                                     stage2_ate=S("positive", 0.8), stage2_atsa=S("positive", 0.6, (0, 7))),
     "positive", 0.8, ["B"], "RuleB: Stage2 preferred.", {}),
    ("A blocked by drop_guard", dict(stage1_ate=S("positive", 0.9), stage1_atsa=S("positive", 0.5),
                                     stage2_ate=S("positive", 0.6), stage2_atsa=S("positive", 0.6)),
     "positive", 0.9, ["B"], "RuleB: Stage2 drop>=0.2", {"stage2_rejected_due_to_confidence": True}),
    ("D diff<0.1 keeps sentence ATE", dict(stage1_ate=S("positive", 0.62), stage1_atsa=S("negative", 0.7)),
     "positive", 0.62, ["D"], "RuleD: diff<0.1 conflict -> sentence ATE.", {"confidence_margin_used": True}),
    ("D ATSA wins", dict(stage1_ate=S("positive", 0.6), stage1_atsa=S("negative", 0.7)),
     "negative", 0.7, ["D"], "RuleD: diff>=0.1 ATSA wins.", {"confidence_margin_used": True}),
    ("D ATE wins", dict(stage1_ate=S("positive", 0.9), stage1_atsa=S("negative", 0.7)),
     "positive", 0.9, ["D"], "RuleD: diff>=0.1 ATE wins.", {"confidence_margin_used": True}),
    ("E fires on low confidence", dict(stage1_ate=S("positive", 0.5), stage1_atsa=S("positive", 0.5, None),
                                       debate_summary={"sentence_polarity": "negative"}),
     "negative", 0.5, ["E"], "RuleE: debate consensus -> negative.", {"rule_e_fired": True,
                                                                        "rule_e_block_reason": None}),
    ("E fires on mixed", dict(stage1_ate=S("positive", 0.9), stage1_atsa=S("mixed", 0.9, None),
                              stage2_ate=S("negative", 0.9), stage2_atsa=S("mixed", 0.9, None),
                              debate_summary={"sentence_polarity": "negative"}),
     "negative", 0.9, ["B", "M", "E"], "RuleE: debate consensus -> negative.",
     {"rule_e_fired": True, "rule_e_attempted_after_b": True}),
    ("E blocked: inferred_empty", dict(stage1_ate=S("positive", 0.5), stage1_atsa=S("positive", 0.5, None),
                                       debate_summary={"final_tuples": []}),
     "positive", 0.5, [], None, {"rule_e_fired": False, "rule_e_block_reason": "inferred_empty"}),
    ("E blocked: no summary is inferred_empty", dict(stage1_ate=S("positive", 0.5), stage1_atsa=S("positive", 0.5, None)),
     "positive", 0.5, [], None, {"rule_e_block_reason": "inferred_empty"}),
    ("E blocked: label_unchanged", dict(stage1_ate=S("positive", 0.5), stage1_atsa=S("positive", 0.5, None),
                                        debate_summary={"sentence_polarity": "positive"}),
     "positive", 0.5, [], None, {"rule_e_block_reason": "label_unchanged"}),
    ("E blocked: confidence_too_high (0.55 is not < 0.55)",
     dict(stage1_ate=S("positive", 0.55), stage1_atsa=S("positive", 0.55, None),
          debate_summary={"sentence_polarity": "negative"}),
     "positive", 0.55, [], None, {"rule_e_block_reason": "confidence_too_high", "rule_e_fired": False}),
]


@pytest.mark.parametrize("name, kwargs, label, conf, rules, rationale, flags", CASES, ids=[c[0] for c in CASES])
def test_rules(name, kwargs, label, conf, rules, rationale, flags):
    out = moderate(**kwargs)
    assert (out.final_label, out.confidence, out.applied_rules) == (label, pytest.approx(conf), rules)
    if rationale:
        assert any(r.startswith(rationale) for r in out.rationale), out.rationale
    else:
        assert out.rationale == []
    for key, value in flags.items():
        assert getattr(out.arbiter_flags, key) == value, key


def test_rule_order_later_rules_read_earlier_results():
    # B picks stage 2, M makes it mixed, C vetoes to negative, D: ATSA (positive, 0.95) beats 0.8 by >= 0.1,
    # E: debate says negative and the label is positive with 0.95 -> confidence_too_high.
    out = moderate(stage1_ate=S("positive", 0.7), stage1_atsa=S("positive", 0.7), stage2_ate=S("neutral", 0.8),
                   stage2_atsa=S("positive", 0.95, (40, 50)), validator=V("negative", 0.1, ("irony", "low")),
                   debate_summary={"sentence_polarity": "negative"})
    assert out.applied_rules == ["B", "M", "C", "D"]
    assert out.rationale == ["RuleB: Stage2 preferred.", "RuleM: conflicting stage1/stage2 labels -> mixed.",
                             "RuleC: Validator critical veto.", "RuleD: diff>=0.1 ATSA wins."]
    assert (out.final_label, out.confidence, out.selected_stage) == ("positive", 0.95, "stage2")
    assert out.arbiter_flags.rule_e_block_reason == "confidence_too_high"


def test_thresholds_are_configurable():
    kwargs = dict(stage1_ate=S("positive", 0.6), stage1_atsa=S("positive", 0.6, None),
                  debate_summary={"sentence_polarity": "negative"})
    assert moderate(**kwargs).final_label == "positive"
    assert moderate(**kwargs, thresholds=ModeratorThresholds(debate_max_conf=0.7)).final_label == "negative"


@pytest.mark.parametrize("summary, label", [
    ({"sentence_polarity": "mixed", "final_tuples": [{"polarity": "positive"}]}, "mixed"),
    ({"sentence_polarity": "", "final_tuples": [{"polarity": "positive"}, {"polarity": "negative"}]}, "mixed"),
    ({"final_tuples": [{"polarity": "negative"}, {"polarity": "neutral"}]}, "negative"),
    ({"final_tuples": [{"polarity": "neutral"}]}, "neutral"),
    ({"consensus": "The reviewers agree it is positive overall."}, "positive"),
    ({"key_agreements": ["food positive"], "key_disagreements": ["service negative"]}, "mixed"),
    ({"rationale": "nothing decided"}, None),
    (None, None),
])
def test_debate_label_inference_priority(summary, label):
    assert infer_label_from_debate(summary) == label


def test_span_iou_and_atsa_aggregate():
    assert span_iou((0, 10), (0, 8)) == 0.8 and span_iou((0, 4), (6, 9)) == 0.0 and span_iou(None, (0, 1)) is None
    agg = aggregate_atsa([AspectTuple(term="a", polarity="positive", confidence=0.8, span=(4, 9)),
                          AspectTuple(term="b", polarity="negative", confidence=0.6, span=(20, 25))])
    assert (agg.label, agg.confidence, agg.span) == ("mixed", 0.7, (4, 25))
    assert aggregate_atsa([]) == Signal(label="neutral", confidence=0.0, span=None)


def test_the_rationale_prints_the_thresholds_actually_used():
    th = ModeratorThresholds(drop_guard=0.35, span_iou=0.6, tie_margin=0.25)
    kept = moderate(S("negative", 0.9), S("negative", 0.9), S("negative", 0.5), S("negative", 0.5), thresholds=th)
    assert "RuleB: Stage2 drop>=0.35; keep Stage1." in kept.rationale
    aligned = moderate(S("positive", 0.8), S("positive", 0.8, (0, 10)), thresholds=th)
    assert "RuleA: IoU>=0.6 span aligned." in aligned.rationale
    tie = moderate(S("positive", 0.6), S("negative", 0.45), thresholds=th)
    assert "RuleD: diff<0.25 conflict -> sentence ATE." in tie.rationale and tie.final_label == "positive"
    wins = moderate(S("positive", 0.3), S("negative", 0.9), thresholds=th)
    assert "RuleD: diff>=0.25 ATSA wins." in wins.rationale and wins.final_label == "negative"
    assert not any(x in line for line in kept.rationale + tie.rationale + wins.rationale for x in ("0.2;", "0.1 "))
