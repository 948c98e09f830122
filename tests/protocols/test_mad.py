"""mad (Liang et al. 2023) driven by scripted models: turn order, what each role sees, the
moderator's break, the judge, failed calls and bad parameters."""

import json

import pytest

from debatekit.models import scripted
from debatekit.protocols.mad import prompts
from debatekit.protocols.shared.answers import AnswerSpec
from debatekit.records.schemas import RunConfig
from debatekit.runner import run

NO = "Neither side has settled it.\nPreference: no\nSide: none\nAnswer: none"


def prefer(value, side="affirmative"):
    return f"The {side} side is right.\nPreference: yes\nSide: {side}\nAnswer: {value}"


def debate(tmp_path, dataset, model_from, moderator=lambda r: NO, judge="The judge weighs it.\nAnswer: 10",
           fault=lambda req: None, **params):
    """Run mad on the first item; debaters answer 10 (affirmative) and 11 (negative), each turn
    naming its side and round. Returns (debate record, the requests in call order)."""
    calls = []

    def fn(req):
        calls.append(req)
        if (injected := fault(req)) is not None:
            return injected
        if req.agent == "moderator":
            return moderator(req.round)
        if req.agent == "judge":
            return "Candidates: 10 and 11" if req.phase == "candidates" else judge
        value = 10 if req.agent == "affirmative" else 11
        return f"{req.agent} argues in round {req.round}\nAnswer: {value}"

    result = run(RunConfig(protocol="mad", dataset=str(dataset), limit=1, model=model_from(fn), params=params),
                 tmp_path / "run", progress=False)
    return result.debates[0], calls


def where(calls):
    return [(c.agent, c.round, c.phase) for c in calls]


def last(req):
    return req.messages[-1]["content"]


def test_who_speaks_when_and_sees_what_then_the_judge_reads_the_openings(tmp_path, arithmetic_file, model_from):
    record, calls = debate(tmp_path, arithmetic_file, model_from, rounds=2)
    assert where(calls) == [("affirmative", 1, "argue"), ("negative", 1, "argue"), ("moderator", 1, "moderate"),
                            ("affirmative", 2, "argue"), ("negative", 2, "argue"), ("moderator", 2, "moderate"),
                            ("judge", None, "candidates"), ("judge", None, "judge")]
    aff1, neg1, mod1, aff2, neg2, mod2, candidates, verdict = calls
    # round 1: the affirmative sees the question only; the negative its answer and the order to disagree
    assert [m["role"] for m in aff1.messages] == ["system", "user"] and "What is 10?" in last(aff1)
    assert "What is 10?" in aff1.messages[0]["content"] and "argues" not in aff1.prompt
    assert last(neg1).startswith("affirmative argues in round 1\nAnswer: 10\n\nYou do not agree with my answer")
    assert "Round 1" in last(mod1) and "affirmative argues in round 1" in last(mod1) \
        and "negative argues in round 1" in last(mod1)
    # round 2: each side sees the other's latest turn and is asked whether it agrees, no longer told to disagree
    assert [m["role"] for m in aff2.messages] == ["system", "user", "assistant", "user"]
    assert last(aff2).startswith("negative argues in round 1") and "Do you agree" in last(aff2)
    assert last(neg2).startswith("affirmative argues in round 2") and "You do not agree" not in last(neg2)
    assert [m["role"] for m in mod2.messages] == ["system", "user", "assistant", "user"]
    assert "Round 2" in last(mod2) and "negative argues in round 2" in last(mod2) \
        and "round 1" not in last(mod2)
    # the debaters never see the moderator
    assert not any("Neither side" in c.prompt for c in (aff1, neg1, aff2, neg2))
    # the judge: the moderator's system prompt, the two openings only, then its candidates and the question
    assert candidates.messages[0] == mod1.messages[0] and len(candidates.messages) == 2
    assert "affirmative argues in round 1" in last(candidates) and "negative argues in round 1" in last(candidates)
    assert "round 2" not in candidates.prompt
    assert [m["content"] for m in verdict.messages[:3]] == [m["content"] for m in candidates.messages] + [
        "Candidates: 10 and 11"]
    assert "What is 10?" in last(verdict) and "Answer: X" in last(verdict)

    assert record.status == "ok" and record.final_answer == 10 and record.correct is True
    assert record.stop_reason == "max_rounds" and record.converged is False
    assert [r.answers for r in record.rounds] == [{"affirmative": 10, "negative": 11}] * 2
    no_preference = {"preference": False, "supported_side": None, "answer": None}
    assert [r.extra["moderator"] for r in record.rounds] == [no_preference] * 2
    assert record.output["moderator"] == [no_preference] * 2
    assert record.output["decided_by"] == "judge" and record.output["candidates"] == "Candidates: 10 and 11"


def test_the_moderators_answer_ends_the_debate(tmp_path, arithmetic_file, model_from):
    record, calls = debate(tmp_path, arithmetic_file, model_from, moderator=lambda r: prefer(11, "negative"))
    assert where(calls) == [("affirmative", 1, "argue"), ("negative", 1, "argue"), ("moderator", 1, "moderate")]
    assert record.stop_reason == "moderator" and record.final_answer == 11 and record.correct is False
    assert record.rounds[0].extra["moderator"] == {"preference": True, "supported_side": "negative", "answer": 11}
    assert record.output["decided_by"] == "moderator" and record.output["supported_side"] == "negative"
    assert record.output["reasoning"].startswith("The negative side is right")


def test_the_break_follows_the_answer_not_the_preference_flag_as_in_the_official_code(
        tmp_path, arithmetic_file, model_from):
    flag_only = "One side is better.\nPreference: yes\nSide: affirmative\nAnswer: none"
    record, calls = debate(tmp_path, arithmetic_file, model_from, moderator=lambda r: flag_only if r == 1
                           else "Undecided.\nPreference: no\nSide: none\nAnswer: 10", rounds=3)
    assert len(calls) == 6 and record.stop_reason == "moderator" and record.final_answer == 10
    assert record.rounds[0].extra["moderator"]["preference"] is True


def test_a_preference_in_the_last_round_decides_without_the_judge(tmp_path, arithmetic_file, model_from):
    record, calls = debate(tmp_path, arithmetic_file, model_from, moderator=lambda r: prefer(10) if r == 2 else NO,
                           rounds=2)
    assert len(calls) == 6 and "judge" not in {c.agent for c in calls}
    assert record.stop_reason == "moderator" and record.final_answer == 10
    assert record.output["decided_by"] == "moderator"


@pytest.mark.parametrize("last_round, judged, final", [(NO, True, 10), (prefer(12), False, 12)])
def test_without_adaptive_break_every_round_runs_and_the_last_decision_counts(
        tmp_path, arithmetic_file, model_from, last_round, judged, final):
    record, calls = debate(tmp_path, arithmetic_file, model_from, adaptive_break=False,
                           moderator=lambda r: last_round if r == 3 else prefer(11, "negative"))
    assert [c.agent for c in calls[:9]] == ["affirmative", "negative", "moderator"] * 3
    assert len(calls) == (11 if judged else 9) and record.stop_reason == "max_rounds"
    assert record.final_answer == final and record.output["decided_by"] == ("judge" if judged else "moderator")
    assert [r.extra["moderator"]["answer"] for r in record.rounds][:2] == [11, 11]


def test_a_failing_moderator_is_no_preference_and_the_debate_goes_on(tmp_path, arithmetic_file, model_from):
    record, calls = debate(tmp_path, arithmetic_file, model_from, moderator=lambda r: prefer(10),
                           fault=lambda req: scripted.Fault("server") if (req.agent, req.round) == ("moderator", 1)
                           else "no decision at all" if (req.agent, req.round) == ("moderator", 2) else None)
    assert record.status == "degraded" and record.final_answer == 10 and record.stop_reason == "moderator"
    first, second, third = (r.extra["moderator"] for r in record.rounds)
    assert first["preference"] is None and first["error"].startswith("server")
    assert second["preference"] is None and second["error"].startswith("parse")
    assert third["answer"] == 10 and record.usage.parse_failures == 2
    moderator = [c for c in calls if c.agent == "moderator"]
    # the failed round's prompt was dropped: round 3 sees rounds 2 (its garbage reply kept) and 3
    assert [m["role"] for m in moderator[-1].messages] == ["system", "user", "assistant", "user"]
    assert "Round 2" in moderator[-1].messages[1]["content"]


def test_a_moderator_failing_every_round_leaves_the_answer_to_the_judge(tmp_path, arithmetic_file, model_from):
    record, calls = debate(tmp_path, arithmetic_file, model_from,
                           fault=lambda req: scripted.Fault("server") if req.agent == "moderator" else None)
    assert record.status == "degraded" and record.final_answer == 10 and record.correct is True
    assert record.output["decided_by"] == "judge" and len(record.rounds) == 3


@pytest.mark.parametrize("phase", ["candidates", "judge"])
def test_a_failing_judge_is_no_answer_not_a_wrong_one(tmp_path, arithmetic_file, model_from, phase):
    record, calls = debate(tmp_path, arithmetic_file, model_from, rounds=1,
                           fault=lambda req: scripted.Fault("server") if req.phase == phase else None)
    assert record.final_answer is None and record.status == "error" and record.correct is None
    assert record.score is None and record.output["decided_by"] is None
    assert ("judge" in [c.phase for c in calls]) == (phase == "judge")  # no verdict asked without candidates


def test_a_judge_reply_without_an_answer_is_the_models_answer_and_scored(tmp_path, arithmetic_file, model_from):
    record, _ = debate(tmp_path, arithmetic_file, model_from, rounds=1, judge="I cannot say.")
    assert record.status == "ok" and record.final_answer is None and record.correct is False
    assert record.usage.parse_failures == 2


def test_a_debater_whose_call_fails_is_shown_as_missing(tmp_path, arithmetic_file, model_from):
    record, calls = debate(tmp_path, arithmetic_file, model_from, rounds=2,
                           fault=lambda req: scripted.Fault("server") if (req.agent, req.round) == ("negative", 1)
                           else None)
    by = {(c.agent, c.round): c for c in calls}
    assert prompts.MISSING in last(by[("moderator", 1)]) and last(by[("affirmative", 2)]).startswith(prompts.MISSING)
    assert [m["role"] for m in by[("negative", 2)].messages] == ["system", "user"]
    assert prompts.MISSING in last(calls[-2])  # the judge reads the missing opening as missing
    assert record.status == "degraded" and record.rounds[0].answers == {"affirmative": 10, "negative": None}


def test_models_per_role_and_the_judge_model(tmp_path, arithmetic_file, model_from):
    served = {}

    def by(name, reply):
        return model_from(lambda req: served.setdefault(name, set()).add(req.agent) or reply(req))

    debater = lambda req: f"I argue.\nAnswer: {10 if req.agent == 'affirmative' else 11}"  # noqa: E731
    default = by("default", debater)
    params = {"rounds": 1, "models": {"moderator": by("mod", lambda req: NO)},
              "judge_model": by("judge", lambda req: "A list" if req.phase == "candidates" else "Answer: 10")}
    result = run(RunConfig(protocol="mad", dataset=str(arithmetic_file), limit=1, model=default, params=params),
                 tmp_path / "run", progress=False)
    assert served == {"default": {"affirmative", "negative"}, "mod": {"moderator"}, "judge": {"judge"}}
    assert result.debates[0].final_answer == 10


@pytest.mark.parametrize("answer_format", ["text", "json"])
@pytest.mark.parametrize("dataset", ["commonsenseqa", "strategyqa", "arithmetic"])
def test_shipped_datasets_in_both_formats_on_the_schema_model(tmp_path, dataset, answer_format):
    result = run(RunConfig(protocol="mad", dataset=dataset, limit=2, model="scripted/schema", cache=False,
                           params={"answer_format": answer_format}), tmp_path / "run", progress=False)
    for record in result.debates:
        assert record.status == "ok" and record.usage.parse_failures == 0 and record.correct is not None
        decision = record.rounds[-1].extra["moderator"]
        kind = {"commonsenseqa": str, "strategyqa": str, "arithmetic": int}[dataset]
        assert isinstance(record.final_answer, kind) and decision["preference"] is not None
    events = [json.loads(line) for line in (tmp_path / "run" / "events.jsonl").read_text().splitlines()]
    moderator = next(e for e in events if e["agent"] == "moderator")
    assert ("`preference`" in moderator["messages"][-1]["content"]) == (answer_format == "json")


def test_the_moderators_lines_are_read_in_code():
    spec = AnswerSpec(kind="yesno", format="text")
    read = prompts.decision_model(spec).from_text
    decided = read("Both argued well.\n**Preference:** Yes\n**Side:** Negative\n**Answer:** no")
    assert (decided.preference, decided.supported_side, decided.answer) == (True, "negative", "no")
    undecided = read("It is open; yes and no both have support.\nPreference: no\nSide: none\nAnswer: none")
    assert (undecided.preference, undecided.supported_side, undecided.answer) == (False, None, None)
    assert read("I back the affirmative.\nAnswer: yes").preference is True  # no Preference line: the answer says
    worded = read("The answer: yes, I think.\nWhether there is a preference: No\nSupported side: none\n"
                  "Final answer: None (no clear winner)")
    assert (worded.preference, worded.supported_side, worded.answer) == (False, None, None)
    for bad, why in (("I back yes.", "no `Preference:` or `Answer:` line"),
                     ("Preference: yes\nAnswer: maybe", "is not \"yes\" or \"no\" nor `none`")):
        with pytest.raises(ValueError, match=why):
            read(bad)
    choice = prompts.decision_model(AnswerSpec(kind="choice", format="text", choices=("red", "blue")))
    assert choice.from_text("Preference: yes\nSide: affirmative\nAnswer: (B)").answer == "B"


@pytest.mark.parametrize("setting, message", [
    (["models={judge: scripted/schema}"], "mad: models given for 'judge'; roles: affirmative, negative, moderator"),
    (["rounds=0"], "parameter 'rounds'"),
    (["adaptive_break=maybe"], "parameter 'adaptive_break'"),
    (["answer_format=xml"], "parameter 'answer_format'"),
    (["models=[a, b]"], "parameter 'models'"),
])
def test_bad_parameters_are_one_line_errors(tmp_path, arithmetic_file, capsys, setting, message):
    from debatekit.cli.app import main

    args = [a for s in setting for a in ("--set", s)]
    assert main(["run", "mad", "--dataset", str(arithmetic_file), "--model", "scripted/schema",
                 "--out", str(tmp_path / "r"), "--quiet", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("debatekit: error:") and message in err and len(err.strip().splitlines()) == 1, err


def test_show_transcript_reads_as_the_debate(tmp_path, arithmetic_file, model_from):
    from debatekit.cli.show import show

    debate(tmp_path, arithmetic_file, model_from, rounds=1)
    text = show(tmp_path / "run", "q1", transcript=True)
    order = ["--- affirmative · argue ---", "--- negative · argue ---", "--- moderator · moderate ---",
             "=== round - ===", "--- judge · candidates ---", "--- judge · judge ---"]
    assert [text.index(h) for h in order] == sorted(text.index(h) for h in order)
    moderator = text[text.index("--- moderator"):text.index("=== round - ===")]
    assert moderator.rstrip().endswith(">>> answer: none given")  # no preference, not a parse failure
    candidates = text[text.index("--- judge · candidates"):text.index("--- judge · judge")]
    assert candidates.rstrip().endswith(">>> answer: none asked (free text: this call does not answer the question)")
    assert "Answer: 10\n>>> answer: 10\n\nfinal answer: 10" in text
