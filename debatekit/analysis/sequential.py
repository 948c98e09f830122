"""Group-sequential tests of a paired accuracy difference: looks, alpha spending and decisions.

A study that registers a plan (`sweep.grid.study_plan`) runs its items in looks (after 50, 100
and 150 items, say) and tests its primary comparison after each one, so that it can stop as soon
as the answer is known:

    design = sequential.Design(looks=(50, 100, 150), alpha=0.05, margin=0.10)
    design.efficacy()       # two-sided z boundaries, one per look: 3.71, 2.51, 1.99
    design.equivalence()    # one-sided z boundaries of each of the two TOST tests
    sequential.decide(design, look=1, only_config=12, only_baseline=3, pairs=50)
    sequential.decide(...).repeated_interval()  # the difference's interval that allows for the looks

Boundaries spend alpha with Lan and DeMets' O'Brien-Fleming-type function (Lan & DeMets 1983,
Biometrika 70:659), computed exactly for the looks' information fractions (each look's share of
the planned pairs) from the joint normal law of the looks' statistics (scipy's multivariate normal;
they match the published tables, `tests/analysis/test_sequential.py`). The statistic is the paired
difference over its standard error, `z = d / se` with `d = (b - c) / n` and the per-item variance
`((b + c) / n - d**2) * n / (n - 1)` (b, c: the items only one side got right): McNemar's test in its
normal form (below). *Efficacy*: |z| reaches the look's two-sided boundary. *Equivalence*: both one-sided
tests of TOST, `(d + margin) / se` and `(margin - d) / se`, reach the look's one-sided boundary (each
spends alpha the same way). The statistics carry McNemar's continuity correction and the boundaries
are read as t-quantiles (`statistics`, `at_look`): without them the normal approximation let the
equivalence error reach 0.054 to 0.06 at a discordance of 0.12 to 0.2. At the last look a study
that crossed neither is undecided.

`simulate` draws studies at a given true difference and discordance and reports how often each
decision is reached and at which look: the type-I error of efficacy at no difference, of
equivalence at a difference of the margin, and power (`python -m benchmarks sequential`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy.optimize import brentq
from scipy.stats import multivariate_normal, norm, t as t_law

DECISIONS = ("different", "equivalent", "continue", "undecided")


@dataclass(frozen=True)
class Design:
    """Looks (cumulative pairs at each), the level of each test and the equivalence margin."""

    looks: tuple[int, ...]
    alpha: float = 0.05
    margin: float = 0.10

    def __post_init__(self):
        looks = tuple(int(n) for n in self.looks)
        if not looks or any(n <= 1 for n in looks) or list(looks) != sorted(set(looks)):
            raise ValueError(f"looks must be increasing item counts above 1, got {list(self.looks)}")
        if not 0 < self.alpha < 0.5 or not 0 < self.margin < 1:
            raise ValueError(f"alpha must be in (0, 0.5) and margin in (0, 1), got {self.alpha}, {self.margin}")
        object.__setattr__(self, "looks", looks)

    @property
    def fractions(self) -> tuple[float, ...]:
        return tuple(n / self.looks[-1] for n in self.looks)

    def efficacy(self) -> tuple[float, ...]:
        """The two-sided boundary on |z| at each look."""
        return _boundaries(self.fractions, self.alpha, two_sided=True)

    def equivalence(self) -> tuple[float, ...]:
        """The one-sided boundary each of the two TOST statistics must reach at each look."""
        return _boundaries(self.fractions, self.alpha, two_sided=False)


def spent(t: float, alpha: float, two_sided: bool = True) -> float:
    """Alpha spent by information fraction t (Lan-DeMets O'Brien-Fleming type): for a one-sided test
    at level a, 2 - 2 Phi(z_{1-a/2} / sqrt(t)); a two-sided test spends that at a = alpha/2 on each side."""
    if t <= 0:
        return 0.0
    side = alpha / 2 if two_sided else alpha
    once = 2 - 2 * norm.cdf(norm.ppf(1 - side / 2) / math.sqrt(t))
    return 2 * once if two_sided else once


@lru_cache(maxsize=64)
def _boundaries(fractions: tuple[float, ...], alpha: float, two_sided: bool) -> tuple[float, ...]:
    ts = np.asarray(fractions, dtype=float)
    cov = np.sqrt(np.minimum.outer(ts, ts) / np.maximum.outer(ts, ts))  # corr(Z_i, Z_j) = sqrt(t_i / t_j)
    found: list[float] = []
    for k, t in enumerate(ts):
        target = spent(t, alpha, two_sided) - (spent(ts[k - 1], alpha, two_sided) if k else 0.0)
        if k == 0:
            found.append(float(norm.ppf(1 - target / 2) if two_sided else norm.ppf(1 - target)))
            continue
        before = _inside(found, cov[:k, :k], two_sided)  # P(no earlier look crossed)

        def crossing(c: float) -> float:  # P(no earlier look crossed, this one does) - what it may spend
            return before - _inside([*found, c], cov[:k + 1, :k + 1], two_sided) - target

        found.append(float(brentq(crossing, 0.1, 12.0, xtol=1e-6)))
    return tuple(found)


def _inside(bounds: list[float], cov: np.ndarray, two_sided: bool) -> float:
    """P(every look's statistic stays inside its boundary) for jointly normal statistics."""
    upper = np.asarray(bounds, dtype=float)
    if len(upper) == 1:
        return float(norm.cdf(upper[0]) - (norm.cdf(-upper[0]) if two_sided else 0.0))
    law = multivariate_normal(mean=np.zeros(len(upper)), cov=cov, seed=0, abseps=1e-7, releps=1e-7,
                              maxpts=50_000 * len(upper))
    lower = -upper if two_sided else np.full(len(upper), -np.inf)
    return float(law.cdf(upper, lower_limit=lower))


@dataclass
class Look:
    """One look at the primary comparison: its numbers and what they decide."""

    look: int
    pairs: int
    only_config: int
    only_baseline: int
    difference: float
    z: float
    efficacy_boundary: float
    tost_low: float
    tost_high: float
    equivalence_boundary: float
    decision: str

    def repeated_interval(self) -> tuple[float, float]:
        """The repeated confidence interval of this look (Jennison & Turnbull 2000, *Group Sequential
        Methods*, ch. 9): the difference plus or minus the look's efficacy boundary times its standard
        error (the same per-item variance as `statistics`, without the continuity correction). Its
        coverage holds over all the looks at once, so it stays valid whichever look stopped the study,
        which a plain interval at the stopping look does not."""
        d, se = (float(v) for v in difference_and_se(self.only_config, self.only_baseline, self.pairs))
        return d - self.efficacy_boundary * se, d + self.efficacy_boundary * se


def difference_and_se(only_config, only_baseline, pairs):
    """The paired difference `d = (b - c) / n` and its standard error from the per-item variance
    `((b + c) / n - d**2) * n / (n - 1)` (arrays work too)."""
    b, c, n = (np.asarray(x, dtype=float) for x in (only_config, only_baseline, pairs))
    d = (b - c) / n
    return d, np.sqrt(np.maximum(((b + c) / n - d * d) * n / np.maximum(n - 1, 1), 0.0) / n)


def statistics(only_config, only_baseline, pairs, margin: float):
    """The paired difference, its efficacy statistic and the two TOST statistics (arrays work too).

    `d = (b - c) / n` over its standard error from the per-item variance `((b + c) / n - d**2) *
    n / (n - 1)`; each statistic is taken one item closer to its null (McNemar's continuity
    correction: `(|d| - 1/n) / se` for efficacy, `(d + margin - 1/n) / se` and `(margin - d - 1/n) / se`
    for TOST), which keeps the type-I errors at or below alpha where the normal law is rough (few
    discordant items). With no spread (no discordant item) each is +-inf or 0, as its sign says."""
    d, se = difference_and_se(only_config, only_baseline, pairs)
    step = 1 / np.asarray(pairs, dtype=float)

    def over(numerator):
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(se > 0, numerator / se, np.where(numerator > 0, np.inf, np.where(numerator < 0, -np.inf, 0.0)))

    z = np.sign(d) * over(np.maximum(np.abs(d) - step, 0.0))
    return d, z, over(d + margin - step), over(margin - d - step)


def at_look(boundary: float, pairs) -> float:
    """A normal boundary as the t-quantile of the same tail with `pairs - 1` degrees of freedom: the
    standard error is estimated, not known."""
    return t_law.ppf(norm.cdf(boundary), np.maximum(np.asarray(pairs, dtype=float) - 1, 1))


def decide(design: Design, look: int, only_config: int, only_baseline: int, pairs: int) -> Look:
    """The decision at look `look` (1-based): "different" (efficacy boundary crossed), "equivalent"
    (both TOST statistics crossed theirs), "continue", or at the last look "undecided"."""
    if not 1 <= look <= len(design.looks):
        raise ValueError(f"look {look} of a design with {len(design.looks)} looks")
    efficacy = float(at_look(design.efficacy()[look - 1], pairs))
    equivalence = float(at_look(design.equivalence()[look - 1], pairs))
    d, z, low, high = (float(v) for v in statistics(only_config, only_baseline, pairs, design.margin))
    if abs(z) >= efficacy:
        decision = "different"
    elif min(low, high) >= equivalence:
        decision = "equivalent"
    else:
        decision = "undecided" if look == len(design.looks) else "continue"
    return Look(look, pairs, only_config, only_baseline, d, z, efficacy, low, high, equivalence, decision)


def simulate(design: Design, difference: float, discordance: float, n_sims: int = 20_000,
             seed: int = 0) -> dict:
    """How often studies drawn at a true `difference` and `discordance` (share of items only one side
    gets right) end each way: {decision: share}, with the expected number of items used."""
    if not 0 <= abs(difference) <= discordance <= 1:
        raise ValueError(f"need |difference| <= discordance <= 1, got {difference}, {discordance}")
    rng = np.random.default_rng(seed)
    probs = [(discordance + difference) / 2, (discordance - difference) / 2]
    n = design.looks[-1]
    draws = rng.choice(3, size=(n_sims, n), p=[*probs, 1 - discordance])
    only_a, only_b = np.cumsum(draws == 0, axis=1), np.cumsum(draws == 1, axis=1)
    efficacy, equivalence = design.efficacy(), design.equivalence()
    ended = np.zeros(n_sims, dtype=bool)
    outcome = np.full(n_sims, "undecided", dtype=object)
    used = np.full(n_sims, n, dtype=float)
    for k, size in enumerate(design.looks):
        _, z, low, high = statistics(only_a[:, size - 1], only_b[:, size - 1], size, design.margin)
        different = ~ended & (np.abs(z) >= at_look(efficacy[k], size))
        same = ~ended & ~different & (np.minimum(low, high) >= at_look(equivalence[k], size))
        outcome[different], outcome[same] = "different", "equivalent"
        used[different | same] = size
        ended |= different | same
    return {"different": float(np.mean(outcome == "different")), "equivalent": float(np.mean(outcome == "equivalent")),
            "undecided": float(np.mean(outcome == "undecided")), "expected_items": float(used.mean()),
            "n_sims": n_sims}
