"""Plot builders: a DataFrame in (from `debatekit.analysis`), a plotly Figure out, no I/O.

    from debatekit import analysis
    from debatekit.analysis import plots
    rounds = analysis.fill_rounds(tables.rounds)
    plots.score_trajectory(analysis.score_trajectory(rounds))
    plots.convergence_curve(analysis.convergence_curve(rounds))
    plots.accuracy_grid(configs, x="rounds", line="agents")
    plots.cost_accuracy(configs, cost="completion_tokens")
    plots.flip_flow(analysis.flip_flow(rounds))
    plots.paired_difference(analysis.compare(tables, baseline="single"))

Figures carry the data only; `debatekit.sweep.report` writes them to HTML (plotly.js embedded)
or PNG (kaleido).
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import plotly.graph_objects as go
from plotly.colors import qualitative

PALETTE = qualitative.Plotly
AGGREGATES = ("majority", "mean")
LAYOUT = dict(template="plotly_white", height=460, margin=dict(l=60, r=20, t=50, b=40), title_font_size=15,
              legend=dict(orientation="h", yanchor="top", y=-0.15, x=0))
SHARE = dict(range=[-0.02, 1.04])  # y axis of accuracies and rates


def _rgba(color: str, alpha: float) -> str:
    color = color.lstrip("#")
    r, g, b = (int(color[i:i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"


def _band(x, low, high, color: str, group: str, name: str) -> go.Scatter:
    """A filled confidence band (upper edge left to right, lower edge back)."""
    x = list(x)
    return go.Scatter(x=x + x[::-1], y=list(high) + list(low)[::-1], mode="lines", fill="toself",
                      fillcolor=_rgba(color, 0.15), line=dict(width=0), hoverinfo="skip", showlegend=False, legendgroup=group,
                      name=f"{name} 95% CI")


def _fmt(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _label(keys, values) -> str:
    values = values if isinstance(values, tuple) else (values,)
    return ", ".join(f"{k}={_fmt(v)}" for k, v in zip(keys, values))


def score_trajectory(frame: pd.DataFrame, by: list[str] | tuple = (), title: str = "Score per round",
                     score_label: str = "accuracy", agents: bool = True) -> go.Figure:
    """Score per round, one line per agent and a bold one for the aggregate, each with its 95% band.

    Args:
        frame: `analysis.score_trajectory` output (round, agent, score, low, high, *by).
        by: columns that split the frame into groups (e.g. ["agents"]); one color per group.
        agents: draw the individual agents as well as the aggregate.
    """
    fig = go.Figure()
    groups = frame.groupby(list(by)) if by else [((), frame)]
    for i, (keys, group) in enumerate(groups):
        color = PALETTE[i % len(PALETTE)]
        prefix = _label(by, keys) if by else ""
        for agent, rows in group.sort_values("round").groupby("agent", sort=True):
            aggregate = agent in AGGREGATES
            if not aggregate and not agents:
                continue
            name = f"{prefix} {agent}".strip()
            if aggregate:
                fig.add_trace(_band(rows["round"], rows["low"], rows["high"], color, name, name))
            fig.add_trace(go.Scatter(
                x=rows["round"], y=rows["score"], mode="lines+markers", name=name, legendgroup=name,
                line=dict(color=color, width=3 if aggregate else 1, dash=None if aggregate else "dot"),
                opacity=1.0 if aggregate else 0.6,
                customdata=rows[["low", "high", "n"]].to_numpy(),
                hovertemplate=f"{name}<br>round %{{x}}: %{{y:.2f}} [%{{customdata[0]:.2f}}, "
                              f"%{{customdata[1]:.2f}}], n=%{{customdata[2]}}<extra></extra>"))
    fig.update_layout(title=title, xaxis_title="round", yaxis_title=score_label, **LAYOUT)
    fig.update_xaxes(dtick=1)
    if score_label == "accuracy":
        fig.update_yaxes(**SHARE)
    return fig


def convergence_curve(frame: pd.DataFrame, by: list[str] | tuple = (), title: str = "Convergence") -> go.Figure:
    """Share of debates converged (all agents agree) per round, with 95% bands, and the mean agreement rate.

    Args:
        frame: `analysis.convergence_curve` output.
        by: columns that split the frame into groups, one color per group.
    """
    fig = go.Figure()
    groups = frame.groupby(list(by)) if by else [((), frame)]
    for i, (keys, group) in enumerate(groups):
        color = PALETTE[i % len(PALETTE)]
        name = _label(by, keys) if by else "all debates"
        rows = group.sort_values("round")
        fig.add_trace(_band(rows["round"], rows["converged_low"], rows["converged_high"], color, name, name))
        fig.add_trace(go.Scatter(x=rows["round"], y=rows["converged"], mode="lines+markers", name=f"{name} converged",
                                 legendgroup=name, line=dict(color=color, width=3)))
        fig.add_trace(go.Scatter(x=rows["round"], y=rows["agreement"], mode="lines", name=f"{name} agreement rate",
                                 legendgroup=name, line=dict(color=color, width=1, dash="dash")))
    fig.update_layout(title=title, xaxis_title="round", yaxis_title="share of debates", **LAYOUT)
    fig.update_xaxes(dtick=1)
    fig.update_yaxes(**SHARE)
    return fig


def accuracy_grid(configs: pd.DataFrame, x: str = "rounds", line: str = "agents", single: pd.Series | None = None,
                  matched: pd.DataFrame | None = None, title: str = "Accuracy against rounds and agents") -> go.Figure:
    """Final accuracy against `x`, one line per value of `line`, with 95% error bars and baselines.

    Args:
        configs: `analysis.config_table` rows of the debate configurations (x, line, accuracy, low, high).
        single: one `config_table` row of the single-agent baseline: drawn as a horizontal
            reference line with its band.
        matched: `analysis.equal_budget` output: each configuration's closest self-consistency
            baseline at equal token budget, drawn as open markers joined by a dotted line.
    """
    fig = go.Figure()
    for i, (value, rows) in enumerate(configs.groupby(line, sort=True)):
        rows, color = rows.sort_values(x), PALETTE[i % len(PALETTE)]
        fig.add_trace(go.Scatter(
            x=rows[x], y=rows["accuracy"], mode="lines+markers", name=f"{line}={_fmt(value)}",
            line=dict(color=color, width=3),
            error_y=dict(type="data", symmetric=False, array=rows["high"] - rows["accuracy"],
                         arrayminus=rows["accuracy"] - rows["low"], color=color)))
        if matched is not None and not matched.empty:
            base = matched[matched[line] == value].sort_values(x)
            fig.add_trace(go.Scatter(
                x=base[x], y=base["baseline_accuracy"], mode="lines+markers",
                name=f"self-consistency at equal budget ({line}={_fmt(value)})",
                line=dict(color=color, dash="dot", width=1), marker=dict(symbol="circle-open", size=10),
                customdata=base[["baseline_budget", "budget"]].to_numpy(),
                hovertemplate="self-consistency %{y:.2f} at %{customdata[0]:.0f} completion tokens/item used "
                              "(the debate used %{customdata[1]:.0f})<extra></extra>"))
    if single is not None:
        span = [configs[x].min(), configs[x].max()]
        fig.add_trace(go.Scatter(x=span + span[::-1], y=[single["high"]] * 2 + [single["low"]] * 2, fill="toself",
                                 fillcolor="rgba(80,80,80,0.10)", line=dict(width=0), hoverinfo="skip",
                                 showlegend=False, legendgroup="single"))
        fig.add_trace(go.Scatter(x=span, y=[single["accuracy"]] * 2, mode="lines", name="single agent",
                                 legendgroup="single", line=dict(color="black", dash="dash")))
    fig.update_layout(title=title, xaxis_title=x, yaxis_title="accuracy", **LAYOUT)
    fig.update_xaxes(dtick=1)
    fig.update_yaxes(**SHARE)
    return fig


def cost_accuracy(configs: pd.DataFrame, cost: str = "completion_tokens", label: str = "label",
                  pareto: pd.Series | None = None, title: str = "Cost against accuracy") -> go.Figure:
    """One point per configuration (cost per item against accuracy), the Pareto front marked and joined;
    a configuration with fewer items than the most (a study part-way) is labelled with its `n`.

    Args:
        configs: `analysis.config_table` rows with a `label` column naming each configuration.
        pareto: boolean mask of front rows (`analysis.pareto_front`); computed when None.
    """
    from debatekit.analysis import pareto_front

    placed = configs[cost].notna() & configs["accuracy"].notna() if len(configs) else []
    if not len(configs) or not placed.any():  # nothing finished yet: an empty plot that says so
        fig = go.Figure()
        fig.add_annotation(text="no configuration has both a cost and an accuracy yet", showarrow=False)
        fig.update_layout(title=title, **LAYOUT)
        return fig
    if pareto is not None:
        pareto = pareto[placed]
    configs = configs[placed]  # a configuration with no finished item has no point to draw
    if "items" in configs and configs["items"].nunique() > 1:  # a part-way configuration says on how many
        short = configs["items"] < configs["items"].max()
        configs = configs.assign(**{label: configs[label].where(
            ~short, configs[label] + " (n=" + configs["items"].astype("Int64").astype(str) + ")")})
    front = pareto if pareto is not None else pareto_front(configs, cost, "accuracy")
    line = configs[front].sort_values(cost)
    shown, position = _point_labels(configs, cost, label, line)
    fig = go.Figure()
    for name, mask, symbol in (("configurations", ~front, "circle"), ("Pareto front", front, "star")):
        rows = configs[mask]
        fig.add_trace(go.Scatter(
            x=rows[cost], y=rows["accuracy"], mode="markers+text", name=name, hovertext=rows[label],
            text=shown[mask], textposition=position[mask], marker=dict(symbol=symbol, size=14 if symbol == "star" else 10),
            error_y=dict(type="data", symmetric=False, array=rows["high"] - rows["accuracy"],
                         arrayminus=rows["accuracy"] - rows["low"], thickness=1)))
    fig.add_trace(go.Scatter(x=line[cost], y=line["accuracy"], mode="lines", name="front",
                             line=dict(color="black", dash="dot", shape="hv"), hoverinfo="skip"))
    fig.update_layout(title=title, xaxis_title=f"{cost.replace('_', ' ')} per item", yaxis_title="accuracy", **LAYOUT)
    fig.update_xaxes(range=_label_range(configs, cost, shown, position))  # a label at either end is not cut off
    fig.update_yaxes(**SHARE)
    return fig


SIDES = ("top center", "bottom center", "middle right", "middle left")
"""Where a point's label may go, in order of preference."""


def _point_labels(configs: pd.DataFrame, cost: str, label: str,
                  line: pd.DataFrame | None = None) -> tuple[pd.Series, pd.Series]:
    """Labels that do not print over each other: one joined label per coordinate, each put, left to
    right, on the side (above, below, right, left) where its box overlaps least with the labels
    already placed, the other points and the steps of `line` (rows sorted by cost, drawn with
    shape "hv"); the first side in `SIDES` wins a tie."""
    key = configs[cost].round(6).astype(str) + "|" + configs["accuracy"].round(6).astype(str)
    joined = configs.groupby(key, sort=False)[label].agg(_joined)
    first = ~key.duplicated()
    shown = pd.Series([joined[k] if f else "" for k, f in zip(key, first)], index=configs.index)
    position = pd.Series(SIDES[0], index=configs.index)
    unit = _units(configs[cost])
    points = [_box(x, y, "", "marker", unit) for x, y in zip(configs[cost], configs["accuracy"])]
    placed = _steps(line, cost, unit) if line is not None else []
    for idx in configs[first].sort_values(cost, kind="stable").index:
        x, y = configs.at[idx, cost], configs.at[idx, "accuracy"]
        own = _box(x, y, "", "marker", unit)
        others = placed + [p for p in points if p != own]
        boxes = {side: _box(x, y, shown[idx], side, unit) for side in SIDES}
        side = min(SIDES, key=lambda s: (_off_axis(boxes[s]), sum(_overlap(boxes[s], o) for o in others)))
        position[idx] = side
        placed.append(boxes[side])
    return shown, position


def _off_axis(box: tuple[float, float, float, float]) -> bool:
    """Whether a label's box reaches past the accuracy axis, where the plot cuts it off (a point at 1.0)."""
    return box[3] > SHARE["range"][1] or box[2] < SHARE["range"][0]


def _units(x: pd.Series) -> tuple[float, float]:
    """Data units per pixel, x and y, for the narrowest plot the figure is shown in: a 900 px PNG
    (`report.save_png`), whose axes are about 820 by 330 px (`LAYOUT`'s margins and height).
    The x axis is wider than the points by the labels' room; 0.7 of it is taken as their span."""
    return ((float(x.max() - x.min())) or 1.0) / (0.7 * 820), (SHARE["range"][1] - SHARE["range"][0]) / 330


def _steps(line: pd.DataFrame, cost: str, unit: tuple[float, float]) -> list[tuple[float, float, float, float]]:
    """Boxes 2 px thick along a line drawn through `line`'s points with shape "hv"."""
    px, py = unit
    x, y = line[cost].astype(float).tolist(), line["accuracy"].astype(float).tolist()
    flat = [(x0, x1, y0 - py, y0 + py) for x0, x1, y0 in zip(x, x[1:], y)]
    rising = [(x1 - px, x1 + px, min(y0, y1), max(y0, y1)) for x1, y0, y1 in zip(x[1:], y, y[1:])]
    return flat + rising


def _box(x: float, y: float, text: str, side: str, unit: tuple[float, float]) -> tuple[float, float, float, float]:
    """(left, right, bottom, top) of a label printed at `side` of the point (x, y), in data units
    (about 7 px a character, 16 px high, 6 px from the point); a point's own marker for `marker`."""
    px, py = unit
    width, half_height, gap = len(text) * 7 * px, 8 * py, 6
    if side == "marker":
        return x - 7 * px, x + 7 * px, y - 7 * py, y + 7 * py
    if side == "top center":
        return x - width / 2, x + width / 2, y + gap * py, y + (gap + 16) * py
    if side == "bottom center":
        return x - width / 2, x + width / 2, y - (gap + 16) * py, y - gap * py
    if side == "middle right":
        return x + (gap + 6) * px, x + (gap + 6) * px + width, y - half_height, y + half_height
    return x - (gap + 6) * px - width, x - (gap + 6) * px, y - half_height, y + half_height


def _overlap(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> float:
    return max(0.0, min(a[1], b[1]) - max(a[0], b[0])) * max(0.0, min(a[3], b[3]) - max(a[2], b[2]))


def _joined(names) -> str:
    """One label for configurations at the same point: `a = b`, a later name that extends the first
    (`society_of_mind debate@3` after `society_of_mind`) by what it adds (`society_of_mind = debate@3`)."""
    names = [str(n) for n in names]
    head = names[0]
    return " = ".join([head] + [n[len(head) + 1:] if n.startswith(head + " ") else n for n in names[1:]])


def _label_range(configs: pd.DataFrame, cost: str, shown: pd.Series, position: pd.Series) -> list[float]:
    """An x range wide enough for every label where `_point_labels` put it."""
    x = configs[cost].astype(float)
    unit = _units(x)
    boxes = [_box(v, a, t, side, unit) for v, a, t, side in zip(x, configs["accuracy"], shown, position) if t]
    low = min([x.min(), *(b[0] for b in boxes)])
    high = max([x.max(), *(b[1] for b in boxes)])
    margin = 0.03 * ((high - low) or 1.0)
    return [low - margin, high + margin]


def flip_flow(frame: pd.DataFrame, title: str = "Answer flips between rounds") -> go.Figure:
    """Sankey of agents' answers moving between right and wrong from round to round.

    Args:
        frame: `analysis.flip_flow` output (from_round, to_round, before, after, count).
    """
    flows = frame.groupby(["from_round", "to_round", "before", "after"], as_index=False)["count"].sum()
    rounds = sorted(set(flows["from_round"]) | set(flows["to_round"]))
    nodes = [(r, s) for r in rounds for s in ("right", "wrong")]
    index = {node: i for i, node in enumerate(nodes)}
    colors = {("right", "right"): "rgba(44,160,44,0.5)", ("wrong", "wrong"): "rgba(214,39,40,0.35)",
              ("wrong", "right"): "rgba(31,119,180,0.7)", ("right", "wrong"): "rgba(255,127,14,0.8)"}
    fig = go.Figure(go.Sankey(
        arrangement="snap",
        node=dict(label=[f"round {r} {s}" for r, s in nodes], pad=20,
                  color=["#2ca02c" if s == "right" else "#d62728" for _, s in nodes]),
        link=dict(source=[index[(r, b)] for r, b in zip(flows["from_round"], flows["before"])],
                  target=[index[(r, a)] for r, a in zip(flows["to_round"], flows["after"])],
                  value=flows["count"].tolist(),
                  label=[f"{b}->{a}" for b, a in zip(flows["before"], flows["after"])],
                  color=[colors[(b, a)] for b, a in zip(flows["before"], flows["after"])])))
    fig.update_layout(title=title, template="plotly_white", height=380, margin=dict(l=20, r=20, t=60, b=20))
    return fig


def item_answers(rounds: pd.DataFrame, truth: Any = None, round_marker: int | None = None,
                 title: str = "Answers per round") -> go.Figure:
    """One item's debate: each agent's answer per round (numbers as lines, else as text), the truth as a line.

    Args:
        rounds: the `Tables.rounds` rows of one debate.
        truth: the ground truth, drawn as a dashed line when numeric.
        round_marker: a round to highlight (the explorer's slider).
    """
    fig = go.Figure()
    numeric = pd.to_numeric(rounds["answer"], errors="coerce") if not rounds.empty else pd.Series(dtype=float)
    for i, (agent, rows) in enumerate(rounds.assign(_y=numeric).sort_values("round").groupby("agent")):
        fig.add_trace(go.Scatter(x=rows["round"], y=rows["_y"], mode="lines+markers+text", name=agent,
                                 text=[str(a) for a in rows["answer"]], textposition="top center",
                                 marker=dict(size=11, color=PALETTE[i % len(PALETTE)],
                                             symbol=["circle" if c else "x" for c in rows["correct"].fillna(False)])))
    if truth is not None and isinstance(truth, (int, float)) and not rounds.empty:
        span = [rounds["round"].min() - 0.2, rounds["round"].max() + 0.2]
        fig.add_trace(go.Scatter(x=span, y=[truth, truth], mode="lines", name=f"truth {_fmt(truth)}",
                                 line=dict(color="black", dash="dash")))
    if round_marker is not None:
        fig.add_vline(x=round_marker, line=dict(color="grey", width=8), opacity=0.2)
    fig.update_layout(title=title, xaxis_title="round", yaxis_title="answer", **LAYOUT)
    fig.update_xaxes(dtick=1)
    return fig


def paired_difference(table: pd.DataFrame, title: str | None = None) -> go.Figure:
    """Forest plot of paired accuracy differences: one row per configuration, its 95% interval, zero
    marked, and beside it the McNemar p and the number of pairs.

    Args:
        table: `analysis.compare` output (config, baseline, difference, low, high, p_mcnemar,
            only_config, only_baseline, pairs).
    """
    fig = go.Figure()
    mixed = table["baseline"].nunique() > 1  # rows against different baselines: each row names its own
    if mixed:
        table = table.assign(config=[c if " vs " in str(c) else f"{c} vs {b}"
                                     for c, b in zip(table["config"], table["baseline"])])
    rows = table.iloc[::-1]  # the first configuration on top
    fig.add_trace(go.Scatter(
        x=rows["difference"], y=rows["config"].astype(str), mode="markers", name="difference",
        marker=dict(size=10, color=PALETTE[0]), showlegend=False,
        error_x=dict(type="data", symmetric=False, array=(rows["high"] - rows["difference"]).tolist(),
                     arrayminus=(rows["difference"] - rows["low"]).tolist(), thickness=2, width=6),
        customdata=rows[["low", "high", "p_mcnemar", "only_config", "only_baseline", "pairs"]].to_numpy(),
        hovertemplate="%{y}: %{x:+.3f} [%{customdata[0]:+.3f}, %{customdata[1]:+.3f}]<br>McNemar p "
                      "%{customdata[2]:.3g}; only this right %{customdata[3]}, only baseline right "
                      "%{customdata[4]}; %{customdata[5]} pairs<extra></extra>"))
    fig.add_vline(x=0, line=dict(color="grey", dash="dash"))
    for row in rows.itertuples():
        # the pairs each row rests on: a study's configurations may have finished different numbers of items
        fig.add_annotation(x=0 if pd.isna(row.high) else row.high, y=str(row.config),  # no pair: no interval
                           text=f"p={row.p_mcnemar:.2g}{_holm(row)}, n={row.pairs}", showarrow=False,
                           xanchor="left", xshift=8, font=dict(size=11, color="grey"))
    baseline = table["baseline"].iloc[0] if len(table) else "baseline"
    against = "the baseline each row names after 'vs'" if mixed else baseline
    fig.update_layout(title=title or f"Accuracy difference against {against} (paired, 95% bootstrap interval)",
                      xaxis_title=("accuracy minus that of the configuration after 'vs', on the same items" if mixed
                                   else f"accuracy minus {baseline}'s on the same items"), yaxis_title="",
                      **{**LAYOUT, "height": max(240, 90 + 60 * len(table))})
    return fig


def _holm(row) -> str:
    """` (Holm 0.086)` beside a raw p where the table carries Holm-adjusted ones (`study.holm`)."""
    holm = getattr(row, "p_holm", float("nan"))
    return f" (Holm {holm:.2g})" if holm == holm and holm is not None else ""
