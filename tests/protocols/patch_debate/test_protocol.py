"""patch_debate driven end to end by a scripted model; assertions on the trace."""

import asyncio
import json

import pytest

from debatekit import registry
from debatekit.protocols.patch_debate.scoring import debate_kpis, stage_table
from debatekit.records.schemas import RunConfig
from debatekit.registry import ProtocolError
from debatekit.runner import run

TEXT = "The pasta was perfectly al dente, but the service was painfully slow."
ITEM = {"id": "en-1", "lang": "en", "text": TEXT, "sentence_label": "mixed", "phenomena": ["contrast"],
        "aspects": [{"term": "pasta", "category": "food", "polarity": "positive", "span": [4, 9]},
                    {"term": "service", "category": "service", "polarity": "negative", "span": [42, 49]}]}


@pytest.fixture
def absa_file(tmp_path):
    path = tmp_path / "absa.jsonl"
    path.write_text(json.dumps(ITEM) + "\n")
    return path


def edit(op, ref, value="", confidence=None, polarity=None, evidence=""):
    return {"op": op, "target": {"aspect_ref": ref, "polarity": polarity}, "value": value, "evidence": evidence,
            "confidence": confidence}


REPLIES = {
    "stage1_extract": {"aspects": [{"term": "pasta", "polarity": "positive", "confidence": 0.9},
                                   {"term": "service", "polarity": "positive", "confidence": 0.6},
                                   {"term": "al dente", "polarity": "positive", "confidence": 0.5}],
                       "sentence_label": "positive", "confidence": 0.6},
    "stage1_validate": {"issues": [{"type": "contrast", "aspect_ref": "service", "severity": "high", "confidence": 0.7}],
                        "corrections": [{"type": "FLIP_POLARITY", "aspect_ref": "service", "value": "negative"}],
                        "suggested_label": "mixed", "confidence": 0.6},
    "epm": {"proposed_edits": [edit("set_polarity", "service", "negative", 0.9, evidence="painfully slow")]},
    "tan": {"proposed_edits": [edit("drop_tuple", "al dente", confidence=0.8),
                               edit("set_polarity", "service", "negative", 0.8)]},
    "cj": {"proposed_edits": [edit("confirm_tuple", "pasta", polarity="positive", confidence=0.8),
                              edit("set_polarity", "dessert", "negative")]},
    "judge": {"final_patch": [edit("set_polarity", "service", "negative"), edit("drop_tuple", "al dente"),
                              edit("set_polarity", "wine", "negative")],
              "final_tuples": [{"aspect_ref": "pasta", "polarity": "positive"},
                               {"aspect_ref": "service", "polarity": "negative"}],
              "unresolved_conflicts": [], "sentence_polarity": "mixed",
              "sentence_evidence_spans": ["perfectly al dente", "painfully slow"]},
    "stage2_ate": {"aspect_review": [], "sentence_label": "mixed", "confidence": 0.7},
    "stage2_atsa": {"sentiment_review": [
        {"action": "maintain", "aspect_ref": "pasta", "polarity": "positive", "confidence": 0.9},
        {"action": "flip_polarity", "aspect_ref": "service", "polarity": "positive", "confidence": 0.5}]},
}


def scripted(seen=None, broken=()):
    def fn(req):
        key = req.agent if req.phase == "debate" else req.phase
        if seen is not None:
            seen.append((req.phase, req.agent, req.round, req.messages))
        return "not json" if key in broken else REPLIES[key]
    return fn


def go(tmp_path, absa_file, model, **params):
    return run(RunConfig(protocol="patch_debate", dataset=str(absa_file), model=model, params=params),
               tmp_path / "run", progress=False)


def test_the_whole_pipeline_on_one_sentence(tmp_path, absa_file, model_from):
    seen = []
    result = go(tmp_path, absa_file, model_from(scripted(seen)))
    (d,) = result.debates
    assert d.status == "ok" and d.final_answer == "mixed" and d.correct is True and d.truth == "mixed"
    assert [(p, a, r) for p, a, r, _ in seen] == [
        ("stage1_extract", "ate_atsa", None), ("stage1_validate", "validator", None),
        ("debate", "epm", 1), ("debate", "tan", 1), ("debate", "cj", 1), ("judge", "cj", None),
        ("stage2_ate", "ate_review", None), ("stage2_atsa", "atsa_review", None)]

    # speakers: persona JSON and the history so far in the system prompt, in the seed's format
    prompts = {(p, a): m[0]["content"] for p, a, _, m in seen}
    tan = prompts[("debate", "tan")]
    assert '[PERSONA]\n{"name":"TAN","role":"Target-Aspect Normalizer"' in tan
    assert '[HISTORY]\nepm: set_polarity target=service value=negative evidence="painfully slow"' in tan
    assert "[HISTORY]\n(none)" in prompts[("debate", "epm")]
    assert "[ALL_TURNS]\nepm: set_polarity" in prompts[("judge", "cj")] and "cj: set_polarity target=dessert" in \
        prompts[("judge", "cj")]
    review_prompt = [m for p, _, _, m in seen if p == "stage2_atsa"][0][1]["content"]
    assert '"judge_sentence_polarity":"mixed"' in review_prompt and '"service":{"negative":1.7}' in review_prompt

    # rounds: each speaker's implied sentence label and its history lines
    (r1,) = d.rounds
    assert r1.answers == {"epm": "mixed", "tan": "mixed", "cj": "positive"}
    assert r1.extra["edits"]["tan"] == ["tan: drop_tuple target=al dente value=- evidence=-",
                                        "tan: set_polarity target=service value=negative evidence=-"]

    m = d.output["metrics"]
    assert (m["stage1"]["tp"], m["stage1"]["fp"], m["stage1"]["fn"], m["stage1"]["sentence_label"]) == (1, 2, 1, "positive")
    assert (m["debate"]["f1"], m["debate"]["sentence_correct"]) == (1.0, True)
    assert (m["final"]["precision"], m["final"]["recall"], m["final"]["f1"]) == (0.666667, 1.0, 0.8)
    assert d.output["override"]["debate_override_applied"] == 1
    assert d.output["override"]["debate_override_skipped_low_signal"] == 2
    assert d.output["mapping_metrics"]["debate_fail_no_match_rate"] == 0.2 and d.output["mapping"]["edits"] == 5
    mod = d.output["moderator"]
    assert mod["applied_rules"] == ["B", "M", "C", "A"] and mod["selected_stage"] == "stage2"
    assert mod["arbiter_flags"]["rule_e_block_reason"] == "label_unchanged"

    folder = result.path / "items" / "en-1"
    assert sorted(p.name for p in folder.iterdir()) == [
        "debate_output.json", "debate_review_context.json", "debate_round1_cj.json", "debate_round1_epm.json",
        "debate_round1_tan.json", "moderator.json", "patch_log.json", "stage1.json", "stage2.json"]
    patch = json.loads((folder / "patch_log.json").read_text())
    assert (patch["applied"], patch["rejected"]) == (2, 1)
    assert patch["log"][2]["reason"] == "unknown_aspect_ref" and patch["log"][2]["aspect_ref"] == "wine"
    stage1 = json.loads((folder / "stage1.json").read_text())
    assert stage1["tuples"][2]["span"] == [24, 32]  # located in code
    context = json.loads((folder / "debate_review_context.json").read_text())
    assert set(context) >= {"summary", "rebuttal_points", "aspect_hints", "synonym_hints", "mapping_stats",
                            "mapping_fail_reasons"}
    assert context["mapping_fail_reasons"] == {"no_aspects": 0, "no_match": 1, "neutral_stance": 1, "fallback_used": 0}
    assert "staff" in context["synonym_hints"]["service"]
    stage2 = json.loads((folder / "stage2.json").read_text())
    assert stage2["review_log"][0] == "validator: FLIP_POLARITY 'service' -> applied"
    assert stage2["override"]["log"] == ["DEBATE_OVERRIDE service: positive -> negative (pos=0.00, neg=1.70)"]

    table = stage_table([result.path]).set_index("stage")
    assert list(table.index) == ["stage1", "debate", "final"]
    assert list(table.f1) == [0.4, 1.0, 0.8] and list(table.sentence_accuracy) == [0.0, 1.0, 1.0]
    (kpis,) = debate_kpis([result.path]).to_dict("records")
    assert kpis["debate_mapping_coverage"] == 1.0 and kpis["debate_override_applied"] == 1
    assert kpis["debate_override_skipped_already_confident_rate"] == 0.0 and kpis["warnings"] == []


def test_without_override_the_review_error_stays(tmp_path, absa_file, model_from):
    result = go(tmp_path, absa_file, model_from(scripted()), enable_debate_override=False)
    (d,) = result.debates
    final = {t["term"]: t["polarity"] for t in d.output["final_tuples"]}
    assert final["service"] == "positive" and d.output["override"]["debate_override_applied"] == 0


def test_stage2_can_start_from_the_debated_tuples(tmp_path, absa_file, model_from):
    (d,) = go(tmp_path, absa_file, model_from(scripted()), stage2_base="debate").debates
    assert d.output["metrics"]["final"]["f1"] == 1.0


def test_order_rounds_and_persona_overrides(tmp_path, absa_file, model_from):
    seen = []
    result = go(tmp_path, absa_file, model_from(scripted(seen)), order=["tan", "epm"], rounds=2,
                personas={"tan": {"goal": "Only merge duplicates."}})
    speakers = [(a, r) for p, a, r, _ in seen if p == "debate"]
    assert speakers == [("tan", 1), ("epm", 1), ("tan", 2), ("epm", 2)]
    tan_prompt = next(m[0]["content"] for p, a, _, m in seen if a == "tan")
    assert '"goal":"Only merge duplicates."' in tan_prompt and '"name":"TAN"' in tan_prompt
    round2_epm = [m[0]["content"] for p, a, r, m in seen if a == "epm" and r == 2][0]
    assert round2_epm.count("epm: set_polarity target=service") == 1  # round 1's line in the history
    (d,) = result.debates
    assert [r.round for r in d.rounds] == [1, 2] and d.stop_reason == "max_rounds"
    assert (result.path / "items" / "en-1" / "debate_round2_tan.json").exists()


def test_bad_configuration_is_named():
    spec = registry.get("patch_debate")
    with pytest.raises(ProtocolError, match="order names"):
        spec.build({"order": ["epm", "judge"]})
    with pytest.raises(ProtocolError, match="debate_override.*min_totl"):
        spec.build({"debate_override": {"min_totl": 1.0}})
    with pytest.raises(ProtocolError, match="rounds"):
        spec.build({"rounds": 0})
    spec.build({"personas": {"skeptic": {"name": "SK", "role": "Skeptic", "goal": "doubt"}},
                "order": ["skeptic", "cj"], "moderator_thresholds": {"debate_max_conf": 0.6}})


def test_without_debate_only_stages_and_moderator_run(tmp_path, absa_file, model_from):
    seen = []
    (d,) = go(tmp_path, absa_file, model_from(scripted(seen)), enable_debate=False).debates
    assert [p for p, *_ in seen] == ["stage1_extract", "stage1_validate", "stage2_ate", "stage2_atsa"]
    m = d.output["metrics"]
    assert m["debate"]["f1"] == m["stage1"]["f1"] and d.stop_reason == "no_debate" and d.rounds == []


def test_failed_calls_are_recorded_not_fatal(tmp_path, absa_file, model_from):
    broken = ("epm", "judge", "stage2_atsa")
    (d,) = go(tmp_path, absa_file, model_from(scripted(broken=broken))).debates
    assert d.status == "ok" and d.usage.parse_failures == 6
    assert d.rounds[0].answers["epm"] is None
    assert any(line.startswith("judge failed: parse") for line in d.log)
    assert d.output["metrics"]["debate"]["f1"] == 0.4  # no judge: the Stage-1 tuples stand
    assert d.converged is None


def test_no_signal_at_all_ends_in_rule_z_and_human_review(tmp_path, absa_file, model_from):
    (d,) = go(tmp_path, absa_file, model_from(lambda req: "garbage")).debates
    assert d.status == "ok" and d.final_answer == "neutral" and d.needs_human_review
    assert d.output["moderator"]["applied_rules"] == ["Z"]


def test_dry_run_on_the_shipped_dataset(tmp_path):
    result = run(RunConfig(protocol="patch_debate", dataset="absa_reviews", limit=3, model="scripted/schema"),
                 tmp_path / "run", progress=False)
    assert [d.status for d in result.debates] == ["ok"] * 3
    assert result.summary.parse_failures == 0 and result.summary.calls == 3 * 8


def test_callable_as_a_workflow_node(model_from):
    import debatekit

    state = asyncio.run(debatekit.node("patch_debate", {"text": TEXT, "step": 3}, model=model_from(scripted())))
    assert state["step"] == 3 and state["patch_debate"]["label"] == "mixed"
    assert state["patch_debate"]["usage"]["calls"] == 8 and "metrics" not in state["patch_debate"]


def _variant(**changes):
    """REPLIES with nested changes: {"stage2_ate.confidence": 0.4, "tan.proposed_edits": [...]}."""
    import copy

    replies = copy.deepcopy(REPLIES)
    for path, value in changes.items():
        key, field = path.split(".", 1)
        if "." in field:
            field, index, sub = field.split(".")
            replies[key][field][int(index)][sub] = value
        else:
            replies[key][field] = value
    return replies


LOW_CONF = {"stage1_extract.confidence": 0.4, "stage1_validate.suggested_label": None,
            "stage1_validate.confidence": 0.3, "stage1_validate.issues": [], "stage2_ate.confidence": 0.4,
            "stage2_ate.sentence_label": "positive"}


@pytest.mark.parametrize("changes, params, rules, flags, label", [
    # D: the sentence ATE (positive) and the aspects (mixed) disagree by more than 0.1 -> the aspects win
    (LOW_CONF, {}, ["B", "D"], {"confidence_margin_used": True, "rule_e_block_reason": "label_unchanged"}, "mixed"),
    # E fires: a weak label (0.47 < 0.55) that differs from the judge's sentence polarity
    ({**LOW_CONF, "stage2_atsa.sentiment_review.0.confidence": 0.5, "stage2_atsa.sentiment_review.1.confidence": 0.6},
     {"enable_debate_override": False}, ["B", "A", "E"], {"rule_e_fired": True, "rule_e_block_reason": None}, "mixed"),
    # E blocked: the label is already confident (rule A lifted it to 0.65)
    ({**LOW_CONF, "stage2_atsa.sentiment_review.1.confidence": 0.9}, {"enable_debate_override": False},
     ["B", "A"], {"rule_e_fired": False, "rule_e_block_reason": "confidence_too_high"}, "positive"),
], ids=["rule D", "rule E fires", "rule E blocked: confidence_too_high"])
def test_moderator_rules_through_the_whole_pipeline(tmp_path, absa_file, model_from, changes, params, rules, flags,
                                                     label):
    (d,) = go(tmp_path, absa_file, model_from(lambda req: _variant(**changes)[
        req.agent if req.phase == "debate" else req.phase]), **params).debates
    mod = d.output["moderator"]
    assert mod["applied_rules"] == rules and d.final_answer == label
    assert {k: mod["arbiter_flags"][k] for k in flags} == flags


@pytest.mark.parametrize("changes, outcome", [
    # the review already holds the debate's polarity with confidence >= 0.7
    ({"stage2_atsa.sentiment_review.1.polarity": "negative", "stage2_atsa.sentiment_review.1.action": "maintain",
      "stage2_atsa.sentiment_review.1.confidence": 0.9}, "skipped_already_confident"),
    # the speakers pull the service both ways: total 1.7 >= 1.6 but margin 0.1 < 0.8
    ({"tan.proposed_edits": [edit("set_polarity", "service", "positive", 0.8)]}, "skipped_conflict"),
], ids=["already confident", "conflict"])
def test_override_outcomes_through_the_whole_pipeline(tmp_path, absa_file, model_from, changes, outcome):
    (d,) = go(tmp_path, absa_file, model_from(lambda req: _variant(**changes)[
        req.agent if req.phase == "debate" else req.phase])).debates
    assert d.output["override"][f"debate_override_{outcome}"] == 1
    assert d.output["override"]["debate_override_applied"] == 0
