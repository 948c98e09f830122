"""consultancy driven end to end by scripted models; assertions on what the consultant and the judge saw."""

import json

import pytest

from debatekit.models.scripted import Fault
from debatekit.protocols.judged_debate.consultancy import consultancy_report
from debatekit.records.schemas import RunConfig
from debatekit.registry import ProtocolError, get
from debatekit.runner import run
from tests.protocols.judged_helpers import FACTS, choice_file, pick, roles, yes_no_file


def go(tmp_path, model, data, out="run", seed=0, **params):
    return run(RunConfig(protocol="consultancy", dataset=str(data), model=model, seed=seed, params=params),
               tmp_path / out, progress=False)


def test_the_consultant_argues_the_right_answer_on_about_half_the_items_drawn_from_the_seed(tmp_path, model_from):
    data = yes_no_file(tmp_path / "d.jsonl", n=20)
    sides = {}
    for out, seed in (("one", 0), ("again", 0), ("other", 3)):
        result = go(tmp_path, model_from(roles([])), data, out, seed=seed, rounds=1)
        sides[out] = {d.item_id: d.output["consultant_correct"] for d in result.debates}
        for d in result.debates:
            assert (d.output["consultant_answer"] == d.truth) == d.output["consultant_correct"]
            assert d.rounds[0].answers == {"consultant": d.output["consultant_answer"]}
    assert 5 <= sum(sides["one"].values()) <= 15
    assert sides["one"] == sides["again"] and sides["one"] != sides["other"]
    report = consultancy_report(tmp_path / "one")
    assert f"right answer in {sum(sides['one'].values())} of 20 debates" in report
    assert "judge accuracy when the consultant was right" in report and "was wrong" in report


def test_the_consultant_defends_its_side_and_reads_the_evidence_the_judge_never_sees(tmp_path, model_from):
    seen = []
    (debate,) = go(tmp_path, model_from(roles(seen)), choice_file(tmp_path / "m.jsonl"), rounds=3).debates
    consultant = [r for r in seen if r.agent == "consultant"]
    judges = [r for r in seen if r.agent == "judge"]
    assert len(consultant) == 3 and [r.phase for r in judges] == ["question", "question", "judge", "judge_swapped"]
    mine = ["Rhine", "Danube", "Nile", "Volga", "Thames"]["ABCDE".index(debate.output["consultant_answer"])]
    assert (mine == "Nile") == debate.output["consultant_correct"]
    for req in consultant:
        assert all(fact in req.messages[-1]["content"] for fact in FACTS)
        assert f"<your_answer>{mine}</your_answer>" in req.messages[1]["content"]
    for req in judges:
        assert FACTS[1] not in json.dumps(req.messages) and "<evidence>" not in req.prompt
    final = next(r.prompt for r in judges if r.phase == "judge")
    assert final.count(f"<v_quote>{FACTS[0].upper()}</v_quote>") == 3 and "<u_quote>the Nile is purple</u_quote>" in final


def test_the_judge_questions_from_round_two_and_the_consultant_answers_that_question(tmp_path, model_from):
    seen = []
    (debate,) = go(tmp_path, model_from(roles(seen)), yes_no_file(tmp_path / "d.jsonl"), rounds=3).debates
    calls = [(r.round, r.agent, r.phase) for r in seen if r.round is not None]
    assert calls == [(1, "consultant", "argue"), (2, "judge", "question"), (2, "consultant", "argue"),
                     (3, "judge", "question"), (3, "consultant", "argue")]
    asked = {r.round: r.prompt for r in seen if r.phase == "question"}
    assert "arg-consultant-r1" in asked[2] and "<u_quote>the Nile is purple</u_quote>" in asked[2]
    assert "arg-consultant-r2" in asked[3] and "why-r2?" in asked[3]
    answered = {r.round: r.messages[-1]["content"] for r in seen if r.agent == "consultant"}
    assert 'Judge: """why-r2?"""' in answered[2] and "Reply to the judge's question" in answered[2]
    assert answered[2].index("arg-consultant-r1") < answered[2].index("why-r2?")
    assert "Judge:" not in answered[1] and "opening argument" in answered[1]
    assert debate.output["questions"] == ["why-r2?", "why-r3?"]
    assert [r.extra["question"] for r in debate.rounds] == [None, "why-r2?", "why-r3?"]
    # the final judge reads each round's question before the consultant's reply
    final = next(r.prompt for r in seen if r.phase == "judge")
    assert final.index('Judge: """why-r2?"""') < final.index("arg-consultant-r2")


def test_the_questioning_judge_lists_the_answers_in_position_order_not_right_first(tmp_path, model_from):
    seen = []
    result = go(tmp_path, model_from(roles(seen)), yes_no_file(tmp_path / "d.jsonl", n=8), rounds=2)
    firsts = set()
    for d in result.debates:
        prompt = next(r.prompt for r in seen if r.phase == "question" and r.item_id == d.item_id)
        listed = prompt.split("Answer choices:\n")[1].split("\n\n")[0]
        assert listed == f"- {d.output['candidates']['A']}\n- {d.output['candidates']['B']}"
        firsts.add(listed.splitlines()[0][2:] == d.truth)
    assert firsts == {True, False}


def test_without_interactive_there_are_no_questions(tmp_path, model_from):
    seen = []
    (debate,) = go(tmp_path, model_from(roles(seen)), yes_no_file(tmp_path / "d.jsonl"), rounds=2,
                   interactive=False).debates
    assert not [r for r in seen if r.phase == "question"] and debate.output["questions"] == []
    second = next(r.messages[-1]["content"] for r in seen if r.agent == "consultant" and r.round == 2)
    assert "next argument" in second and "Judge:" not in second


def test_the_final_judge_reads_both_letter_orders_and_its_probability_decides(tmp_path, model_from):
    seen = []
    data = yes_no_file(tmp_path / "d.jsonl")  # truth yes
    (debate,) = go(tmp_path, model_from(roles(seen, verdict=pick("yes", 0.75))), data, rounds=1).debates
    as_run, swapped = (next(r.prompt for r in seen if r.phase == p) for p in ("judge", "judge_swapped"))
    assert as_run.split("The consultancy so far")[1] == swapped.split("The consultancy so far")[1]
    options = lambda text: [line[3:] for line in text.splitlines() if line[:3] in ("A: ", "B: ")]  # noqa: E731
    assert sorted(options(as_run)) == ["no", "yes"] and options(swapped) == options(as_run)[::-1]
    letters = [j["letter"] for j in debate.output["judgements"]]
    assert sorted(letters) == ["A", "B"] and debate.final_answer == "yes" and debate.correct is True
    assert debate.output["p_correct"] == 0.75 and debate.output["order_accuracy"] == 1.0


def test_a_failed_question_leaves_the_round_without_one_and_the_consultant_argues_on(tmp_path, model_from):
    seen = []
    model = model_from(roles(seen, question=lambda req: Fault("bad_request", "judge down")))
    (debate,) = go(tmp_path, model, yes_no_file(tmp_path / "d.jsonl"), rounds=2).debates
    second = next(r.messages[-1]["content"] for r in seen if r.agent == "consultant" and r.round == 2)
    assert "next argument" in second and "Reply to the judge's question" not in second
    assert debate.status == "degraded" and debate.output["missing"] == ["round 2 question"]


def test_a_judge_without_a_readable_verdict_is_not_scored(tmp_path, model_from):
    model = model_from(roles([], verdict=lambda req, shown: "<thinking>no idea</thinking>"))
    (debate,) = go(tmp_path, model, yes_no_file(tmp_path / "d.jsonl"), rounds=1).debates
    assert debate.status == "failed" and debate.correct is None


def test_a_failed_consultant_turn_is_missing_not_an_answer(tmp_path, model_from):
    def argument(req):
        return Fault("server", "down") if req.round == 1 else "<argument>arg two</argument>"

    (debate,) = go(tmp_path, model_from(roles([], argument=argument)), yes_no_file(tmp_path / "d.jsonl"),
                   rounds=2, interactive=False).debates
    assert debate.output["missing"] == ["round 1 consultant"] and debate.rounds[0].answers == {"consultant": None}
    assert debate.status == "degraded"


@pytest.mark.parametrize("params, field", [({"rounds": 11}, "rounds"), ({"word_limit": 3}, "word_limit"),
                                           ({"interactive": "sometimes"}, "interactive")])
def test_bad_parameters_are_one_line_errors(params, field):
    with pytest.raises(ProtocolError, match=f"parameter '{field}'") as caught:
        get("consultancy").build(params)
    assert "\n" not in str(caught.value)


def test_json_replies_work_for_every_role(tmp_path, model_from):
    def fn(req):
        if req.phase == "argue":
            return {"thinking": "t", "argument": f"arg <quote>{FACTS[1]}</quote>"}
        if req.phase == "question":
            return {"thinking": "t", "question": "and why?"}
        return {"thinking": "t", "answer": "B", "probability": 0.8}

    (debate,) = go(tmp_path, model_from(fn), yes_no_file(tmp_path / "d.jsonl"), rounds=2, answer_format="json").debates
    assert debate.status == "ok" and debate.output["questions"] == ["and why?"]
    assert debate.output["quotes"] == {"verified": 2, "unverified": 0}
    assert [j["letter"] for j in debate.output["judgements"]] == ["B", "B"]
