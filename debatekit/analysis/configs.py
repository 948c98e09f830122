"""Configurations side by side (pure pandas): each one's accuracy and cost per item, the Pareto front
of cost against accuracy, and the baseline of equal budget."""

from __future__ import annotations

import pandas as pd

from debatekit.analysis.intervals import N_BOOT, nested_bootstrap_ci
from debatekit.analysis.tables import as_float
from debatekit.records.schemas import ANSWERED


def config_table(summary: pd.DataFrame, keys: list[str], n_boot: int = N_BOOT) -> pd.DataFrame:
    """One row per configuration (`keys`) of a per-item table: accuracy with a 95% interval and cost per item.

    Args:
        summary: one row per configuration, seed and item, with `correct`, `calls`,
            `prompt_tokens`, `completion_tokens`, `cost`, `wall_s` (a sweep's summary table);
            rows whose `status` is error or failed are left out of accuracy and counted.
        keys: the columns that identify a configuration (missing values allowed).

    Returns:
        keys, accuracy, low, high (resampling items, then seeds), items, failed, and per-item
        means of calls, prompt_tokens, completion_tokens, tokens, cost, wall_s.
    """
    frame = summary.assign(tokens=summary["prompt_tokens"] + summary["completion_tokens"])
    answered = frame["status"].isin(ANSWERED) if "status" in frame else pd.Series(True, index=frame.index)
    frame = frame.assign(_answered=answered, _c=as_float(frame["correct"]).fillna(0.0).where(answered))
    item = frame["item_id"] if "item_id" in frame else pd.Series(range(len(frame)), index=frame.index)
    frame = frame.assign(_item=item)
    cost_cols = [c for c in ("calls", "prompt_tokens", "completion_tokens", "tokens", "cost", "wall_s") if c in frame]
    rows = []
    for values, group in frame.groupby(keys, dropna=False):
        values = values if isinstance(values, tuple) else (values,)
        groups = [g.tolist() for _, g in group.groupby("_item", sort=False)["_c"]]
        acc, low, high = nested_bootstrap_ci(groups, n_boot=n_boot)
        rows.append({**dict(zip(keys, values)), "accuracy": acc, "low": low, "high": high, "items": len(group),
                     "failed": int((~group["_answered"]).sum()), **{c: float(group[c].mean()) for c in cost_cols}})
    return pd.DataFrame(rows)


def pareto_front(frame: pd.DataFrame, cost: str, score: str) -> pd.Series:
    """Whether each row is on the Pareto front: no other row is at least as good on both and better on one."""
    c, s = frame[cost].to_numpy(dtype=float), frame[score].to_numpy(dtype=float)
    dominated = [bool(((c <= c[i]) & (s >= s[i]) & ((c < c[i]) | (s > s[i]))).any()) for i in range(len(frame))]
    return pd.Series([not d for d in dominated], index=frame.index, name="pareto")


def equal_budget(configs: pd.DataFrame, baseline: pd.Series, budget: str = "completion_tokens") -> pd.DataFrame:
    """For each configuration, the baseline configuration closest to it in `budget` per item.

    Args:
        configs: a `config_table`.
        baseline: boolean mask of `configs` rows that are baselines (e.g. self-consistency).
        budget: the cost column to match on.

    Returns:
        The non-baseline rows with `budget` (what each used, per item), `baseline_accuracy`,
        `baseline_low`, `baseline_high`, `baseline_budget` (what the matched baseline used)
        and `baseline_row` (index into `configs`) of the closest baseline.
    """
    base, rest = configs[baseline], configs[~baseline].assign(budget=configs.loc[~baseline, budget])
    if base.empty:
        return rest.assign(baseline_accuracy=float("nan"), baseline_low=float("nan"), baseline_high=float("nan"),
                           baseline_budget=float("nan"), baseline_row=None)
    nearest = [(base[budget] - value).abs().idxmin() for value in rest[budget]]
    return rest.assign(baseline_accuracy=base.loc[nearest, "accuracy"].to_numpy(),
                       baseline_low=base.loc[nearest, "low"].to_numpy(),
                       baseline_high=base.loc[nearest, "high"].to_numpy(),
                       baseline_budget=base.loc[nearest, budget].to_numpy(), baseline_row=nearest)
