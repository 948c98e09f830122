"""A fork against its parent: final accuracy paired by item (difference, exact McNemar as statsmodels
computes it) and the follow rate of a pushed answer, on hand-built runs whose answers are counted by hand."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from debatekit import analysis
from debatekit.analysis.forks import MEASURES
from tests.analysis.test_conformity import hand_tables

TRUTH = {f"q{i}": 10 + i for i in range(10)}


def final_only(run: str, right: set[int]):
    """A one-round run of one agent on the ten items, right exactly on `right`."""
    return hand_tables(run, {q: (t, [{"a1": t if int(q[1:]) in right else -1}]) for q, t in TRUTH.items()})


def test_the_fork_accuracy_is_the_paired_difference_with_mcnemar_as_statsmodels_has_it():
    from statsmodels.stats.contingency_tables import mcnemar

    parent, child = final_only("parent", set(range(7))), final_only("fork", {0, 1, 2, 3, 8})
    row = analysis.fork_accuracy(child, parent).iloc[0]
    # both right on 0-3, only the parent on 4-6, only the fork on 8, neither on 7 and 9
    assert (row.pairs, row.accuracy, row.baseline_accuracy) == (10, 0.5, 0.7)
    assert row.difference == pytest.approx(-0.2) and row.low < -0.2 < row.high
    assert (row.only_config, row.only_baseline) == (1, 3)
    assert row.p_mcnemar == pytest.approx(mcnemar([[4, 1], [3, 2]], exact=True).pvalue) == pytest.approx(0.625)


# Four items, agents a1 a2 a3, the fork at round 2 plants 99 in a1's mouth. Round 1 is shared; there a2
# already said 99 on q3, so a2 does not count for q3. The fork: round 2 a2 follows on q0 q1, a3 on q0
# (a3's q2 answer is missing); round 3 a2 on q0-q2, a3 on q0 q1. The parent: only a3 on q0 at round 3.
ROUND_1 = {q: {"a1": t, "a2": 99 if q == "q3" else t, "a3": t} for q, t in TRUTH.items() if q < "q4"}


def debate(q: str, second: dict, third: dict) -> tuple:
    t = TRUTH[q]
    fill = {"a1": t, "a2": t, "a3": t}
    return t, [ROUND_1[q], {**fill, **second}, {**fill, **third}]


FORK = {"q0": debate("q0", {"a1": 99, "a2": 99, "a3": 99}, {"a1": 99, "a2": 99, "a3": 99}),
        "q1": debate("q1", {"a1": 99, "a2": 99}, {"a1": 99, "a2": 99, "a3": 99}),
        "q2": debate("q2", {"a1": 99, "a3": None}, {"a1": 99, "a2": 99}),
        "q3": debate("q3", {"a1": 99, "a2": 99}, {"a1": 99, "a2": 99})}
PARENT = {"q0": debate("q0", {}, {"a3": 99}), "q1": debate("q1", {}, {}), "q2": debate("q2", {}, {}),
          "q3": debate("q3", {"a2": 99}, {"a2": 99})}
PUSHED = {q: 99 for q in FORK}


def test_the_follow_rate_counts_the_other_agents_that_take_the_pushed_answer():
    table = analysis.follow_rate(hand_tables("fork", FORK), hand_tables("parent", PARENT), PUSHED, fork_round=2,
                                 agents=["a2", "a3"]).set_index("round")
    # eligible: a2 on q0-q2, a3 on q0-q3 (7); round 2 in the fork a3's q2 answer is missing: that agent is
    # left out on both sides (6), not counted in the parent alone
    assert table.loc[2, ["agents", "left_out", "fork_followed", "control_followed"]].tolist() == [6, 1, 3, 0]
    assert table.loc[3, ["agents", "left_out", "fork_followed", "control_followed"]].tolist() == [7, 0, 5, 1]
    assert table["items"].tolist() == [4, 4]
    assert table.loc[2, "difference"] == pytest.approx(0.5) and table.loc[3, "difference"] == pytest.approx(4 / 7)
    assert table.loc[2, "fork_low"] < 0.5 < table.loc[2, "fork_high"] and table.loc[2, "control_low"] == 0
    assert table.loc[2, "low"] <= 0.5 <= table.loc[2, "high"]
    # paired agents that followed in one run only: round 2, three in the fork; round 3, five follow in the fork,
    # one of them (a3 on q0) in the parent too; exact McNemar on them (two-sided binomial: 2 * 0.5**3)
    assert table.loc[2, ["only_fork", "only_control", "p_exact"]].tolist() == [3, 0, 0.25]
    assert table.loc[3, ["only_fork", "only_control"]].tolist() == [4, 0]


def test_the_fork_round_and_the_planted_agent_come_from_the_forks_run_json(tmp_path):
    (tmp_path / "run.json").write_text(json.dumps({"run_id": "fork", "parent": {
        "run": "parent", "run_id": "p", "at_round": 2, "intervention": {"name": "replace", "params": {"agent": "a1"}}}}))
    child, parent = hand_tables("fork", FORK, path=str(tmp_path)), hand_tables("parent", PARENT)
    assert analysis.fork_parent(child)["at_round"] == 2
    assert analysis.fork_parent(tmp_path)["intervention"]["params"]["agent"] == "a1"
    explicit = analysis.follow_rate(child, parent, PUSHED, fork_round=2, agents=["a2", "a3"])
    effect = analysis.fork_effect(child, parent, pushed=PUSHED)
    assert effect.follow.equals(explicit)
    assert effect.accuracy.iloc[0].pairs == 4 and analysis.fork_effect(child, parent).follow is None


def test_a_run_that_is_not_a_fork_needs_its_fork_round(tmp_path):
    (tmp_path / "run.json").write_text(json.dumps({"run_id": "plain"}))
    child, parent = hand_tables("fork", FORK, path=str(tmp_path)), hand_tables("parent", PARENT)
    assert analysis.fork_parent(tmp_path) is None
    with pytest.raises(ValueError, match="fork_round"):
        analysis.follow_rate(child, parent, PUSHED)


def test_pushing_the_truth_counts_the_agents_that_reach_it():
    wrong_first = {q: (t, [{"a1": t, "a2": 0, "a3": 0}, {"a1": t, "a2": t if q == "q0" else 0, "a3": 0}])
                   for q, t in TRUTH.items() if q < "q2"}
    unchanged = {q: (t, [{"a1": t, "a2": 0, "a3": 0}] * 2) for q, t in TRUTH.items() if q < "q2"}
    table = analysis.follow_rate(hand_tables("fork", wrong_first), hand_tables("parent", unchanged), "truth",
                                 fork_round=2, agents=["a2", "a3"])
    assert table[["fork_followed", "agents", "control_followed"]].values.tolist() == [[1, 4, 0]]


def test_the_conformity_effect_counts_moves_and_flips_in_both_runs_by_hand():
    table = analysis.conformity_effect(hand_tables("fork", FORK), hand_tables("parent", PARENT), fork_round=2)
    first = table[table["to_round"] == 2].set_index("measure")
    assert list(first.index) == MEASURES
    # fork 1->2: q0 all three leave 10 for 99, q1 a1 a2 leave (a3 keeps), q2 a1 leaves, a2 keeps (a3 has no
    # answer: no transition, in either run), q3 a1 leaves the majority's 13, a2 keeps 99, a3 keeps 13: 4 kept
    # of 11; the parent keeps all 11
    assert first.loc["keep", ["items", "fork_count", "fork_of", "control_count", "control_of"]].tolist() == \
        [4, 4, 11, 11, 11]
    assert first.loc["away", ["fork_count", "fork_of"]].tolist() == [7, 11]
    assert first.loc["to_majority", "fork_count"] == 0
    assert first.loc["keep", "difference"] == pytest.approx(4 / 11 - 1)
    assert first.loc["keep", "low"] <= 4 / 11 - 1 <= first.loc["keep", "high"] < 0
    # right in the majority: q0 3, q1 3, q2 2, q3 a1 a3; wrong in round 2: q0 3, q1 2, q2 1, q3 1
    assert first.loc["right_to_wrong_majority", ["fork_count", "fork_of", "control_count", "control_of"]].tolist() \
        == [7, 10, 0, 10]
    assert first.loc["wrong_to_right_minority", ["fork_count", "fork_of", "control_count", "control_of"]].tolist() \
        == [0, 1, 0, 1]  # q3's a2, wrong with 99 in the minority, stays wrong
    assert first.loc["right_to_wrong_minority", "fork_of"] == 0
    assert pd.isna(first.loc["right_to_wrong_minority", "difference"])  # nobody to count: no rate, no difference
    later = analysis.conformity_effect(hand_tables("fork", FORK), hand_tables("parent", PARENT), fork_round=3)
    assert set(later["to_round"]) == {3}
    only_others = analysis.conformity_effect(hand_tables("fork", FORK), hand_tables("parent", PARENT), fork_round=2,
                                             agents=["a2", "a3"]).set_index(["to_round", "measure"])
    assert only_others.loc[(2, "keep"), ["fork_count", "fork_of"]].tolist() == [4, 7]  # a1's four moves left out
