"""The pure tables behind the plots: filling early-stopped debates, trajectories, convergence, flips, Pareto."""

import math

import pandas as pd
import pytest

from debatekit import analysis, sweep
from tests.sweep_helpers import make_sweep


def rows(debate, answers_by_round, truth=10, run="r1"):
    out = []
    for r, answers in enumerate(answers_by_round, start=1):
        correct = [a == truth for a in answers.values()]
        top = max(set(answers.values()), key=list(answers.values()).count)
        for agent, a in answers.items():
            out.append({"run_id": run, "item_id": debate, "debate_id": debate, "round": r, "agent": agent,
                        "answer": a, "correct": a == truth, "majority": top, "majority_correct": top == truth,
                        "agreement": list(answers.values()).count(top) / len(answers), "changed": False,
                        "relied": False, "bullied": False, "flip": "unchanged"})
    return out


@pytest.fixture
def frame():
    return pd.DataFrame(
        rows("d1", [{"a1": 10, "a2": 11, "a3": 10}, {"a1": 10, "a2": 10, "a3": 10}])  # converges in round 2
        + rows("d2", [{"a1": 12, "a2": 12, "a3": 12}])                               # agrees (wrong) in round 1
        + rows("d3", [{"a1": 10, "a2": 11, "a3": 12}, {"a1": 11, "a2": 11, "a3": 10}]))


def test_fill_rounds_carries_the_last_round_forward(frame):
    filled = analysis.fill_rounds(frame, until=3)
    assert len(filled) == 3 * 3 * 3
    d2 = filled[filled["debate_id"] == "d2"]
    assert sorted(d2["round"].unique()) == [1, 2, 3] and d2["filled"].sum() == 6
    assert (d2[d2["round"] == 3]["answer"] == 12).all()
    assert len(analysis.fill_rounds(frame)) == 3 * 3 * 2  # default: the largest round of the run


def test_score_trajectory_per_agent_and_majority(frame):
    traj = analysis.score_trajectory(analysis.fill_rounds(frame), n_boot=200)
    majority = traj[traj["agent"] == "majority"].set_index("round")
    assert majority.loc[1, "score"] == pytest.approx(2 / 3)  # d1 right, d2 wrong, d3: tie -> 10 seen first
    assert majority.loc[2, "score"] == pytest.approx(1 / 3)
    a2 = traj[traj["agent"] == "a2"].set_index("round")
    assert a2.loc[1, "score"] == 0.0 and a2.loc[2, "score"] == pytest.approx(1 / 3)
    assert (traj["low"] <= traj["score"]).all() and (traj["score"] <= traj["high"]).all()
    assert set(traj["n"]) == {3}


def test_convergence_curve_counts_debates_where_all_agree(frame):
    curve = analysis.convergence_curve(analysis.fill_rounds(frame), n_boot=200).set_index("round")
    assert curve.loc[1, "converged"] == pytest.approx(1 / 3)  # d2
    assert curve.loc[2, "converged"] == pytest.approx(2 / 3)  # d1 and d2 (carried forward)
    assert curve.loc[2, "debates"] == 3


def test_flip_flow_counts_right_and_wrong_transitions(frame):
    flow = analysis.flip_flow(frame)
    counts = flow.groupby(["before", "after"])["count"].sum().to_dict()
    # d1: a2 wrong->right, a1 a3 right->right; d3: a1 right->wrong, a2 wrong->wrong, a3 wrong->right
    assert counts == {("right", "right"): 2, ("wrong", "right"): 2, ("right", "wrong"): 1, ("wrong", "wrong"): 1}


def test_pareto_front_and_equal_budget():
    configs = pd.DataFrame({"protocol": ["som", "som", "sc", "sc"], "completion_tokens": [100, 300, 90, 310],
                            "accuracy": [0.5, 0.45, 0.4, 0.7], "low": [0.3] * 4, "high": [0.8] * 4})
    assert analysis.pareto_front(configs, "completion_tokens", "accuracy").tolist() == [True, False, True, True]
    matched = analysis.equal_budget(configs, configs["protocol"] == "sc")
    assert matched["baseline_accuracy"].tolist() == [0.4, 0.7]
    assert matched["baseline_budget"].tolist() == [90, 310]


def test_config_table_on_a_sweep(tmp_path):
    data = sweep.load(make_sweep(tmp_path))
    table = analysis.config_table(data.summary, ["protocol", "agents", "rounds"])
    som = table[(table["protocol"] == "society_of_mind") & (table["agents"] == 3)].set_index("rounds")
    assert som.loc[1, "accuracy"] == 0.5  # q1, q2: agents 2 and 3 outvote the right agent1 in round 1
    assert som.loc[2, "accuracy"] == 1.0  # ... and agree with it in round 2
    assert som.loc[1, "items"] == 4 and som.loc[1, "calls"] == 3.0
    single = table[table["protocol"] == "single"].iloc[0]
    assert single["accuracy"] == 1.0 and math.isnan(single["agents"])


def test_summary_counts_escalations_by_target():
    from debatekit.analysis import summarize
    from debatekit.records.schemas import DebateRecord

    def rec(i, to=None, human=False):
        return DebateRecord(run_id="r", debate_id=f"d{i}", item_id=f"i{i}", protocol="p", status="ok",
                            escalated_to=to, needs_human_review=human)

    debates = [rec(1, "council"), rec(2), rec(3, "human", human=True), rec(4, human=True),  # 4: an older record
               rec(5, "council")]
    summary = summarize(debates)
    assert summary["escalated_to"] == {"council": 2, "human": 2} and summary["needs_human_review"] == 2


def test_the_rounds_table_says_which_model_each_agent_used(tmp_path, arithmetic_file, model_from):
    from debatekit.analysis import load_runs
    from debatekit.records.schemas import RunConfig
    from debatekit.runner import run

    strong = model_from(lambda req: {"reasoning": "sum", "answer": 10})
    weak = model_from(lambda req: {"reasoning": "guess", "answer": 7})
    result = run(RunConfig(protocol="society_of_mind", dataset=str(arithmetic_file), limit=2, model=strong,
                           params={"agents": ["ann", "bob", "cy"], "rounds": 2, "stop_on_agreement": False,
                                   "models": {"cy": weak}}), tmp_path / "mixed", progress=False)
    rounds = load_runs([result.path]).rounds
    used = rounds.groupby("agent")["model"].unique().map(list).to_dict()
    assert used == {"ann": [strong], "bob": [strong], "cy": [weak]}
    assert len(rounds) == 2 * 2 * 3 and rounds["model"].notna().all()


def test_only_keeps_the_debates_rounds_and_calls_of_the_items_named(tmp_path, arithmetic_file, model_from):
    from debatekit.analysis import load_runs
    from debatekit.records.schemas import RunConfig
    from debatekit.runner import run

    model = model_from(lambda req: {"reasoning": "sum", "answer": 10})
    result = run(RunConfig(protocol="society_of_mind", dataset=str(arithmetic_file), limit=2, model=model,
                           params={"agents": 3, "rounds": 2, "stop_on_agreement": False}), tmp_path / "r",
                 progress=False)
    tables = load_runs([result.path])
    first, second = sorted(tables.debates["item_id"])
    kept = tables.only([first])
    assert list(kept.debates["item_id"]) == [first]
    assert set(kept.rounds["item_id"]) == {first} and len(kept.rounds) == 2 * 3
    assert set(kept.turns["item_id"]) == {first} and len(kept.turns) == len(tables.turns) // 2
    assert kept.runs.equals(tables.runs) and tables.only([]).debates.empty


def test_the_study_table_quotes_each_runs_own_accuracy_interval():
    """The report's table (`config_table`) and a run's summary (run.json, `--status`) give one
    interval, not two that differ in the second decimal (they resampled 1,000 and 2,000 times until
    session 17: self_consistency's [0.66, 0.82] against [0.65, 0.82])."""
    import numpy as np

    from debatekit.analysis import summarize
    from debatekit.records.schemas import DebateRecord

    right = (np.random.default_rng(5).random(100) < 0.74).tolist()  # 1,000 and 2,000 resamples: 0.79 and 0.80
    records = [DebateRecord(run_id="r", debate_id=f"d{i}", item_id=f"i{i}", protocol="p", status="ok", correct=c)
               for i, c in enumerate(right)]
    frame = pd.DataFrame({"run_id": "r", "item_id": [f"i{i}" for i in range(100)], "status": "ok", "correct": right,
                          "prompt_tokens": 0, "completion_tokens": 0})
    row, summary = analysis.config_table(frame, ["run_id"]).iloc[0], summarize(records)
    assert [row["accuracy"], row["low"], row["high"]] == [summary["accuracy"], *summary["accuracy_ci"]]
