"""society_of_mind driven end to end by a scripted model; assertions on the trace."""

import json

from debatekit.analysis import load_runs, round_metrics
from debatekit.records.schemas import RunConfig
from debatekit.runner import run
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
                  params={"rounds": 2, "answer_format": "json"}), tmp_path / "run", progress=False)
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
    assert result.summary.parse_failures == 2


def test_agents_by_name_with_a_model_for_some_of_them(tmp_path, arithmetic_file, model_from):
    served, seen = {}, {}

    def by(model):
        def fn(req):
            served.setdefault(model, set()).add(req.agent)
            seen[(req.round, req.agent)] = req.messages[-1]["content"]
            return answer({"ann": 10, "bob": 11, "cy": 12}[req.agent])
        return fn

    default, special = model_from(by("default")), model_from(by("special"))
    result = run(RunConfig(protocol="society_of_mind", dataset=str(arithmetic_file), limit=1, model=default,
                           params={"agents": ["ann", "bob", "cy"], "rounds": 2, "models": {"bob": special},
                                   "answer_format": "json"}),
                 tmp_path / "run", progress=False)
    (debate,) = result.debates
    assert [r.answers for r in debate.rounds] == [{"ann": 10, "bob": 11, "cy": 12}] * 2
    assert served == {"default": {"ann", "cy"}, "special": {"bob"}}
    assert "Answer: 11" in seen[(2, "ann")] and "Answer: 12" in seen[(2, "ann")]
    assert "Answer: 10" not in seen[(2, "ann")]


def test_a_count_of_agents_still_works_without_a_warning(tmp_path, arithmetic_file, model_from):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = run(RunConfig(protocol="society_of_mind", dataset=str(arithmetic_file), limit=1,
                               model=model_from(lambda req: answer(10)), params={"agents": 2, "models": []}),
                     tmp_path / "run", progress=False)
    assert list(result.debates[0].rounds[0].answers) == ["agent1", "agent2"]


def test_bad_agent_names_and_stray_models_are_one_line_errors(tmp_path, arithmetic_file, capsys):
    from debatekit.cli.app import main

    for setting, message in ((["agents=[ann, ann]"], "give a count of agents or 1 to 16 distinct, non-blank"),
                             (["agents=[ann, bob]", "models={cy: scripted/schema}"],
                              "models given for 'cy', not among agents ['ann', 'bob']"),
                             (["agents=[]"], "parameter 'agents': Value error, give a count of agents or"),
                             (["models=openai/x"], "parameter 'models': Value error, give {agent name: model}"),
                             (["agents=17"], "a count of agents must be 1 to 16, got 17")):
        args = [a for s in setting for a in ("--set", s)]
        assert main(["run", "society_of_mind", "--dataset", str(arithmetic_file), "--model", "scripted/schema",
                     "--out", str(tmp_path / "r"), "--quiet", *args]) == 2
        err = capsys.readouterr().err
        assert err.startswith("debatekit: error:") and message in err, err


# --- update rules (Choi et al. 2025): conformist and follower ----------------------------------

def _update_run(tmp_path, arithmetic_file, model, **params):
    return run(RunConfig(protocol="society_of_mind", dataset=str(arithmetic_file), limit=1, model=model,
                         params={"rounds": 2, "stop_on_agreement": False, **params}), tmp_path / "run", progress=False)


def test_a_conformist_in_the_majority_keeps_its_reply_without_a_call(tmp_path, arithmetic_file, model_from):
    asked = []

    def fn(req):
        asked.append((req.round, req.agent))
        return answer({1: {"agent1": 10, "agent2": 10, "agent3": 12}, 2: {"agent3": 10}}[req.round][req.agent])

    (debate,) = _update_run(tmp_path, arithmetic_file, model_from(fn), update="conformist").debates
    assert sorted(asked) == [(1, "agent1"), (1, "agent2"), (1, "agent3"), (2, "agent3")]
    assert debate.rounds[1].answers == {"agent1": 10, "agent2": 10, "agent3": 10}
    assert debate.rounds[1].extra["adopted"] == {"agent1": "agent1", "agent2": "agent2"}
    assert debate.usage.calls == 4


def test_with_no_majority_every_conformist_revises(tmp_path, arithmetic_file, model_from):
    model = model_from(script({("q1", 1): [10, 11, 12], ("q1", 2): [10, 10, 12]}))
    (debate,) = _update_run(tmp_path, arithmetic_file, model, update="conformist").debates
    assert debate.usage.calls == 6 and "adopted" not in debate.rounds[1].extra


def test_a_follower_told_to_follow_takes_the_majority_reply_as_its_own(tmp_path, arithmetic_file, model_from):
    seen = {}

    def fn(req):
        seen[(req.round, req.agent)] = req.messages
        values = {"agent1": 10, "agent2": 10, "agent3": 12} if req.round == 1 else {"agent1": 11, "agent2": 11,
                                                                                     "agent3": 11}
        return answer(values[req.agent], reasoning=f"{req.agent} worked it out")

    model = model_from(fn)
    (debate,) = _update_run(tmp_path, arithmetic_file, model, update="follower", follow_rate=1.0,
                            rounds=3).debates
    assert debate.rounds[1].answers == {"agent1": 10, "agent2": 10, "agent3": 10}
    assert debate.rounds[1].extra["adopted"] == {"agent1": "agent1", "agent2": "agent2", "agent3": "agent1"}
    assert set(seen) == {(1, "agent1"), (1, "agent2"), (1, "agent3")}  # round 2 and 3 asked nobody
    assert debate.final_answer == 10 and debate.correct


def test_a_follower_that_is_never_drawn_debates_as_before(tmp_path, arithmetic_file, model_from):
    model = model_from(script({("q1", 1): [10, 10, 12], ("q1", 2): [10, 11, 12]}))
    (debate,) = _update_run(tmp_path, arithmetic_file, model, update="follower", follow_rate=0.0).debates
    assert debate.usage.calls == 6 and debate.rounds[1].answers == {"agent1": 10, "agent2": 11, "agent3": 12}


def test_the_follower_draw_is_seeded_by_the_run_seed_item_agent_and_round(tmp_path, arithmetic_file, model_from):
    from debatekit.engine import derive_seed

    names = [f"agent{k}" for k in range(1, 7)]
    model = model_from(lambda req: answer(10 if req.round == 1 and req.agent in ("agent1", "agent2") else 20))
    result = run(RunConfig(protocol="society_of_mind", dataset=str(arithmetic_file), limit=1, model=model, seed=4,
                           params={"agents": 6, "rounds": 2, "update": "follower", "follow_rate": 0.5}),
                 tmp_path / "run", progress=False)
    drawn = {n for n in names if derive_seed(4, "q1", n, 2, "follow") / 2**31 < 0.5}
    adopted = result.debates[0].rounds[1].extra.get("adopted", {})
    assert set(adopted) == drawn and 0 < len(drawn) < 6
    assert all(source in ("agent3", n) for n, source in adopted.items())  # 20 is the majority (4 of 6)


def test_a_follower_takes_the_majority_reply_of_the_last_round_even_when_its_giver_revises(
        tmp_path, arithmetic_file, model_from):
    from debatekit.engine import derive_seed

    # seed 0, rate 0.5: find a round-2 draw where agent3 follows and agent1 (the first holder of 10) revises
    drawn = {n for n in ("agent1", "agent2", "agent3") if derive_seed(0, "q1", n, 2, "follow") / 2**31 < 0.5}
    assert "agent3" in drawn and "agent1" not in drawn, drawn  # the case this test needs under seed 0
    model = model_from(script({("q1", 1): [10, 10, 12], ("q1", 2): [99, 10, 12]}))
    (debate,) = _update_run(tmp_path, arithmetic_file, model, update="follower", follow_rate=0.5).debates
    assert debate.rounds[1].extra["adopted"]["agent3"] == "agent1"
    assert debate.rounds[1].answers["agent1"] == 99 and debate.rounds[1].answers["agent3"] == 10


def test_one_answer_among_failed_calls_is_no_majority_to_conform_to(tmp_path, arithmetic_file, model_from):
    from debatekit.models import scripted

    def fn(req):
        if req.round == 1 and req.agent != "agent1":
            return scripted.Fault("bad_request", "refused")
        return answer(10)

    (debate,) = _update_run(tmp_path, arithmetic_file, model_from(fn), update="conformist").debates
    assert "adopted" not in debate.rounds[1].extra  # agent1's lone 10 is not a majority: everyone revises
