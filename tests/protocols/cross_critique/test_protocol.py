"""cross_critique driven end to end by a scripted model; assertions on the seed-named trace files."""

import json

import pytest

from debatekit import registry
from debatekit.records.schemas import RunConfig
from debatekit.runner import run

PASSAGES = [{"id": f"P{i}", "source": f"source {i}", "kind": "adat" if i % 2 else "statute",
             "text": f"Passage {i} text about harta pusaka tinggi and the KHI."} for i in (1, 2, 3)]
RULES = [{"id": "R-MIN-1", "community": "minangkabau", "statement": "pusaka tinggi stays with the kaum",
          "condition": {"community": "minangkabau", "property.origin": "ancestral"},
          "conclusion": "the sawah stays with the kaum", "source": "adat"},
         {"id": "R-BAL-1", "community": "bali", "statement": "purusa line",
          "condition": {"community": "bali"}, "conclusion": "not applicable here", "source": "adat"}]
ITEM = {"id": "lc-x", "question": "Who inherits the sawah?", "domain_hint": "inheritance/minangkabau",
        "context": PASSAGES, "facts": {"community": "minangkabau",
                                       "property": [{"name": "sawah pusaka", "origin": "ancestral"}]},
        "reference": "The sawah stays with the kaum.", "must_mention": ["sawah stays with kaum", "faraid", "KHI"],
        "expected_conflict": True}
SEED_FILES = ["debate_round1_nla.json", "debate_round1_ala.json", "critique_round1_nla_on_ala.json",
              "critique_round1_ala_on_nla.json", "debate_round2_nla.json", "debate_round2_ala.json"]


@pytest.fixture
def legal(tmp_path):
    data, rules = tmp_path / "legal.jsonl", tmp_path / "rules.json"
    data.write_text(json.dumps(ITEM) + "\n")
    rules.write_text(json.dumps(RULES))
    return data, rules


def claims(n=3, evidence=("P1",)):
    return [{"id": f"C{i}", "statement": f"claim {i}", "evidence": list(evidence), "confidence": 0.7,
             "assumptions": []} for i in range(1, n + 1)]


def body(text, n=3, evidence=("P1",)):
    return {"answer": text, "claims": claims(n, evidence), "uncertainties": [], "open_questions": []}


def crit(severity="MINOR", issue="logic_gap", fix="cite P2", k=1):
    item = {"id": f"K{k}", "target_claim_id": "C1", "issue_type": issue, "description": "a gap",
            "severity": severity}
    return {**item, "suggested_fix": fix} if fix is not None else item


def crits(*specs):
    return {"critiques": [crit(*s, k=i) if isinstance(s, tuple) else crit(s, k=i) for i, s in enumerate(specs, 1)]}


MINOR3 = crits("MINOR", "MINOR", "MINOR")
CONFLICT = crits(("MAJOR", "conflict"), ("MAJOR", "logic_gap"), "MINOR")
WORDS = "the kaum keeps the sawah pusaka tinggi and the children inherit the shophouse by faraid under the KHI"


def text(agent, r, changed=True):
    """An answer that differs completely between rounds (changed) or stays the same."""
    return f"{agent} round {r if changed else 1}: " + " ".join(f"{w}{r if changed else ''}" for w in WORDS.split())


def scripted(answers=None, critiques=None, verdicts=(True, False, True)):
    """Reply by phase: answers[(agent, round)] and critiques[(agent, round)] override the defaults."""
    answers, critiques = answers or {}, critiques or {}
    seen = []

    def fn(req):
        seen.append(req)
        if req.phase in ("answer", "revise"):
            return answers.get((req.agent, req.round), body(text(req.agent, req.round)))
        if req.phase in ("critique", "critique_retry"):
            key = (req.agent, req.round, req.phase)
            return critiques.get(key, critiques.get((req.agent, req.round), MINOR3))
        if req.phase == "synthesis":
            return {"synthesis": "The sawah stays with the kaum; the rest follows faraid.", "key_points": ["kaum"],
                    "confidence": 0.6}
        if req.phase == "score":
            return {"verdicts": [{"point": i, "mentioned": v} for i, v in enumerate(verdicts, 1)]}
        raise AssertionError(req.phase)

    fn.seen = seen
    return fn


def debate(tmp_path, legal, model_from, fn, **params):
    data, rules = legal
    result = run(RunConfig(protocol="cross_critique", dataset=str(data), model=model_from(fn),
                           params={"rules": str(rules), **params}), tmp_path / "run", progress=False)
    (record,) = result.debates
    assert record.status == "ok", record.error
    return record, tmp_path / "run" / "items" / "lc-x"


def triggers(record):
    return [t["trigger"] for t in record.output["escalation"]]


def test_converges_at_round_2_with_the_seed_files(tmp_path, legal, model_from):
    fn = scripted()
    record, items = debate(tmp_path, legal, model_from, fn)
    assert record.converged and record.stop_reason == "converged" and record.output["rounds_used"] == 2
    assert not record.needs_human_review and record.escalation_reason is None
    assert sorted(p.name for p in items.iterdir()) == sorted(
        SEED_FILES + ["debate_summary.json", "supervisor_synthesis.json", "score.json"])
    r1 = json.loads((items / "debate_round1_nla.json").read_text())
    assert r1["round"] == 1 and r1["agent"] == "NLA" and set(r1) == {
        "round", "agent", "answer", "claims", "uncertainties", "open_questions"}
    k = json.loads((items / "critique_round1_ala_on_nla.json").read_text())
    assert (k["round"], k["agent"], k["target"]) == (1, "ALA", "NLA") and len(k["critiques"]) == 3
    check = record.output["checks"][-1]
    assert check["after"] == "revision" and check["few_severe"] and check["max_change"] > 0.15
    assert record.rounds[1].extra["answer_change"]["NLA"] > 0.15
    # the judge: 2 of 3 points mentioned, recorded as a score call
    assert record.score == pytest.approx(2 / 3) and record.final_answer.startswith("The sawah")
    events = [json.loads(line) for line in (tmp_path / "run" / "events.jsonl").read_text().splitlines()]
    assert [e["phase"] for e in events].count("score") == 1 and events[-1]["agent"] == "judge"
    assert sorted((e["round"], e["phase"], e["agent"]) for e in events if e["round"]) == [
        (1, "answer", "ALA"), (1, "answer", "NLA"), (1, "critique", "ALA"), (1, "critique", "NLA"),
        (2, "revise", "ALA"), (2, "revise", "NLA")]


def test_not_converged_goes_to_round_3_and_converges(tmp_path, legal, model_from):
    one_way = crits(("MAJOR", "conflict"), ("MAJOR", "logic_gap"), "MINOR")
    fn = scripted(answers={(a, 3): body(text(a, 2)) for a in ("NLA", "ALA")},  # R3 keeps the R2 answer
                  critiques={("NLA", 1): CONFLICT, ("ALA", 1): CONFLICT, ("NLA", 2): one_way, ("ALA", 2): MINOR3})
    record, items = debate(tmp_path, legal, model_from, fn)
    assert record.output["rounds_used"] == 3 and record.converged and record.stop_reason == "converged"
    assert [(c["round"], c["after"], c["converged"]) for c in record.output["checks"]] == [
        (2, "revision", False), (2, "critique", False), (3, "revision", True)]
    assert record.output["checks"][-1]["stable"] and record.output["checks"][-1]["max_change"] == 0.0
    assert (items / "critique_round2_nla_on_ala.json").exists() and (items / "debate_round3_ala.json").exists()
    assert not record.needs_human_review  # a one-way conflict critique is no hard contradiction
    assert len(record.rounds) == 3


def test_no_convergence_after_round_3_escalates(tmp_path, legal, model_from):
    fn = scripted(critiques={(a, r): CONFLICT for a in ("NLA", "ALA") for r in (1, 2)})
    record, _ = debate(tmp_path, legal, model_from, fn)
    assert record.output["rounds_used"] == 3 and not record.converged and record.stop_reason == "max_rounds"
    assert triggers(record) == ["no_convergence"] and record.needs_human_review and record.escalated_to == "human"
    assert "no convergence after R3" in record.escalation_reason
    queue = [json.loads(line) for line in (tmp_path / "run" / "review_queue.jsonl").read_text().splitlines()]
    assert [q["item_id"] for q in queue] == ["lc-x"] and queue[0]["item_dir"] == "items/lc-x"
    summary = json.loads((tmp_path / "run" / "run.json").read_text())["summary"]
    assert summary["escalated"] == 1 and summary["reviewed"] == 0 and summary["needs_human_review"] == 1


def test_critical_evidence_critique_escalates(tmp_path, legal, model_from):
    fn = scripted(critiques={("NLA", 1): CONFLICT, ("ALA", 1): CONFLICT,
                             ("NLA", 2): crits(("CRITICAL", "evidence_gap")), ("ALA", 2): crits("MINOR")})
    record, items = debate(tmp_path, legal, model_from, fn)
    assert record.converged and record.output["rounds_used"] == 2  # no domain conflict left: converged
    assert triggers(record) == ["critical_evidence_validity"] and record.needs_human_review
    summary = json.loads((items / "debate_summary.json").read_text())
    assert summary["disputed_claims"][0]["severity"] == "CRITICAL" and summary["conflicts"]


def test_critical_norm_conflict_escalates(tmp_path, legal, model_from):
    fn = scripted(critiques={("NLA", 1): CONFLICT, ("ALA", 1): CONFLICT,
                             ("NLA", 2): crits(("CRITICAL", "conflict")), ("ALA", 2): crits("MINOR")})
    record, _ = debate(tmp_path, legal, model_from, fn)
    assert "critical_norm_conflict" in triggers(record) and not record.converged
    assert "R-MIN-1" not in record.escalation_reason and "NLA on ALA C1" in record.escalation_reason


def test_hard_contradiction_when_both_keep_conflicting_answers(tmp_path, legal, model_from):
    fn = scripted(answers={(a, 2): body(text(a, 1)) for a in ("NLA", "ALA")},  # nobody moves in R2
                  critiques={("NLA", 1): CONFLICT, ("ALA", 1): CONFLICT})
    record, _ = debate(tmp_path, legal, model_from, fn)
    assert record.converged and record.output["checks"][-1]["stable"]  # stable, yet deadlocked
    assert triggers(record) == ["hard_contradiction"]


def test_unsupported_claims_and_invented_ids_are_detected_by_the_engine(tmp_path, legal, model_from):
    nla = body(text("NLA", 1), evidence=("P99",))  # an id that is not in the context
    nla["claims"][0]["evidence"] = ["P1"]
    ala = body(text("ALA", 1), evidence=("R-MIN-1",))  # a rule that fired: valid evidence
    ala["claims"][1]["evidence"] = ["R-BAL-1"]  # a rule that exists but did not fire
    fn = scripted(answers={("NLA", 1): nla, ("ALA", 1): ala, ("NLA", 2): nla, ("ALA", 2): ala})
    record, items = debate(tmp_path, legal, model_from, fn)
    gaps = {(g["agent"], g["round"], g["claim_id"], g["cited"], g["kind"]) for g in record.output["evidence_gaps"]}
    assert ("NLA", 1, "C2", "P99", "unknown_id") in gaps and ("NLA", 2, "C3", "P99", "unknown_id") in gaps
    assert ("ALA", 1, "C2", "R-BAL-1", "rule_not_applicable") in gaps
    assert not any(g[3] in ("P1", "R-MIN-1") for g in gaps)
    assert record.output["unsupported"] == {"NLA": pytest.approx(2 / 3), "ALA": pytest.approx(1 / 3)}
    assert triggers(record) == ["unsupported_claims", "unsupported_claims"]
    assert record.output["rule_results"] == ["R-MIN-1"]
    # the critic is told about the gaps the engine found
    critique_prompt = next(r for r in fn.seen if r.phase == "critique" and r.agent == "ALA").prompt
    assert "C2 cites 'P99' (unknown_id)" in critique_prompt


def test_too_few_critiques_are_reasked_once_then_a_violation(tmp_path, legal, model_from):
    fn = scripted(critiques={("NLA", 1): crits("MINOR", "MINOR"),
                             ("ALA", 1): crits("MINOR"), ("ALA", 1, "critique_retry"): MINOR3})
    record, _ = debate(tmp_path, legal, model_from, fn)
    retries = [r for r in fn.seen if r.phase == "critique_retry"]
    assert sorted(r.agent for r in retries) == ["ALA", "NLA"]
    assert "too_few_critiques: 2 < 3" in retries[0].prompt + retries[1].prompt
    assert record.output["guard_violations"] == [
        {"round": 1, "agent": "NLA", "target": "ALA", "guard": "too_few_critiques", "detail": "too_few_critiques: 2 < 3"}]


def test_missing_suggested_fix_is_reasked_then_a_violation(tmp_path, legal, model_from):
    no_fix = {"critiques": [crit("MINOR", fix=None, k=1), crit("MINOR", k=2), crit("MINOR", fix="  ", k=3)]}
    fn = scripted(critiques={("NLA", 1): no_fix})
    record, items = debate(tmp_path, legal, model_from, fn)
    (violation,) = record.output["guard_violations"]
    assert violation["guard"] == "missing_suggested_fix" and violation["detail"].endswith("K1, K3")
    assert [r.agent for r in fn.seen if r.phase == "critique_retry"] == ["NLA"]
    assert record.usage.parse_failures == 0  # a missing fix is a guard, not a parse failure


def test_claims_are_capped(tmp_path, legal, model_from):
    fn = scripted(answers={("NLA", 1): body(text("NLA", 1), n=12)})
    record, items = debate(tmp_path, legal, model_from, fn, max_claims=8)
    assert len(json.loads((items / "debate_round1_nla.json").read_text())["claims"]) == 8
    assert {"round": 1, "agent": "NLA", "guard": "claims_capped", "detail": "12 claims, kept 8"} in \
        record.output["guard_violations"]


def test_three_personas_never_critique_themselves(tmp_path, legal, model_from):
    fn = scripted()
    record, items = debate(tmp_path, legal, model_from, fn, agents=["NLA", "ALA", "Islamic"],
                           persona_prompts={"Islamic": "You are an expert of the KHI."})
    names = sorted(p.name for p in items.glob("critique_round1_*"))
    assert names == ["critique_round1_ala_on_islamic.json", "critique_round1_ala_on_nla.json",
                     "critique_round1_islamic_on_ala.json", "critique_round1_islamic_on_nla.json",
                     "critique_round1_nla_on_ala.json", "critique_round1_nla_on_islamic.json"]
    for path in items.glob("critique_*"):
        data = json.loads(path.read_text())
        assert data["agent"] != data["target"]
    islamic = next(r for r in fn.seen if r.agent == "Islamic")
    assert islamic.messages[0]["content"] == "You are an expert of the KHI."


def test_supervisor_gets_only_the_summary_and_final_revisions(tmp_path, legal, model_from):
    fn = scripted()
    debate(tmp_path, legal, model_from, fn)
    (sup,) = [r for r in fn.seen if r.phase == "synthesis"]
    assert "Passage 1 text" not in sup.prompt  # no context passages
    assert '"agreed_claims"' in sup.prompt and text("NLA", 2) in sup.prompt
    assert text("NLA", 1) not in sup.prompt  # round-1 answers are not final revisions


def test_rule_results_shown_to_the_adat_agent_only(tmp_path, legal, model_from):
    fn = scripted()
    debate(tmp_path, legal, model_from, fn)
    first = {r.agent: r.prompt for r in fn.seen if r.phase == "answer"}
    assert "[R-MIN-1] the sawah stays with the kaum (applies to: sawah pusaka)" in first["ALA"]
    assert "R-MIN-1" not in first["NLA"] and "[P1] (adat) Passage 1" in first["NLA"]


def test_a_failing_agent_does_not_crash_the_debate(tmp_path, legal, model_from):
    base = scripted()
    record, items = debate(tmp_path, legal, model_from, lambda req: "garbage" if req.agent == "ALA" else base(req))
    assert record.status == "ok" and any(line.startswith("NO_OUTPUT: ALA") for line in record.log)
    assert not (items / "debate_round1_ala.json").exists() and (items / "debate_round2_nla.json").exists()


def test_unknown_persona_and_bad_rounds_are_clear_errors():
    spec = registry.get("cross_critique")
    with pytest.raises(registry.ProtocolError, match="unknown persona 'XYZ'"):
        spec.build({"agents": ["NLA", "XYZ"]})
    with pytest.raises(registry.ProtocolError, match="min_rounds .4. exceeds max_rounds .3."):
        spec.build({"min_rounds": 4})
    assert spec.flag("rounds") == "max_rounds"  # --rounds is the ceiling here too


def test_dry_run_on_the_shipped_dataset(tmp_path):
    result = run(RunConfig(protocol="cross_critique", dataset="legal_conflicts", limit=2, model="scripted/schema"),
                 tmp_path / "run", progress=False)
    assert [d.status for d in result.debates] == ["ok", "ok"]
    for d in result.debates:
        assert (tmp_path / "run" / "items" / d.item_id / "debate_summary.json").exists()


def test_as_a_graph_node_over_a_state_dict(tmp_path, legal, model_from):
    import asyncio

    import debatekit

    fn = scripted(critiques={(a, r): CONFLICT for a in ("NLA", "ALA") for r in (1, 2)})
    state = {"query": "Who inherits the sawah?", "context": [{"id": p["id"], "text": p["text"]} for p in PASSAGES],
             "facts": ITEM["facts"], "other": 1}
    out = asyncio.run(debatekit.node("cross_critique", state, model=model_from(fn), folder=str(tmp_path / "node"),
                                     rules=str(legal[1])))
    assert out["other"] == 1 and out["needs_human_review"] and out["debate"]["rule_results"] == ["R-MIN-1"]
    assert out["debate"]["answer"].startswith("The sawah") and out["debate"]["rounds_used"] == 3
    assert (tmp_path / "node" / "debate_summary.json").exists()
