"""A vote that reuses a debate's round-1 answers as its first samples (`self_consistency(reuse=...)`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from debatekit.records.schemas import RunConfig
from debatekit.runner import run
from debatekit.sweep.execute import _point_to_folder
from debatekit.sweep.grid import SweepError, expand_grid


def _model(model_from):
    """Each agent and sample answers its own number, so who answered what can be read back."""
    return model_from(lambda req: {"reasoning": "r", "answer": int(req.agent[-1]) * 10})


def _debate(tmp_path, dataset, model, **params):
    return run(RunConfig(protocol="society_of_mind", dataset=str(dataset), model=model, limit=2,
                         params={"agents": 3, "rounds": 1, "answer_format": "json", **params}),
               tmp_path / "debate", progress=False)


def test_the_vote_takes_the_debates_round_one_and_draws_only_the_rest(tmp_path, arithmetic_file, model_from):
    model = _model(model_from)
    _debate(tmp_path, arithmetic_file, model)
    vote = run(RunConfig(protocol="self_consistency", dataset=str(arithmetic_file), model=model, limit=2,
                         params={"samples": 5, "answer_format": "json", "reuse": str(tmp_path / "debate")}),
               tmp_path / "vote", progress=False)
    events = [json.loads(line) for line in (tmp_path / "vote" / "events.jsonl").read_text().splitlines()]
    assert sorted({e["agent"] for e in events}) == ["sample4", "sample5"] and len(events) == 4  # 2 fresh per item
    for debate in vote.debates:
        assert debate.rounds[0].answers == {"sample1": 10, "sample2": 20, "sample3": 30, "sample4": 40, "sample5": 50}
        shared = debate.output["shared"]
        assert shared["samples"] == 3 and shared["from"] == str(tmp_path / "debate") and shared["completion_tokens"] > 0


@pytest.mark.parametrize("debate_params, vote_params, why", [
    ({"personas": ["You are careful.", "You are quick.", "You are bold."]}, {}, "round-1 prompts"),
    ({}, {"temperature": 0.2}, "temperature"),
])
def test_a_vote_refuses_draws_of_another_prompt_or_temperature(tmp_path, arithmetic_file, model_from, debate_params,
                                                                vote_params, why):
    model = _model(model_from)
    _debate(tmp_path, arithmetic_file, model, **debate_params)
    vote = run(RunConfig(protocol="self_consistency", dataset=str(arithmetic_file), model=model, limit=2,
                         params={"samples": 5, "answer_format": "json", "reuse": str(tmp_path / "debate"),
                                 **vote_params}), tmp_path / "vote", progress=False)
    assert all(d.status == "failed" and why in d.error for d in vote.debates)
    assert not (tmp_path / "vote" / "events.jsonl").exists() or not (tmp_path / "vote" / "events.jsonl").read_text()


def test_a_grid_names_the_debate_point_and_the_sweep_passes_its_folder(tmp_path):
    points = expand_grid({"parameters": {"dataset": "arithmetic"},
                          "points": [{"protocol": "society_of_mind", "rounds": 3},
                                     {"protocol": "self_consistency", "samples": 9, "reuse": "society_of_mind"}]})
    args = {"config": {"protocol": "self_consistency", "params": {"reuse": "society_of_mind", "samples": 9}}}
    _point_to_folder(args, points, tmp_path)
    assert Path(args["config"]["params"]["reuse"]).name == points[0].id
    with pytest.raises(SweepError, match="0 points of the grid run 'mad'"):
        _point_to_folder({"config": {"params": {"reuse": "mad"}}}, points, tmp_path)
