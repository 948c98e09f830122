"""Conformity: move and flip rates equal counts made by hand, the martingale test's interval where the
answer is known, missing answers left out, and the figures of the committed GSM8K debate."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from debatekit import analysis
from debatekit.analysis.tables import Tables
from debatekit.records.trace import RunFolder

ROOT = Path(__file__).resolve().parents[2]
GSM8K_SOM = ROOT / "results/studies/gsm8k/society_of_mind-agents3-rounds3-stop_on_agreementfalse-3ea484a1"


def rounds_rows(debate: str, truth, answers_by_round: list[dict], run: str = "r1") -> list[dict]:
    """The columns of `Tables.rounds` the conformity functions read, for one debate."""
    return [{"run_id": run, "item_id": debate, "debate_id": f"{run}-{debate}", "round": r,
             "agent": agent, "answer": a, "correct": None if truth is None or a is None else a == truth}
            for r, answers in enumerate(answers_by_round, start=1) for agent, a in answers.items()]


def hand_tables(run: str, debates: dict[str, tuple], path: str = "") -> Tables:
    """Tables of one run from {item: (truth, [answers of round 1, 2, ...])}; the last round is final."""
    rounds, rows = [], []
    for item, (truth, by_round) in debates.items():
        rounds += rounds_rows(item, truth, by_round, run=run)
        final = list(by_round[-1].values())[0]
        rows.append({"run_id": run, "item_id": item, "debate_id": f"{run}-{item}", "seed": 0, "status": "ok",
                     "truth": truth, "final_answer": final, "correct": final == truth, "completion_tokens": 10})
    runs = pd.DataFrame([{"run_id": run, "path": path}])
    return Tables(runs, pd.DataFrame(rows), pd.DataFrame(rounds), pd.DataFrame())


# q1 (truth 5): round 1 majority 5 (a3 in the minority); a2 leaves it for 7, a3 joins it; round 3 all on 5
# q2 (truth 1): round 1 all differ (a tie); a2's round-2 answer is missing; round 2's two answers tie again
# q3 (no truth): a3 joins the majority; counted as a move, never scored
HAND = pd.DataFrame(
    rounds_rows("q1", 5, [{"a1": 5, "a2": 5, "a3": 7}, {"a1": 5, "a2": 7, "a3": 5}, {"a1": 5, "a2": 5, "a3": 5}])
    + rounds_rows("q2", 1, [{"a1": 1, "a2": 2, "a3": 3}, {"a1": 2, "a2": None, "a3": 3}, {"a1": 2, "a2": 2, "a3": 1}])
    + rounds_rows("q3", None, [{"a1": 4, "a2": 4, "a3": 9}, {"a1": 4, "a2": 4, "a3": 4}]))


def test_move_counts_and_rates_equal_the_hand_counts():
    table = analysis.switch_rates(HAND).set_index(["from_round", "to_round", "move"])
    # 1->2: q1 a1 keep, a2 away, a3 to_majority; q2 a1 away, a3 keep (a2 missing); q3 a1, a2 keep, a3 to_majority
    # 2->3: q1 a1 keep, a2 to_majority, a3 keep; q2 a1 keep, a3 away (a2 had no round-2 answer)
    counts = {(1, 2, "keep"): 4, (1, 2, "to_majority"): 2, (1, 2, "away"): 2,
              (2, 3, "keep"): 3, (2, 3, "to_majority"): 1, (2, 3, "away"): 1}
    assert table["count"].to_dict() == counts
    assert table["transitions"].to_dict() == {k: 8 if k[0] == 1 else 5 for k in counts}
    assert table.loc[(1, 2, "keep"), "rate"] == 0.5 and table.loc[(2, 3, "keep"), "rate"] == 0.6
    assert table.groupby(level=[0, 1])["rate"].sum().tolist() == pytest.approx([1.0, 1.0])
    assert (table["low"] <= table["rate"]).all() and (table["rate"] <= table["high"]).all()


def test_positions_follow_the_previous_round_majority_counting_the_agent_itself():
    steps = analysis.answer_transitions(HAND)
    at = steps.set_index(["item_id", "to_round", "agent"])
    assert at.loc[("q1", 2, "a1"), "position"] == "majority" and at.loc[("q1", 2, "a3"), "position"] == "minority"
    assert at.loc[("q2", 2, "a1"), "position"] == "tie" and at.loc[("q2", 3, "a3"), "position"] == "tie"
    assert at.loc[("q1", 3, "a2"), "previous_majority"] == 5 and at.loc[("q2", 3, "a1"), "previous_majority"] is None
    assert ("q2", 2, "a2") not in at.index and ("q2", 3, "a2") not in at.index  # no answer: no transition


def test_flips_are_conditioned_on_the_minority_majority_or_tie():
    table = analysis.flips_by_position(HAND).set_index(["from_round", "to_round", "position", "flip"])
    # (at risk, count): 1->2 majority: q1 a1 right->right, a2 right->wrong; minority: q1 a3 wrong->right;
    # tie: q2 a1 right->wrong, a3 wrong->wrong. 2->3 majority: q1 a1, a3 right->right; minority: q1 a2
    # wrong->right; tie: q2 a1 wrong->wrong, a3 wrong->right. q3 has no truth: nowhere.
    expected = {
        (1, 2, "majority", "right_to_wrong"): (2, 1), (1, 2, "majority", "wrong_to_right"): (0, 0),
        (1, 2, "minority", "right_to_wrong"): (0, 0), (1, 2, "minority", "wrong_to_right"): (1, 1),
        (1, 2, "tie", "right_to_wrong"): (1, 1), (1, 2, "tie", "wrong_to_right"): (1, 0),
        (2, 3, "majority", "right_to_wrong"): (2, 0), (2, 3, "majority", "wrong_to_right"): (0, 0),
        (2, 3, "minority", "right_to_wrong"): (0, 0), (2, 3, "minority", "wrong_to_right"): (1, 1),
        (2, 3, "tie", "right_to_wrong"): (0, 0), (2, 3, "tie", "wrong_to_right"): (2, 1)}
    assert {k: (r.at_risk, r.count) for k, r in zip(table.index, table.itertuples())} == expected
    assert table.loc[(1, 2, "majority", "right_to_wrong"), "rate"] == 0.5
    assert table.loc[(1, 2, "minority", "right_to_wrong")].isna()[["rate", "low", "high"]].all()  # nobody at risk


def test_the_martingale_change_is_the_hand_mean_over_scored_transitions():
    table = analysis.martingale_test(HAND, n_boot=2000).set_index("to_round")
    # 1->2: q1 0, -1, +1; q2 -1, 0 (a2 missing, q3 unscored) -> -1/5; 2->3: q1 0, +1, 0; q2 0, +1 -> 2/5
    assert table.loc[2, "change"] == pytest.approx(-0.2) and table.loc[3, "change"] == pytest.approx(0.4)
    assert table["transitions"].tolist() == [5, 5] and table["items"].tolist() == [2, 2]
    assert table.loc[2, "accuracy_before"] == pytest.approx(3 / 5) and table.loc[2, "accuracy_after"] == 0.4


def steady(items: int, change: dict[int, int]) -> pd.DataFrame:
    """`items` debates of three agents over two rounds; item i's agent 1 goes from wrong to right
    (change +1) or right to wrong (-1) as `change` says, every other answer stays (half of them right)."""
    rows = []
    for i in range(items):
        first = {"a1": 0 if change.get(i, 0) > 0 else 1, "a2": 1, "a3": 0 if i % 2 else 1}
        second = {**first, "a1": {1: 1, -1: 0}.get(change.get(i, 0), first["a1"])}
        rows += rounds_rows(f"q{i}", 1, [first, second])
    return pd.DataFrame(rows)


def test_no_change_gives_zero_with_a_zero_width_interval():
    row = analysis.martingale_test(steady(20, {})).iloc[0]
    assert (row.change, row.low, row.high, row.zero_inside) == (0.0, 0.0, 0.0, True)


def test_a_systematic_improvement_excludes_zero_and_a_balanced_one_does_not():
    better = analysis.martingale_test(steady(40, {i: 1 for i in range(20)})).iloc[0]
    assert better.change == pytest.approx(20 / 120) and better.low > 0 and not better.zero_inside
    balanced = analysis.martingale_test(steady(40, {i: 1 if i < 20 else -1 for i in range(40)})).iloc[0]
    assert balanced.change == 0 and balanced.low < 0 < balanced.high and balanced.zero_inside


def test_the_bootstrap_resamples_whole_items_with_a_fixed_seed():
    # in 10 of 30 items all three agents go from wrong to right together: 30 draws, not 90
    rows = []
    for i in range(30):
        start = {a: 0 for a in ("a1", "a2", "a3")}
        rows += rounds_rows(f"q{i}", 1, [start, {a: 1 for a in start} if i < 10 else start])
    first, again = (analysis.martingale_test(pd.DataFrame(rows), seed=7).iloc[0] for _ in range(2))
    assert first.change == pytest.approx(1 / 3) and (first.low, first.high) == (again.low, again.high)
    # over items the standard error is sqrt(2/9 / 30) = 0.086 (a 95% width near 0.34); over 90 agents,
    # as if independent, it would be 0.050 (a width near 0.19)
    assert first.high - first.low > 0.28


def test_the_summary_has_one_row_per_round_pair_and_none_for_one_round():
    table = analysis.conformity_summary(HAND, n_boot=500)
    assert table[["from_round", "to_round", "transitions"]].values.tolist() == [[1, 2, 8], [2, 3, 5]]
    assert table.loc[0, "keep"] == 0.5 and table.loc[0, "right_to_wrong_majority"] == 0.5
    assert pd.isna(table.loc[0, "right_to_wrong_minority"])
    one_round = HAND[HAND["round"] == 1]
    assert analysis.conformity_summary(one_round).empty and analysis.switch_rates(one_round).empty


@pytest.fixture(scope="module")
def gsm8k():
    return analysis.load_runs([GSM8K_SOM])


def test_the_committed_gsm8k_debate_adds_up(gsm8k):
    answered = {}  # (from, to) -> agent transitions with an answer in both rounds, counted from the records
    for d in RunFolder(GSM8K_SOM).debates():
        for before, after in zip(d.rounds, d.rounds[1:]):
            both = sum(before.answers.get(a) is not None and after.answers.get(a) is not None for a in after.answers)
            answered[(before.round, after.round)] = answered.get((before.round, after.round), 0) + both
    assert answered == {(1, 2): 297, (2, 3): 299}  # 300 each, less the missing answers
    moves = analysis.switch_rates(gsm8k)
    for (start, end), group in moves.groupby(["from_round", "to_round"]):
        assert group["count"].sum() == group["transitions"].iloc[0] == answered[(start, end)]
        assert group["rate"].sum() == pytest.approx(1.0)
    flips = analysis.flips_by_position(gsm8k)
    at_risk = flips.groupby(["from_round", "to_round"])["at_risk"].sum()
    assert at_risk.to_dict() == answered  # every item has a truth: each transition is at risk of one flip once
    drift = analysis.martingale_test(gsm8k)
    assert drift["transitions"].tolist() == [297, 299] and drift["items"].tolist() == [100, 100]


def test_the_figures_the_docs_quote(gsm8k):
    table = analysis.conformity_summary(gsm8k).round(3)
    assert table[["keep", "to_majority", "away"]].values.tolist() == [[0.657, 0.067, 0.276], [0.819, 0.077, 0.104]]
    assert table[["change", "low", "high"]].values.tolist() == [[0.0, -0.034, 0.034], [0.030, 0.007, 0.057]]
    assert table["zero_inside"].tolist() == [True, False]
    by_position = analysis.switch_rates(gsm8k, by=["position"]).set_index(["position", "to_round", "move"])["count"]
    assert [by_position[("minority", r, "to_majority")] for r in (2, 3)] == [20, 23]
    assert by_position.loc[("minority", 2)].sum() == 25 and by_position.loc[("minority", 3)].sum() == 37
    assert (by_position[("tie", 2, "away")], by_position.loc[("tie", 2)].sum()) == (64, 84)
    flips = analysis.flips_by_position(gsm8k).set_index(["position", "flip", "to_round"]).sort_index()
    assert flips.loc[("minority", "wrong_to_right"), ["count", "at_risk"]].values.tolist() == [[14, 24], [13, 35]]
    assert flips.loc[("majority", "right_to_wrong"), ["count", "at_risk"]].values.tolist() == [[13, 164], [8, 174]]
    summary = table.set_index("to_round")  # the summary's flips are these, in the minority and majority
    assert summary[["wrong_to_right_minority", "wrong_in_minority"]].values.tolist() == [[0.583, 24], [0.371, 35]]
    assert summary[["right_to_wrong_majority", "right_in_majority"]].values.tolist() == [[0.079, 164], [0.046, 174]]
    drift = analysis.martingale_test(gsm8k).round(3)
    assert drift[["accuracy_before", "accuracy_after"]].values.tolist() == [[0.603, 0.603], [0.595, 0.625]]


def test_answers_an_update_rule_imposed_are_not_counted_as_the_agents_moves(tmp_path, arithmetic_file):
    from debatekit.models import scripted
    from debatekit.records.schemas import RunConfig
    from debatekit.runner import run

    values = {1: {"agent1": 10, "agent2": 10, "agent3": 12}, 2: {"agent3": 10}}
    model = scripted.register("conformists", fn=lambda req: {"reasoning": "r", "answer": values[req.round][req.agent]})
    result = run(RunConfig(protocol="society_of_mind", dataset=str(arithmetic_file), limit=1, model=model,
                           params={"rounds": 2, "stop_on_agreement": False, "update": "conformist"}),
                 tmp_path / "run", progress=False)
    tables = analysis.load_runs([result.path])
    moves = analysis.answer_transitions(tables)
    assert list(moves["agent"]) == ["agent3"] and list(moves["move"]) == ["to_majority"]  # agents 1, 2 made no call
    # the martingale test counts the answers the agents hold, the kept ones too: 3 transitions, one wrong -> right
    (row,) = analysis.martingale_test(tables).itertuples()
    assert (row.transitions, row.accuracy_before, row.accuracy_after) == (3, 2 / 3, 1.0)
    assert row.change == pytest.approx(1 / 3)
    (summary,) = analysis.conformity_summary(tables).itertuples()  # what `debatekit show` prints
    assert (summary.transitions, summary.to_majority) == (1, 1.0) and summary.change == pytest.approx(1 / 3)
