"""society_of_mind driven end to end by a scripted model; assertions on the trace."""

import json

from debatekit.analysis import load_runs, round_metrics
from debatekit.runner import run
from debatekit.schemas import RunConfig
from tests.conftest import answer


def script(table):
    """Reply by (item, round, agent) from a table {(item, round): [agent1, agent2, agent3]}."""
    def fn(req):
        values = table[(req.item_id, req.round)]
        return answer(values[int(req.agent[-1]) - 1])
    return fn


def test_agents_revise_toward_the_truth_and_majority_wins(tmp_path, arithmetic_file, model_from):
    model = model_from(script({("q1", 1): [10, 11, 12], ("q1", 2): [10, 10, 12]}))
    result = run(RunConfig(protocol="society_of_mind", dataset=str(arithmetic_file), limit=1, model=model,
                           params={"rounds": 2}), tmp_path / "run", progress=False)
    (debate,) = result.debates
    assert debate.status == "ok" and debate.final_answer == 10 and debate.correct is True
    assert [r.answers for r in debate.rounds] == [{"agent1": 10, "agent2": 11, "agent3": 12},
                                                  {"agent1": 10, "agent2": 10, "agent3": 12}]
    assert debate.stop_reason == "max_rounds" and debate.converged is False
    events = [json.loads(line) for line in (tmp_path / "run" / "events.jsonl").read_text().splitlines()]
    assert len(events) == 6
    assert sorted((e["round"], e["phase"]) for e in events) == [(1, "answer")] * 3 + [(2, "revise")] * 3
    assert all(e["completion_tokens"] > 0 and e["output"]["answer"] is not None for e in events)

    tables = load_runs([tmp_path / "run"])
    agent2 = tables.rounds.query("agent == 'agent2' and round == 2").iloc[0]
    assert agent2.changed and agent2.relied and agent2.flip == "wrong_to_right"
    metrics = round_metrics(tables).set_index("round")
    assert metrics.loc[1, "agent_accuracy"] == 1 / 3 and metrics.loc[2, "agent_accuracy"] == 2 / 3
    assert metrics.loc[2, "wrong_to_right"] == 1 and metrics.loc[2, "right_to_wrong"] == 0


def test_revision_prompt_shows_the_other_agents_answers(tmp_path, arithmetic_file, model_from):
    seen = {}

    def fn(req):
        seen[(req.round, req.agent)] = req.messages
        return answer({"agent1": 7, "agent2": 8, "agent3": 9}[req.agent])

    model = model_from(fn)
    run(RunConfig(protocol="society_of_mind", dataset=str(arithmetic_file), limit=1, model=model,
                  params={"rounds": 2}), tmp_path / "run", progress=False)
    revise = seen[(2, "agent1")]
    assert [m["role"] for m in revise] == ["system", "user", "assistant", "user"]
    assert "Answer: 8" in revise[-1]["content"] and "Answer: 9" in revise[-1]["content"]
    assert "Answer: 7" not in revise[-1]["content"]  # an agent never sees itself as "another agent"


def test_stops_early_when_all_agents_agree(tmp_path, arithmetic_file, model_from):
    model = model_from(lambda req: answer(10))
    result = run(RunConfig(protocol="society_of_mind", dataset=str(arithmetic_file), limit=1, model=model,
                           params={"rounds": 3}), tmp_path / "run", progress=False)
    (debate,) = result.debates
    assert len(debate.rounds) == 1 and debate.stop_reason == "agreement" and debate.converged
    assert debate.usage.calls == 3


def test_bullied_agent_is_detected(tmp_path, arithmetic_file, model_from):
    model = model_from(script({("q1", 1): [10, 11, 11], ("q1", 2): [11, 11, 11]}))
    result = run(RunConfig(protocol="society_of_mind", dataset=str(arithmetic_file), limit=1, model=model,
                           params={"rounds": 2}), tmp_path / "run", progress=False)
    assert result.debates[0].correct is False
    rounds = load_runs([tmp_path / "run"]).rounds
    agent1 = rounds.query("agent == 'agent1' and round == 2").iloc[0]
    assert agent1.bullied and agent1.flip == "right_to_wrong"


def test_an_agent_that_returns_garbage_is_dropped_not_fatal(tmp_path, arithmetic_file, model_from):
    model = model_from(lambda req: "garbage" if req.agent == "agent3" else answer(10))
    result = run(RunConfig(protocol="society_of_mind", dataset=str(arithmetic_file), limit=1, model=model,
                           params={"rounds": 1}), tmp_path / "run", progress=False)
    (debate,) = result.debates
    assert debate.status == "ok" and debate.final_answer == 10
    assert debate.rounds[0].answers["agent3"] is None and debate.usage.parse_failures == 2
    assert result.summary["parse_failures"] == 2
