"""Debate or vote from one society_of_mind run, and the power helper, checked against hand counts."""

import math

import pytest

from debatekit.analysis import load_runs
from debatekit.analysis.decompose import across_runs, decompose, decomposition
from debatekit.analysis.paired import mcnemar_exact
from debatekit.analysis.power import detectable_difference, items_needed, mcnemar_power
from debatekit.records.schemas import RunConfig
from debatekit.runner import run
from tests.protocols.test_society_of_mind import script

# truths: q1 10, q2 20, q3 30; agents answer by (item, round)
TABLE = {
    ("q1", 1): [10, 11, 11], ("q1", 2): [11, 11, 12], ("q1", 3): [11, 11, 11],  # single right, debate talks it out
    ("q2", 1): [21, 20, 20], ("q2", 2): [20, 20, 20], ("q2", 3): [20, 20, 20],  # vote fixes single
    ("q3", 1): [31, 32, 30], ("q3", 2): [30, 30, 32], ("q3", 3): [30, 30, 30],  # debate fixes a wrong vote
}


@pytest.fixture
def tables(tmp_path, arithmetic_file, model_from):
    model = model_from(script(TABLE))
    run(RunConfig(protocol="society_of_mind", dataset=str(arithmetic_file), model=model,
                  params={"agents": 3, "rounds": 3, "stop_on_agreement": False}), tmp_path / "som", progress=False)
    return load_runs([tmp_path / "som"])


def test_one_run_gives_single_vote_and_debate_per_item(tables):
    frame = decompose(tables).set_index(["item_id", "config"])["correct"]
    assert frame.loc["q1"].to_dict() == {"single": True, "vote@1": False, "debate@2": False, "debate@3": False}
    assert frame.loc["q2"].to_dict() == {"single": False, "vote@1": True, "debate@2": True, "debate@3": True}
    assert frame.loc["q3"].to_dict() == {"single": False, "vote@1": False, "debate@2": True, "debate@3": True}
    agreement = decompose(tables).drop_duplicates("item_id").set_index("item_id")["agreement"]
    assert agreement.to_dict() == {"q1": 2 / 3, "q2": 2 / 3, "q3": 1 / 3}  # q3: a three-way tie


def test_costs_grow_with_the_rounds_a_configuration_reads(tables):
    cost = decompose(tables).query("item_id == 'q1'").set_index("config")["completion_tokens"]
    assert 0 < cost["single"] < cost["vote@1"] < cost["debate@2"] < cost["debate@3"]
    assert cost["vote@1"] == pytest.approx(3 * cost["single"], rel=0.5)


def test_paired_differences_of_the_decomposition(tables):
    rows = decomposition(tables, n_boot=200).set_index(["config", "baseline"])
    vote = rows.loc[("vote@1", "single")]
    assert vote["difference"] == pytest.approx(0.0) and (vote["only_config"], vote["only_baseline"]) == (1, 1)
    debate = rows.loc[("debate@3", "vote@1")]
    assert debate["difference"] == pytest.approx(1 / 3) and (debate["only_config"], debate["only_baseline"]) == (1, 0)
    assert debate["p_mcnemar"] == 1.0 and debate["pairs"] == 3
    assert rows.loc[("debate@2", "single")]["difference"] == pytest.approx(1 / 3)


# the same items with the third agent replaced: it holds the right answer on q1 and never finds q3's
OTHER = {**TABLE, ("q1", 1): [10, 11, 10], ("q1", 2): [10, 11, 10], ("q1", 3): [10, 10, 10],
         ("q3", 1): [31, 32, 33], ("q3", 2): [31, 32, 33], ("q3", 3): [31, 31, 33]}


def test_two_runs_are_paired_stage_by_stage_and_compare_prints_it(tmp_path, arithmetic_file, model_from, capsys):
    from debatekit.cli.app import main

    folders = []
    for name, table in (("base", TABLE), ("other", OTHER)):
        run(RunConfig(protocol="society_of_mind", dataset=str(arithmetic_file), model=model_from(script(table)),
                      params={"agents": 3, "rounds": 3, "stop_on_agreement": False}), tmp_path / name, progress=False)
        folders.append(tmp_path / name)
    tables = load_runs(folders)
    labels = {r: f"run {i}" for i, r in enumerate(tables.runs["run_id"])}
    rows = across_runs(tables, labels, "run 0", n_boot=200).set_index("config")
    assert list(rows.index) == ["run 1 single", "run 1 vote@1", "run 1 debate@2", "run 1 debate@3"]
    assert list(rows["baseline"]) == ["run 0 single", "run 0 vote@1", "run 0 debate@2", "run 0 debate@3"]
    # hand counts: single is agent 1 in round 1, the same answers in both runs
    assert (rows.loc["run 1 single", "only_config"], rows.loc["run 1 single", "only_baseline"]) == (0, 0)
    # vote@1: the other run gets q1 (10, 11, 10), the base run does not; q3 is wrong in both
    assert (rows.loc["run 1 vote@1", "only_config"], rows.loc["run 1 vote@1", "only_baseline"]) == (1, 0)
    # debate@3: the other run keeps q1 and loses q3, which the base run's debate fixed
    assert (rows.loc["run 1 debate@3", "only_config"], rows.loc["run 1 debate@3", "only_baseline"]) == (1, 1)
    assert rows.loc["run 1 debate@3", "difference"] == pytest.approx(0.0) and (rows["pairs"] == 3).all()
    assert list(rows["stage"]) == ["single", "vote@1", "debate@2", "debate@3"] and set(rows["run"]) == {"run 1"}
    assert across_runs(tables, labels, "not a debate run", n_boot=200)["baseline"].iloc[0] == "run 0 single"
    assert across_runs(load_runs(folders[:1]), labels, "run 0").empty  # one run: nothing to pair

    assert main(["compare", str(folders[0]), str(folders[1])]) == 0
    out = capsys.readouterr().out
    block = out[out.index("stage by stage"):].splitlines()
    rows = {line.split()[0]: line for line in block[3:]}
    assert list(rows) == ["single", "vote@1", "debate@2", "debate@3"]
    assert " +0.33 [" in rows["vote@1"] and " 0.67 vs 0.33 " in rows["vote@1"] and " +0.00 [" in rows["debate@3"]


def test_mcnemar_exact_on_a_hand_counted_table():
    # 10 pairs only the first right, 2 only the second: two-sided binomial p = 2 * (1 + 12 + 66) / 4096
    assert mcnemar_exact(10, 2) == pytest.approx(158 / 4096)
    assert mcnemar_exact(0, 0) == 1.0


def test_power_of_the_exact_test_at_the_edges_a_hand_count_gives():
    # every pair discordant and all favour one side: n = 5 gives p = 2/32 > 0.05 (never rejects),
    # n = 6 gives p = 2/64 < 0.05 (always rejects)
    assert mcnemar_power(5, 1.0, 1.0) == 0.0 and mcnemar_power(6, 1.0, 1.0) == pytest.approx(1.0)
    assert mcnemar_power(100, 0.3, 0.0) <= 0.05  # no true difference: at most the test's size


def test_power_matches_a_brute_force_sum_over_all_outcomes():
    from scipy.stats import multinomial

    n, discordance, difference = 12, 0.5, 0.3
    p10, p01 = (discordance + difference) / 2, (discordance - difference) / 2
    brute = sum(multinomial.pmf([a, b, n - a - b], n, [p10, p01, 1 - discordance])
                for a in range(n + 1) for b in range(n + 1 - a) if mcnemar_exact(a, b) <= 0.05)
    assert mcnemar_power(n, discordance, difference) == pytest.approx(brute, abs=1e-9)


def test_detectable_difference_and_items_needed_agree_with_the_normal_approximation():
    from scipy.stats import norm

    def connor(d, pd):  # Connor (1987): items for 80% power at alpha 0.05
        return (norm.ppf(0.975) * math.sqrt(pd) + norm.ppf(0.8) * math.sqrt(pd - d * d)) ** 2 / d ** 2

    found = detectable_difference(100, 0.25)
    assert 0.12 < found < 0.18 and connor(found, 0.25) == pytest.approx(100, rel=0.25)
    needed = items_needed(0.05, 0.25)
    assert needed == pytest.approx(connor(0.05, 0.25), rel=0.1)
    assert mcnemar_power(needed, 0.25, 0.05) >= 0.8
    assert detectable_difference(10, 0.05) is None  # ten items with rare disagreement detect nothing


def test_the_run_table_of_a_society_of_mind_run_prints_the_decomposition(tmp_path, arithmetic_file, capsys):
    from debatekit.cli.app import main
    from debatekit.models import scripted

    scripted.register("decompose-cli", fn=script(TABLE))
    assert main(["run", "society_of_mind", "--dataset", str(arithmetic_file), "--model", "scripted/decompose-cli",
                 "--rounds", "3", "--set", "stop_on_agreement=false", "--out", str(tmp_path / "r"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "debate or vote, inside this run" in out
    line = next(line for line in out.splitlines() if line.startswith("debate@3") and "vote@1" in line)
    assert "0.67 vs 0.33" in line and "+0.33" in line


def test_a_debate_that_stopped_on_agreement_is_carried_to_the_last_round_of_its_run(tmp_path, arithmetic_file,
                                                                                    model_from):
    # default rounds (2) and the default early stop: q2 agrees in round 1 and stops there
    table = {("q1", 1): [10, 11, 11], ("q1", 2): [10, 10, 11],
             ("q2", 1): [20, 20, 20],
             ("q3", 1): [31, 32, 30], ("q3", 2): [30, 30, 32]}
    run(RunConfig(protocol="society_of_mind", dataset=str(arithmetic_file), model=model_from(script(table)),
                  params={"agents": 3}), tmp_path / "som", progress=False)
    frame = decompose(load_runs([tmp_path / "som"])).set_index(["item_id", "config"])
    assert set(frame.xs("debate@2", level="config").index) == {"q1", "q2", "q3"}  # q2 carried, not dropped
    assert frame.loc[("q2", "debate@2"), "correct"] == frame.loc[("q2", "vote@1"), "correct"] == True  # noqa: E712
    assert frame.loc[("q1", "debate@2"), "correct"] and frame.loc[("q3", "debate@2"), "correct"]
