"""Answer formats (text | json), multiple choice and yes/no, driven through whole protocols."""

from __future__ import annotations

import json

import pytest

from debatekit.cli.show import show
from debatekit.records.schemas import RunConfig
from debatekit.runner import run
from tests.conftest import answer

CSQA = {"id": "c1", "question": "Where do you keep milk?", "choices": ["oven", "fridge", "shelf"], "answer": "B"}
YESNO = {"id": "y1", "question": "Is ice cold?", "answer": "yes"}


def write(tmp_path, *rows):
    path = tmp_path / "items.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def events(folder):
    return [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines()]


def test_text_debate_extracts_answers_and_shows_other_agents_their_words(tmp_path, arithmetic_file, model_from):
    seen = {}

    def fn(req):
        seen[(req.round, req.agent)] = (req.messages, req.schema)
        value = {"agent1": 10, "agent2": 11, "agent3": 10}[req.agent] if req.round == 1 else 10
        return f"{req.agent} works: 5 + 5 = {value} in round {req.round}.\nAnswer: {value:,}"

    model = model_from(fn)
    result = run(RunConfig(protocol="society_of_mind", dataset=str(arithmetic_file), limit=1, model=model,
                           params={"rounds": 2, "answer_format": "text"}), tmp_path / "run", progress=False)
    (debate,) = result.debates
    assert [r.answers for r in debate.rounds] == [{"agent1": 10, "agent2": 11, "agent3": 10},
                                                  {"agent1": 10, "agent2": 10, "agent3": 10}]
    assert debate.correct is True and debate.usage.parse_failures == 0
    assert all(schema is None for _, schema in seen.values())  # free text: no response format sent
    system, first = seen[(1, "agent1")][0][:2]
    assert "Answer: X" in system["content"] and "JSON" not in system["content"]
    revise = seen[(2, "agent1")][0][-1]["content"]
    assert "agent2 works: 5 + 5 = 11 in round 1.\nAnswer: 11" in revise  # the other agents' own text
    assert "agent3 works" in revise and "agent1 works" not in revise
    assert "Answer: X" in revise and "What is 10?" in revise
    logged = events(tmp_path / "run")
    assert {e["text"] for e in logged if e["round"] == 1 and e["agent"] == "agent2"} == {
        "agent2 works: 5 + 5 = 11 in round 1.\nAnswer: 11"}
    assert all(e["output"]["reasoning"] == e["text"] for e in logged)


def test_json_reasoning_is_a_list_of_steps_shown_to_the_others_a_step_a_line(tmp_path, arithmetic_file, model_from):
    seen = {}

    def fn(req):
        seen[(req.round, req.agent)] = (req.messages, req.schema)
        value = 11 if (req.round, req.agent) == (1, "agent2") else 10
        return {"reasoning": [f"{req.agent}: 5 + 5 = {value}", "so the sum is that"], "answer": value}

    model = model_from(fn)
    result = run(RunConfig(protocol="society_of_mind", dataset=str(arithmetic_file), limit=1, model=model,
                           params={"rounds": 2, "answer_format": "json"}), tmp_path / "run", progress=False)
    (debate,) = result.debates
    assert debate.correct is True and debate.usage.parse_failures == 0
    reasoning = seen[(1, "agent1")][1]["properties"]["reasoning"]
    assert reasoning["type"] == "array" and reasoning["items"] == {"type": "string"}
    revise = seen[(2, "agent1")][0][-1]["content"]
    assert "agent2: 5 + 5 = 11\nso the sum is that\nAnswer: 11" in revise
    logged = events(tmp_path / "run")
    assert {e["output"]["reasoning"] for e in logged if e["round"] == 1 and e["agent"] == "agent3"} == {
        "agent3: 5 + 5 = 10\nso the sum is that"}


@pytest.mark.parametrize("reply", [answer(10, "one string, as other providers may send"),
                                   answer(10, ["a step", "another"])])
def test_json_reasoning_reads_a_string_or_a_list(tmp_path, arithmetic_file, model_from, reply):
    model = model_from(lambda req: reply)
    result = run(RunConfig(protocol="single", dataset=str(arithmetic_file), limit=1, model=model,
                           params={"answer_format": "json"}), tmp_path / "run", progress=False)
    assert result.debates[0].final_answer == 10 and result.debates[0].usage.parse_failures == 0


def test_a_reply_without_an_answer_is_a_parse_failure_after_one_repair(tmp_path, arithmetic_file, model_from):
    asked = []

    def fn(req):
        asked.append(req.messages[-1]["content"])
        return "I am not sure what to do here."

    model = model_from(fn)
    result = run(RunConfig(protocol="single", dataset=str(arithmetic_file), limit=1, model=model,
                           params={"answer_format": "text"}), tmp_path / "run", progress=False)
    (debate,) = result.debates
    assert debate.final_answer is None and debate.correct is False
    assert debate.usage.parse_failures == 2 and result.summary.parse_failures == 2
    assert "no final answer (a whole number) found" in asked[1] and "Answer: X" in asked[1]
    (event,) = events(tmp_path / "run")
    assert event["error_kind"] == "parse" and event["text"] == "I am not sure what to do here."


@pytest.mark.parametrize("protocol, params", [("single", {}), ("self_consistency", {"samples": 2}),
                                              ("society_of_mind", {"rounds": 1})])
@pytest.mark.parametrize("fmt", ["json", "text"])
def test_multiple_choice_shows_options_alike_and_constrains_letters(tmp_path, model_from, protocol, params, fmt):
    prompts = []

    def fn(req):
        prompts.append(req.messages[1]["content"])
        if fmt == "json":
            assert req.schema["properties"]["answer"]["enum"] == ["A", "B", "C"]
            return answer("B")
        return "Milk spoils when warm, so it goes where it is cold.\nAnswer: fridge"

    model = model_from(fn)
    result = run(RunConfig(protocol=protocol, dataset=write(tmp_path, CSQA), model=model,
                           params={**params, "answer_format": fmt}), tmp_path / "run", progress=False)
    (debate,) = result.debates
    assert debate.final_answer == "B" and debate.correct is True
    assert prompts[0].startswith("Where do you keep milk?\nA) oven\nB) fridge\nC) shelf\n\n")
    assert len(set(prompts)) == 1


def test_a_letter_outside_the_items_options_is_rejected(tmp_path, model_from):
    model = model_from(lambda req: answer("D"))
    result = run(RunConfig(protocol="single", dataset=write(tmp_path, CSQA), model=model,
                           params={"answer_format": "json"}), tmp_path / "run", progress=False)
    assert result.debates[0].final_answer is None and result.debates[0].usage.parse_failures == 2


@pytest.mark.parametrize("fmt, reply", [("json", answer("yes")), ("text", "Ice is frozen water.\nAnswer: Yes")])
def test_yes_no_is_a_two_option_constraint(tmp_path, model_from, fmt, reply):
    schemas = []

    def fn(req):
        schemas.append(req.schema)
        return reply

    model = model_from(fn)
    result = run(RunConfig(protocol="single", dataset=write(tmp_path, YESNO), model=model,
                           params={"answer_format": fmt}), tmp_path / "run", progress=False)
    assert result.debates[0].final_answer == "yes" and result.debates[0].correct is True
    if fmt == "json":
        assert schemas[0]["properties"]["answer"]["enum"] == ["yes", "no"]


def test_show_transcript_prints_every_message_reply_and_answer(tmp_path, arithmetic_file, model_from):
    def fn(req):
        if req.agent == "agent3" and req.round == 2:
            return "I give up."
        value = 11 if (req.agent, req.round) == ("agent2", 1) else 10
        return f"{req.agent} round {req.round}: {value}\nAnswer: {value}"

    model = model_from(fn)
    run(RunConfig(protocol="society_of_mind", dataset=str(arithmetic_file), limit=1, model=model,
                  params={"rounds": 2, "answer_format": "text"}), tmp_path / "run", progress=False)
    text = show(tmp_path / "run", "q1", transcript=True)
    assert text.index("=== round 1 ===") < text.index("=== round 2 ===")
    round2 = text[text.index("=== round 2 ==="):]
    agent1 = round2[round2.index("--- agent1 · revise ---"):round2.index("--- agent2")]
    assert "[user]" in agent1 and "agent2 round 1: 11" in agent1 and "[system]" not in agent1  # only new messages
    assert "[reply]\nagent1 round 2: 10\nAnswer: 10\n>>> answer: 10" in agent1
    assert ">>> answer: no answer (parse: " in round2  # agent3's reply had none, even after the repair
    round1 = text[:text.index("=== round 2 ===")]
    assert round1.count("[system]") == 3 and "What is 10?" in round1
    assert text.rstrip().endswith("correct: True")


def test_transcript_shows_the_next_prompt_after_a_reply_without_an_answer(tmp_path, arithmetic_file, model_from):
    # agent1's round-1 reply has no answer, so it is not kept in its conversation: its round-2
    # prompt (the other agents' replies) must still be printed as new
    model = model_from(lambda req: "no idea" if (req.agent, req.round) == ("agent1", 1) else
                       f"{req.agent} says 10\nAnswer: 10")
    run(RunConfig(protocol="society_of_mind", dataset=str(arithmetic_file), limit=1, model=model,
                  params={"agents": 2, "rounds": 2, "answer_format": "text", "stop_on_agreement": False}),
        tmp_path / "run", progress=False)
    round2 = show(tmp_path / "run", "q1", transcript=True).split("=== round 2 ===")[1]
    agent1 = round2[round2.index("--- agent1 · revise ---"):]
    agent1 = agent1[:agent1.index("--- agent2")] if "--- agent2" in agent1 else agent1
    assert "[user]" in agent1 and "agent2 says 10" in agent1 and "[system]" not in agent1


def test_show_transcript_of_a_run_recorded_without_messages(tmp_path, arithmetic_file, model_from):
    model = model_from(lambda req: answer(10))
    run(RunConfig(protocol="single", dataset=str(arithmetic_file), limit=1, model=model), tmp_path / "run",
        progress=False)
    path = tmp_path / "run" / "events.jsonl"
    old = [{k: v for k, v in e.items() if k != "messages"} for e in events(tmp_path / "run")]
    path.write_text("".join(json.dumps(e) + "\n" for e in old))
    text = show(tmp_path / "run", "q1", transcript=True)
    assert "[shown: not recorded in this run]" in text and ">>> answer: 10" in text


@pytest.mark.parametrize("truth, kind_limit", [(10, 768), ("yes", 1024), ("no", 1024)])
def test_a_free_text_answer_gets_its_kinds_reply_limit_unless_the_run_sets_one(tmp_path, model_from, truth, kind_limit):
    from debatekit.protocols.shared.answers import REPLY_TOKENS

    data = tmp_path / "items.jsonl"
    data.write_text(json.dumps({"id": "q1", "question": "Is it?", "answer": truth}) + "\n")
    sent = []
    model = model_from(lambda req: sent.append(req.params["max_tokens"]) or f"Working.\nAnswer: {truth}")
    run(RunConfig(protocol="single", dataset=str(data), model=model), tmp_path / "a", progress=False)
    run(RunConfig(protocol="single", dataset=str(data), model=model, max_tokens=300, cache=False),
        tmp_path / "b", progress=False)
    choice = tmp_path / "choice.jsonl"
    choice.write_text(json.dumps({"id": "c1", "question": "Which?", "choices": ["x", "y"], "answer": "A"}) + "\n")
    run(RunConfig(protocol="single", dataset=str(choice), model=model_from(
        lambda req: sent.append(req.params["max_tokens"]) or "Answer: A")), tmp_path / "c", progress=False)
    assert sent == [kind_limit, 300, REPLY_TOKENS["choice"]] and REPLY_TOKENS["choice"] == 512


def test_the_cli_passes_max_tokens_to_the_run(tmp_path):
    from debatekit.cli.app import main

    assert main(["run", "single", "--dataset", "arithmetic", "--limit", "1", "--model", "scripted/schema",
                 "--max-tokens", "200", "--out", str(tmp_path / "r"), "--quiet"]) == 0
    assert json.loads((tmp_path / "r" / "run.json").read_text())["config"]["max_tokens"] == 200
    events = [json.loads(line) for line in (tmp_path / "r" / "events.jsonl").read_text().splitlines()]
    assert events and all(e["completion_tokens"] <= 200 for e in events)
