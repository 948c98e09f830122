"""A debate's rounds as curves, from `Tables.rounds` (pure pandas): each debate filled to its last
round, the score per round with intervals, how often the agents all agree, and the answers that
moved between right and wrong."""

from __future__ import annotations

import pandas as pd

from debatekit.analysis.intervals import N_BOOT, bootstrap_ci
from debatekit.analysis.tables import as_float


def fill_rounds(rounds: pd.DataFrame, until: int | dict | None = None) -> pd.DataFrame:
    """Carry each debate's last recorded round forward, so a debate that stopped early keeps its answers.

    Args:
        rounds: `Tables.rounds` (one row per debate, round and agent).
        until: last round to fill to: one number, a map run_id -> number (e.g. the configured
            rounds), or None for the largest round seen in each run.

    Returns:
        The rows plus copies of each debate's last round for the missing rounds, marked
        `filled=True` (with `changed=False`, `flip="unchanged"`).
    """
    if rounds.empty:
        return rounds.assign(filled=pd.Series(dtype=bool))
    seen = rounds.groupby("run_id")["round"].max().to_dict()
    limit = {run: (until.get(run, top) if isinstance(until, dict) else (until or top)) for run, top in seen.items()}
    extra = []
    last_round = rounds.groupby("debate_id")["round"].transform("max")
    for _, last in rounds[rounds["round"] == last_round].groupby("debate_id"):
        stop = int(limit[last["run_id"].iloc[0]])
        for r in range(int(last["round"].iloc[0]) + 1, stop + 1):
            extra.append(last.assign(round=r, changed=False, relied=False, bullied=False, flip="unchanged"))
    out = rounds.assign(filled=False)
    if extra:
        out = pd.concat([out, *(e.assign(filled=True) for e in extra)], ignore_index=True)
    return out.sort_values(["run_id", "debate_id", "round", "agent"], ignore_index=True)


def score_trajectory(rounds: pd.DataFrame, by: list[str] | tuple = (), metric: str = "correct",
                     n_boot: int = N_BOOT) -> pd.DataFrame:
    """Score per round for each agent and for the aggregate, with bootstrap 95% intervals.

    Rows of several runs in one `by` group (e.g. seeds) are pooled, so the interval is over
    items and seeds. The aggregate of `correct` is the majority vote (`majority_correct`);
    of any other metric, the mean over agents.

    Returns:
        Columns: *by, round, agent ("majority" or "mean" for the aggregate), score, low, high, n.
    """
    by = list(by)
    if rounds.empty:
        return pd.DataFrame(columns=[*by, "round", "agent", "score", "low", "high", "n"])
    frame = rounds.assign(_v=as_float(rounds[metric]))
    per_debate = frame.drop_duplicates(["debate_id", "round"])
    if metric == "correct":
        aggregate = per_debate.assign(agent="majority", _v=as_float(per_debate["majority_correct"]))
    else:
        means = frame.groupby(["debate_id", "round"])["_v"].mean().rename("_m")
        aggregate = per_debate.join(means, on=["debate_id", "round"]).assign(agent="mean")
        aggregate = aggregate.assign(_v=aggregate["_m"])
    rows = []
    for keys, group in pd.concat([frame, aggregate], ignore_index=True).groupby([*by, "round", "agent"]):
        mean, low, high = bootstrap_ci(group["_v"].tolist(), n_boot=n_boot)
        rows.append({**dict(zip([*by, "round", "agent"], keys)), "score": mean, "low": low, "high": high,
                     "n": int(group["_v"].notna().sum())})
    return pd.DataFrame(rows)


def convergence_curve(rounds: pd.DataFrame, by: list[str] | tuple = (), n_boot: int = N_BOOT) -> pd.DataFrame:
    """Per round: share of debates whose agents all agree, and mean agreement rate (95% intervals).

    Pass `fill_rounds(...)` rows so a debate that stopped on agreement counts as converged
    in the later rounds too.

    Returns:
        Columns: *by, round, converged, converged_low, converged_high, agreement,
        agreement_low, agreement_high, debates.
    """
    by = list(by)
    cols = [*by, "round", "converged", "converged_low", "converged_high", "agreement", "agreement_low",
            "agreement_high", "debates"]
    if rounds.empty:
        return pd.DataFrame(columns=cols)
    per_debate = rounds.drop_duplicates(["debate_id", "round"])
    per_debate = per_debate.assign(_agree=as_float(per_debate["agreement"]))
    rows = []
    for keys, group in per_debate.groupby([*by, "round"]):
        keys = keys if isinstance(keys, tuple) else (keys,)
        conv = bootstrap_ci((group["_agree"] >= 1.0).astype(float).tolist(), n_boot=n_boot)
        agree = bootstrap_ci(group["_agree"].tolist(), n_boot=n_boot)
        rows.append({**dict(zip([*by, "round"], keys)), "converged": conv[0], "converged_low": conv[1],
                     "converged_high": conv[2], "agreement": agree[0], "agreement_low": agree[1],
                     "agreement_high": agree[2], "debates": len(group)})
    return pd.DataFrame(rows, columns=cols)


def flip_flow(rounds: pd.DataFrame, by: list[str] | tuple = ()) -> pd.DataFrame:
    """Counts of agents' answers moving between right and wrong from each round to the next.

    Returns:
        Columns: *by, from_round, to_round, before ("right"/"wrong"), after, changed (answer
        changed), count.
    """
    by = list(by)
    cols = [*by, "from_round", "to_round", "before", "after", "changed", "count"]
    scored = rounds[rounds["correct"].notna()] if not rounds.empty else rounds
    if scored.empty:
        return pd.DataFrame(columns=cols)
    now = scored[[*by, "debate_id", "agent", "round", "correct", "changed"]]
    before = now[["debate_id", "agent", "round", "correct"]].assign(round=now["round"] + 1)
    pairs = now.merge(before, on=["debate_id", "agent", "round"], suffixes=("", "_before"))
    state = {True: "right", False: "wrong"}
    pairs = pairs.assign(from_round=pairs["round"] - 1, to_round=pairs["round"],
                         before=pairs["correct_before"].map(lambda v: state[bool(v)]),
                         after=pairs["correct"].map(lambda v: state[bool(v)]),
                         changed=pairs["changed"].astype(bool))
    out = pairs.groupby([*by, "from_round", "to_round", "before", "after", "changed"]).size()
    return out.rename("count").reset_index()[cols]
