"""Debate or vote: one society_of_mind run, read as one agent, majority voting and debate.

A society_of_mind run that keeps every round holds three configurations on the same items and
the same calls (Choi et al. 2025, "Debate or Vote"):

- `single`: the first agent's round-1 answer (one agent, one sample);
- `vote@1`: the majority of the agents' round-1 answers (self-consistency over independent
  samples, before anyone has read anyone);
- `debate@t`: the majority after round t (t >= 2: the agents have read each other t - 1 times).

`decompose(tables)` gives per item and configuration whether it was right and what it cost
(completion tokens of the calls up to that point), and `decomposition(tables)` the paired
differences vote@1 - single and debate@t - vote@1 (and debate@t - single) with the bootstrap
interval and exact McNemar test of `paired.compare`. `across_runs(tables, labels, baseline)` pairs
two or more such runs stage by stage (each run's vote@1 against the baseline run's vote@1, and so
on): a change of the agents (another model for one of them, say) read at every stage. A debate
that stopped early (stop on agreement) keeps its last majority for the later rounds, as a reader
of its final answer would.
An unreadable answer counts as wrong; a debate whose calls failed is left out of every pair.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from debatekit.analysis.intervals import N_BOOT
from debatekit.analysis.paired import COLUMNS as PAIRED_COLUMNS, EQUIVALENCE_MARGIN, compare, paired_lines
from debatekit.datasets.voting import agreement_rate, answers_equal, majority

COLUMNS = ["run_id", "item_id", "seed", "config", "round", "correct", "status", "completion_tokens", "agreement"]


def decompose(tables: Any, first_agent: str | None = None) -> pd.DataFrame:
    """Per debate of each society_of_mind run and configuration (single, vote@1, debate@2, ...):
    correct, status, the completion tokens spent up to it, and the round-1 agreement (share of
    agents giving the round-1 majority answer; 1.0 means the vote was one answer repeated)."""
    debates = tables.debates
    debates = debates[debates["protocol"] == "society_of_mind"] if not debates.empty else debates
    if debates.empty:
        return pd.DataFrame(columns=COLUMNS)
    turns = tables.turns
    spent: dict[str, dict[tuple, int]] = {}  # debate -> (round, agent) -> completion tokens, read once
    if not turns.empty:
        sums = turns[turns["debate_id"].isin(debates["debate_id"])].groupby(
            ["debate_id", "round", "agent"])["completion_tokens"].sum()
        for (debate, round_no, agent), n in sums.items():
            spent.setdefault(debate, {})[(round_no, agent)] = n
    rounds = tables.rounds.set_index("debate_id") if not tables.rounds.empty else None
    runs = tables.runs.set_index("run_id")
    # a debate that stopped early is carried to the run's configured rounds, or (rounds left at the
    # protocol's default) to the last round any of the run's debates reached
    reached = tables.rounds.groupby("run_id")["round"].max().to_dict() if not tables.rounds.empty else {}
    given = runs["param_rounds"].dropna().to_dict() if "param_rounds" in runs else {}
    configured = {run: given.get(run, top) for run, top in reached.items()}
    rows = []
    for d in debates.itertuples():
        answers = _answers_by_round(rounds, d.debate_id)
        if not answers:
            continue
        first = first_agent or sorted(answers[1])[0]
        top = max(answers)
        tokens = spent.get(d.debate_id, {})  # (round, agent) -> completion tokens
        agreement = agreement_rate(list(answers[1].values())) or 0.0
        base = {"run_id": d.run_id, "item_id": d.item_id, "seed": d.seed, "status": d.status, "agreement": agreement}
        rows.append({**base, "config": "single", "round": 1, "correct": _right(answers[1].get(first), d.truth),
                     "completion_tokens": float(tokens.get((1, first), 0))})
        for t in range(1, max(top, int(configured.get(d.run_id) or 0)) + 1):
            said = answers[min(t, top)]
            upto = float(sum(n for (r, _), n in tokens.items() if r <= t))
            rows.append({**base, "config": "vote@1" if t == 1 else f"debate@{t}", "round": t,
                         "correct": _right(majority(said.values()), d.truth), "completion_tokens": upto})
    return pd.DataFrame(rows, columns=COLUMNS)


def decomposition(tables: Any, n_boot: int = N_BOOT, seed: int = 0, margin: float = EQUIVALENCE_MARGIN) -> pd.DataFrame:
    """The paired differences of the decomposition: vote@1 - single, then each debate@t - vote@1 and
    debate@t - single (rows of `paired.compare`: difference, 95% interval, McNemar p, tokens, and
    the 90% interval and TOST against `margin`)."""
    frame = decompose(tables)
    if frame.empty:
        return pd.DataFrame(columns=PAIRED_COLUMNS)

    def against(baseline: str, configs: list[str]) -> pd.DataFrame:
        return compare(frame[frame["config"].isin([baseline, *configs])], baseline=baseline, by="config",
                       n_boot=n_boot, seed=seed, margin=margin)

    debates = [c for c in dict.fromkeys(frame["config"]) if c.startswith("debate@")]
    parts = [against("single", ["vote@1"])]
    if debates:
        parts += [against("vote@1", debates), against("single", debates)]
    return pd.concat(parts, ignore_index=True)


def across_runs(tables: Any, labels: dict[str, str], baseline: str | None = None, n_boot: int = N_BOOT,
                seed: int = 0) -> pd.DataFrame:
    """Each society_of_mind run's stages (single, vote@1, debate@t) against the same stage of the
    baseline run, paired on the items both answered: rows of `paired.compare` (config "<run> <stage>",
    baseline "<baseline run> <stage>") with the `run` and `stage` apart. Empty with fewer than two
    society_of_mind runs.

    Args:
        tables: `analysis.load_runs` of the runs.
        labels: a label per run id (`paired.run_labels`).
        baseline: the label of the run to compare against; default (or when it is not a
            society_of_mind run) the first society_of_mind run in `labels`.
    """
    frame = decompose(tables)
    frame = frame.assign(run=frame["run_id"].map(labels))
    runs = [label for label in dict.fromkeys(labels.values()) if label in set(frame["run"])]
    if len(runs) < 2:
        return pd.DataFrame()
    baseline = baseline if baseline in runs else runs[0]
    parts = []
    for stage in dict.fromkeys(frame["config"]):
        part = frame[frame["config"] == stage]
        if baseline in set(part["run"]) and part["run"].nunique() > 1:
            rows = compare(part.assign(config=part["run"] + " " + stage), baseline=f"{baseline} {stage}",
                           by="config", n_boot=n_boot, seed=seed)
            parts.append(rows.assign(stage=stage, run=rows["config"].str.removesuffix(" " + stage)))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def format_across(table: pd.DataFrame) -> str:
    """`across_runs` as printed by `debatekit compare` ('' when empty): a row per stage and run."""
    if table.empty:
        return ""
    baseline = table["baseline"].iloc[0].removesuffix(" " + table["stage"].iloc[0])
    lines = paired_lines(table, {"stage": "stage", "run": "run"})
    return (f"stage by stage, each against the same stage of {baseline} (single: the first agent's round-1 "
            f"answer; vote@1: the round-1 majority; debate@t: the majority after round t):\n" + "\n".join(lines))


def _answers_by_round(rounds: pd.DataFrame | None, debate_id: str) -> dict[int, dict[str, Any]]:
    if rounds is None or debate_id not in rounds.index:
        return {}
    rows = rounds.loc[[debate_id]]
    return {int(r): dict(zip(g["agent"], g["answer"])) for r, g in rows.groupby("round")}


def _right(answer: Any, truth: Any) -> bool | None:
    if truth is None:
        return None
    return answer is not None and answers_equal(answer, truth)

