"""arbitration driven end to end by a scripted arbitrator; assertions on the trace.

The seed's five scenarios (S1.7) are the shipped items mr-001 (none), mr-006 (simple),
mr-011 (source conflict), mr-016 (both valid) and mr-021 (3-way).
"""

import asyncio
import json
import re
from pathlib import Path

import pytest

import debatekit
from debatekit.models import scripted
from debatekit.protocols.arbitration import ArbitrationItem
from debatekit.records.schemas import RunConfig
from debatekit.runner import run

DATASET = Path(__file__).resolve().parents[3] / "datasets" / "metric_reports.jsonl"
ITEMS = {json.loads(line)["id"]: json.loads(line) for line in DATASET.read_text().splitlines()}
SCENARIOS = {"none": "mr-001", "simple": "mr-006", "source_conflict": "mr-011", "both_valid": "mr-016",
             "three_way": "mr-021"}
HOOK_EVENTS: list[dict] = []


def record_event(event):  # a progress hook reachable as "tests.protocols.arbitration.test_protocol:record_event"
    HOOK_EVENTS.append(event)


def dataset(tmp_path, *ids) -> str:
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "items.jsonl"
    path.write_text("".join(json.dumps(ITEMS[i]) + "\n" for i in ids))
    return str(path)


def agents_and_values(prompt: str):
    """(agent1, value1, agent2, value2) as the arbitrator prompt shows them."""
    (a1, v1), (a2, v2) = re.findall(r"- Agent \d \((\w+)\): (-?[\d.e+]+)", prompt)
    return a1, float(v1), a2, float(v2)


def oracle(req):
    """An arbitrator that answers from the item's truth (and recommends only the reports' values)."""
    a1, v1, a2, v2 = agents_and_values(req.prompt)
    truth = next(t for t in ITEMS[req.item_id]["truth"] if t["agents"] == [a1, a2])
    value = {"agent1_correct": v1, "agent2_correct": v2}.get(truth["expected_resolution"])
    return {"explanation": "per the truth", "resolution": truth["expected_resolution"],
            "recommended_value": value, "recommended_citation": None, "confidence": 0.9,
            "action": truth["expected_action"]}


def run_items(tmp_path, model, *ids, **params):
    result = run(RunConfig(protocol="arbitration", dataset=dataset(tmp_path, *ids), model=model, params=params,
                           cache=False),
                 tmp_path / "run", progress=False)
    events = [json.loads(line) for line in (tmp_path / "run" / "events.jsonl").read_text().splitlines()] \
        if (tmp_path / "run" / "events.jsonl").exists() else []
    return {d.item_id: d for d in result.debates}, events


@pytest.mark.parametrize("scenario, contradictions, outcome", [
    ("none", 0, None),
    ("simple", 2, ["accepted", "accepted"]),
    ("source_conflict", 1, ["accepted"]),
    ("both_valid", 1, ["both_valid"]),
    ("three_way", 4, ["accepted", "accepted"]),
])
def test_the_seeds_five_scenarios(tmp_path, model_from, scenario, contradictions, outcome):
    item = SCENARIOS[scenario]
    (debate,), events = (lambda d, e: (list(d.values()), e))(*run_items(tmp_path, model_from(oracle), item))
    results = debate.output["debate_results"]
    assert debate.status == "ok" and results["contradictions_found"] == contradictions
    assert len(events) == contradictions and all(e["phase"] == "arbitrate" for e in events)  # one call each
    assert debate.score == 1.0 and debate.correct is True
    if scenario == "none":
        assert results["status"] == "skipped" and results["latency_ms"] == 0 and debate.usage.calls == 0
        assert [p["status"] for p in debate.output["progress"]] == ["running", "complete"]
        return
    assert results["status"] == "complete"
    assert [g["outcome"] for g in debate.output["consensus"]["groups"]] == outcome
    item_dir = tmp_path / "run" / "items" / item
    assert {p.name for p in item_dir.iterdir()} >= {"contradictions.json", "resolutions.json", "consensus.json",
                                                   "debate_results.json", "progress.json"}


def test_three_way_flags_only_the_pair_of_two_wrong_agents(tmp_path, model_from):
    debates, _ = run_items(tmp_path, model_from(oracle), "mr-021")
    d = debates["mr-021"]
    assert d.output["debate_results"]["resolved"] == 3 and d.output["debate_results"]["flagged_for_review"] == 1
    flagged = [r for r in d.output["resolutions"] if r["flagged"]]
    assert [(r["agent1_name"], r["agent2_name"], r["flag_reason"]) for r in flagged] == [
        ("agent2", "agent3", "arbitrator_flagged")]
    adjusted = {r["agent"]: r for r in d.output["consensus"]["adjusted_reports"]}
    growth = adjusted["agent3"]["findings"][0]
    assert growth["value"] == 6.8 and growth["debate"]["original"]["value"] == 4.1  # took agent1's value
    assert d.needs_human_review and d.output["score"]["truth_flag_rate"] == 0.25


def test_the_oracle_scores_full_marks_on_the_whole_dataset(tmp_path, model_from):
    debates, events = run_items(tmp_path, model_from(oracle), *ITEMS)
    assert len(debates) == 24 and all(d.score == 1.0 for d in debates.values())
    assert len(events) == sum(len(i["truth"]) for i in ITEMS.values())
    assert all(d.output["score"]["detection_precision"] in (None, 1.0) for d in debates.values())


def _all_overlap(events) -> bool:
    """Whether every call's [start, end] interval shares a moment with every other's."""
    starts = [e["ts"] - e["latency_s"] for e in events]
    return max(starts) < min(e["ts"] for e in events)


def test_contradictions_are_arbitrated_concurrently_and_in_batches(tmp_path, model_from):
    model = model_from(lambda req: scripted.Delayed(0.4, oracle(req)))
    debates, events = run_items(tmp_path, model, "mr-021")
    assert len(events) == 4 and _all_overlap(events)  # the 4 calls were in flight together
    assert {e["round"] for e in events} == {1}

    debates, events = run_items(tmp_path / "b", model, "mr-021", batch_size=2)
    d = debates["mr-021"]
    assert sorted(e["round"] for e in events) == [1, 1, 2, 2]
    batch1, batch2 = ([e for e in events if e["round"] == r] for r in (1, 2))
    assert _all_overlap(batch1) and _all_overlap(batch2)
    assert min(e["ts"] - e["latency_s"] for e in batch2) >= max(e["ts"] for e in batch1) - 0.01  # one after the other
    assert [p["status"] for p in d.output["progress"]] == ["running", "batch", "batch", "complete"]


def test_a_hallucinated_value_is_rejected_and_flagged(tmp_path, model_from):
    def liar(req):
        reply = oracle(req)
        return {**reply, "recommended_value": 15.0}  # 14.2 and 16.8 were reported; 15.0 was not

    debates, _ = run_items(tmp_path, model_from(liar), "mr-006")
    d = debates["mr-006"]
    margin = next(r for r in d.output["resolutions"] if r["metric_name"] == "operating_margin")
    assert margin["flagged"] and margin["flag_reason"] == "hallucinated_value"
    assert margin["action"] == "flag_for_review" and margin["arbitrator_action"] == "use_agent1"
    assert d.needs_human_review and d.output["debate_results"]["flagged_for_review"] >= 1
    assert d.output["score"]["action_accuracy"] < 1.0


def test_a_failed_arbitrator_call_flags_its_contradiction(tmp_path, model_from):
    debates, _ = run_items(tmp_path, model_from(lambda req: "not json"), "mr-011")
    d = debates["mr-011"]
    assert d.status == "ok" and d.output["resolutions"][0]["flag_reason"] == "arbitrator_failed"
    assert d.output["consensus"]["groups"][0]["outcome"] == "no_verdict" and d.score == 0.0


def test_an_arbitrator_that_never_replies_leaves_the_item_unscored_not_wrong(tmp_path, model_from):
    debates, _ = run_items(tmp_path, model_from(lambda req: scripted.Fault("server")), "mr-011")
    d = debates["mr-011"]
    assert d.output["resolutions"][0]["flag_reason"] == "arbitrator_failed"
    assert d.status == "error" and d.final_answer is None and d.score is None and d.correct is None


def test_authority_and_freshness_are_data_in_the_prompt(tmp_path, model_from):
    prompts = []
    model = model_from(lambda req: (prompts.append(req.prompt), oracle(req))[1])
    run_items(tmp_path, model, "mr-012")
    assert "Source authority (Eurostat > European Central Bank > Financial press)" in prompts[0]
    assert "the more recent source wins" in prompts[0]  # mr-012 has prefer_fresher: true
    prompts.clear()
    run_items(tmp_path / "b", model, "mr-012", source_authority=["ECB", "Eurostat"], prefer_fresher=False)
    assert "Source authority (ECB > Eurostat)" in prompts[0] and "only breaks ties" in prompts[0]
    assert "[European Central Bank, 2024-09-12]" in prompts[0]  # the cited source's text is shown


def test_progress_events_reach_a_hook_named_on_the_command_line(tmp_path, model_from):
    HOOK_EVENTS.clear()
    debates, _ = run_items(tmp_path, model_from(oracle), "mr-006",
                           progress_hook="tests.protocols.arbitration.test_protocol:record_event")
    assert [e["status"] for e in HOOK_EVENTS] == ["running", "complete"]
    done = HOOK_EVENTS[-1]
    assert (done["contradictions"], done["resolved"], done["flagged"]) == (2, 2, 0) and done["latency_ms"] > 0
    assert debates["mr-006"].output["progress"] == HOOK_EVENTS


def test_the_seed_node_over_a_state_dict(model_from):
    calls = []

    async def event_callback(*args):
        calls.append(args)

    item = ArbitrationItem.model_validate(ITEMS["mr-011"])
    state = {"id": "mr-011", "agent_reports": [r.model_dump() for r in item.reports], "event_callback": event_callback}
    out = asyncio.run(debatekit.node("arbitration", state, model=model_from(oracle),
                                     source_authority=item.source_authority))
    assert out["debate_results"]["status"] == "complete" and out["debate_results"]["resolved"] == 1
    assert calls[0] == ("debate", "running") and calls[-1][:3] == (
        "debate", "complete", {"contradictions": 1, "resolved": 1, "flagged": 0})
    assert out["agent_reports"][1]["findings"][0]["value"] == 87.9  # the World Bank figure replaced


def test_analyst_mode_builds_reports_from_the_source_documents(tmp_path, model_from):
    def analysts(req):
        if req.phase == "analyse":
            value = {"agent1": 14.2, "agent2": 16.8}[req.agent]
            return {"findings": [{"metric": "Operating margin", "value": value, "unit": "%", "period": "2024-Q2",
                                  "document": "D1", "confidence": 0.8, "interpretation": "declining"},
                                 {"metric": "Made-up", "value": 1, "unit": "%", "period": "2024-Q2",
                                  "document": "D9", "confidence": 0.8, "interpretation": "stable"}]}
        a1, v1, a2, v2 = agents_and_values(req.prompt)
        return {"explanation": "the 10-Q says 14.2%", "resolution": "agent1_correct", "recommended_value": v1,
                "recommended_citation": None, "confidence": 0.9, "action": "use_agent1"}

    debates, events = run_items(tmp_path, model_from(analysts), "mr-006", reports="analysts")
    d = debates["mr-006"]
    assert [e["phase"] for e in events].count("analyse") == 2 and [e["phase"] for e in events][-1] == "arbitrate"
    assert d.output["reports"][0]["findings"][0]["citation"]["source"] == ITEMS["mr-006"]["source_documents"][0]["source"]
    assert any("DROPPED" in line and "D9" in line for line in d.log)
    assert d.output["debate_results"]["contradictions_found"] == 1
    assert d.output["score"]["value_accuracy"] is not None


def test_bad_parameters_are_named(tmp_path):
    from debatekit.registry import ProtocolError, get

    with pytest.raises(ProtocolError, match="reports"):
        get("arbitration").validate({"reports": "invented"})
    with pytest.raises(ProtocolError, match="threshold"):
        get("arbitration").validate({"threshold": 2})
