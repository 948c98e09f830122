"""Paired comparisons: known per-item correctness gives the exact difference, a covering interval,
and the McNemar p-value of a table computed by hand; the CLI prints them (issue 13)."""

from __future__ import annotations

import json
from math import comb

import pytest

from debatekit import analysis
from debatekit.analysis import plots
from debatekit.cli.app import main
from debatekit.models import scripted
from tests.conftest import answer

N = 200
A_RIGHT = set(range(0, 120))                        # 60%
B_RIGHT = set(range(0, 100)) | set(range(120, 170))  # 75%; both right on 0..99
ONLY_A, ONLY_B = len(A_RIGHT - B_RIGHT), len(B_RIGHT - A_RIGHT)  # 20, 50


def dataset(tmp_path):
    path = tmp_path / "items.jsonl"
    path.write_text("".join(json.dumps({"id": f"q{i}", "question": f"What is {i}?", "answer": i}) + "\n"
                            for i in range(N)))
    return str(path)


def right_on(name: str, right: set[int], fail: set[int] = frozenset()) -> str:
    def reply(req):
        i = int(req.item_id[1:])
        if i in fail:
            return scripted.Fault("bad_request", "rejected")
        return answer(i if i in right else -1)

    return scripted.register(name, fn=reply)


def hand_mcnemar(only_a: int, only_b: int) -> float:
    """Exact two-sided McNemar: twice the binomial(n, 1/2) tail of the smaller discordant count."""
    n, k = only_a + only_b, min(only_a, only_b)
    return min(1.0, 2 * sum(comb(n, i) for i in range(k + 1)) / 2**n)


def run_two(tmp_path, capsys, model_b: str) -> tuple:
    data = dataset(tmp_path)
    a = right_on("paired-a", A_RIGHT)
    for name, model in (("a", a), ("b", model_b)):
        assert main(["run", "single", "--dataset", data, "--model", model, "--out", str(tmp_path / name),
                     "--quiet", "--no-cache", "--concurrency", "16"]) == 0
    capsys.readouterr()
    return tmp_path / "a", tmp_path / "b"


def test_known_correctness_gives_the_exact_difference_interval_and_mcnemar(tmp_path, capsys):
    a, b = run_two(tmp_path, capsys, right_on("paired-b", B_RIGHT))
    tables = analysis.load_runs([a, b])
    frame = tables.debates.assign(config=tables.debates["model"])
    table = analysis.compare(frame, baseline="scripted/paired-a", by="config")
    row = table.iloc[0]
    assert (row.config, row.pairs, row.left_out, row.seeds) == ("scripted/paired-b", N, 0, 1)
    assert row.accuracy == 0.75 and row.baseline_accuracy == 0.60
    assert row.difference == pytest.approx(0.15)
    assert row.low < 0.15 < row.high and row.low > 0  # 70 discordant pairs, 50 of them for B
    assert (row.only_config, row.only_baseline) == (ONLY_B, ONLY_A) == (50, 20)
    assert row.p_mcnemar == pytest.approx(hand_mcnemar(ONLY_A, ONLY_B), rel=1e-9)
    assert row.p_mcnemar < 0.001

    assert main(["compare", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("paired against single ")  # both runs are `single`: labelled by run id
    line = next(x for x in out.splitlines() if "+0.15 [" in x)
    assert " 200 " in line and " 50 " in line and " 20 " in line and f"{hand_mcnemar(20, 50):.3g}" in line

    fig = plots.paired_difference(table)
    (bar,) = [t for t in fig.data if t.type == "scatter"]
    assert list(bar.x) == [pytest.approx(0.15)] and list(bar.y) == ["scripted/paired-b"]
    assert list(bar.error_x.array) == [pytest.approx(row.high - 0.15)]
    assert list(bar.error_x.arrayminus) == [pytest.approx(0.15 - row.low)]
    assert any(shape.x0 == 0 and shape.x1 == 0 for shape in fig.layout.shapes)  # zero marked
    # beside the interval: the McNemar p and the pairs it rests on
    assert [a.text for a in fig.layout.annotations] == [f"p={row.p_mcnemar:.2g}, n={N}"]


def test_items_where_either_side_failed_are_left_out_of_the_pair_and_counted(tmp_path, capsys):
    failing = set(range(190, 200))  # both wrong anyway: leaving them out changes the accuracies only
    a, b = run_two(tmp_path, capsys, right_on("paired-b-fails", B_RIGHT, fail=failing))
    tables = analysis.load_runs([a, b])
    row = analysis.compare(tables.debates.assign(config=tables.debates["model"]), by="config").iloc[0]
    assert (row.pairs, row.left_out) == (N - 10, 10)
    assert row.accuracy == pytest.approx(150 / 190) and row.baseline_accuracy == pytest.approx(120 / 190)
    assert (row.only_config, row.only_baseline) == (50, 20)


def test_run_of_several_protocols_prints_each_against_the_first(tmp_path, capsys):
    model = right_on("paired-all", set(range(0, N, 2)))
    assert main(["run", "single", "self_consistency", "society_of_mind", "--dataset", dataset(tmp_path),
                 "--limit", "20", "--model", model, "--out", str(tmp_path / "runs"), "--quiet"]) == 0
    out = capsys.readouterr().out
    block = out[out.index("paired against single"):]
    lines = block.splitlines()
    rows = {line.split()[0]: line for line in lines[3:5]}
    assert set(rows) == {"self_consistency", "society_of_mind"}
    # the same model answers the same items right whatever the protocol: no discordant pair, so the
    # bootstrap interval is a point and a line under the table gives what 20 alike pairs rule out
    assert all(" +0.00 [+0.00, +0.00] " in line and " 1 " in line for line in rows.values())
    assert lines[5:] == [f"{name}: no pair decided differently, so the bootstrap interval is a point; Tango's 95% "
                         "score interval is [-0.16, +0.16]" for name in rows]


def test_compare_refuses_a_baseline_that_is_not_there(tmp_path, capsys):
    a, b = run_two(tmp_path, capsys, right_on("paired-b2", B_RIGHT))
    assert main(["compare", str(a), str(b), "--baseline", "nope"]) == 2
    assert "baseline 'nope' is not among" in capsys.readouterr().err


def test_run_labels_add_parameters_only_where_two_runs_share_a_protocol():
    from types import SimpleNamespace as NS

    from debatekit.analysis.paired import run_labels

    def record(run_id, protocol, params):
        return NS(run_id=run_id, config=NS(protocol=protocol, params=params))

    labels = run_labels([record("r1", "single", {}), record("r2", "society_of_mind", {"rounds": 2}),
                         record("r3", "society_of_mind", {"rounds": 3}), record("r4", "self_consistency", {}),
                         record("r5", "self_consistency", {"samples": 4})])
    assert labels == {"r1": "single", "r2": "society_of_mind rounds=2", "r3": "society_of_mind rounds=3",
                      "r4": "self_consistency samples=default", "r5": "self_consistency samples=4"}

    def limited(run_id, max_tokens):
        return NS(run_id=run_id, model="m", config=NS(protocol="single", params={"temperature": 0},
                                                      max_tokens=max_tokens, seed=0))

    assert run_labels([limited("a", 512), limited("b", None)]) == {"a": "single max_tokens=512",
                                                                   "b": "single max_tokens=default"}
    assert run_labels([limited("a", 512), limited("b", 512)]) == {"a": "single a", "b": "single b"}


def test_run_labels_name_models_by_the_words_that_tell_them_apart():
    from types import SimpleNamespace as NS

    from debatekit.analysis.paired import run_labels, short_model_names

    big, small = "local/qwen2.5-coder-1.5b-instruct", "local/qwen2.5-coder-0.5b-instruct"

    def record(run_id, params):
        return NS(run_id=run_id, model=big, config=NS(protocol="society_of_mind", params=params, seed=0))

    labels = run_labels([record("all", {}), record("mixed", {"models": [big, big, small]})])
    assert labels == {"all": "society_of_mind models=default", "mixed": "society_of_mind models=[1.5b, 1.5b, 0.5b]"}
    assert short_model_names(["openai/gpt-4o", "openai/gpt-4o-mini"]) == {"openai/gpt-4o": "4o",
                                                                          "openai/gpt-4o-mini": "4o-mini"}
    assert short_model_names([big, big]) == {big: big}  # one model: nothing to tell apart, kept whole
    assert short_model_names(["a/x", "b/y"]) == {"a/x": "a/x", "b/y": "b/y"}  # no word shared at the ends


def test_run_labels_shorten_only_model_settings_and_never_into_alike_names():
    from types import SimpleNamespace as NS

    from debatekit.analysis.paired import run_labels, short_model_names

    def record(run_id, params):
        return NS(run_id=run_id, model="m", config=NS(protocol="judged_debate", params=params, seed=0))

    judges = run_labels([record("a", {"judge_model": "local/qwen2.5-coder-0.5b-instruct"}),
                         record("b", {"judge_model": "local/qwen2.5-coder-1.5b-instruct"})])
    assert judges == {"a": "judged_debate judge_model=0.5b", "b": "judged_debate judge_model=1.5b"}
    by_agent = run_labels([record("a", {"models": {"pro": "x/big-v1", "con": "x/small-v1"}}), record("b", {})])
    assert by_agent["a"] == "judged_debate models={pro: big, con: small}"
    # lists that are not model names keep their quotes, so that two personas lists stay apart
    personas = run_labels([record("a", {"personas": ["x, y", "z"]}), record("b", {"personas": ["x", "y, z"]})])
    assert personas == {"a": "judged_debate personas=['x, y', 'z']", "b": "judged_debate personas=['x', 'y, z']"}
    assert short_model_names(["a/b", "a-b"]) == {"a/b": "a/b", "a-b": "a-b"}  # both would be 'b'
    assert short_model_names(["local/m/", "local/n/"]) == {"local/m/": "m", "local/n/": "n"}
    assert short_model_names(["local/m/", "local/m"]) == {"local/m/": "m/", "local/m": "m"}


def test_two_runs_of_one_protocol_are_refused_not_merged_under_its_name(tmp_path, capsys):
    """`analysis.compare(load_runs(...))` labels by protocol: two single runs answering the same items
    would overwrite each other's rows; it says so and names the way out instead of keeping the last."""
    a, b = run_two(tmp_path, capsys, right_on("paired-b3", B_RIGHT))
    with pytest.raises(ValueError, match=r"runs .* both answer the same items under one configuration 'single'"
                                         r".*compare_runs"):
        analysis.compare(analysis.load_runs([a, b]))
    (row,) = analysis.compare_runs(analysis.load_runs([a, b])).itertuples()
    assert (row.config, row.baseline, row.pairs) == ("single model=b3", "single model=a", N)
    assert (row.only_config, row.only_baseline) == (ONLY_B, ONLY_A)
    records = [analysis.load_runs([path]).runs.iloc[0] for path in (a, b)]
    assert {r["dataset_sha256"] for r in records} == {records[0]["dataset_sha256"]}


def test_runs_of_different_datasets_are_refused(tmp_path, capsys):
    a, _ = run_two(tmp_path, capsys, right_on("paired-b4", B_RIGHT))
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"id": "q0", "question": "What is 0?", "answer": 0}) + "\n")
    assert main(["run", "self_consistency", "--dataset", str(other), "--model", right_on("paired-c", {0}),
                 "--out", str(tmp_path / "c"), "--quiet", "--no-cache"]) == 0
    with pytest.raises(ValueError, match="different datasets"):
        analysis.compare(analysis.load_runs([a, tmp_path / "c"]))


def test_runs_made_from_different_base_seeds_pair_seed_for_seed(tmp_path, capsys):
    """Seeds pair by their index within a configuration: run A's seeds 0, 1 against run B's 7, 8."""
    data = dataset(tmp_path)
    model = right_on("paired-seeds", A_RIGHT)
    for name, seed in (("a", "0"), ("b", "7")):
        assert main(["run", "single", "--dataset", data, "--model", model, "--limit", "20", "--seeds", "2",
                     "--seed", seed, "--out", str(tmp_path / name), "--quiet", "--no-cache"]) == 0
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("single seed=7"))
    assert " 40 " in row and "+0.00" in row and "nan" not in row


def test_load_runs_takes_one_folder_given_alone(tmp_path, capsys):
    a, b = run_two(tmp_path, capsys, right_on("paired-b5", B_RIGHT))
    for given in (a, str(a)):
        tables = analysis.load_runs(given)
        assert len(tables.runs) == 1 and len(tables.debates) == N
