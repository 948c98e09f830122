"""Plot builders: figures built from small fixture frames, their traces checked."""

import pandas as pd

from debatekit.analysis import plots


def trajectory_frame():
    rows = []
    for agents in (1, 3):
        names = ["agent1"] if agents == 1 else ["agent1", "agent2", "agent3"]
        for r in (1, 2, 3):
            for name in [*names, "majority"]:
                score = 0.2 * r + (0.1 if name == "majority" else 0.0)
                rows.append({"agents": agents, "round": r, "agent": name, "score": score, "low": score - 0.1,
                             "high": score + 0.1, "n": 10})
    return pd.DataFrame(rows)


def test_score_trajectory_lines_per_agent_and_bands_for_the_aggregate():
    fig = plots.score_trajectory(trajectory_frame(), by=["agents"])
    lines = [t for t in fig.data if t.mode == "lines+markers"]
    bands = [t for t in fig.data if t.fill == "toself"]
    assert sorted(t.name for t in lines) == sorted(
        ["agents=1 agent1", "agents=1 majority", "agents=3 agent1", "agents=3 agent2", "agents=3 agent3",
         "agents=3 majority"])
    assert len(bands) == 2  # one per aggregate line
    majority = next(t for t in lines if t.name == "agents=3 majority")
    assert list(majority.x) == [1, 2, 3] and [round(y, 2) for y in majority.y] == [0.3, 0.5, 0.7]
    assert majority.line.width == 3
    band = next(t for t in bands if t.legendgroup == "agents=3 majority")
    assert [round(y, 2) for y in band.y] == [0.4, 0.6, 0.8, 0.6, 0.4, 0.2]  # upper edge, then lower back
    assert len(plots.score_trajectory(trajectory_frame(), by=["agents"], agents=False).data) == 4


def test_convergence_curve():
    frame = pd.DataFrame({"round": [1, 2, 3], "converged": [0.2, 0.5, 0.9], "converged_low": [0.0, 0.3, 0.7],
                          "converged_high": [0.4, 0.7, 1.0], "agreement": [0.6, 0.8, 0.95],
                          "agreement_low": [0.5] * 3, "agreement_high": [1.0] * 3, "debates": [10] * 3})
    fig = plots.convergence_curve(frame)
    names = [t.name for t in fig.data]
    assert "all debates converged" in names and "all debates agreement rate" in names
    converged = fig.data[names.index("all debates converged")]
    assert list(converged.y) == [0.2, 0.5, 0.9]
    assert fig.data[0].fill == "toself" and list(fig.data[0].y) == [0.4, 0.7, 1.0, 0.7, 0.3, 0.0]


def configs():
    return pd.DataFrame({
        "protocol": ["society_of_mind"] * 4 + ["single", "self_consistency"],
        "agents": [1, 1, 3, 3, None, None], "rounds": [1, 2, 1, 2, None, None],
        "accuracy": [0.4, 0.45, 0.5, 0.7, 0.4, 0.55], "low": [0.2, 0.25, 0.3, 0.5, 0.2, 0.35],
        "high": [0.6, 0.65, 0.7, 0.9, 0.6, 0.75], "completion_tokens": [100, 200, 300, 600, 100, 300],
        "label": ["a1 r1", "a1 r2", "a3 r1", "a3 r2", "single", "SC3"]})


def test_accuracy_grid_with_baselines():
    c = configs()
    debates = c[c["protocol"] == "society_of_mind"]
    matched = debates.assign(baseline_accuracy=[0.4, 0.55, 0.55, 0.55], baseline_budget=[100, 300, 300, 300],
                             budget=debates["completion_tokens"])
    fig = plots.accuracy_grid(debates, single=c.iloc[4], matched=matched)
    by_name = {t.name: t for t in fig.data}
    assert list(by_name["agents=3"].x) == [1, 2] and list(by_name["agents=3"].y) == [0.5, 0.7]
    assert [round(v, 2) for v in by_name["agents=3"].error_y.array] == [0.2, 0.2]
    assert list(by_name["self-consistency at equal budget (agents=1)"].y) == [0.4, 0.55]
    # the budget each side actually used: the baseline's and the debate's, per item
    assert by_name["self-consistency at equal budget (agents=1)"].customdata.tolist() == [[100, 100], [300, 200]]
    assert list(by_name["single agent"].y) == [0.4, 0.4]


def test_cost_accuracy_marks_the_pareto_front():
    fig = plots.cost_accuracy(configs())
    by_name = {t.name: t for t in fig.data}
    front = by_name["Pareto front"]
    # a1 r1 and single tie at (100, 0.4): neither dominates the other; SC3 dominates a3 r1
    assert sorted(front.hovertext) == ["SC3", "a1 r1", "a1 r2", "a3 r2", "single"]
    assert list(by_name["configurations"].hovertext) == ["a3 r1"]
    # the tied points print one joined label, not two labels over each other
    printed = [t for t in front.text if t]
    assert sorted(printed) == ["SC3", "a1 r1 = single", "a1 r2", "a3 r2"]
    # a3 r1 sits 0.05 below SC3's point, on the front's step up to it: its label goes to the right
    assert list(by_name["configurations"].textposition) == ["middle right"]
    assert set(front.textposition) == {"top center"}
    assert list(by_name["front"].x) == sorted(front.x)
    # the axis leaves room for the labels at either end, which the plot would otherwise cut off
    low, high = fig.layout.xaxis.range
    for x, text in zip(front.x, front.text):
        half = len(text) * (max(front.x) - min(front.x)) * 7 / 1200 / 2
        assert low <= x - half and x + half <= high


def test_a_decomposed_configuration_at_its_runs_point_joins_by_what_it_adds():
    frame = pd.DataFrame({"completion_tokens": [3000, 3000, 1000], "accuracy": [0.5, 0.5, 0.5],
                          "label": ["society_of_mind", "society_of_mind debate@3", "self_consistency"]})
    shown, _ = plots._point_labels(frame, "completion_tokens", "label")
    assert list(shown) == ["society_of_mind = debate@3", "", "self_consistency"]


def test_flip_flow_sankey():
    flow = pd.DataFrame({"from_round": [1, 1, 1, 2], "to_round": [2, 2, 2, 3],
                         "before": ["right", "wrong", "right", "wrong"], "after": ["right", "right", "wrong", "wrong"],
                         "changed": [False, True, True, False], "count": [5, 3, 1, 2]})
    fig = plots.flip_flow(flow)
    sankey = fig.data[0]
    labels = list(sankey.node.label)
    assert labels == ["round 1 right", "round 1 wrong", "round 2 right", "round 2 wrong", "round 3 right",
                      "round 3 wrong"]
    links = {(labels[s], labels[t]): v for s, t, v in zip(sankey.link.source, sankey.link.target, sankey.link.value)}
    assert links == {("round 1 right", "round 2 right"): 5, ("round 1 wrong", "round 2 right"): 3,
                     ("round 1 right", "round 2 wrong"): 1, ("round 2 wrong", "round 3 wrong"): 2}


def test_item_answers_marks_truth_and_round():
    rounds = pd.DataFrame({"agent": ["agent1", "agent2", "agent1", "agent2"], "round": [1, 1, 2, 2],
                           "answer": [10, 11, 10, 10], "correct": [True, False, True, True]})
    fig = plots.item_answers(rounds, truth=10, round_marker=2)
    assert [t.name for t in fig.data] == ["agent1", "agent2", "truth 10"]
    assert list(fig.data[1].y) == [11, 10] and list(fig.data[1].marker.symbol) == ["x", "circle"]
    assert fig.layout.shapes[0].x0 == 2


def test_cost_labels_take_the_side_where_they_clear_their_neighbours():
    frame = pd.DataFrame({"completion_tokens": [100, 120, 1000, 1010, 500],
                          "accuracy": [0.1, 0.1, 0.5, 0.9, 0.1],
                          "label": ["close one", "close two", "far", "far above", "middle"]})
    shown, position = plots._point_labels(frame, "completion_tokens", "label")
    assert list(shown) == list(frame["label"])
    assert position[0] != position[1]  # 20 tokens apart at the same accuracy: one above, one below
    assert position[4] == "top center"  # nothing near it
    assert position[2] == position[3] == "top center"  # close in x, far apart in accuracy


def test_labels_of_points_crowded_at_one_cost_go_to_different_sides():
    # the GSM8K study's right end: three configurations within 24 tokens and 0.08 of accuracy
    frame = pd.DataFrame({"completion_tokens": [309, 995, 3076, 3100, 3076],
                          "accuracy": [0.6, 0.68, 0.63, 0.70, 0.62],
                          "label": ["single", "vote@1", "society_of_mind", "self_consistency", "debate@3"]})
    shown, position = plots._point_labels(frame, "completion_tokens", "label")
    crowded = position.iloc[2:]
    assert crowded.nunique() == 3  # not two on one side, printed over each other
    # the label above the lower point would run into the higher point's label: it goes to the side
    assert position[2] == "middle right" and position[3] == "top center" and position[4] == "bottom center"
    # and the x axis is widened to show a label put right of the last point
    low, high = plots._label_range(frame, "completion_tokens", shown, position)
    right_edge = plots._box(3076, 0.63, "society_of_mind", "middle right", plots._units(frame["completion_tokens"]))[1]
    centred = max(x + len(t) * 7 * (3100 - 309) / (0.7 * 820) / 2 for x, t in zip(frame["completion_tokens"], shown))
    assert high >= right_edge > centred  # the label put right reaches past any centred one, and fits


def test_a_configuration_part_way_says_its_n_and_a_label_at_the_top_stays_on_the_plot():
    frame = configs().assign(items=20)
    frame.loc[5, ["items", "accuracy", "low", "high"]] = [1, 1.0, 1.0, 1.0]  # SC3: one item, right
    fig = plots.cost_accuracy(frame)
    texts = {t for trace in fig.data if trace.text is not None for t in trace.text if t}
    assert "SC3 (n=1)" in texts and not any("(n=20)" in t for t in texts)
    front = {t.name: t for t in fig.data}["Pareto front"]
    side = dict(zip(front.text, front.textposition))["SC3 (n=1)"]
    assert side != "top center"  # above a point at 1.0 the plot would cut the label off


def test_cost_accuracy_draws_what_it_can_and_says_when_there_is_nothing():
    frame = configs()
    frame.loc[5, "completion_tokens"] = float("nan")  # SC3 finished no item yet
    fig = plots.cost_accuracy(frame)
    drawn = [t for trace in fig.data if trace.name != "front" for t in trace.hovertext]
    assert sorted(drawn) == ["a1 r1", "a1 r2", "a3 r1", "a3 r2", "single"]
    empty = plots.cost_accuracy(frame.iloc[0:0])
    assert not empty.data and "no configuration" in empty.layout.annotations[0].text


def test_a_comparison_with_no_pair_is_labelled_at_zero_not_lost():
    table = pd.DataFrame({"config": ["a", "b"], "baseline": "single", "difference": [0.1, float("nan")],
                          "low": [0.0, float("nan")], "high": [0.2, float("nan")], "p_mcnemar": [0.5, float("nan")],
                          "only_config": [1, 0], "only_baseline": [0, 0], "pairs": [10, 0]})
    fig = plots.paired_difference(table)
    notes = {a.y: (a.x, a.text) for a in fig.layout.annotations}
    assert notes == {"a": (0.2, "p=0.5, n=10"), "b": (0, "p=nan, n=0")}


def test_rows_against_different_baselines_each_name_theirs_and_the_axis_says_so():
    table = pd.DataFrame({"config": ["vote@1", "debate@3", "debate@3"], "baseline": ["single", "vote@1", "single"],
                          "difference": [0.05, 0.01, 0.06], "low": [0.0, -0.05, 0.0], "high": [0.1, 0.07, 0.12],
                          "p_mcnemar": [0.3, 1.0, 0.2], "only_config": [5, 3, 6], "only_baseline": [1, 2, 0],
                          "pairs": [100, 100, 100]})
    fig = plots.paired_difference(table)
    assert list(fig.data[0].y) == ["debate@3 vs single", "debate@3 vs vote@1", "vote@1 vs single"]
    assert "after 'vs'" in fig.layout.xaxis.title.text and "single's" not in fig.layout.xaxis.title.text
    same = plots.paired_difference(table.assign(baseline="single"))
    assert same.layout.xaxis.title.text == "accuracy minus single's on the same items"
    assert list(same.data[0].y) == ["debate@3", "debate@3", "vote@1"]
