"""Conformity in a debate: who keeps an answer, who moves to the majority, and whether debating helps.

    rounds = analysis.load_runs(["runs/som"]).rounds
    conformity.switch_rates(rounds)        # per round pair: kept, moved to the majority, moved elsewhere
    conformity.flips_by_position(rounds)   # right->wrong and wrong->right, for agents in the minority or majority
    conformity.martingale_test(rounds)     # mean change of an agent's correctness, bootstrap over items
    conformity.conformity_summary(rounds)  # one row per round pair: what `debatekit show RUN` prints

A transition is one agent of one debate from round t-1 to round t, where both rounds recorded an
answer for it. An agent whose answer is missing in either round (a failed call) is left out of that
transition, never counted as a change or scored as wrong; a debate that stopped early has no
transition past its last round.

The majority of round t-1 is the answer more of the agents gave than any other, counted over all
agents that answered, the agent itself included; where two answers tie for the most there is no
majority. An agent is in the `majority` position when its answer was that answer, in the `minority`
when there was a majority and its answer was another, and at a `tie` when there was none. For an
agent outside the majority this answer is also the most common one among the other agents, so
"moved to the majority" reads the same under either definition; counting the agent in is what lets
an agent that shares the leading answer with one other agent count as in the majority.

Rates come with Wilson intervals (statsmodels), which treat the transitions as independent; the
agents of one debate are not, so read those intervals as a lower bound on the uncertainty. The
martingale test resamples whole items (an item's agents and seeds together) instead.
"""

from __future__ import annotations

import json
import math
from typing import Any, Sequence

import numpy as np
import pandas as pd

from debatekit.analysis.intervals import N_BOOT
from debatekit.datasets.voting import answers_equal, normalize

MOVES = ("keep", "to_majority", "away")
"""What an agent did from round t-1 to t: kept its answer, changed to the round t-1 majority, or
changed to any other answer (including where round t-1 had no majority)."""
POSITIONS = ("majority", "minority", "tie")
"""Where an agent stood at round t-1 (see the module docstring)."""
FLIPS = ("right_to_wrong", "wrong_to_right")

_KEYS = ["run_id", "debate_id", "agent"]
ROUND_COLUMNS = ["run_id", "item_id", "debate_id", "round", "agent", "answer", "correct"]


def answer_transitions(rounds: Any, imposed: bool = False) -> pd.DataFrame:
    """One row per agent, debate and round t >= 2 with an answer in both rounds t-1 and t, left out
    where an update rule gave the agent its answer without a call (`adopted`: society_of_mind's
    conformist and follower rules), unless `imposed`: what an agent chose is its own answers only,
    what it ends up holding (the martingale test) is every answer, however it came.

    Args:
        rounds: `Tables.rounds` (or the tables themselves): one row per debate, round and agent with
            `run_id`, `item_id`, `debate_id`, `round`, `agent`, `answer`, `correct`.

    Returns:
        The round-t rows (every column they carry) with `from_round`, `to_round`, `before` and
        `after` (the answers), `was_correct` (correctness at t-1; `correct` is at t), `previous_majority`
        (the round t-1 majority, None at a tie), `position` and `move` (`POSITIONS`, `MOVES`).
    """
    rounds = getattr(rounds, "rounds", rounds)
    columns = [*dict.fromkeys([*ROUND_COLUMNS, *rounds.columns]), "from_round", "to_round", "before", "after",
               "was_correct", "previous_majority", "position", "move"]
    if rounds.empty:
        return pd.DataFrame(columns=columns)
    present = rounds[[not no_answer(a) for a in rounds["answer"]]]
    tops = {key: _leader(group["answer"].tolist())
            for key, group in present.groupby(["run_id", "debate_id", "round"], sort=False)}
    before = present[[*_KEYS, "round", "answer", "correct"]].rename(
        columns={"answer": "before", "correct": "was_correct"}).assign(round=lambda f: f["round"] + 1)
    pairs = present.merge(before, on=[*_KEYS, "round"], how="inner", validate="one_to_one")
    if "adopted" in pairs and not imposed:  # an answer an update rule imposed (no call) is no choice of the agent's
        pairs = pairs[~pairs["adopted"].fillna(False).astype(bool)]
    if pairs.empty:
        return pd.DataFrame(columns=columns)
    top = [tops[(run, debate, r - 1)] for run, debate, r in zip(pairs["run_id"], pairs["debate_id"], pairs["round"])]
    position = ["tie" if t is None else "majority" if answers_equal(b, t) else "minority"
                for b, t in zip(pairs["before"], top)]
    move = ["keep" if answers_equal(a, b) else "to_majority" if t is not None and answers_equal(a, t) else "away"
            for a, b, t in zip(pairs["answer"], pairs["before"], top)]
    out = pairs.assign(from_round=pairs["round"] - 1, to_round=pairs["round"], after=pairs["answer"],
                       previous_majority=pd.Series(top, index=pairs.index, dtype=object), position=position,
                       move=move)
    return out[columns].sort_values([*_KEYS[:2], "to_round", "agent"], ignore_index=True)


def switch_rates(rounds: Any, by: Sequence[str] = ("run_id",), level: float = 0.95) -> pd.DataFrame:
    """Per round pair: the share of transitions that kept the answer, moved to the majority, moved away.

    Args:
        rounds: `Tables.rounds`, or `answer_transitions` of it.
        by: columns to split by (any column of the rounds table, or `position`).
        level: the intervals' coverage.

    Returns:
        One row per `by` group, round pair and move (`MOVES`, all three even when one is 0):
        *by, from_round, to_round, move, count, transitions, rate, low, high (Wilson).
    """
    steps = _transitions(rounds)
    keys = [*by, "from_round", "to_round"]
    if steps.empty:
        return pd.DataFrame(columns=[*keys, "move", "count", "transitions", "rate", "low", "high"])
    counts = steps.groupby(keys)["move"].value_counts().unstack(fill_value=0).reindex(columns=list(MOVES),
                                                                                     fill_value=0)
    long = counts.stack().rename("count").reset_index()
    long["transitions"] = long.groupby(keys)["count"].transform("sum")
    return _with_rates(long, "count", "transitions", level)[[*keys, "move", "count", "transitions", "rate", "low",
                                                             "high"]]


def flips_by_position(rounds: Any, by: Sequence[str] = ("run_id",), level: float = 0.95) -> pd.DataFrame:
    """Right->wrong and wrong->right rates per round pair, for agents in the majority, minority or at a tie.

    Only transitions scored in both rounds count (an item without a truth, or a missing answer, is
    left out). `right_to_wrong` is among the agents right at t-1 (`at_risk`), the share wrong at t;
    `wrong_to_right` among the agents wrong at t-1, the share right at t.

    Returns:
        One row per `by` group, round pair, position (`POSITIONS`) and flip (`FLIPS`): *by,
        from_round, to_round, position, flip, at_risk, count, rate, low, high (Wilson; NaN with
        nobody at risk).
    """
    steps = _transitions(rounds)
    steps = steps[steps["was_correct"].notna() & steps["correct"].notna()]
    steps = steps.assign(_right_before=steps["was_correct"].astype(bool), _right=steps["correct"].astype(bool))
    keys = [*by, "from_round", "to_round"]
    rows = []
    for values, group in steps.groupby(keys):
        for position in POSITIONS:
            here = group[group["position"] == position]
            right, wrong = here[here["_right_before"]], here[~here["_right_before"]]
            for flip, at_risk, count in (("right_to_wrong", len(right), int((~right["_right"]).sum())),
                                         ("wrong_to_right", len(wrong), int(wrong["_right"].sum()))):
                rows.append({**dict(zip(keys, values)), "position": position, "flip": flip, "at_risk": at_risk,
                             "count": count})
    frame = pd.DataFrame(rows, columns=[*keys, "position", "flip", "at_risk", "count"])
    return _with_rates(frame, "count", "at_risk", level)


def martingale_test(rounds: Any, by: Sequence[str] = ("run_id",), n_boot: int = N_BOOT, seed: int = 0,
                    level: float = 0.95) -> pd.DataFrame:
    """Whether an agent's expected correctness stays the same from one round to the next.

    Choi et al. 2025 ("Debate or Vote", arXiv 2508.17536) model debate as a martingale over an
    agent's belief in the right answer: in expectation, a round of debate neither raises nor lowers
    an agent's chance of being right. Per round pair, `change` is the mean over transitions of
    correct at t minus correct at t-1 (each 1 or 0); its percentile bootstrap interval resamples
    items with all their agents (and seeds) kept together, since agents that read each other are
    not independent. `zero_inside` says whether the interval holds 0: where it does not, this round
    moved the agents' accuracy, against the unconditional martingale claim.

    Transitions without a score in both rounds (a missing answer, an item without a truth) are
    left out, never scored as wrong. An answer an update rule gave an agent without a call (`adopted`)
    counts: the claim is about the answers the agents hold, and under the conformist rule leaving out
    the majority's kept answers would test the minority alone. A table of transitions given in place of
    the rounds is taken as it is (make it with `answer_transitions(rounds, imposed=True)`).

    Returns:
        One row per `by` group and round pair: *by, from_round, to_round, items, transitions,
        accuracy_before, accuracy_after, change, low, high, zero_inside.
    """
    steps = _transitions(rounds, imposed=True)
    steps = steps[steps["was_correct"].notna() & steps["correct"].notna()]
    steps = steps.assign(_change=steps["correct"].astype(bool).astype(float)
                         - steps["was_correct"].astype(bool).astype(float))
    keys = [*by, "from_round", "to_round"]
    rows = []
    for values, group in steps.groupby(keys):
        per_item = group.groupby("item_id")["_change"].agg(["sum", "count"])
        change, low, high = ratio_bootstrap(per_item["sum"].to_numpy(), per_item["count"].to_numpy(),
                                            n_boot=n_boot, seed=seed, level=level)
        rows.append({**dict(zip(keys, values)), "items": len(per_item), "transitions": len(group),
                     "accuracy_before": float(group["was_correct"].astype(bool).mean()),
                     "accuracy_after": float(group["correct"].astype(bool).mean()),
                     "change": change, "low": low, "high": high, "zero_inside": bool(low <= 0 <= high)})
    return pd.DataFrame(rows, columns=[*keys, "items", "transitions", "accuracy_before", "accuracy_after", "change",
                                       "low", "high", "zero_inside"])


def conformity_summary(rounds: Any, by: Sequence[str] = ("run_id",), n_boot: int = N_BOOT,
                       seed: int = 0) -> pd.DataFrame:
    """One row per round pair: the three move rates, right->wrong and wrong->right in the minority and
    in the majority (each with how many agents were right, or wrong, there), and the martingale test's
    change with its interval; empty for a run with one round.

    Returns:
        *by, from_round, to_round, transitions, keep, to_majority, away, right_to_wrong_minority,
        right_in_minority, right_to_wrong_majority, right_in_majority, wrong_to_right_minority,
        wrong_in_minority, wrong_to_right_majority, wrong_in_majority, change, low, high, zero_inside.
    """
    keys = [*by, "from_round", "to_round"]
    columns = [*keys, "transitions", *MOVES, "right_to_wrong_minority", "right_in_minority",
               "right_to_wrong_majority", "right_in_majority", "wrong_to_right_minority", "wrong_in_minority",
               "wrong_to_right_majority", "wrong_in_majority", "change", "low", "high", "zero_inside"]
    steps = _transitions(rounds)
    if steps.empty:
        return pd.DataFrame(columns=columns)
    moves = switch_rates(steps, by).pivot(index=keys, columns="move", values="rate")
    out = moves.join(steps.groupby(keys).size().rename("transitions"))
    flips = flips_by_position(steps, by)
    flips = flips[flips["position"].isin(["minority", "majority"])]
    for flip, held in (("right_to_wrong", "right_in_"), ("wrong_to_right", "wrong_in_")):
        part = flips[flips["flip"] == flip]
        out = out.join(part.pivot(index=keys, columns="position", values="rate").add_prefix(flip + "_")) \
            .join(part.pivot(index=keys, columns="position", values="at_risk").add_prefix(held))
    drift = martingale_test(rounds, by, n_boot=n_boot, seed=seed).set_index(keys)  # every answer held, imposed too
    out = out.join(drift[["change", "low", "high", "zero_inside"]])
    return out.reset_index().reindex(columns=columns)


def ratio_bootstrap(sums: Any, counts: Any, n_boot: int = N_BOOT, seed: int = 0, level: float = 0.95,
                    minus: tuple[Any, Any] | None = None) -> tuple[float, float, float]:
    """The pooled mean sum(sums) / sum(counts) and its percentile bootstrap interval over the groups
    (items): each resample draws whole groups with replacement. With `minus` (the sums and counts of a
    second measure on the same groups), the difference of the two pooled means, resampled in pairs.
    NaNs when there is no group, and a NaN interval when a resample draws only groups with no count."""
    sides = [(np.asarray(sums, dtype=float), np.asarray(counts, dtype=float))]
    if minus is not None:
        sides.append((np.asarray(minus[0], dtype=float), np.asarray(minus[1], dtype=float)))
    if len(sides[0][0]) == 0 or any(c.sum() == 0 for _, c in sides):
        return (math.nan, math.nan, math.nan)
    signs = (1.0, -1.0)[:len(sides)]
    point = float(sum(sign * s.sum() / c.sum() for sign, (s, c) in zip(signs, sides)))
    draws = np.random.default_rng(seed).integers(0, len(sides[0][0]), size=(n_boot, len(sides[0][0])))
    with np.errstate(invalid="ignore"):  # a resample with nobody to count: NaN, and so is the interval
        means = sum(sign * s[draws].sum(axis=1) / c[draws].sum(axis=1) for sign, (s, c) in zip(signs, sides))
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail], method="inverted_cdf")
    return point, float(low), float(high)


def wilson(count: Any, nobs: Any, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score intervals (statsmodels) of count / nobs, elementwise; NaN where nobs is 0."""
    from statsmodels.stats.proportion import proportion_confint

    count, nobs = np.asarray(count, dtype=float), np.asarray(nobs, dtype=float)
    seen = nobs > 0
    low, high = np.full(count.shape, np.nan), np.full(count.shape, np.nan)
    if seen.any():
        low[seen], high[seen] = proportion_confint(count[seen], nobs[seen], alpha=1 - level, method="wilson")
    low[seen & (count == 0)], high[seen & (count == nobs)] = 0.0, 1.0  # exact at the ends, not 1e-17 off
    return low, high


def _with_rates(frame: pd.DataFrame, count: str, nobs: str, level: float) -> pd.DataFrame:
    n = frame[nobs].to_numpy(dtype=float)
    low, high = wilson(frame[count], n, level)
    rate = np.divide(frame[count].to_numpy(dtype=float), n, out=np.full(len(frame), np.nan), where=n > 0)
    return frame.assign(rate=rate, low=low, high=high)


def _transitions(rounds: Any, imposed: bool = False) -> pd.DataFrame:
    """`answer_transitions` of a rounds table, or the table itself when it already is one."""
    rounds = getattr(rounds, "rounds", rounds)
    return rounds if "move" in rounds else answer_transitions(rounds, imposed)


def _leader(answers: list) -> Any:
    """The answer given more often than any other (None when two or more tie for the most)."""
    counts: dict[Any, list] = {}
    for a in answers:
        counts.setdefault(_key(a), []).append(a)
    ranked = sorted((len(v) for v in counts.values()), reverse=True)
    if not ranked or (len(ranked) > 1 and ranked[0] == ranked[1]):
        return None
    return next(v[0] for v in counts.values() if len(v) == ranked[0])


def _key(answer: Any) -> Any:
    """A hashable form of an answer under which equal answers count together."""
    value = normalize(answer)
    try:
        hash(value)
        return value
    except TypeError:  # a structured answer (a list, a dict)
        return json.dumps(answer, sort_keys=True, default=str)


def no_answer(answer: Any) -> bool:
    """Whether an answer is missing: None, or the NaN a numeric answer column holds for it."""
    return answer is None or (isinstance(answer, float) and math.isnan(answer))
