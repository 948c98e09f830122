"""reconcile driven end to end by scripted models: what each agent is shown, the stop rules, the
recalibrated weighted vote, failed calls, convincing samples and bad parameters."""

import json

import pytest

from debatekit.cli.app import main
from debatekit.models import scripted
from debatekit.protocols.reconcile.vote import recalibrate, weighted_vote
from debatekit.records.schemas import RunConfig
from debatekit.runner import run

QUESTION = {"id": "q1", "question": "Where do you keep milk?", "choices": ["fridge", "oven", "shelf"], "answer": "A"}


@pytest.fixture
def choice_file(tmp_path):
    path = tmp_path / "choice.jsonl"
    path.write_text(json.dumps(QUESTION) + "\n")
    return path


def said(letter, confidence, why="because"):
    """A free-text reply with an answer and a confidence line (None: no confidence line)."""
    tail = "" if confidence is None else f"\nConfidence: {confidence}"
    return f"{why} {letter}.\nAnswer: {letter}{tail}"


def table(rows):
    """Reply by (round, agent) from {round: {agent: reply}}; a later round falls back to the last given."""
    def fn(req):
        known = [r for r in rows if r <= req.round]
        return rows[max(known)][req.agent]
    return fn


def go(tmp_path, dataset, model, **params):
    result = run(RunConfig(protocol="reconcile", dataset=str(dataset), limit=1, model=model, params=params),
                 tmp_path / "run", progress=False)
    events = [json.loads(line) for line in (result.path / "events.jsonl").read_text().splitlines()]
    return result.debates[0], events


def prompts_of(events, round_no):
    return {e["agent"]: e["messages"] for e in events if e["round"] == round_no}


def test_round_two_shows_every_agent_the_same_grouped_answers_with_raw_confidences(tmp_path, choice_file, model_from):
    model = model_from(table({1: {"agent1": said("B", 0.7, "ovens keep"), "agent2": said("A", 0.95, "cold keeps"),
                                  "agent3": said("B", 0.75, "heat keeps")},
                              2: {"agent1": said("A", 0.9), "agent2": said("A", 0.9), "agent3": said("B", 0.9)}}))
    debate, events = go(tmp_path, choice_file, model, rounds=2)
    first, second = prompts_of(events, 1), prompts_of(events, 2)
    assert [m["role"] for m in first["agent1"]] == ["user"] and [m["role"] for m in second["agent1"]] == ["user"]
    shown = {agent: messages[-1]["content"] for agent, messages in second.items()}
    assert shown["agent1"] == shown["agent2"] == shown["agent3"]  # one summary for all, own reply included
    text = shown["agent1"]
    assert text.startswith(first["agent1"][-1]["content"])  # the whole first prompt again, then the review
    groups = text.split("2 agents gave the answer B.")[1]
    assert "1 agent gave the answer A." in groups  # the larger group first
    b_group, a_group = groups.split("1 agent gave the answer A.")
    assert "my answer is B, because ovens keep B. My confidence is 0.7." in b_group
    assert "my answer is B, because heat keeps B. My confidence is 0.75." in b_group
    assert "my answer is A, because cold keeps A. My confidence is 0.95." in a_group
    assert "Answer: B" not in groups and "Confidence: 0.7" not in groups  # reply's own last lines stripped
    assert text.rstrip().endswith("`Confidence: C`, where C is a number from 0.0 to 1.0 saying how likely it is "
                                  "that your answer is right.")
    assert debate.rounds[0].extra["confidence"] == {"agent1": 0.7, "agent2": 0.95, "agent3": 0.75}
    assert debate.rounds[0].extra["weight"] == {"agent1": 0.3, "agent2": 0.8, "agent3": 0.3}


def test_only_the_two_most_common_answers_are_shown(tmp_path, choice_file, model_from):
    model = model_from(table({1: {"agent1": said("A", 0.5, "one"), "agent2": said("B", 0.5, "two"),
                                  "agent3": said("C", 1.0, "three")}}))
    _, events = go(tmp_path, choice_file, model, rounds=2)
    text = prompts_of(events, 2)["agent3"][-1]["content"]
    assert "1 agent gave the answer A." in text and "1 agent gave the answer B." in text
    assert "answer C" not in text and "three" not in text  # the third answer is dropped, as in the official code


@pytest.mark.parametrize("confidence, weight", [(0.0, 0.1), (0.6, 0.1), (0.61, 0.3), (0.79, 0.3), (0.8, 0.5),
                                                (0.89, 0.5), (0.9, 0.8), (0.99, 0.8), (1.0, 1.0), (None, 0.1)])
def test_recalibration_table(confidence, weight):
    assert recalibrate(confidence) == weight


def test_weighted_vote_ties_go_to_the_answer_given_first():
    assert weighted_vote({"a": "A", "b": "B"}, {"a": 0.7, "b": 0.75})[0] == "A"
    assert weighted_vote({"a": "B", "b": "A"}, {"a": 0.7, "b": 0.75})[0] == "B"
    assert weighted_vote({"a": None, "b": None}, {}) == (None, {})


def test_a_confident_minority_outvotes_the_majority(tmp_path, choice_file, model_from):
    model = model_from(table({1: {"agent1": said("B", 0.7), "agent2": said("B", 0.75), "agent3": said("A", 1.0)}}))
    debate, _ = go(tmp_path, choice_file, model, rounds=1)
    assert debate.final_answer == "A" and debate.correct is True
    assert debate.output["majority"] == "B"
    assert debate.output["weights"] == {"agent1": 0.3, "agent2": 0.3, "agent3": 1.0}
    assert debate.output["votes"] == {"B": pytest.approx(0.6, abs=1e-4), "A": pytest.approx(1.0, abs=1e-4)}


def test_stops_when_all_agree(tmp_path, choice_file, model_from):
    model = model_from(lambda req: said("A", 0.9))
    debate, events = go(tmp_path, choice_file, model)
    assert debate.stop_reason == "agreement" and debate.converged and len(debate.rounds) == 1
    assert len(events) == 3 and debate.final_answer == "A"


def test_runs_all_rounds_without_agreement_and_votes_on_the_last(tmp_path, choice_file, model_from):
    model = model_from(table({1: {"agent1": said("A", 1.0), "agent2": said("B", 0.5), "agent3": said("B", 0.5)},
                              3: {"agent1": said("A", 0.5), "agent2": said("A", 0.5), "agent3": said("B", 1.0)}}))
    debate, events = go(tmp_path, choice_file, model)
    assert debate.stop_reason == "max_rounds" and not debate.converged and len(debate.rounds) == 3
    assert sorted((e["round"], e["phase"]) for e in events) == [(1, "answer")] * 3 + [(2, "discuss")] * 3 + \
        [(3, "discuss")] * 3
    assert debate.final_answer == "B" and debate.output["majority"] == "A"  # round 3: A 0.2 vs B 1.0


def test_a_missing_confidence_weighs_as_zero_and_is_recorded_as_none(tmp_path, choice_file, model_from):
    model = model_from(table({1: {"agent1": said("A", None, "no idea"), "agent2": said("B", 0.3),
                                  "agent3": said("A", "85%")}}))
    debate, events = go(tmp_path, choice_file, model, rounds=2)
    assert debate.rounds[0].extra["confidence"] == {"agent1": None, "agent2": 0.3, "agent3": 0.85}
    assert debate.rounds[0].extra["weight"] == {"agent1": 0.1, "agent2": 0.1, "agent3": 0.5}
    assert "because no idea A. My confidence is 0.0." in prompts_of(events, 2)["agent1"][-1]["content"]
    assert debate.usage.parse_failures == 0


def test_an_answer_followed_by_a_confidence_in_words_is_read_as_the_answer(tmp_path, model_from):
    # the embedded model's way (reconcile's first GSM8K debates): read before the fix as answer 1, confidence none
    sheep = tmp_path / "sheep.jsonl"
    sheep.write_text(json.dumps({"id": "s", "question": "How many sheep?", "answer": 260}) + "\n")
    worded = ("160 + 80 + 20 = 260, so they have \\(\\boxed{{{n}}}\\) sheep.\n\n"
              "Now, let's judge the confidence of our answer:\n- plain multiplication\n\n"
              "Hence, the confidence of our answer is \\({c}\\).")
    model = model_from(table({1: {"agent1": worded.format(n=260, c="1.0"), "agent2": worded.format(n=360, c="0.7"),
                                  "agent3": worded.format(n=260, c="0.9")}}))
    debate, events = go(tmp_path, sheep, model, rounds=2)
    assert debate.rounds[0].answers == {"agent1": 260, "agent2": 360, "agent3": 260}
    assert debate.rounds[0].extra["confidence"] == {"agent1": 1.0, "agent2": 0.7, "agent3": 0.9}
    shown = prompts_of(events, 2)["agent2"][-1]["content"]
    assert "2 agents gave the answer 260." in shown and "1 agent gave the answer 360." in shown
    assert "My confidence is 1.0." in shown and "My confidence is 0.0." not in shown
    assert debate.final_answer == 260 and debate.usage.parse_failures == 0


def test_json_format_reads_the_confidence_field(tmp_path, choice_file, model_from):
    replies = {"agent1": {"reasoning": "cold", "answer": "A", "confidence": 0.95},
               "agent2": {"reasoning": "hot", "answer": "B", "confidence": "70%"},
               "agent3": {"reasoning": "hot", "answer": "B", "confidence": 0.6}}
    seen = []

    def fn(req):
        seen.append(req.schema)
        return replies[req.agent]

    debate, events = go(tmp_path, choice_file, model_from(fn), rounds=1, answer_format="json")
    assert debate.rounds[0].extra["confidence"] == {"agent1": 0.95, "agent2": 0.7, "agent3": 0.6}
    assert debate.final_answer == "A" and debate.output["majority"] == "B"  # 0.8 against 0.3 + 0.1
    schema = seen[0]
    assert "confidence" in schema["required"] and schema["properties"]["confidence"]["maximum"] == 1


def test_failed_calls_are_left_out_not_scored_as_answers(tmp_path, choice_file, model_from):
    model = model_from(lambda req: scripted.Fault("bad_request") if req.agent == "agent3" else
                       said("A", 0.9) if req.agent == "agent1" else said("B", 0.5))
    debate, events = go(tmp_path, choice_file, model, rounds=2)
    assert debate.status == "degraded" and debate.final_answer == "A"
    assert all(r.answers["agent3"] is None and "agent3" not in r.extra["weight"] for r in debate.rounds)
    text = prompts_of(events, 2)["agent1"][-1]["content"]
    assert text.count("Solution of one agent") == 2  # agent3 failed: nothing of it is shown
    assert debate.output["answers"]["agent3"] is None


def test_a_table_where_every_call_fails_is_an_error_not_a_wrong_answer(tmp_path, model_from):
    path = tmp_path / "two.jsonl"
    path.write_text(json.dumps(QUESTION) + "\n" + json.dumps({**QUESTION, "id": "q2"}) + "\n")
    model = model_from(lambda req: scripted.Fault("bad_request") if req.item_id == "q2" else said("A", 1.0))
    result = run(RunConfig(protocol="reconcile", dataset=str(path), model=model, concurrency=1, params={"rounds": 2}),
                 tmp_path / "run", progress=False)
    ok, failed = result.debates
    assert ok.status == "ok" and ok.correct is True
    assert failed.status == "error" and failed.final_answer is None and failed.correct is None
    assert [r.answers for r in failed.rounds] == [{"agent1": None, "agent2": None, "agent3": None}] * 2


def test_when_the_last_round_fails_the_vote_is_on_the_latest_round_with_answers(tmp_path, choice_file, model_from):
    model = model_from(lambda req: scripted.Fault("bad_request") if req.round == 2 else
                       said("B", 0.7) if req.agent != "agent3" else said("A", 1.0))
    debate, _ = go(tmp_path, choice_file, model, rounds=2)
    assert debate.status == "degraded" and len(debate.rounds) == 2 and debate.final_answer == "A"
    assert debate.output["answers"] == {"agent1": "B", "agent2": "B", "agent3": "A"}


def test_models_are_dealt_to_the_agents(tmp_path, choice_file, model_from):
    served = {}

    def by(name):
        def fn(req):
            served.setdefault(name, set()).add(req.agent)
            return said("A", 1.0)
        return fn

    first, second = model_from(by("first")), model_from(by("second"))
    debate, _ = go(tmp_path, choice_file, first, models=[first, second])
    assert served == {"first": {"agent1", "agent3"}, "second": {"agent2"}} and debate.final_answer == "A"


TRAIN = [{"id": f"t{k}", "question": f"Train question {k}?", "choices": ["x", "y"], "answer": "A",
          "metadata": {"explanation": f"gold reason {k}"}} for k in (1, 2, 3)]


def test_convincing_samples_are_those_a_gold_explanation_turned_right(tmp_path, choice_file, model_from):
    train = tmp_path / "train.jsonl"
    train.write_text("".join(json.dumps(r) + "\n" for r in TRAIN))
    convinced_by = {"m1": "t1", "m2": "t2"}

    def model(name):
        def fn(req):
            if req.phase == "convince_before":  # t3 is right alone, so it convinces nobody
                return said("A" if "Train question 3" in req.prompt else "B", 0.5)
            if req.phase == "convince_after":
                mine = f"gold reason {convinced_by[name][1]}" in req.prompt
                return said("A" if mine else "B", 0.5)
            return said("A", 1.0)
        return fn

    m1, m2 = model_from(model("m1")), model_from(model("m2"))
    debate, events = go(tmp_path, choice_file, m1, models={"agent2": m2}, convincing=str(train))
    # each agent sees the samples of the other agents' models: agent2 (m2) only m1's
    assert debate.output["convincing"] == {"agent1": ["t2", "t1"], "agent2": ["t1"], "agent3": ["t1", "t2"]}
    pre = [e for e in events if e["round"] == 0]
    assert {(e["agent"], e["phase"]) for e in pre} == {("agent1", "convince_before"), ("agent1", "convince_after"),
                                                       ("agent2", "convince_before"), ("agent2", "convince_after")}
    assert len(pre) == 10  # per model: 3 items alone, the 2 it got wrong again with their explanation
    hinted = next(e for e in pre if e["phase"] == "convince_after")["messages"][-1]["content"]
    assert "Use this fact in your answer: gold reason" in hinted
    agent2 = prompts_of(events, 1)["agent2"]
    assert [m["role"] for m in agent2] == ["user", "assistant", "user"]
    assert agent2[0]["content"].startswith("Q: Train question 1?\nA) x\nB) y")
    assert agent2[1]["content"] == "gold reason 1\nAnswer: A"
    assert len(prompts_of(events, 1)["agent1"]) == 5 and debate.final_answer == "A"


def test_convincing_samples_appear_as_json_in_json_format(tmp_path, choice_file, model_from):
    train = tmp_path / "train.jsonl"
    train.write_text(json.dumps(TRAIN[0]) + "\n")

    def fn(req):
        if req.phase == "convince_before":
            return {"reasoning": "guess", "answer": "B", "confidence": 0.5}
        return {"reasoning": "sure", "answer": "A", "confidence": 1.0}

    debate, events = go(tmp_path, choice_file, model_from(fn), convincing=str(train), answer_format="json")
    shot = prompts_of(events, 1)["agent1"][1]["content"]
    assert json.loads(shot) == {"reasoning": ["gold reason 1"], "answer": "A"}
    assert debate.output["convincing"]["agent1"] == ["t1"]


def test_convincing_is_off_by_default(tmp_path, choice_file, model_from):
    debate, events = go(tmp_path, choice_file, model_from(lambda req: said("A", 1.0)))
    assert all(e["round"] == 1 for e in events) and debate.output["convincing"] == {f"agent{k}": [] for k in (1, 2, 3)}


def test_bad_parameters_are_one_line_errors(tmp_path, choice_file, capsys):
    no_explanation = tmp_path / "bare.jsonl"
    no_explanation.write_text(json.dumps({"id": "t1", "question": "Q?", "answer": "yes"}) + "\n")
    cases = ((["agents=1"], "reconcile: a round table needs at least 2 agents, got 1"),
             (["rounds=0"], "parameter 'rounds'"),
             (["convincing=commonsenseqa"], "'commonsenseqa' is a shipped test/dev split (no shipped dataset has a "
                                            "training split)"),
             (["convincing=true"], "name the training split's JSONL file (convincing=FILE.jsonl)"),
             ([f"convincing={no_explanation}"], "item 't1' has no explanation"),
             ([f"convincing={tmp_path / 'missing.jsonl'}"], "convincing samples need a training split: dataset file "
                                                            "not found"),
             (["convincing_samples=9"], "convincing_samples (9) cannot exceed convincing_pool (8)"),
             (["models={cy: scripted/schema}"], "reconcile: models given for 'cy', not among agents"))
    for settings, message in cases:
        args = [a for s in settings for a in ("--set", s)]
        assert main(["run", "reconcile", "--dataset", str(choice_file), "--model", "scripted/schema",
                     "--out", str(tmp_path / "r"), "--quiet", *args]) == 2
        err = capsys.readouterr().err
        assert err.startswith("debatekit: error:") and message in err and err.count("\n") == 1, err


def test_after_a_round_nobody_answered_the_agents_get_the_first_prompt_again(tmp_path, choice_file, model_from):
    model = model_from(lambda req: "no answer here" if req.round == 1 else said("A", 0.9))
    debate, events = go(tmp_path, choice_file, model, rounds=2)
    assert debate.rounds[0].answers == {"agent1": None, "agent2": None, "agent3": None}
    assert prompts_of(events, 2)["agent1"] == prompts_of(events, 1)["agent1"]
    assert debate.final_answer == "A" and debate.usage.parse_failures == 6
