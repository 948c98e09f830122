"""Bootstrap confidence intervals over items, flat and nested (items, then seeds within an item).

Where every item gives one value of -1, 0 or 1 (a run's accuracy over items with one seed each, a
paired difference of two such runs) the interval is the **exact** bootstrap interval: the
percentiles of the distribution the resampled mean follows, computed in closed form (the limit of
infinitely many resamples), so that no digit of it moves with a random seed. Otherwise (several
seeds per item, other values) it is a Monte Carlo percentile bootstrap with `N_BOOT` resamples.
Either way the percentile is the inverse of the resampled means' distribution function (the
smallest mean with at least that share of the draws at or below it).

A bootstrap interval can only move where the items do: with no discordant pair it is [0, 0]. For one
answer per item on each side, `paired_score_ci` gives Tango's score interval for the difference of
two paired proportions, which stays honest there: with 0 of 10 pairs discordant it rules out only
differences beyond +-0.28, where the bootstrap's [0, 0] would rule out every difference but zero."""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np


N_BOOT = 10_000
"""Bootstrap resamples every Monte Carlo interval of debatekit.analysis defaults to, so that a run's
summary and the report's tables quote one interval for the same items."""
EXACT_MAX_ITEMS = 5_000
"""Up to this many items the exact interval is computed; past it the Monte Carlo one."""


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
    if width == 1 and (exact := _exact(table[:, 0], level)) is not None:
        return (point, *exact)
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, len(clean), size=(n_boot, len(clean)))
    drawn = sizes[rows][..., None]
    cols = (rng.random(size=(n_boot, len(clean), width)) * drawn).astype(int)
    values = np.where(np.arange(width) < drawn, table[rows[..., None], cols], np.nan)  # a group's own size
    draws = np.nanmean(values, axis=2).mean(axis=1)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(draws, [tail, 100 - tail], method="inverted_cdf")
    return point, float(low), float(high)


def paired_score_ci(only_a: int, only_b: int, pairs: int, level: float = 0.95) -> tuple[float, float]:
    """Tango's asymptotic score interval for p_a - p_b, two proportions measured on the same `pairs`
    (Tango 1998, Statistics in Medicine 17:891-908; among the intervals Fagerland, Lydersen and Laake
    recommend, Statistics in Medicine 2014, 33:2850-2875): `only_a` pairs where only a succeeded,
    `only_b` where only b did.

    The interval holds every difference d whose score statistic
    (only_a - only_b - pairs * d) / sqrt(pairs * (2 q + d (1 - d))) lies within the normal quantile,
    q being the most likely share of only-b pairs given d. Where no pair is discordant a bootstrap over
    the pairs is the single point 0; this interval is +-z^2 / (pairs + z^2). (nan, nan) with no pairs.
    """
    from scipy.optimize import brentq
    from scipy.stats import norm

    if not 0 < level < 1:
        raise ValueError(f"the interval's level is a share between 0 and 1, got {level}")
    if pairs <= 0:
        return (math.nan, math.nan)
    if not 0 <= only_a + only_b <= pairs or min(only_a, only_b) < 0:
        raise ValueError(f"discordant counts {only_a} and {only_b} do not fit in {pairs} pairs")
    z = float(norm.ppf(0.5 + level / 2))
    estimate = (only_a - only_b) / pairs

    def score(d: float) -> float:  # does not rise with d; 0 at the estimate
        linear = -only_a - only_b + (2 * pairs - only_a + only_b) * d  # q: the root of a quadratic in q
        root = max(0.0, linear ** 2 + 8 * pairs * only_b * d * (1 - d))  # rounds below 0 near d = -1
        q = (math.sqrt(root) - linear) / (4 * pairs)
        variance = pairs * (2 * q + d * (1 - d))
        numerator = only_a - only_b - pairs * d
        return 0.0 if variance <= 0 else numerator / math.sqrt(variance)

    edge = 1e-12
    low = -1.0 if estimate <= -1 or score(-1 + edge) <= z else brentq(lambda d: score(d) - z, -1 + edge, estimate)
    high = 1.0 if estimate >= 1 or score(1 - edge) >= -z else brentq(lambda d: score(d) + z, estimate, 1 - edge)
    return float(low), float(high)


def _exact(values: np.ndarray, level: float) -> tuple[float, float] | None:
    """The exact percentile bootstrap interval of the mean of `values` when each is -1, 0 or 1 (None
    otherwise, or past `EXACT_MAX_ITEMS`): the resampled sum is the sum of n independent draws from
    the values' empirical distribution, whose distribution is that distribution convolved n times."""
    n = len(values)
    if n > EXACT_MAX_ITEMS or not np.isin(values, (-1.0, 0.0, 1.0)).all():
        return None
    step = np.array([np.mean(values == -1), np.mean(values == 0), np.mean(values == 1)])  # sums -1, 0, +1
    total, power, k = np.array([1.0]), step, n
    while k:  # the n-fold convolution by squaring: sums -n .. n
        if k & 1:
            total = np.convolve(total, power)
        k >>= 1
        if k:
            power = np.convolve(power, power)
    cdf = np.cumsum(total)
    tail = (1 - level) / 2
    low, high = (int(np.searchsorted(cdf, q - 1e-9)) for q in (tail, 1 - tail))  # the first sum reaching q
    return (low - n) / n, (high - n) / n


def _isnan(v: Any) -> bool:
    return isinstance(v, float) and math.isnan(v)
