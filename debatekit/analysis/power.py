"""What a paired comparison could have detected: the power of the exact McNemar test.

Two configurations answered the same n items; a pair is discordant when exactly one of them is
right. With a discordance rate `pd` (share of discordant pairs) and a true accuracy difference
`d`, the pairs where only the first is right occur at rate (pd + d) / 2 and those where only the
second is at (pd - d) / 2. The exact McNemar test (`paired.mcnemar_exact`) conditions on the
number of discordant pairs D ~ Binomial(n, pd) and rejects when the two-sided binomial test of
the first count ~ Binomial(D, (pd + d) / (2 pd)) against 1/2 falls below alpha. Its power is
summed exactly over D with scipy's binomial distribution (no normal approximation):

    from debatekit.analysis import power
    power.detectable_difference(n=100, discordance=0.25)    # ~0.16: smaller true gains go unseen
    power.items_needed(difference=0.05, discordance=0.25)    # items for 80% power at that gain

A planning tool, for before a run: from a pilot's discordance, how many items a study needs, or
what it could detect. Computed after the fact from the discordance a study observed, it is
conditioned on that study's data and says nothing about what the study ruled out; that is the
90% interval of its difference against an equivalence margin (`paired.equivalence`, TOST).
"""

from __future__ import annotations

import numpy as np


def _lows(discordant: np.ndarray, alpha: float) -> np.ndarray:
    """For each number of discordant pairs D, the largest count k <= D/2 of the first side that the
    exact two-sided test rejects (2 * P(X <= k) <= alpha under Binomial(D, 1/2)); -1 when none."""
    from scipy.stats import binom

    k = binom.ppf(alpha / 2, discordant, 0.5)  # the smallest k with P(X <= k) >= alpha / 2
    k = np.where(binom.cdf(k, discordant, 0.5) <= alpha / 2 + 1e-12, k, k - 1)
    return np.where(discordant > 0, np.minimum(k, np.floor(discordant / 2)), -1).astype(int)


def mcnemar_power(n: int, discordance: float, difference: float, alpha: float = 0.05) -> float:
    """Probability that the exact McNemar test at `alpha` rejects, for `n` pairs with discordance
    rate `discordance` and true accuracy difference `difference` (|difference| <= discordance)."""
    from scipy.stats import binom

    if not 0 <= discordance <= 1 or abs(difference) > discordance + 1e-12:
        raise ValueError(f"need 0 <= |difference| <= discordance <= 1, got difference {difference}, "
                         f"discordance {discordance}")
    if n <= 0 or discordance == 0:
        return 0.0
    p_first = min(1.0, max(0.0, (discordance + difference) / (2 * discordance)))
    spread = 10 * np.sqrt(n * discordance * (1 - discordance)) + 10  # the counts D that carry any weight
    counts = np.arange(max(0, int(n * discordance - spread)), min(n, int(n * discordance + spread)) + 1)
    weight = binom.pmf(counts, n, discordance)
    low = _lows(counts, alpha)
    reject = np.where(low >= 0, binom.cdf(low, counts, p_first) + binom.sf(counts - low - 1, counts, p_first), 0.0)
    return float(np.sum(weight * np.minimum(reject, 1.0)))


def detectable_difference(n: int, discordance: float, power: float = 0.8, alpha: float = 0.05,
                          step: float = 0.0025) -> float | None:
    """The smallest accuracy difference that `n` pairs detect with `power` at `alpha`, given the
    discordance rate; None if even a difference equal to the discordance is not detected that often."""
    grid = np.arange(step, discordance + step / 2, step)
    for difference in grid:
        if mcnemar_power(n, discordance, float(min(difference, discordance)), alpha) >= power:
            return round(float(min(difference, discordance)), 4)
    return None


def items_needed(difference: float, discordance: float, power: float = 0.8, alpha: float = 0.05,
                 most: int = 100_000) -> int | None:
    """The fewest items for which a true `difference` is detected with `power` at `alpha` (the
    planning question: how many items before running); None if more than `most` are needed."""
    if mcnemar_power(most, discordance, difference, alpha) < power:
        return None
    low, high = 1, most
    while low < high:  # power grows with n (up to the test's discreteness, which bisection smooths)
        mid = (low + high) // 2
        if mcnemar_power(mid, discordance, difference, alpha) >= power:
            high = mid
        else:
            low = mid + 1
    return low
