"""judge_refine driven end to end by scripted reasoners and a scripted judge; assertions on the trace."""

import json
import re

from debatekit import datasets
from debatekit.cli.app import main
from debatekit.protocols.judge_refine import Incident
from debatekit.protocols.judge_refine.hypotheses import keyword_match
from debatekit.records.schemas import RunConfig
from debatekit.runner import run

REASONERS = ["log_focused", "kg_focused", "hybrid"]
S45_KEYS = {"rounds", "final_hypothesis", "convergence_achieved", "total_rounds", "improvement_trajectory"}


def hyp(text, category="resource", components=("dn-07",), **extra):
    return {"hypothesis": text, "confidence": 0.6, "reasoning": f"because {text}", "evidence": [f"log: {text}"],
            "category": category, "affected_components": list(components),
            "suggested_resolution": "1. Free space 2. Throttle replication", **extra}


def scripted_debate(initial, refined, scores, feedback=None, grade=None):
    """A model answering as reasoners, judge and grader.

    initial: {reasoner: [hyp, ...]} for round 1; refined: {(reasoner, round): hyp} for later rounds;
    scores: {hypothesis text: score} (the judge reads the texts from its prompt: it never sees sources).
    """
    def fn(req):
        if req.phase == "hypothesize":
            return {"hypotheses": initial[req.agent]}
        if req.phase == "refine":
            return dict(refined[(req.agent, req.round)], changes_made=f"round {req.round} changes")
        if req.phase == "score":
            return grade
        assert req.phase == "judge"
        shown = re.findall(r"^\[(H\d+)\] (.*)$", req.messages[-1]["content"], re.M)
        verdict = {label: {"strengths": [f"S:{text}"], "weaknesses": [f"W:{text}"],
                           "feedback": (feedback or "F:{text}").format(text=text), "score": scores[text]}
                   for label, text in shown}
        verdict["top_hypothesis"] = max(shown, key=lambda s: scores[s[1]])[0]
        return verdict
    return fn


def three_each(prefix, categories=("resource", "software", "network")):
    return {r: [hyp(f"{prefix} {r} {k}", category=categories[k], components=(f"{r}-c{k}",)) for k in range(3)]
            for r in REASONERS}


def run_debate(tmp_path, model, name="run", limit=1, cache=True, **params):
    result = run(RunConfig(protocol="judge_refine", dataset="incidents", limit=limit, model=model, params=params,
                           cache=cache),
                 tmp_path / name, progress=False)
    return result, result.debates[0]


def events(path):
    return [json.loads(line) for line in (path / "events.jsonl").read_text().splitlines()]


def test_plateau_stops_the_debate_and_the_output_is_s45(tmp_path, model_from):
    initial = three_each("guess")
    refined = {(r, 2): hyp(f"refined {r}", category="software", components=(f"{r}-x",)) for r in REASONERS}
    scores = {h["hypothesis"]: 40 + 5 * k for r in REASONERS for k, h in enumerate(initial[r])}
    scores["guess hybrid 2"] = 70
    scores.update({"refined log_focused": 72, "refined kg_focused": 60, "refined hybrid": 50})
    result, debate = run_debate(tmp_path, model_from(scripted_debate(initial, refined, scores)))
    out = debate.output
    assert set(out) == S45_KEYS
    assert debate.stop_reason == "plateau" and out["convergence_achieved"] is True and debate.converged
    assert out["total_rounds"] == 2 and out["improvement_trajectory"] == [70, 72]
    final = out["final_hypothesis"]
    assert final["hypothesis"] == "refined log_focused" and final["judge_score"] == 72
    assert final["source"] == "log_focused" and final["rounds_refined"] == 2
    assert final["changes_made"] == "round 2 changes" and final["resolution"].startswith("1. Free space")
    assert {"hypothesis", "confidence", "judge_score", "source", "reasoning", "evidence", "resolution",
            "rounds_refined"} <= set(final)
    r1, r2 = out["rounds"]
    assert set(r1) == {"round_number", "hypotheses", "judge_evaluation", "top_hypothesis"}
    assert r1["top_hypothesis"]["hypothesis"] == "guess hybrid 2" and r1["top_hypothesis"]["judge_score"] == 70
    assert {r: len(h) for r, h in r1["hypotheses"].items()} == {r: 3 for r in REASONERS}
    assert [len(h) for h in r2["hypotheses"].values()] == [1, 1, 1]
    # per-round records carry the top score (engine.plateau reads it) and each reasoner's best
    assert [r.extra["top_score"] for r in debate.rounds] == [70, 72]
    assert debate.rounds[0].answers == {"log_focused": "guess log_focused 2", "kg_focused": "guess kg_focused 2",
                                        "hybrid": "guess hybrid 2"}
    assert debate.rounds[1].extra["scores"] == {"log_focused": 72, "kg_focused": 60, "hybrid": 50}
    calls = [(e["round"], e["phase"]) for e in events(result.path)]
    assert sorted(calls) == [(1, "hypothesize")] * 3 + [(1, "judge")] + [(2, "judge")] + [(2, "refine")] * 3


def test_max_rounds_when_scores_keep_improving(tmp_path, model_from):
    initial = three_each("guess")
    refined = {(r, n): hyp(f"refined {r} r{n}", category=c, components=(f"{r}-x",))
               for n in (2, 3) for r, c in zip(REASONERS, ("resource", "software", "network"))}
    scores = {h["hypothesis"]: 50 for r in REASONERS for h in initial[r]}
    scores.update({f"refined {r} r{n}": 50 + 10 * (n - 1) - k for n in (2, 3) for k, r in enumerate(REASONERS)})
    _, debate = run_debate(tmp_path, model_from(scripted_debate(initial, refined, scores)), rounds=3)
    out = debate.output
    assert debate.stop_reason == "max_rounds" and out["convergence_achieved"] is False
    assert out["total_rounds"] == 3 and out["improvement_trajectory"] == [50, 60, 70]
    assert out["final_hypothesis"]["hypothesis"] == "refined log_focused r3"
    assert out["final_hypothesis"]["rounds_refined"] == 3


def test_consensus_stops_when_all_reasoners_top_hypotheses_agree(tmp_path, model_from):
    initial = {r: [hyp(f"{r}: DataNode dn-07 /data/3 volume full", components=("DataNode dn-07", "/data/3")),
                   hyp(f"{r}: network", category="network", components=("switch",)),
                   hyp(f"{r}: gc", category="software", components=("NameNode",))] for r in REASONERS}
    initial["hybrid"][0]["affected_components"] = ["dn-07"]  # "dn-07" is inside "DataNode dn-07": same component
    scores = {h["hypothesis"]: 80 - 30 * k for r in REASONERS for k, h in enumerate(initial[r])}
    _, debate = run_debate(tmp_path, model_from(scripted_debate(initial, {}, scores)), rounds=3)
    assert debate.stop_reason == "consensus" and debate.output["convergence_achieved"] is True
    assert debate.output["total_rounds"] == 1 and debate.rounds[0].extra["consensus"] is True
    # the final hypothesis names the true cause of inc-001 (volume full + datanode): keyword scorer
    assert debate.correct is True and debate.score == 1.0


def test_consensus_stop_can_be_disabled(tmp_path, model_from):
    initial = {r: [hyp(f"{r} full disk", components=("dn-07",))] * 3 for r in REASONERS}
    scores = {f"{r} full disk": 60 for r in REASONERS}
    refined = {(r, 2): hyp(f"{r} full disk", components=("dn-07",)) for r in REASONERS}
    _, debate = run_debate(tmp_path, model_from(scripted_debate(initial, refined, scores)), rounds=2,
                           stop_on_consensus=False)
    assert debate.stop_reason == "plateau" and len(debate.rounds) == 2
    assert all(r.extra["consensus"] for r in debate.rounds)


def test_refinement_prompt_has_previous_hypothesis_score_feedback_and_others(tmp_path, model_from):
    seen = {}
    initial = three_each("guess")
    refined = {(r, 2): hyp(f"refined {r}") for r in REASONERS}
    scores = {h["hypothesis"]: 30 + 10 * k + 3 * i for i, r in enumerate(REASONERS) for k, h in enumerate(initial[r])}
    scores.update({f"refined {r}": 90 for r in REASONERS})
    inner = scripted_debate(initial, refined, scores, feedback="Cite the log line for {text}.")

    def fn(req):
        seen[(req.agent, req.phase, req.round)] = req.messages
        return inner(req)

    run_debate(tmp_path, model_from(fn), rounds=2)
    first = seen[("kg_focused", "hypothesize", 1)]
    second = seen[("kg_focused", "refine", 2)]
    assert second[0] == first[0]  # same focus system prompt
    assert second[1]["content"].startswith(first[1]["content"].split("=== INSTRUCTIONS ===")[0])  # same incident
    prompt = second[-1]["content"]
    assert "You are refining your root cause hypothesis based on judge feedback." in prompt
    own = prompt.split("=== YOUR PREVIOUS HYPOTHESIS ===")[1].split("=== JUDGE FEEDBACK ===")[0]
    assert "Hypothesis: guess kg_focused 2" in own and "Score: 53/100" in own and "Confidence: 0.6" in own
    judged = prompt.split("=== JUDGE FEEDBACK ===")[1].split("=== OTHER REASONERS' TOP HYPOTHESES ===")[0]
    assert "- S:guess kg_focused 2" in judged and "- W:guess kg_focused 2" in judged
    assert "Feedback: Cite the log line for guess kg_focused 2." in judged
    others = prompt.split("=== OTHER REASONERS' TOP HYPOTHESES ===")[1].split("=== INSTRUCTIONS ===")[0]
    assert "- log_focused (score 50/100): guess log_focused 2" in others
    assert "- hybrid (score 56/100): guess hybrid 2" in others and "kg_focused" not in others
    assert '"changes_made": "Summary of refinements"' in prompt
    # focus: the log reasoner reads the logs, the knowledge reasoner the KB and key lines, hybrid both
    log_view, kg_view, hybrid_view = (seen[(r, "hypothesize", 1)][1]["content"] for r in REASONERS)
    assert "=== LOGS ===" in log_view and "KB-12" not in log_view
    assert "=== LOGS ===" not in kg_view and "KB-12" in kg_view and "=== KEY LOG LINES ===" in kg_view
    assert "=== LOGS ===" in hybrid_view and "KB-12" in hybrid_view


def test_judge_sees_shuffled_hypotheses_without_sources_and_the_order_is_recorded(tmp_path, model_from):
    prompts = {}
    letter = dict(zip(REASONERS, "xyz"))  # hypothesis texts that do not give their source away
    initial = {r: [hyp(f"cause {letter[r]} {k}", components=(f"c{letter[r]}{k}",)) for k in range(3)]
               for r in REASONERS}
    scores = {h["hypothesis"]: 50 for r in REASONERS for h in initial[r]}
    inner = scripted_debate(initial, {}, scores)

    def fn(req):
        if req.phase == "judge":
            prompts[req.item_id] = req.messages[-1]["content"]
        return inner(req)

    model = model_from(fn)
    result, debate = run_debate(tmp_path, model, rounds=1)
    prompt = prompts["inc-001"]
    assert not any(name in prompt for name in ("log_focused", "kg_focused", "hybrid", "Log-Focused"))
    shown = re.findall(r"^\[(H\d+)\] cause (\w) (\d)$", prompt, re.M)
    assert [label for label, _, _ in shown] == [f"H{i}" for i in range(1, 10)]
    order = debate.output["rounds"][0]["judge_evaluation"]["order"]
    assert [(o["label"], letter[o["source"]], str(o["index"])) for o in order] == shown  # recorded = shown
    assert [o["source"] for o in order] != [r for r in REASONERS for _ in range(3)]  # actually shuffled
    saved = json.loads((result.path / "items" / "inc-001" / "judge_round1.json").read_text())
    assert saved["order"] == order and saved["prompt"] == prompt and saved["shuffled"] is True
    # deterministic for a seed; another seed gives another order; shuffle=False keeps reasoner order
    _, again = run_debate(tmp_path, model, name="again", rounds=1)
    assert again.output["rounds"][0]["judge_evaluation"]["order"] == order
    other = run(RunConfig(protocol="judge_refine", dataset="incidents", limit=1, model=model, seed=7,
                          params={"rounds": 1}), tmp_path / "seed7", progress=False).debates[0]
    assert other.output["rounds"][0]["judge_evaluation"]["order"] != order
    _, plain = run_debate(tmp_path, model, name="plain", rounds=1, shuffle=False)
    assert [o["source"] for o in plain.output["rounds"][0]["judge_evaluation"]["order"]] == \
        [r for r in REASONERS for _ in range(3)]


def test_judge_grade_sets_the_score_and_keywords_set_correct(tmp_path, model_from):
    initial = {r: [hyp("NameNode GC pauses", category="software", components=("NameNode",))] * 3 for r in REASONERS}
    grade = {"explanation": "different cause", "same_cause": False, "score": 15}
    model = model_from(scripted_debate(initial, {}, {"NameNode GC pauses": 60}, grade=grade))
    result, debate = run_debate(tmp_path, model, rounds=1, score_with_judge=True)
    assert debate.correct is False and debate.score == 0.15
    saved = json.loads((result.path / "items" / "inc-001" / "score.json").read_text())
    assert saved["keyword_match"] is False and saved["grade"] == grade
    assert [g["matched"] for g in saved["groups"]] == [False, False]
    grader = [e for e in events(result.path) if e["phase"] == "score"]
    assert len(grader) == 1 and grader[0]["agent"] == "grader"


def test_a_failing_judge_and_a_failing_reasoner_do_not_crash_the_debate(tmp_path, model_from):
    initial = three_each("guess")

    def fn(req):
        if req.phase == "judge" or req.agent == "kg_focused":
            return "not json"
        return {"hypotheses": initial[req.agent]}

    result, debate = run_debate(tmp_path, model_from(fn), rounds=2)
    assert debate.status == "ok" and debate.needs_human_review
    assert debate.output["improvement_trajectory"] == [None, None]
    assert debate.output["rounds"][0]["hypotheses"]["kg_focused"] == []
    assert debate.output["final_hypothesis"]["judge_score"] is None
    assert any(line.startswith("judge failed in round 1") for line in debate.log)
    assert result.summary.parse_failures > 0


def test_custom_reasoners_and_unknown_reasoner(tmp_path, model_from, capsys):
    seen = {}
    initial = {"dba": [hyp("dba idea")] * 3, "hybrid": [hyp("hybrid idea", category="config")] * 3}
    inner = scripted_debate(initial, {}, {"dba idea": 40, "hybrid idea": 41})

    def fn(req):
        seen[req.agent] = req.messages
        return inner(req)

    _, debate = run_debate(tmp_path, model_from(fn), rounds=1, agents=["dba", "hybrid"],
                           focus={"dba": "You are the database reasoner."})
    assert set(debate.rounds[0].answers) == {"dba", "hybrid"}
    assert "You are the database reasoner." in seen["dba"][0]["content"]
    assert main(["run", "judge_refine", "--dataset", "incidents", "--set", "agents=[log_focused, dba]",
                 "--model", "scripted/schema", "--out", str(tmp_path / "bad"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("debatekit: error: judge_refine: unknown reasoner 'dba'") and len(err.splitlines()) == 1


def test_dataset_fits_the_item_model_and_gold_causes_match_their_keywords():
    items, info = datasets.load("incidents", Incident)
    assert len(items) == info.items == 15
    for item in items:
        assert keyword_match(item.root_cause, item.keywords)[0], item.id


def test_dry_run_on_schema_filler(tmp_path):
    result = run(RunConfig(protocol="judge_refine", dataset="incidents", limit=2, model="scripted/schema"),
                 tmp_path / "dry", progress=False)
    assert result.summary.failed == 0
    for d in result.debates:
        assert set(d.output) == S45_KEYS and d.stop_reason in ("plateau", "consensus", "max_rounds")


def test_text_caps_off_sends_the_reply_models_without_character_caps(tmp_path, model_from):
    seen = {}

    def fn(req):
        seen.setdefault((caps, req.phase), (json.dumps(req.schema), req.params.get("max_tokens")))
        return script(req)

    long = "disk full on dn-07 " * 20  # 380 characters: past the hypothesis cap of 160
    script = scripted_debate({r: [hyp(f"{long}{r} {k}") for k in range(3)] for r in REASONERS}, {},
                             {f"{long}{r} {k}": 60 for r in REASONERS for k in range(3)},
                             grade={"explanation": "same disk", "same_cause": True, "score": 90})
    model = model_from(fn)
    for caps in (True, False):
        _, debate = run_debate(tmp_path, model, name=f"caps-{caps}", rounds=1, text_caps=caps, score_with_judge=True,
                               cache=False)  # every call reaches the model, the grader's included
        assert debate.status == "ok" and debate.output["final_hypothesis"]["hypothesis"].startswith(long)
        assert debate.score == 0.9
    for phase in ("hypothesize", "judge"):
        (capped, capped_budget), (free, free_budget) = seen[(True, phase)], seen[(False, phase)]
        assert '"maxLength"' in capped and '"maxLength"' not in free
        assert json.loads(free)["title"] == json.loads(capped)["title"] and free_budget > capped_budget
    # the grader measures the protocol: the same schema and budget whether the protocol's caps are on or off
    assert seen[(True, "score")] == seen[(False, "score")] and '"maxLength"' in seen[(True, "score")][0]
