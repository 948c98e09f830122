"""Paired comparisons of configurations run on the same items: each against a baseline.

    from debatekit import analysis
    table = analysis.compare(analysis.load_runs(["runs/single", "runs/som"]), baseline="single")

Two configurations are paired on (item, seed). A pair where either side has no answer
(status `error` or `failed`) or that only one side ran is left out and counted. The difference
in accuracy gets a bootstrap 95% interval that resamples items, then seeds within an item;
the exact McNemar test is a two-sided binomial test on the discordant pairs (scipy.stats). With one
seed, each row also has Tango's score interval of the difference (`score_low`, `score_high`,
`intervals.paired_score_ci`), which unlike the bootstrap does not shrink to [0, 0] when no pair is
discordant: quote it where few pairs differ.
Where two configurations do not separate, what the null rules out is an interval, not a power
figure: each row has the 90% t-interval of the paired difference over items (`low90`, `high90`)
and the p-value of two one-sided tests (TOST, statsmodels) against an equivalence margin
(`margin`, `EQUIVALENCE_MARGIN` unless given): the two are equivalent within the margin when the
90% interval lies inside it (p_tost < 0.05).
With several seeds it counts item-seed pairs as if they were independent, which they are not
(an item hard for one seed is hard for the others): read its p-value as a rough guide there,
and the interval, which resamples whole items, as the test.
"""

from __future__ import annotations

import math
import re
from typing import Any, Sequence

import numpy as np
import pandas as pd

from debatekit.analysis.intervals import N_BOOT, nested_bootstrap_ci, paired_score_ci
from debatekit.records.schemas import ANSWERED

COLUMNS = ["config", "baseline", "pairs", "left_out", "seeds", "accuracy", "baseline_accuracy", "difference",
           "low", "high", "only_config", "only_baseline", "p_mcnemar", "completion_tokens",
           "baseline_completion_tokens", "low90", "high90", "margin", "p_tost", "score_low", "score_high"]
EQUIVALENCE_MARGIN = 0.10
"""The accuracy difference (either way) within which two configurations count as equivalent, unless a
study states its own (`primary.margin` in its grid)."""


def run_labels(records) -> dict[str, str]:
    """A label per run (by run id) to compare runs under: its protocol, with the settings that tell it
    apart where runs share a protocol (parameters, then `max_tokens`, model, seed; its run id if
    nothing differs). Model names in a label keep only the part that tells them apart
    (`models=[1.5b, 1.5b, 0.5b]` for local/qwen2.5-coder-1.5b-instruct and -0.5b-)."""
    labels = {}
    for record in records:
        label = record.config.protocol
        twins = [r for r in records if r.config.protocol == label]
        if len(twins) > 1:
            settings = [_settings(r) for r in twins]
            differ = [k for k in dict.fromkeys(k for d in settings for k in d)
                      if len({repr(d.get(k)) for d in settings}) > 1]
            mine = _settings(record)
            shown = [f"{k}={_shown(k, mine.get(k), settings)}" for k in differ]
            label += " " + (" ".join(shown) or record.run_id)
        labels[record.run_id] = label
    if len(set(labels.values())) < len(labels):  # the same settings twice: tell them apart by run id
        labels = {run: f"{label} {run}" for run, label in labels.items()}
    return labels


def _shown(key: str, value, settings: list[dict]) -> str:
    """A setting's value in a label: `default` where a run leaves it out, model names shortened to the
    words that tell apart the names the runs give this setting."""
    from debatekit.registry import model_strings, names_models

    if value is None:
        return "default"
    if key != "model" and not names_models(key):
        return str(value)
    short = short_model_names([m for d in settings for m in model_strings(d.get(key))])
    if isinstance(value, dict):
        return "{" + ", ".join(f"{agent}: {short.get(m, m)}" for agent, m in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(short.get(m, str(m)) for m in value) + "]"
    return short.get(value, str(value))


def short_model_names(names: Sequence[str]) -> dict[str, str]:
    """Each model name without the leading and trailing words (split at '/' and '-') that all of them
    share, each keeping at least one word: local/qwen2.5-coder-1.5b-instruct and -0.5b- give 1.5b and
    0.5b; openai/gpt-4o and openai/gpt-4o-mini give 4o and 4o-mini. One distinct name stays whole, and
    so do all of them where shortening would make two alike or one empty."""
    distinct = list(dict.fromkeys(names))
    if len(distinct) < 2:
        return {n: n for n in distinct}
    parts = [re.split(r"([/-])", n) for n in distinct]  # words at even positions, separators between
    words = [p[::2] for p in parts]
    most = min(len(w) for w in words) - 1
    lead = next((i for i in range(most) if len({w[i] for w in words}) > 1), most)
    most -= lead
    trail = next((i for i in range(most) if len({w[-1 - i] for w in words}) > 1), most)
    short = {n: "".join(p[2 * lead:len(p) - 2 * trail]) for n, p in zip(distinct, parts)}
    if "" in short.values() or len(set(short.values())) < len(short):  # a/b and a-b; local/m/
        return {n: n for n in distinct}
    return short


def _settings(record) -> dict:
    config = record.config
    return {**config.params, "max_tokens": getattr(config, "max_tokens", None),
            "model": getattr(record, "model", None), "seed": getattr(config, "seed", 0)}


def compare_runs(tables: Any, records: Sequence | None = None, baseline: str | None = None,
                 labels: dict[str, str] | None = None) -> pd.DataFrame:
    """`compare` of whole runs, each under its `run_labels` label (what `debatekit compare` prints):
    `compare_runs(load_runs([a, b]))` tells apart two runs of one protocol by what differs.

    Args:
        tables: `analysis.load_runs` of the runs' folders.
        records: the runs' `RunRecord`s; default read from the folders `tables` was loaded from.
        baseline: the label to compare against; default the first run's.
        labels: `run_labels(records)`, when the caller has them already.
    """
    if records is None:
        from debatekit.records.trace import RunFolder

        records = [RunFolder(path).read_run() for path in tables.runs["path"]]
    labels = labels or run_labels(records)
    frame = tables.debates.assign(config=tables.debates["run_id"].map(labels))
    return compare(frame, baseline=baseline or labels[records[0].run_id], by="config")


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """Two-sided exact McNemar p-value from the discordant counts (1.0 with no discordant pair)."""
    from scipy.stats import binomtest

    n = only_a + only_b
    return 1.0 if n == 0 else float(binomtest(only_a, n, 0.5, alternative="two-sided").pvalue)


def compare(tables: Any, baseline: str | None = None, by: str | Sequence[str] = "protocol",
            n_boot: int = N_BOOT, seed: int = 0, margin: float = EQUIVALENCE_MARGIN) -> pd.DataFrame:
    """Each configuration against the baseline, paired on the items (and seeds) both answered.

    Args:
        tables: `analysis.Tables` (its `debates`) or a frame with one row per configuration,
            item and seed: `item_id`, `correct`, `status`, `completion_tokens`, the `by` columns
            and optionally `seed`.
        baseline: the configuration (its label) to compare against; default the first one.
        by: the column(s) naming a configuration; several are joined into one label.
        n_boot: bootstrap resamples.
        margin: the equivalence margin of the TOST (`p_tost`).

    Returns:
        One row per other configuration: config, baseline, pairs (item-seed pairs used),
        left_out (pairs dropped: a side failed or did not run the item), seeds, accuracy and
        baseline_accuracy on the pairs, difference (config minus baseline) with its 95% interval
        low/high, only_config and only_baseline (pairs only one got right), p_mcnemar,
        completion tokens per item of each side, and the 90% t-interval of the difference
        (low90/high90) with the TOST p-value against +-margin (`equivalence`), and Tango's 95% score
        interval of the difference (score_low/score_high; nan with several seeds, whose pairs are
        not independent).

    Raises:
        ValueError: an unknown baseline, fewer than two configurations, runs of different datasets,
            or two runs under one configuration label that answer the same item and seed
            (`compare_runs` labels each run by the settings that tell it apart).
    """
    _same_dataset(getattr(tables, "runs", None))
    frame = _labelled(getattr(tables, "debates", tables), by)
    labels = list(dict.fromkeys(frame["config"]))
    if len(labels) < 2:
        raise ValueError(f"a paired comparison needs at least two configurations, got {len(labels)}")
    baseline = labels[0] if baseline is None else baseline
    if baseline not in labels:
        raise ValueError(f"baseline {baseline!r} is not among the configurations: {', '.join(labels)}")
    base = frame[frame["config"] == baseline]
    rows = [_pair(frame[frame["config"] == label], base, label, baseline, n_boot, seed, margin)
            for label in labels if label != baseline]
    return pd.DataFrame(rows, columns=COLUMNS)


def _same_dataset(runs: pd.DataFrame | None) -> None:
    if runs is None or runs.empty:
        return
    key = "dataset_sha256" if "dataset_sha256" in runs else "dataset"
    if runs[key].nunique() > 1:
        raise ValueError("the runs used different datasets (" + ", ".join(dict.fromkeys(runs["dataset"].astype(str)))
                         + "): their items do not pair")


def _labelled(frame: pd.DataFrame, by: str | Sequence[str]) -> pd.DataFrame:
    """The frame with its configuration label (`config`) and each row's seed index within its
    configuration (`_seed`: 0 for its lowest seed, 1 for the next...), so that runs made from
    different base seeds pair seed for seed. A row recorded twice for one item and seed of one
    run keeps the later; two runs under one label that answer the same item and seed are refused
    (one would silently replace the other), while runs of other seeds join as that label's seeds."""
    keys = [by] if isinstance(by, str) else list(by)
    label = frame[keys[0]].astype(str) if len(keys) == 1 else frame[keys].astype(str).agg(" ".join, axis=1)
    frame = frame.assign(config=label)
    if "run_id" in frame:
        cell = ["config", "item_id", *(["seed"] if "seed" in frame else [])]
        rows = frame[cell + ["run_id"]].drop_duplicates()
        clash = rows[rows.duplicated(cell, keep=False)]
        if not clash.empty:
            config, ids = clash["config"].iloc[0], list(dict.fromkeys(clash["run_id"]))
            raise ValueError(f"runs {', '.join(map(str, ids))} both answer the same items under one configuration "
                             f"{config!r} (by={by!r}): compare them with analysis.compare_runs, which labels "
                             "each run by the settings that tell it apart, or pass by= columns that do")
    if "seed" in frame:
        seeds = frame["seed"].fillna(0).groupby(frame["config"], sort=False).rank(method="dense").astype(int) - 1
    else:
        seeds = 0
    return frame.assign(_seed=seeds).drop_duplicates(["config", "item_id", "_seed"], keep="last")


def equivalence(item_differences: Sequence[float], margin: float) -> tuple[float, float, float]:
    """The 90% t-interval of a mean paired difference over items and the TOST p-value that it lies
    within +-margin (statsmodels' `DescrStatsW`): (low, high, p). With fewer than two items, or no
    spread at all, the interval is the mean itself and p is 0 when it lies strictly inside, else 1."""
    from statsmodels.stats.weightstats import DescrStatsW

    values = np.asarray([v for v in item_differences if v == v], dtype=float)
    if len(values) == 0:
        return (math.nan, math.nan, math.nan)
    mean = float(values.mean())
    if len(values) < 2 or values.std() == 0:
        return (mean, mean, 0.0 if -margin < mean < margin else 1.0)
    stats = DescrStatsW(values)
    low, high = stats.tconfint_mean(alpha=0.10)
    return float(low), float(high), float(stats.ttost_mean(-margin, margin)[0])


def _pair(side: pd.DataFrame, base: pd.DataFrame, label: str, baseline: str, n_boot: int, seed: int,
          margin: float = EQUIVALENCE_MARGIN) -> dict:
    cols = ["item_id", "_seed", "correct", "status", "completion_tokens"]
    both = side[cols].merge(base[cols], on=["item_id", "_seed"], how="outer", suffixes=("", "_b"), indicator=True)
    usable = (both["_merge"] == "both") & both["status"].isin(ANSWERED) & both["status_b"].isin(ANSWERED)
    pairs = both[usable]
    a, b = pairs["correct"].eq(True), pairs["correct_b"].eq(True)
    diff = (a.astype(float) - b.astype(float)).groupby(pairs["item_id"], sort=False)
    groups = [g.tolist() for _, g in diff]
    mean, low, high = nested_bootstrap_ci(groups, n_boot=n_boot, seed=seed)
    low90, high90, p_tost = equivalence([sum(g) / len(g) for g in groups], margin)
    only_a, only_b = int((a & ~b).sum()), int((b & ~a).sum())
    seeds = int(pairs["_seed"].nunique())
    score = paired_score_ci(only_a, only_b, len(pairs)) if seeds <= 1 else (math.nan, math.nan)
    return {"config": label, "baseline": baseline, "pairs": len(pairs), "left_out": int((~usable).sum()),
            "seeds": seeds, "accuracy": _mean(a), "baseline_accuracy": _mean(b),
            "difference": mean, "low": low, "high": high, "only_config": only_a, "only_baseline": only_b,
            "p_mcnemar": mcnemar_exact(only_a, only_b),
            "completion_tokens": _mean(pairs["completion_tokens"]),
            "baseline_completion_tokens": _mean(pairs["completion_tokens_b"]),
            "low90": low90, "high90": high90, "margin": margin, "p_tost": p_tost,
            "score_low": score[0], "score_high": score[1]}


def _mean(series: pd.Series) -> float:
    return float(series.astype(float).mean()) if len(series) else float("nan")


def format_comparison(table: pd.DataFrame) -> str:
    """The paired comparison block printed under a run's table (empty for an empty table)."""
    if table.empty:
        return ""
    head = ("protocol", "pairs", "difference [95% CI]", "only this right", "only baseline right",
            "McNemar p", "completion tok/item", "left out")
    rows = [head]
    for r in table.itertuples():
        rows.append((r.config, str(r.pairs), f"{r.difference:+.2f} [{r.low:+.2f}, {r.high:+.2f}]",
                     str(r.only_config), str(r.only_baseline), f"{r.p_mcnemar:.3g}",
                     f"{r.completion_tokens:.0f} vs {r.baseline_completion_tokens:.0f}", str(r.left_out)))
    lines = aligned(rows)
    seeds = int(table["seeds"].max())
    over = "items" if seeds <= 1 else f"items, then {seeds} seeds within each item"
    title = (f"paired against {table['baseline'].iloc[0]} (accuracy difference on the items both answered; "
             f"95% bootstrap interval over {over}; exact McNemar test):")
    return "\n".join([title, *lines, *_alike_notes(table)])


def _alike_notes(table: pd.DataFrame) -> list[str]:
    """A line per row whose pairs all agree: its bootstrap interval is the point itself, which rules out
    nothing; Tango's score interval says what that many alike pairs do rule out."""
    return [f"{r.config}: no pair decided differently, so the bootstrap interval is a point; Tango's 95% score "
            f"interval is [{r.score_low:+.2f}, {r.score_high:+.2f}]"
            for r in table.itertuples() if r.only_config + r.only_baseline == 0 and r.pairs
            and not math.isnan(r.score_low)]


def paired_lines(table: pd.DataFrame, lead: dict[str, str]) -> list[str]:
    """Aligned lines of a `compare` table: the `lead` columns (heading -> column) first, then the
    pairs, both accuracies, the difference with its interval, the discordant counts, McNemar's p
    and both sides' completion tokens per item."""
    head = (*lead, "pairs", "accuracy", "difference [95% CI]", "only this right", "only other right", "McNemar p",
            "completion tok/item")
    rows = [head] + [(*(str(getattr(r, column)) for column in lead.values()), str(r.pairs),
                      f"{r.accuracy:.2f} vs {r.baseline_accuracy:.2f}",
                      f"{r.difference:+.2f} [{r.low:+.2f}, {r.high:+.2f}]", str(r.only_config), str(r.only_baseline),
                      f"{r.p_mcnemar:.3g}", f"{r.completion_tokens:.0f} vs {r.baseline_completion_tokens:.0f}")
                     for r in table.itertuples()]
    return aligned(rows)


def aligned(rows: list[tuple[str, ...]]) -> list[str]:
    """Text rows as left-aligned columns, the first row a header underlined with dashes."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines
