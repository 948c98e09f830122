"""society_of_mind's `topology` (Li et al. 2024): whose previous answers each agent reads, pinned on the
prompts each agent was shown, the round records and the output; scripted models throughout."""

import json

import pytest

from debatekit import registry, sweep
from debatekit.records.schemas import RunConfig
from debatekit.runner import run
from debatekit.sweep.execute import write_meta
from debatekit.sweep.guard import check_points
from debatekit.sweep.point import stamp
from tests.conftest import answer

OTHERS_HEADER = "Other agents have answered the same question"
SELF_CHECK = "Check your previous answer once more"


def marker(agent: str, round_no: int) -> str:
    return f"<{agent} said this in round {round_no}>"


def debate(tmp_path, model_from, agents, rounds=2, fail=lambda req: False, **params):
    """Run one arithmetic item; every reply carries a marker naming its author and round.

    Returns the debate record and {(round, agent): the last message that agent was shown}.
    """
    seen = {}

    def fn(req):
        seen[(req.round, req.agent)] = req.messages[-1]["content"]
        if fail(req):
            return "garbage"
        return answer(10 + int(req.agent[-1]), reasoning=marker(req.agent, req.round))

    result = run(RunConfig(protocol="society_of_mind", dataset="arithmetic", limit=1, model=model_from(fn),
                           cache=False, params={"agents": agents, "rounds": rounds, "stop_on_agreement": False,
                                                **params}),
                 tmp_path / "run", progress=False)
    (record,) = result.debates
    return record, seen


def read_in(prompt: str, names, round_no: int) -> list[str]:
    """The agents whose answer of `round_no` appears in a prompt."""
    return [n for n in names if marker(n, round_no) in prompt]


NAMES5 = [f"agent{i}" for i in range(1, 6)]


def test_in_a_ring_of_five_each_agent_reads_exactly_its_two_neighbours(tmp_path, model_from):
    record, seen = debate(tmp_path, model_from, agents=5, topology="ring")
    ring = {"agent1": ["agent2", "agent5"], "agent2": ["agent1", "agent3"], "agent3": ["agent2", "agent4"],
            "agent4": ["agent3", "agent5"], "agent5": ["agent1", "agent4"]}
    assert {n: read_in(seen[(2, n)], NAMES5, 1) for n in NAMES5} == ring
    assert all(seen[(2, n)].count("--- reply of another agent ---") == 2 for n in NAMES5)
    assert record.output["topology"] == ring and record.rounds[1].extra == {"read": ring}
    assert record.rounds[0].extra == {} and record.usage.calls == 10  # sparsity saves prompt tokens, not calls


def test_three_rounds_in_a_ring_read_the_previous_round_only(tmp_path, model_from):
    _, seen = debate(tmp_path, model_from, agents=4, rounds=3, topology="ring")
    names = NAMES5[:4]
    assert read_in(seen[(3, "agent1")], names, 2) == ["agent2", "agent4"]
    assert read_in(seen[(3, "agent1")].split(OTHERS_HEADER)[-1], names, 1) == []


def test_in_a_star_the_hub_reads_everyone_and_the_spokes_only_the_hub(tmp_path, model_from):
    record, seen = debate(tmp_path, model_from, agents=4, topology="star")
    names = NAMES5[:4]
    assert read_in(seen[(2, "agent1")], names, 1) == ["agent2", "agent3", "agent4"]
    for spoke in ("agent2", "agent3", "agent4"):
        assert read_in(seen[(2, spoke)], names, 1) == ["agent1"], spoke
    assert record.output["topology"] == {"agent1": ["agent2", "agent3", "agent4"], "agent2": ["agent1"],
                                         "agent3": ["agent1"], "agent4": ["agent1"]}


def test_the_star_hub_is_the_first_agent_named(tmp_path, model_from):
    record, _ = debate(tmp_path, model_from, agents=["cy4", "ann1", "bob2", "dee3"], topology="star")
    assert record.output["topology"]["cy4"] == ["ann1", "bob2", "dee3"]
    assert record.output["topology"]["ann1"] == ["cy4"]


def test_an_explicit_adjacency_is_followed_edges_are_directed_and_an_empty_list_reads_nobody(tmp_path, model_from):
    names = ["ann1", "bob2", "cy3", "dee4"]
    adjacency = {"ann1": ["cy3", "bob2"], "bob2": ["dee4"], "cy3": [], "dee4": ["ann1", "bob2", "cy3"]}
    record, seen = debate(tmp_path, model_from, agents=names, topology=adjacency)
    assert read_in(seen[(2, "ann1")], names, 1) == ["bob2", "cy3"]
    assert read_in(seen[(2, "bob2")], names, 1) == ["dee4"]  # dee4 reads bob2, not the other way round
    assert read_in(seen[(2, "dee4")], names, 1) == ["ann1", "bob2", "cy3"]
    assert seen[(2, "cy3")].startswith(SELF_CHECK) and read_in(seen[(2, "cy3")], names, 1) == []
    assert record.output["topology"] == {"ann1": ["bob2", "cy3"], "bob2": ["dee4"], "cy3": [],
                                         "dee4": ["ann1", "bob2", "cy3"]}  # agent order, whatever the list order


def test_a_failed_neighbour_is_not_shown_and_the_debate_goes_on(tmp_path, model_from):
    record, seen = debate(tmp_path, model_from, agents=4, topology="ring",
                          fail=lambda req: req.agent == "agent2" and req.round == 1)
    names = NAMES5[:4]
    assert read_in(seen[(2, "agent1")], names, 1) == ["agent4"]
    assert read_in(seen[(2, "agent3")], names, 1) == ["agent4"]
    assert "garbage" not in seen[(2, "agent1")] + seen[(2, "agent3")]
    assert read_in(seen[(2, "agent2")], names, 1) == ["agent1", "agent3"]  # the failed agent still reads
    assert record.rounds[0].answers["agent2"] is None and record.rounds[1].extra["read"]["agent1"] == ["agent4"]
    assert record.status == "ok" and record.rounds[1].answers["agent2"] == 12


def test_a_neighbour_that_fails_later_is_shown_with_the_last_answer_it_gave(tmp_path, model_from):
    record, seen = debate(tmp_path, model_from, agents=4, rounds=3, topology="ring",
                          fail=lambda req: req.agent == "agent2" and req.round == 2)
    names = NAMES5[:4]
    prompt = seen[(3, "agent1")]  # the round-3 revision prompt alone
    assert read_in(prompt, names, 2) == ["agent4"] and read_in(prompt, names, 1) == ["agent2"]
    assert prompt.count("--- reply of another agent ---") == 2
    assert record.rounds[1].answers["agent2"] is None and record.rounds[2].extra["read"]["agent1"] == ["agent2", "agent4"]


def test_spokes_whose_hub_failed_check_their_own_answer(tmp_path, model_from):
    record, seen = debate(tmp_path, model_from, agents=4, topology="star",
                          fail=lambda req: req.agent == "agent1" and req.round == 1)
    for spoke in ("agent2", "agent3", "agent4"):
        assert seen[(2, spoke)].startswith(SELF_CHECK) and OTHERS_HEADER not in seen[(2, spoke)]
    assert record.rounds[1].extra["read"] == {"agent1": ["agent2", "agent3", "agent4"], "agent2": [],
                                              "agent3": [], "agent4": []}


def test_full_is_the_default_and_unchanged(tmp_path, model_from):
    default, seen_default = debate(tmp_path / "a", model_from, agents=3, answer_format="json")
    full, seen_full = debate(tmp_path / "b", model_from, agents=3, answer_format="json", topology="full")
    ring, seen_ring = debate(tmp_path / "c", model_from, agents=3, answer_format="json", topology="ring")
    assert seen_default == seen_full == seen_ring  # with 3 agents a ring is the full graph
    question = seen_default[(1, "agent1")].split("\n\n")[0]
    assert seen_default[(2, "agent1")] == (
        "Other agents have answered the same question. Their latest replies:\n\n"
        f"--- reply of another agent ---\n{marker('agent2', 1)}\nAnswer: 12\n\n"
        f"--- reply of another agent ---\n{marker('agent3', 1)}\nAnswer: 13\n\n"
        "Treat these replies as extra material, not as the truth: they may be right or wrong. Go through your "
        "own earlier reasoning and theirs step by step, decide what holds up, and answer again. The question "
        f"was: {question}\n\nPut your final answer (the number alone, without units) in the `answer` field.")
    assert default.output["topology"] == {"agent1": ["agent2", "agent3"], "agent2": ["agent1", "agent3"],
                                          "agent3": ["agent1", "agent2"]}
    assert [r.answers for r in default.rounds] == [r.answers for r in full.rounds]


def test_a_sparse_topology_sends_fewer_prompt_tokens_for_the_same_calls(tmp_path, model_from):
    full, _ = debate(tmp_path / "a", model_from, agents=5)
    ring, _ = debate(tmp_path / "b", model_from, agents=5, topology="ring")
    assert full.usage.calls == ring.usage.calls == 10
    assert ring.usage.prompt_tokens < full.usage.prompt_tokens


@pytest.mark.parametrize("setting, message", [
    ("topology=mesh", "parameter 'topology': Value error, give one of full, ring, star or {agent: [agents it "
                      "reads]}, got 'mesh'"),
    ("topology={agent1: agent2}", "parameter 'topology': Value error, give one of full, ring, star"),
    ("topology={agent1: [agent2], agent2: [agent1], agent3: [agent1], agent4: [], agent9: []}",
     "topology has an entry for unknown agent 'agent9'"),
    ("topology={agent1: [agent2], agent2: [agent1], agent3: [agent1]}",
     "topology has no entry for agent 'agent4' (give [] for an agent that reads nobody)"),
    ("topology={agent1: [agent2, agent1], agent2: [], agent3: [], agent4: []}",
     "topology lets 'agent1' read itself"),
    ("topology={agent1: [agent7], agent2: [], agent3: [], agent4: []}",
     "topology lets 'agent1' read unknown agent 'agent7'"),
    ("topology={agent1: [agent2, agent2], agent2: [], agent3: [], agent4: []}",
     "topology lists an agent twice for 'agent1'"),
])
def test_bad_topologies_are_one_line_errors(tmp_path, capsys, setting, message):
    from debatekit.cli.app import main

    code = main(["run", "society_of_mind", "--dataset", "arithmetic", "--limit", "1", "--model", "scripted/schema",
                 "--agents", "4", "--out", str(tmp_path / "r"), "--quiet", "--set", setting])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("debatekit: error:") and message in err, err
    assert err.strip().count("\n") == 0


def test_a_sweep_grid_takes_topology_names_and_an_adjacency(tmp_path, model_from):
    model = model_from(lambda req: answer(330))
    grid = {"parameters": {"protocol": "society_of_mind", "dataset": "arithmetic", "limit": 1, "model": model,
                           "agents": 4, "rounds": 2},
            "grid": {"topology": ["full", "ring", {"agent1": [], "agent2": ["agent1"], "agent3": ["agent1"],
                                                   "agent4": ["agent1"]}]},
            "points": [{"topology": {"agent1": ["agent2"], "agent2": ["agent3"], "agent3": ["agent4"],
                                     "agent4": ["agent1"]}}]}
    points = sweep.expand_grid(grid)
    check_points(points)
    out = tmp_path / "sweep"
    out.mkdir()
    write_meta(out, tmp_path / "nb.ipynb", grid, points)
    for point in points:
        result = sweep.run_point(sweep.point_config(point.parameters), str(out / point.id), progress=False)
        sidecar = out / f"{point.id}.json"
        sweep.record_point(str(sidecar), result)
        assert stamp(sidecar, point.digest)
    summary = sweep.collect(out)
    assert sorted(summary["topology"]) == sorted(
        ["full", "ring", '{"agent1": [], "agent2": ["agent1"], "agent3": ["agent1"], "agent4": ["agent1"]}',
         '{"agent1": ["agent2"], "agent2": ["agent3"], "agent3": ["agent4"], "agent4": ["agent1"]}'])
    readers = {tuple(json.loads((out / p.id / "debates.jsonl").read_text().splitlines()[0])["output"]["topology"]
                     ["agent1"]) for p in points}
    assert readers == {("agent2", "agent3", "agent4"), ("agent2", "agent4"), (), ("agent2",)}
    tables = sweep.load(out)
    assert set(tables.summary["point_id"]) == {p.id for p in points}


def test_a_bad_adjacency_in_a_sweep_grid_names_the_point(tmp_path):
    points = sweep.expand_grid({"parameters": {"protocol": "society_of_mind", "dataset": "arithmetic", "agents": 4},
                                "grid": {"topology": ["ring", "mesh"]}})
    with pytest.raises(sweep.SweepError, match="point .*mesh.*parameter 'topology'"):
        check_points(points)
    assert registry.get("society_of_mind").defaults()["topology"] == "full"
