"""Bootstrap confidence intervals over items, flat and nested (items, then seeds within an item)."""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np


N_BOOT = 2000
"""Bootstrap resamples every interval of debatekit.analysis defaults to, so that a run's summary and
the report's tables quote one interval for the same items."""


def bootstrap_ci(values: Sequence[float], n_boot: int = N_BOOT, level: float = 0.95, seed: int = 0
                 ) -> tuple[float, float, float]:
    """Mean and percentile bootstrap interval of `values` (over items). NaNs are dropped."""
    return nested_bootstrap_ci([[v] for v in values], n_boot=n_boot, level=level, seed=seed)


def nested_bootstrap_ci(groups: Sequence[Sequence[float]], n_boot: int = N_BOOT, level: float = 0.95,
                        seed: int = 0) -> tuple[float, float, float]:
    """Mean of group means and a two-level percentile bootstrap interval: resample the groups
    (items), then the values within each drawn group (seeds). NaNs and empty groups are dropped.

    With one value per group it is the flat bootstrap over the values (`bootstrap_ci`).
    """
    clean = [[float(v) for v in g if v is not None and not _isnan(v)] for g in groups]
    clean = [g for g in clean if g]
    if not clean:
        return (math.nan, math.nan, math.nan)
    width = max(len(g) for g in clean)
    table = np.array([g + [math.nan] * (width - len(g)) for g in clean])
    sizes = np.array([len(g) for g in clean])
    point = float(np.nanmean(table, axis=1).mean())
    if len(clean) == 1 and width == 1:
        return (point,) * 3
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, len(clean), size=(n_boot, len(clean)))
    drawn = sizes[rows][..., None]
    cols = (rng.random(size=(n_boot, len(clean), width)) * drawn).astype(int)
    values = np.where(np.arange(width) < drawn, table[rows[..., None], cols], np.nan)  # a group's own size
    draws = np.nanmean(values, axis=2).mean(axis=1)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(draws, [tail, 100 - tail])
    return point, float(low), float(high)


def _isnan(v: Any) -> bool:
    return isinstance(v, float) and math.isnan(v)
