from debatekit.runner import run
from debatekit.schemas import RunConfig
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
