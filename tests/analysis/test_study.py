"""The study pipeline on a scripted model: study functions on real run folders, and the whole
`debatekit study` command (sweep, study notebook, report) on a tiny grid."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from debatekit import sweep
from debatekit._base import signals
from debatekit.analysis import study
from debatekit.analysis.study.dynamics import _plain
from debatekit.cli import app as cli
from debatekit.models import scripted
from debatekit.records.schemas import RunConfig
from debatekit.records.work import busy_seconds
from debatekit.runner import run

TRUTHS = {"q1": 10, "q2": 20, "q3": 30, "q4": 40}


def reply(req):
    """Round 1: agent1 right on q1 and q2 only, agent2 right on q2 and q3, agent3 wrong everywhere;
    round 2: everyone takes q3's right answer, and q1's wrong majority; the samples of
    self_consistency are right on q2 and q4."""
    truth = TRUTHS[req.item_id]
    if req.agent.startswith("sample"):
        right = req.item_id in ("q2", "q4")
    elif req.round == 1:
        right = {"agent1": ("q1", "q2"), "agent2": ("q2", "q3"), "agent3": ()}[req.agent].__contains__(req.item_id)
    else:
        right = req.item_id in ("q2", "q3")
    return {"reasoning": f"{req.agent} works it out", "answer": truth if right else truth + 1}


@pytest.fixture
def sweep_dir(tmp_path):
    model = scripted.register("study-model", fn=reply)
    data = tmp_path / "items.jsonl"
    data.write_text("".join(json.dumps({"id": k, "question": f"What is {v}?", "answer": v}) + "\n"
                            for k, v in TRUTHS.items()))
    for name, protocol, params in (("single", "single", {}),
                                   ("som", "society_of_mind", {"agents": 3, "rounds": 2, "stop_on_agreement": False}),
                                   ("sc", "self_consistency", {"samples": 3})):
        run(RunConfig(protocol=protocol, dataset=str(data), model=model, params={"answer_format": "json", **params}),
            tmp_path / "study" / name, progress=False)
    return tmp_path / "study"


def test_every_configuration_is_paired_against_single_with_the_decomposition_added(sweep_dir):
    tables, labels = study.load(sweep_dir)
    rows = study.paired(tables, labels, "single").set_index("config")
    assert set(rows.index) == {"society_of_mind", "self_consistency", "society_of_mind vote@1",
                               "society_of_mind debate@2"}
    # single (agent1 alone): q1, q2 right; vote@1: q2 (two of three); debate@2: q2, q3
    assert rows.loc["society_of_mind vote@1", "difference"] == pytest.approx(-0.25)
    assert rows.loc["society_of_mind debate@2", "accuracy"] == pytest.approx(0.5)
    assert rows.loc["self_consistency", "accuracy"] == pytest.approx(0.5)


def test_costs_rules_out_turning_points_and_conclusion_come_from_the_runs(sweep_dir):
    tables, labels = study.load(sweep_dir)
    costs = study.costs(tables, labels).set_index("label")
    assert costs.loc["single", "calls"] == 1 and costs.loc["society_of_mind", "calls"] == 6
    assert costs["pareto"].any()
    against = study.paired(tables, labels, "single")
    limits = study.rules_out(against)  # a planning tool, no longer part of the conclusion
    assert set(limits.columns) >= {"discordance", "detectable", "items_for_5_points"}
    picks = study.turning_points(tables)
    assert picks["fixed"]["item_id"] == "q3" and picks["broke"] is None
    assert any("wrong to right" in c for c in picks["fixed"]["changes"])
    text = study.conclusion(against, study.decomposition(tables), "items", 0.0)
    assert text.startswith("On items:") and "- society_of_mind: " in text and "vote@1" in text
    # 2 rounds: the run's answer is debate@2, said once, and counted once among the comparisons
    assert "society_of_mind debate@2" not in text and "Inside the debate run, debate@2" in text
    assert "None of the 3 comparisons with one agent" in text
    assert "Against self_consistency" not in text
    # at equal cost: each configuration but one agent against self-consistency, both budgets measured
    against_sc = study.paired(tables, labels, "self_consistency")
    text = study.conclusion(against, study.decomposition(tables), "items", 0.0, against_sc)
    rows = against_sc.set_index("config")
    debate, vote = rows.loc["society_of_mind"], rows.loc["society_of_mind vote@1"]
    sc_tokens = f"{debate.baseline_completion_tokens:,.0f}"
    assert debate.completion_tokens == 2 * debate.baseline_completion_tokens  # 6 calls against 3 samples
    assert vote.completion_tokens == vote.baseline_completion_tokens  # round 1: 3 calls
    # the debate (q2, q3 right) and the vote (q2, q4): even; the round-1 vote (q2): one item fewer
    assert (f"- Against self_consistency ({sc_tokens} completion tokens per item), society_of_mind "
            f"({debate.completion_tokens:,.0f}, 200% of its cost) is not separable from self_consistency "
            f"(+0.00 [{debate.low:+.2f}, {debate.high:+.2f}], McNemar p = 1, 4 items).") in text
    assert (f"- Against self_consistency ({sc_tokens} completion tokens per item), society_of_mind vote@1 "
            f"({vote.completion_tokens:,.0f}, the same cost within 10%) is not separable from self_consistency "
            f"(-0.25 [{vote.low:+.2f}, {vote.high:+.2f}], McNemar p = 1, 4 items).") in text
    # debate@2 is the run's own answer (2 rounds): said once; one agent is not an equal-cost rival
    assert "society_of_mind debate@2 (" not in text.split("Against")[-1] and "Against self_consistency" in text
    assert sum(line.startswith("- Against") for line in text.splitlines()) == 2


def test_the_equal_cost_sentence_survives_missing_token_counts_and_says_a_separation():
    row = dict(config="mad", baseline="self_consistency", pairs=100, left_out=0, seeds=1, accuracy=0.8,
               baseline_accuracy=0.6, difference=0.2, low=0.1, high=0.3, only_config=22, only_baseline=2,
               p_mcnemar=1e-5, completion_tokens=900.0, baseline_completion_tokens=0.0)
    nothing = pd.DataFrame(columns=["config"])
    text = study.conclusion(nothing, nothing.assign(baseline=[]), "x", None,
                            pd.DataFrame([row, {**row, "config": "chateval", "pairs": 0}]))
    # a provider that reports no usage: no share, no division by zero; no shared item: no sentence
    assert text.splitlines()[1:] == ["- Against self_consistency, mad is above self_consistency "
                                     "(+0.20 [+0.10, +0.30], McNemar p = 1e-05, 100 items)."]


def test_provenance_names_each_runs_commits_including_its_resumes(sweep_dir):
    record = json.loads((sweep_dir / "som" / "run.json").read_text())
    record["git_commit"] = "a" * 40
    record["resumes"] = [{"at": record["created"], "git_commit": "b" * 40, "answered": 2, "limit": None},
                         {"at": record["created"], "git_commit": "b" * 40, "answered": 3, "limit": None}]
    (sweep_dir / "som" / "run.json").write_text(json.dumps(record))
    rows = study.provenance(*study.load(sweep_dir)).set_index("config")
    assert rows.loc["society_of_mind", "commits"] == "aaaaaaa bbbbbbb"  # in order, each once
    assert rows.loc["single", "status"] == "complete" and rows.loc["single", "items"] == 4
    assert list(rows.columns) == ["status", "items", "model", "created", "finished", "commits",
                                  "calls_made", "tokens_generated", "busy_h"]
    # 4 items x 3 agents x 2 rounds, less agent 1's round-1 replies, which single's run had made (cache)
    assert rows.loc["single", "calls_made"] == 4 and rows.loc["society_of_mind", "calls_made"] == 4 * 3 * 2 - 4


def test_compute_counts_only_calls_made_and_the_time_some_call_was_running(sweep_dir):
    tables, labels = study.load(sweep_dir)
    run_id = tables.runs.set_index("path").loc[str(sweep_dir / "single"), "run_id"]
    turns = tables.turns[tables.turns["run_id"] == run_id].copy()
    # four calls of single: two side by side (0-10 s, 5-15 s), one alone (100-130 s), one from the cache
    turns["ts"], turns["latency_s"] = [10.0, 15.0, 130.0, 200.0], [10.0, 10.0, 30.0, 0.01]
    turns["cache_hit"] = [False, None, False, True]  # unknown (None) counts as made
    turns["calls"], turns["completion_tokens"] = [1, 2, 1, 1], [100, 50, 70, 999]
    row = study.compute(dataclasses.replace(tables, turns=turns)).set_index("run_id").loc[run_id]
    assert row["calls_made"] == 4 and row["tokens_generated"] == 220
    assert row["busy_h"] == pytest.approx((15 + 30) / 3600)


def test_busy_seconds_counts_overlaps_once():
    assert busy_seconds([]) == 0
    assert busy_seconds([(0, 10), (5, 15), (2, 3), (20, 25)]) == 20
    assert busy_seconds([(20, 25), (0, 10)]) == 15


def test_the_study_command_runs_sweep_notebook_and_report_and_resumes_with_no_new_call(tmp_path):
    data = tmp_path / "items.jsonl"
    data.write_text("".join(json.dumps({"id": k, "question": f"What is {v}?", "answer": v}) + "\n"
                            for k, v in list(TRUTHS.items())[:3]))
    folder = tmp_path / "studies" / "tiny"
    folder.mkdir(parents=True)
    grid = folder / "grid.yaml"
    grid.write_text(yaml.safe_dump({
        "parameters": {"dataset": str(data), "model": "scripted/schema", "limit": 3},
        "points": [{"protocol": "single"},
                   {"protocol": "society_of_mind", "agents": 3, "rounds": 2, "stop_on_agreement": False},
                   {"protocol": "self_consistency", "samples": 3}],
        "primary": {"config": "society_of_mind@2", "against": "self_consistency", "margin": 0.2}}))
    assert cli.main(["study", str(grid), "--quiet"]) == 0
    notebook, html = folder / "study.ipynb", folder / "report.html"
    assert notebook.exists() and (folder / "summary.parquet").exists()
    page = html.read_text()
    assert "Debate or vote" in page and "vote@1" in page and "On " in page and "plotly" in page
    # the registered comparison first and alone; Holm-adjusted p beside the raw; ties; the margin stated
    conclusion = _conclusion(notebook).splitlines()
    assert conclusion[1].startswith("- Primary comparison (registered in the grid, tested alone): society_of_mind is ")
    assert "+-0.20" in conclusion[1] and "p_holm" in page and "Ties in a vote" in page and "random_tie_break" in page
    first = _conclusion(notebook)
    injected = next(c for c in json.loads(notebook.read_text())["cells"]
                    if "injected-parameters" in c["metadata"].get("tags", []))
    assert 'sweep_dir = "../' in "".join(injected["source"])  # relative: a committed notebook names no machine's paths
    # each complete point's calls are packed for committing, and still read by the notebook above
    assert not list(folder.rglob("events.jsonl"))
    packed = sorted(folder.rglob("events.jsonl.gz"))
    assert [p.parent.name.split("-")[0] for p in packed] == ["self_consistency", "single", "society_of_mind"]
    before = {p: p.read_bytes() for p in packed}
    assert cli.main(["study", str(grid), "--quiet"]) == 0  # complete: no point re-runs, no call is made
    assert not list(folder.rglob("events.jsonl")) and {p: p.read_bytes() for p in packed} == before
    assert _conclusion(notebook) == first
    # a summary written before the last points finished is rebuilt by --report-only, which runs nothing
    summary = pd.read_parquet(folder / "summary.parquet")
    first_point = summary[summary["point_id"] == summary["point_id"].iloc[0]]
    first_point.to_parquet(folder / "summary.parquet")
    (folder / "rounds.parquet").unlink()
    assert cli.main(["study", str(grid), "--report-only"]) == 0
    pd.testing.assert_frame_equal(pd.read_parquet(folder / "summary.parquet"), summary)
    assert (folder / "rounds.parquet").exists() and _conclusion(notebook) == first


def _conclusion(notebook: Path) -> str:
    cells = json.loads(notebook.read_text())["cells"]
    outputs = [o for c in cells if c["cell_type"] == "code" and "study.conclusion" in "".join(c["source"])
               for o in c["outputs"]]
    return "".join("".join(o.get("text", "")) for o in outputs)


def test_the_conclusion_says_separates_only_where_interval_and_exact_test_agree():
    cols = ["config", "baseline", "pairs", "difference", "low", "high", "p_mcnemar", "low90", "high90", "margin",
            "p_tost"]
    against = pd.DataFrame([["both", "single", 100, 0.15, 0.05, 0.25, 0.01, 0.07, 0.23, 0.1, 0.9],
                            ["interval only", "single", 60, 0.10, 0.02, 0.20, 0.07, 0.03, 0.18, 0.1, 0.5],
                            ["neither", "single", 60, 0.00, -0.10, 0.10, 1.0, -0.08, 0.08, 0.1, 0.03],
                            ["few", "single", 10, 0.10, 0.00, 0.30, 1.0, -0.02, 0.25, 0.1, 0.8]], columns=cols)
    inner = pd.DataFrame([["debate@3", "vote@1", 60, -0.12, -0.20, -0.04, 0.02, -0.18, -0.06, 0.1, 0.6]], columns=cols)
    lines = study.conclusion(against, inner, "gsm8k", 0.5).splitlines()
    assert lines[1].startswith("- both: above one agent (+0.15 [+0.05, +0.25], McNemar p = 0.01, 100 items)")
    assert lines[2].startswith("- interval only: above one agent by its interval only, not by the exact test (")
    assert lines[3].startswith("- neither: not separable from one agent (")
    assert lines[5] == ("- Inside the debate run, debate@3 takes from the round-1 majority vote "
                        "(-0.12 [-0.20, -0.04], McNemar p = 0.02, 60 items).")
    # the interval-only one is no null to bound; the two whose 95% interval holds zero say what their
    # 90% interval rules out against the margin
    assert lines[6] == ("- 3 of 4 comparisons with one agent do not separate. What each rules out: neither, 90% "
                        "interval [-0.08, +0.08]: equivalent within +-0.10 (TOST p = 0.03); few, 90% interval "
                        "[-0.02, +0.25]: not shown equivalent within +-0.10 (TOST p = 0.8).")
    # with Holm-adjusted p-values the exact test is read adjusted; the primary comparison comes first, alone
    adjusted = against.assign(p_holm=[0.04, 0.21, 1.0, 1.0])
    primary = against.iloc[[0]].assign(config="society_of_mind", baseline="self_consistency")
    lines = study.conclusion(adjusted.assign(p_holm=[0.06, 0.21, 1.0, 1.0]), inner, "gsm8k", None,
                             primary_row=primary).splitlines()
    assert lines[1] == ("- Primary comparison (registered in the grid, tested alone): society_of_mind is above "
                        "self_consistency (+0.15 [+0.05, +0.25], McNemar p = 0.01, 100 items); 90% interval "
                        "[+0.07, +0.23]: not shown equivalent within +-0.10 (TOST p = 0.9).")
    assert lines[2] == ("- both: above one agent by its interval only, not by the exact test (+0.15 [+0.05, +0.25], "
                        "McNemar p = 0.01, Holm p = 0.06, 100 items).")
    assert study.conclusion(adjusted, inner, "gsm8k", None).splitlines()[1].startswith("- both: above one agent (")


def test_turning_point_answers_print_as_the_model_wrote_them():
    # a rounds column mixing numbers and None holds floats: 45.0 is printed 45, 9.33 stays
    assert [_plain(v) for v in (45.0, 9.33, "B", None, float("nan"))] == [45, 9.33, "B", None, None]
    assert isinstance(_plain(45.0), int)


def test_report_only_writes_notebook_and_report_over_a_study_part_way_with_no_call(sweep_dir, capsys):
    grid = sweep_dir / "grid.yaml"  # the runs of the fixture stand in for a study whose points are not all done
    grid.write_text(yaml.safe_dump({"parameters": {"dataset": "arithmetic", "model": "scripted/nothing-answers",
                                                   "limit": 100}, "points": [{"protocol": "single"}]}))
    events = sorted(sweep_dir.rglob("events.jsonl"))
    before = {p: p.stat().st_size for p in events}
    assert cli.main(["study", str(grid), "--report-only"]) == 0
    assert {p: p.stat().st_size for p in events} == before  # no run grew, none began
    assert not (sweep_dir / "sweep.json").exists() and "(no point run)" in capsys.readouterr().out
    assert "society_of_mind vote@1" in _conclusion(sweep_dir / "study.ipynb")
    assert "Debate or vote" in (sweep_dir / "report.html").read_text()


@pytest.mark.parametrize("stop, status", [(KeyboardInterrupt, 130), (signals.Terminated, 143)])
def test_a_stopped_study_says_to_run_its_own_command_again(tmp_path, monkeypatch, capsys, stop, status):
    grid = tmp_path / "grid.yaml"
    grid.write_text(yaml.safe_dump({"parameters": {"dataset": "arithmetic", "model": "scripted/schema", "limit": 1},
                                    "points": [{"protocol": "single"}]}))

    def stopped(*args, **kwargs):
        raise stop()

    monkeypatch.setattr(sweep, "run_sweep", stopped)
    assert cli.main(["study", str(grid), "--quiet"]) == status
    err = capsys.readouterr().err
    assert "study stopped" in err and "the same `debatekit study` command" in err and "--resume" not in err


def test_distinct_drops_the_debate_row_that_repeats_its_runs_answer(sweep_dir):
    tables, labels = study.load(sweep_dir)
    rows = study.paired(tables, labels, "single")
    kept = study.distinct(rows)
    # 2 rounds: society_of_mind's answer is debate@2's, so that row goes; vote@1 says something else
    assert set(rows["config"]) - set(kept["config"]) == {"society_of_mind debate@2"}
    assert set(kept["config"]) == {"self_consistency", "society_of_mind", "society_of_mind vote@1"}
    assert study.distinct(rows.iloc[0:0]).empty


@pytest.mark.parametrize("flag, wanted", [([], False), (["--retry-degraded"], True)])
def test_the_study_command_hands_retry_degraded_to_its_sweep(tmp_path, monkeypatch, flag, wanted):
    grid = tmp_path / "grid.yaml"
    grid.write_text(yaml.safe_dump({"parameters": {"dataset": "arithmetic", "model": "scripted/schema", "limit": 1},
                                    "points": [{"protocol": "single"}]}))
    seen = {}

    def stopped(*args, **kwargs):  # what the sweep was asked; then stop, so that no notebook runs
        seen.update(kwargs)
        raise KeyboardInterrupt()

    monkeypatch.setattr(sweep, "run_sweep", stopped)
    assert cli.main(["study", str(grid), "--quiet", *flag]) == 130
    assert seen["retry_degraded"] is wanted


def test_the_notebooks_conformity_cell_reads_the_committed_gsm8k_study():
    import nbformat

    from debatekit.analysis import conformity

    root = Path(__file__).resolve().parents[2]
    cells = nbformat.read(root / "notebooks" / "study.ipynb", as_version=4).cells
    source = next(c.source for c in cells if c.cell_type == "code" and "conformity_summary" in c.source)
    tables, labels = study.load(root / "results" / "studies" / "gsm8k")
    namespace = {"tables": tables, "labels": labels, "study": study, "conformity": conformity}
    exec(source, namespace)  # the cell as shipped, on the study's six runs
    table = namespace["conform"]
    assert table["config"].tolist() == ["society_of_mind"] * 2
    assert table[["from_round", "to_round", "transitions"]].values.tolist() == [[1, 2, 297], [2, 3, 299]]
    assert table["zero_inside"].tolist() == [True, False]


def test_the_headline_figure_of_a_study_with_no_one_agent_arm_pairs_against_the_vote():
    """The replication runs no `single` arm: its headline figure draws the debate against the vote,
    not an empty plot (it did, when the figure read only the rows against one agent)."""
    root = Path(__file__).resolve().parents[2]
    tables, labels = study.load(root / "results" / "studies" / "replication")
    against_single = study.paired(tables, labels, "single")
    against_vote = study.paired(tables, labels, "self_consistency")
    assert against_single.empty
    drawn = study.headline(against_single, against_vote)
    assert "society_of_mind" in set(drawn["config"]) and set(drawn["baseline"]) == {"self_consistency"}
    tables_gsm8k, labels_gsm8k = study.load(root / "results" / "studies" / "gsm8k")
    first = study.paired(tables_gsm8k, labels_gsm8k, "single")
    assert study.headline(first, against_vote) is first  # a study with one agent keeps its figure
