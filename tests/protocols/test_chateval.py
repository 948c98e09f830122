"""chateval driven end to end by scripted models: who speaks when and sees what under each
strategy, the summarizer, the aggregation, failed calls and bad parameters."""

import json

import pytest

from debatekit.models.gateway import Gateway
from debatekit.models.scripted import Fault
from debatekit.protocols.chateval.prompts import ROLES
from debatekit.records.schemas import RunConfig
from debatekit.runner import run

PANEL = list(ROLES)[:3]  # general_public, critic, fact_checker


def said(agent, round_no):
    """A referee's words in one round, unique so that prompts can be searched for them."""
    return f"words-of-{agent}-in-round-{round_no}"


class Raw(str):
    """A reply sent as it is, without the referee's words and answer line."""


def referees(answers=None, summary="summary-after-round-{round}", calls=None):
    """A scripted panel: each referee says `said(...)` and answers `answers[(round, agent)]` (default 10);
    the summarizer replies with `summary`; every request is kept in `calls` as (round, agent, phase, prompt)."""
    answers = answers or {}

    def fn(req):
        if calls is not None:
            assert len(req.messages) == 1 and req.messages[0]["role"] == "user"
            calls.append((req.round, req.agent, req.phase, req.messages[0]["content"]))
        if req.phase == "summarize":
            return summary.format(round=req.round)
        value = answers.get((req.round, req.agent), 10)
        return value if isinstance(value, (Fault, Raw)) else f"{said(req.agent, req.round)}\nAnswer: {value}"

    return fn


def chateval(tmp_path, dataset, model, **params):
    result = run(RunConfig(protocol="chateval", dataset=str(dataset), limit=1, model=model, params=params),
                 tmp_path / "run", progress=False, gateway=Gateway(backoff=0.001))
    return result, result.debates[0]


def prompt_of(calls, round_no, agent):
    (prompt,) = [p for r, a, phase, p in calls if r == round_no and a == agent]
    return prompt


def seen(prompt):
    """Which referees' words of which rounds a prompt shows: {(agent, round)}."""
    return {(a, r) for a in PANEL for r in (1, 2, 3) if said(a, r) in prompt}


def test_one_by_one_each_referee_sees_every_earlier_message_of_this_round_too(tmp_path, arithmetic_file, model_from):
    calls = []
    result, debate = chateval(tmp_path, arithmetic_file, model_from(referees(calls=calls)), strategy="one_by_one")
    assert [(r, a) for r, a, _, _ in calls] == [(1, a) for a in PANEL] + [(2, a) for a in PANEL]
    gp, critic, checker = PANEL
    assert seen(prompt_of(calls, 1, gp)) == set()
    assert seen(prompt_of(calls, 1, critic)) == {(gp, 1)}
    assert seen(prompt_of(calls, 1, checker)) == {(gp, 1), (critic, 1)}
    assert seen(prompt_of(calls, 2, gp)) == {(a, 1) for a in PANEL}
    assert seen(prompt_of(calls, 2, checker)) == {(a, 1) for a in PANEL} | {(gp, 2), (critic, 2)}
    # earlier messages appear in the order they were spoken
    prompt = prompt_of(calls, 2, checker)
    order = [said(gp, 1), said(critic, 1), said(checker, 1), said(gp, 2), said(critic, 2)]
    assert [prompt.index(s) for s in order] == sorted(prompt.index(s) for s in order)
    assert debate.status == "ok" and debate.final_answer == 10 and debate.stop_reason == "max_rounds"
    assert debate.usage.calls == 6 and len(debate.rounds) == 2


def test_each_referee_gets_its_own_role_and_only_its_last_turn_asks_for_a_final_judgement(
        tmp_path, arithmetic_file, model_from):
    calls = []
    chateval(tmp_path, arithmetic_file, model_from(referees(calls=calls)), rounds=3)
    for round_no, agent, _, prompt in calls:
        assert [name for name, role in ROLES.items() if role in prompt] == [agent]
        assert f"your turn to speak, {agent}" in prompt
        assert ("This is your last turn" in prompt) == (round_no == 3)
        assert prompt.index("[Question]") < prompt.index("[Discussion so far]") < prompt.index("[Your role]")
        assert prompt.endswith("end with a last line `Answer: X`, where X is the number alone, without units.")


def test_simultaneous_referees_see_earlier_rounds_only(tmp_path, arithmetic_file, model_from):
    calls = []
    _, debate = chateval(tmp_path, arithmetic_file, model_from(referees(calls=calls)), strategy="simultaneous",
                         rounds=3)
    for agent in PANEL:
        assert seen(prompt_of(calls, 1, agent)) == set()
        assert "Nobody has spoken yet" in prompt_of(calls, 1, agent)
        assert seen(prompt_of(calls, 2, agent)) == {(a, 1) for a in PANEL}
        assert seen(prompt_of(calls, 3, agent)) == {(a, r) for a in PANEL for r in (1, 2)}
    assert {phase for _, _, phase, _ in calls} == {"discuss"} and debate.usage.calls == 9


def test_summarizer_referees_see_only_the_latest_summary(tmp_path, arithmetic_file, model_from):
    calls = []
    _, debate = chateval(tmp_path, arithmetic_file, model_from(referees(calls=calls)),
                         strategy="simultaneous_summarizer", rounds=3)
    summarized = [(r, p) for r, a, phase, p in calls if phase == "summarize"]
    assert [r for r, _ in summarized] == [1, 2]  # after every round but the last
    assert [a for r, a, phase, _ in calls if phase == "summarize"] == ["summarizer"] * 2
    # the summarizer folds the new round into the running summary
    first, second = (p for _, p in summarized)
    assert seen(first) == {(a, 1) for a in PANEL} and "nothing has been summarized yet" in first
    assert seen(second) == {(a, 2) for a in PANEL} and "summary-after-round-1" in second
    for agent in PANEL:
        assert seen(prompt_of(calls, 2, agent)) == set() and "summary-after-round-1" in prompt_of(calls, 2, agent)
        assert seen(prompt_of(calls, 3, agent)) == set()
        assert "summary-after-round-2" in prompt_of(calls, 3, agent)
        assert "summary-after-round-1" not in prompt_of(calls, 3, agent)
    assert [r.extra.get("summary") for r in debate.rounds] == ["summary-after-round-1", "summary-after-round-2", None]
    assert debate.output["summaries"] == ["summary-after-round-1", "summary-after-round-2"]
    assert debate.usage.calls == 11


def test_summarizer_with_keep_history_adds_the_summary_to_the_history(tmp_path, arithmetic_file, model_from):
    calls = []
    chateval(tmp_path, arithmetic_file, model_from(referees(calls=calls)), strategy="simultaneous_summarizer",
             rounds=3, keep_history=True)
    prompt = prompt_of(calls, 3, "critic")
    assert seen(prompt) == {(a, r) for a in PANEL for r in (1, 2)}
    assert prompt.index(said("fact_checker", 1)) < prompt.index("summary-after-round-1") < prompt.index(
        said("general_public", 2)) < prompt.index("summary-after-round-2")


def test_a_failed_summary_leaves_the_round_in_view_until_the_next_summary(tmp_path, arithmetic_file, model_from):
    calls = []
    script = referees(calls=calls)

    def fn(req):
        reply = script(req)
        return Fault("server") if req.phase == "summarize" and req.round == 1 else reply

    _, debate = chateval(tmp_path, arithmetic_file, model_from(fn), strategy="simultaneous_summarizer", rounds=3)
    assert seen(prompt_of(calls, 2, "critic")) == {(a, 1) for a in PANEL}
    second = [p for r, a, phase, p in calls if phase == "summarize" and r == 2][0]
    assert seen(second) == {(a, r) for a in PANEL for r in (1, 2)}
    assert seen(prompt_of(calls, 3, "critic")) == set()
    assert [r.extra.get("summary") for r in debate.rounds] == [None, "summary-after-round-2", None]
    assert debate.status == "degraded" and debate.final_answer == 10


def test_majority_of_the_last_round_ties_go_to_the_earliest_referee(tmp_path, arithmetic_file, model_from):
    answers = {(1, "general_public"): 11, (1, "critic"): 11, (1, "fact_checker"): 11,
               (2, "general_public"): 12, (2, "critic"): 10, (2, "fact_checker"): 11}
    _, debate = chateval(tmp_path, arithmetic_file, model_from(referees(answers)))
    assert debate.rounds[-1].answers == {"general_public": 12, "critic": 10, "fact_checker": 11}
    assert debate.final_answer == 12 and debate.correct is False and debate.converged is False
    answers[(2, "fact_checker")] = 10
    _, debate = chateval(tmp_path / "again", arithmetic_file, model_from(referees(answers)))
    assert debate.final_answer == 10 and debate.correct is True


def test_mean_aggregation_averages_the_last_round(tmp_path, arithmetic_file, model_from):
    answers = {(2, "general_public"): 9, (2, "critic"): 12, (2, "fact_checker"): 9}
    _, debate = chateval(tmp_path, arithmetic_file, model_from(referees(answers)), aggregate="mean")
    assert debate.final_answer == 10 and debate.correct is True  # majority would say 9
    _, debate = chateval(tmp_path / "n", arithmetic_file, model_from(referees(answers)), aggregate="mean",
                         answer="number")
    assert debate.final_answer == 10.0
    answers[(2, "critic")] = 13
    _, debate = chateval(tmp_path / "r", arithmetic_file, model_from(referees(answers)), aggregate="mean")
    assert debate.final_answer == 10  # 31 / 3, to the nearest whole number


def test_multiple_choice_and_yes_no_items(tmp_path, model_from):
    choice = tmp_path / "choice.jsonl"
    choice.write_text(json.dumps({"id": "c1", "question": "Where do fish live?",
                                  "choices": ["trees", "water", "sky"], "answer": "B"}) + "\n")
    yesno = tmp_path / "yesno.jsonl"
    yesno.write_text(json.dumps({"id": "y1", "question": "Is ice cold?", "answer": "yes",
                                 "evidence": ["Ice is frozen water."]}) + "\n")
    calls = []
    answers = {(2, "general_public"): "A", (2, "critic"): "B", (2, "fact_checker"): "B"}
    _, debate = chateval(tmp_path / "c", choice, model_from(referees(answers, calls=calls)))
    assert debate.final_answer == "B" and debate.correct is True
    assert "B) water" in calls[0][3] and "the letter of one option" in calls[0][3]
    answers = {(2, "general_public"): "no", (2, "critic"): "yes", (2, "fact_checker"): "yes"}
    _, debate = chateval(tmp_path / "y", yesno, model_from(referees(answers)), strategy="simultaneous")
    assert debate.final_answer == "yes" and debate.correct is True


def test_a_failed_referee_is_left_out_not_scored_wrong(tmp_path, arithmetic_file, model_from):
    calls = []
    down = {(r, "critic"): Fault("server") for r in (1, 2)}
    down[(2, "fact_checker")] = Raw("I would rather not say.")
    _, debate = chateval(tmp_path, arithmetic_file, model_from(referees({**down, (2, "general_public"): 10},
                                                                        calls=calls)))
    assert debate.rounds[-1].answers == {"general_public": 10, "critic": None, "fact_checker": None}
    assert debate.status == "degraded" and debate.final_answer == 10 and debate.correct is True
    assert ("critic", 1) not in seen(prompt_of(calls, 1, "fact_checker"))  # a failed turn is not heard
    assert debate.usage.parse_failures == 1  # the garbage reply (its repair failed too)


def test_a_panel_whose_every_call_fails_is_an_error_not_a_wrong_answer(tmp_path, arithmetic_file, model_from):
    result, debate = chateval(tmp_path, arithmetic_file, model_from(lambda req: Fault("server")))
    assert debate.status == "error" and debate.final_answer is None and debate.correct is None
    assert debate.rounds[-1].answers == dict.fromkeys(PANEL)


def test_a_model_per_referee_and_for_the_summarizer(tmp_path, arithmetic_file, model_from):
    served = {}

    def by(name):
        script = referees()

        def fn(req):
            served.setdefault(name, set()).add(req.agent)
            return script(req)
        return fn

    default, special, summarizer = model_from(by("default")), model_from(by("special")), model_from(by("sum"))
    chateval(tmp_path, arithmetic_file, default, strategy="simultaneous_summarizer",
             models={"critic": special, "summarizer": summarizer})
    assert served == {"default": {"general_public", "fact_checker"}, "special": {"critic"}, "sum": {"summarizer"}}


def test_named_referees_with_their_own_personas(tmp_path, arithmetic_file, model_from):
    calls = []
    chateval(tmp_path, arithmetic_file, model_from(referees(calls=calls)), agents=["ann", "bob"],
             personas=["You are a pedant.", "You are a poet."], rounds=1)
    assert [(a, "You are a pedant." in p, "You are a poet." in p) for _, a, _, p in calls] == [
        ("ann", True, False), ("bob", False, True)]
    assert "1 other referee has the same question" in calls[0][3]


@pytest.mark.parametrize("setting, message", [
    (["strategy=round_robin"], "parameter 'strategy'"),
    (["agents=1"], "a panel needs at least 2 referees"),
    (["agents=6"], "there are 5 default roles; give `personas` for 6 referees"),
    (["personas=[a, b]"], "give one persona per referee (3 referees, 2 personas)"),
    (["keep_history=true"], "keep_history applies only to strategy simultaneous_summarizer"),
    (["aggregate=mean", "answer=choice"], "aggregate=mean needs numeric answers, not answer=choice"),
    (["aggregate=median"], "parameter 'aggregate'"),
    (["strategy=simultaneous_summarizer", "agents=[summarizer, critic]"], "'summarizer' is the summarizer's name"),
    (["models={summarizer: scripted/schema}"], "chateval: models given for 'summarizer', not among agents"),
    (["rounds=0"], "parameter 'rounds'"),
])
def test_bad_parameters_are_one_line_errors(tmp_path, arithmetic_file, capsys, setting, message):
    from debatekit.cli.app import main

    args = [a for s in setting for a in ("--set", s)]
    assert main(["run", "chateval", "--dataset", str(arithmetic_file), "--model", "scripted/schema",
                 "--out", str(tmp_path / "r"), "--quiet", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("debatekit: error:") and message in err and err.count("\n") == 1, err


def test_mean_on_a_multiple_choice_item_fails_that_debate_by_name(tmp_path, model_from):
    choice = tmp_path / "choice.jsonl"
    choice.write_text(json.dumps({"id": "c1", "question": "Q?", "choices": ["x", "y"], "answer": "A"}) + "\n")
    _, debate = chateval(tmp_path, choice, model_from(referees()), aggregate="mean")
    assert debate.status == "failed" and debate.correct is None
    assert "aggregate=mean needs numeric answers; item 'c1' asks for choice" in debate.error


@pytest.mark.parametrize("dataset", ["commonsenseqa", "strategyqa", "arithmetic"])
@pytest.mark.parametrize("strategy", ["one_by_one", "simultaneous", "simultaneous_summarizer"])
def test_dry_run_on_each_kind_of_item(tmp_path, dataset, strategy):
    result = run(RunConfig(protocol="chateval", dataset=dataset, limit=1, model="scripted/schema", cache=False,
                           params={"strategy": strategy}), tmp_path / "run", progress=False)
    (debate,) = result.debates
    assert debate.status == "ok" and debate.final_answer is not None and debate.usage.parse_failures == 0
    assert debate.usage.calls == 6 + (strategy == "simultaneous_summarizer")


def test_json_answers(tmp_path, model_from):
    calls = []

    def fn(req):
        calls.append(req)
        return {"reasoning": said(req.agent, req.round), "answer": "B"}

    result = run(RunConfig(protocol="chateval", dataset="commonsenseqa", limit=1, model=model_from(fn), cache=False,
                           params={"answer_format": "json"}), tmp_path / "run", progress=False)
    (debate,) = result.debates
    assert debate.status == "ok" and debate.final_answer == "B"
    assert all(c.schema is not None for c in calls)  # constrained to the answer schema
    assert f"[general_public]: {said('general_public', 1)}\nAnswer: B" in calls[1].messages[0]["content"]


def test_show_transcript_reads_the_summary_as_no_answer_asked_not_a_parse_failure(tmp_path):
    from debatekit.cli.show import show

    result = run(RunConfig(protocol="chateval", dataset="commonsenseqa", limit=1, model="scripted/schema", cache=False,
                           params={"strategy": "simultaneous_summarizer"}), tmp_path / "run", progress=False)
    text = show(result.path, result.debates[0].item_id, transcript=True)
    summary = text[text.index("--- summarizer · summarize ---"):text.index("=== round 2 ===")]
    assert "[New messages]\n[general_public]:" in summary
    assert ">>> answer: none asked" in summary and "parse failure" not in text
    assert text.count(">>> answer: ") == 7 and text.count("This is your last turn") == 3
