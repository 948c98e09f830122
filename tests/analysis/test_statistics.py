"""The study's statistics on hand-computed cases: exact bootstrap intervals, the 90% interval and
TOST against a margin, Holm's adjustment, the registered primary comparison, and ties in a vote."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binom, norm, t as student

from debatekit.analysis import Tables, study
from debatekit.analysis.intervals import nested_bootstrap_ci, paired_score_ci
from debatekit.analysis.paired import compare, equivalence, format_comparison
from debatekit.datasets.voting import majority, tied_answers
from debatekit.records.schemas import RunConfig
from debatekit.runner import run
from debatekit.sweep.grid import SweepError, expand_grid, primary_comparison

# --- intervals that no seed moves ------------------------------------------------------------------


def test_the_interval_of_values_minus_one_zero_one_is_the_exact_bootstrap_interval():
    # two items, 1 and 0: a resampled mean is 0, 0.5 or 1 with chances 1/4, 1/2, 1/4
    assert nested_bootstrap_ci([[1.0], [0.0]], level=0.5) == (0.5, 0.0, 0.5)
    # 60 right of 100: the resampled accuracy is Binomial(100, 0.6) / 100, whatever the seed
    right = [[1.0]] * 60 + [[0.0]] * 40
    expected = tuple(binom.ppf([0.025, 0.975], 100, 0.6) / 100)
    assert {nested_bootstrap_ci(right, seed=s)[1:] for s in range(5)} == {expected}
    # paired differences, checked against every one of the 4**4 resamples of four items
    values = [1.0, -1.0, 0.0, 0.0]
    means = sorted(sum(draw) / 4 for draw in itertools.product(values, repeat=4))
    cdf = np.arange(1, len(means) + 1) / len(means)
    by_hand = [means[int(np.searchsorted(cdf, q - 1e-12))] for q in (0.1, 0.9)]
    assert nested_bootstrap_ci([[v] for v in values], level=0.8)[1:] == tuple(by_hand)


def test_reconciles_interval_against_one_agent_ends_at_zero_for_every_seed():
    # GSM8K reconcile - single: 9 items only reconcile right, 19 only single, 72 alike
    diffs = [[1.0]] * 9 + [[-1.0]] * 19 + [[0.0]] * 72
    assert {nested_bootstrap_ci(diffs, seed=s) for s in range(5)} == {(-0.1, -0.2, 0.0)}


def test_several_seeds_per_item_still_get_a_monte_carlo_interval():
    mean, low, high = nested_bootstrap_ci([[1.0, 0.0], [1.0, 1.0], [0.0, 0.0], [1.0, 0.5]], n_boot=2000)
    assert mean == pytest.approx(0.5625) and 0 <= low < mean < high <= 1


# --- Tango's score interval for paired proportions -------------------------------------------------


def _tango(only_a, only_b, n, d):
    """Tango's score statistic at difference d, its nuisance share found by maximising the likelihood
    on a fine grid rather than by the closed form the code uses."""
    q = np.linspace(max(0.0, -d), (1 - d) / 2, 200_001)[1:-1]  # P(only b); P(only a) = q + d; both fit in 1
    loglik = only_a * np.log(q + d) + only_b * np.log(q) + (n - only_a - only_b) * np.log(1 - 2 * q - d)
    best = q[np.argmax(loglik)]
    return (only_a - only_b - n * d) / np.sqrt(n * (2 * best + d * (1 - d)))


@pytest.mark.parametrize("only_a, only_b, n", [(1, 7, 21), (40, 20, 160), (3, 0, 10), (2, 2, 10)])
def test_the_score_interval_ends_where_tangos_statistic_reaches_the_normal_quantile(only_a, only_b, n):
    low, high = paired_score_ci(only_a, only_b, n)
    z = norm.ppf(0.975)
    assert low < (only_a - only_b) / n < high
    assert _tango(only_a, only_b, n, low) == pytest.approx(z, abs=1e-3)
    assert _tango(only_a, only_b, n, high) == pytest.approx(-z, abs=1e-3)


def test_the_score_interval_matches_a_published_one_and_heeds_its_level():
    # Cavo et al. 2012 (59 both, 6 only before, 16 only after, 80 neither): Tango's interval as the
    # R package of Fagerland, Lydersen and Laake's book prints it, -0.1240 to -0.0054
    assert paired_score_ci(6, 16, 161) == pytest.approx((-0.1240, -0.0054), abs=5e-5)
    low99, high99 = paired_score_ci(6, 16, 161, level=0.99)
    assert low99 < -0.1240 and high99 > -0.0054
    assert _tango(6, 16, 161, low99) == pytest.approx(norm.ppf(0.995), abs=1e-3)
    with pytest.raises(ValueError, match="level"):
        paired_score_ci(6, 16, 161, level=95)


def test_the_score_interval_of_a_large_one_sided_table_mirrors_its_twin():
    # every pair only b's, thousands of them: the square root's argument rounds below zero near d = -1
    low, high = paired_score_ci(0, 2102, 2102)
    assert (low, high) == pytest.approx(tuple(-v for v in reversed(paired_score_ci(2102, 0, 2102))))


def test_the_score_interval_does_not_collapse_without_discordant_pairs():
    z2 = norm.ppf(0.975) ** 2
    assert paired_score_ci(0, 0, 10) == pytest.approx((-z2 / (10 + z2), z2 / (10 + z2)))
    assert paired_score_ci(10, 0, 10)[1] == 1.0 and paired_score_ci(0, 10, 10)[0] == -1.0
    # the bootstrap over the same ten alike pairs is the point itself
    assert nested_bootstrap_ci([[0.0]] * 10) == (0.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="do not fit"):
        paired_score_ci(6, 5, 10)


def test_compare_gives_the_score_interval_with_one_seed_and_none_with_several():
    rows = [{"protocol": p, "item_id": f"i{i}", "seed": 0, "correct": True, "status": "ok", "completion_tokens": 1}
            for p in ("a", "b") for i in range(10)]
    row = compare(pd.DataFrame(rows), baseline="a", n_boot=100).iloc[0]
    assert (row.low, row.high) == (0.0, 0.0)
    assert (row.score_low, row.score_high) == pytest.approx(paired_score_ci(0, 0, 10))
    assert format_comparison(compare(pd.DataFrame(rows), baseline="a", n_boot=100)).splitlines()[-1] == (
        "b: no pair decided differently, so the bootstrap interval is a point; Tango's 95% score interval is "
        "[-0.28, +0.28]")
    wrong = [r | {"correct": r["protocol"] == "b" or r["item_id"] != "i0"} for r in rows]  # a misses i0 only
    row = compare(pd.DataFrame(wrong), baseline="a", n_boot=100).iloc[0]
    assert (row.score_low, row.score_high) == pytest.approx(paired_score_ci(1, 0, 10))
    assert row.score_low < 0.1 < row.score_high
    seeded = [r | {"seed": s} for r in rows for s in range(2)]
    row = compare(pd.DataFrame(seeded), baseline="a", n_boot=100).iloc[0]
    assert np.isnan(row.score_low) and np.isnan(row.score_high)


# --- what a null rules out: the 90% interval and TOST ----------------------------------------------


def test_equivalence_is_the_90_percent_t_interval_and_two_one_sided_tests():
    # GSM8K debate@3 - vote@1: 5 items only the debate right, 6 only the vote, 89 alike
    d = [1.0] * 5 + [-1.0] * 6 + [0.0] * 89
    mean, sd = np.mean(d), np.std(d, ddof=1)
    se, q = sd / np.sqrt(100), student.ppf(0.95, 99)
    low, high, p = equivalence(d, 0.07)
    assert (low, high) == pytest.approx((mean - q * se, mean + q * se))
    tost = max(student.sf((mean + 0.07) / se, 99), student.sf((0.07 - mean) / se, 99))
    assert p == pytest.approx(tost) and p < 0.05  # equivalent within +-0.07
    assert equivalence(d, 0.05)[2] > 0.05  # but not within +-0.05
    assert equivalence([0.0] * 10, 0.1) == (0.0, 0.0, 0.0)  # no spread: the mean itself, inside the margin


def test_the_equivalence_table_says_equivalent_different_or_undecided():
    rows = pd.DataFrame([["a", "b", 100, 0.0, -0.10, 0.10, -0.05, 0.05, 0.1, 0.01],
                         ["c", "b", 100, 0.2, 0.05, 0.35, 0.08, 0.32, 0.1, 0.9],
                         ["e", "b", 100, 0.05, -0.08, 0.18, -0.06, 0.16, 0.1, 0.2]],
                        columns=["config", "baseline", "pairs", "difference", "low", "high", "low90", "high90",
                                 "margin", "p_tost"])
    assert list(study.equivalence(rows)["verdict"]) == ["equivalent", "different", "undecided"]


# --- Holm over the report's family ------------------------------------------------------------------


def test_holm_adjusts_over_every_distinct_comparison_and_leaves_the_primary_out():
    cols = ["config", "baseline", "p_mcnemar"]
    families = {"single": pd.DataFrame([["x", "single", 0.01], ["y", "single", 0.04]], columns=cols),
                "sc": pd.DataFrame([["x", "sc", 0.03], ["single", "x", 0.01], ["z", "sc", 0.001]], columns=cols)}
    adjusted = study.holm(families, exclude=("z", "sc"))
    # family {0.01, 0.04, 0.03} (x-single met twice, z-sc registered): 0.01*3, then max(0.03*2, 0.03), 0.04*1 -> 0.06
    assert list(adjusted["single"]["p_holm"]) == pytest.approx([0.03, 0.06])
    sc = adjusted["sc"]["p_holm"].tolist()
    assert sc[:2] == pytest.approx([0.06, 0.03]) and np.isnan(sc[2])


# --- the registered primary comparison ---------------------------------------------------------------


def test_a_grid_registers_one_primary_comparison_and_refuses_a_malformed_one():
    grid = {"parameters": {"dataset": "arithmetic"}, "points": [{"protocol": "single"}],
            "primary": {"config": "society_of_mind@3", "against": "self_consistency", "margin": 0.07}}
    assert len(expand_grid(grid)) == 1  # no point of its own
    assert primary_comparison(grid) == {"config": "society_of_mind@3", "against": "self_consistency", "margin": 0.07}
    assert primary_comparison({"points": []}) is None
    for bad in ("society_of_mind vs self_consistency", {"config": "a"}, {"config": "a", "against": "a"},
                {"config": "a", "against": "b", "margin": 2}, {"config": "a", "against": "b", "alpha": 0.1}):
        with pytest.raises(SweepError, match="primary"):
            expand_grid({**grid, "primary": bad})


def test_a_name_with_a_round_resolves_to_the_report_label():
    labels = ["single", "self_consistency", "society_of_mind", "society_of_mind vote@1", "society_of_mind debate@2"]
    last = {"society_of_mind": 3}
    assert study.resolve("society_of_mind@2", labels, last) == "society_of_mind debate@2"
    assert study.resolve("society_of_mind@3", labels, last) == "society_of_mind"  # its last round: the run itself
    assert study.resolve("society_of_mind@vote", labels, last) == "society_of_mind vote@1"
    with pytest.raises(ValueError, match="no configuration 'society_of_mind@5'.*it has single"):
        study.resolve("society_of_mind@5", labels, last)
    with pytest.raises(ValueError, match="no configuration 'mad'"):
        study.resolve("mad", labels, last)


# --- ties in a vote ------------------------------------------------------------------------------


def test_a_tie_goes_first_or_to_a_seeded_draw():
    assert majority([1, 2, 3]) == 1 and majority([1, 2, 2]) == 2 and tied_answers([1, 2, 3, None]) == [1, 2, 3]
    draws = [majority([1, 2, 3], tie_break=f"0:q{k}") for k in range(12)]
    assert set(draws) == {1, 2, 3} and draws == [majority([1, 2, 3], tie_break=f"0:q{k}") for k in range(12)]
    assert majority([4, 4, 5], tie_break="any") == 4  # no tie: no draw


def _tables(rows: list[tuple[str, list, object]]) -> Tables:
    """One self_consistency run: per debate its samples' answers and its truth."""
    debates = pd.DataFrame([{"run_id": "r", "debate_id": d, "status": "ok", "truth": truth} for d, _, truth in rows])
    rounds = pd.DataFrame([{"run_id": "r", "debate_id": d, "round": 1, "agent": f"sample{k + 1}", "answer": a}
                           for d, answers, _ in rows for k, a in enumerate(answers)])
    return Tables(runs=pd.DataFrame([{"run_id": "r", "protocol": "self_consistency"}]), debates=debates,
                  rounds=rounds, turns=pd.DataFrame())


def test_the_sensitivity_to_ties_is_computed_exactly():
    tables = _tables([("d1", [1, 2, 3], 2), ("d2", [5, 5, 6], 5), ("d3", [7, 8, 9, 9], 7), ("d4", [4, 1], 9)])
    row = study.ties(tables, {"r": "self_consistency"}).iloc[0]
    # d1: a three-way tie, the truth second (first rule wrong, 1/3 at random, 0 to 1); d2 untied right;
    # d3 untied wrong; d4 a tie with no right answer
    assert (row["items"], row["tied"]) == (4, 0.5)
    assert row["accuracy"] == 0.25 and row["random_tie_break"] == pytest.approx((1 / 3 + 1) / 4)
    assert (row["lowest"], row["highest"]) == (0.25, 0.5)


def test_a_protocol_breaks_its_ties_with_a_seeded_draw_when_asked(tmp_path, arithmetic_file, model_from):
    model = model_from(lambda req: {"reasoning": "r", "answer": {"agent1": 1, "agent2": 2, "agent3": 3}[req.agent]})
    finals = {}
    for rule in ("first", "random"):
        result = run(RunConfig(protocol="society_of_mind", dataset=str(arithmetic_file), model=model, limit=3,
                               params={"rounds": 1, "tie_break": rule, "answer_format": "json"}),
                     tmp_path / rule, progress=False)
        finals[rule] = {d.item_id: d.final_answer for d in result.debates}
        params = json.loads((tmp_path / rule / "run.json").read_text())["config"]["params"]
        assert params["tie_break"] == rule
    assert set(finals["first"].values()) == {1}
    assert finals["random"] == {item: majority([1, 2, 3], tie_break=f"0:{item}") for item in finals["random"]}


def test_the_vote_curve_is_the_majority_of_the_first_k_samples():
    tables = _tables([("d1", [1, 2, 2], 2), ("d2", [5, 5, 6], 5)])
    curve = study.vote_curve(tables, {"r": "self_consistency"})
    # d1: sample 1 wrong, a tie of two goes to the first (wrong), three samples right; d2 right throughout
    assert list(curve["k"]) == [1, 2, 3] and list(curve["accuracy"]) == [0.5, 0.5, 1.0]
    assert list(curve["items"]) == [2, 2, 2] and (curve["low"] <= curve["accuracy"]).all()
