import json

from debatekit.records.schemas import RunConfig
from debatekit.runner import run
from tests.conftest import answer


def test_single_agent_answers_once(tmp_path, arithmetic_file, model_from):
    model = model_from(lambda req: answer(10))
    result = run(RunConfig(protocol="single", dataset=str(arithmetic_file), model=model), tmp_path / "r",
                 progress=False)
    assert sorted(d.item_id for d in result.debates if d.correct) == ["q1"]
    assert all(d.usage.calls == 1 and d.rounds[0].answers.keys() == {"agent1"} for d in result.debates)


def test_self_consistency_takes_the_majority_of_k_samples(tmp_path, arithmetic_file, model_from):
    model = model_from(lambda req: answer(10 if req.call["sample"] % 3 else 99))
    result = run(RunConfig(protocol="self_consistency", dataset=str(arithmetic_file), limit=1, model=model,
                           params={"samples": 5}), tmp_path / "r", progress=False)
    (d,) = result.debates
    assert d.usage.calls == 5 and d.final_answer == 10 and d.correct
    assert list(d.rounds[0].answers.values()) == [99, 10, 10, 99, 10]
    assert d.output["agreement"] == 0.6


def test_a_boolean_truth_is_the_yes_or_no_of_a_yes_no_answer(tmp_path, model_from):
    rows = [{"id": "t", "question": "Is water wet?", "answer": True},
            {"id": "f", "question": "Is fire cold?", "answer": False}]
    path = tmp_path / "bools.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    model = model_from(lambda req: "Thinking it over.\nAnswer: yes")
    result = run(RunConfig(protocol="single", dataset=str(path), model=model), tmp_path / "r", progress=False)
    by_id = {d.item_id: d for d in result.debates}
    assert by_id["t"].final_answer == "yes" and by_id["t"].correct is True
    assert by_id["f"].final_answer == "yes" and by_id["f"].correct is False
