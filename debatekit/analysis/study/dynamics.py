"""What the votes and rounds did: each vote's ties, the accuracy of a vote of k samples, the debate run's
rounds, and two debates picked by rule (one a debate fixed, one it broke)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from debatekit import analysis
from debatekit.analysis import decompose
from debatekit.analysis.study.runs import DEBATE


def _in_agent_order(said: pd.DataFrame) -> list:
    """The answers of one round, agent1 .. agent9 then agent10 (sample1 .. sample10): shorter names first."""
    return [answer for _, answer in sorted(zip(said["agent"], said["answer"]), key=lambda pair: (len(pair[0]), pair[0]))]


VOTES = ("self_consistency", DEBATE)
"""Protocols whose answer is a majority vote, whose ties `ties` looks at."""


def ties(tables: analysis.Tables, labels: dict[str, str]) -> pd.DataFrame:
    """Per configuration decided by a vote (self_consistency; the debate run's vote@1, debate@t and its
    own answer): the share of its answered items where the vote tied, its accuracy under the rule the
    runs used (a tie goes to the answer given first), the accuracy expected under a random tie-break
    (a tie of k answers, one of them right, is right 1/k of the time: exact, no draws) and the lowest
    and highest accuracy any tie-break gives."""
    from debatekit.datasets.voting import answers_equal, majority, tied_answers

    rounds, debates = tables.rounds, tables.debates
    columns = ["config", "items", "tied", "accuracy", "random_tie_break", "lowest", "highest"]
    if rounds.empty or debates.empty:
        return pd.DataFrame(columns=columns)
    rows = []
    for run in tables.runs.itertuples():
        if run.protocol not in VOTES:
            continue
        mine = debates[(debates["run_id"] == run.run_id) & debates["status"].isin(("ok", "degraded"))]
        said = rounds[rounds["run_id"] == run.run_id]
        top = int(said["round"].max()) if len(said) else 0
        stages = {labels[run.run_id]: top} if run.protocol != DEBATE else {
            **{f"{labels[run.run_id]} {'vote@1' if t == 1 else f'debate@{t}'}": t for t in range(1, top)},
            labels[run.run_id]: top}
        by_debate = {d: g for d, g in said.groupby("debate_id")}
        for config, stage in stages.items():
            counts = {"first": 0.0, "random": 0.0, "low": 0.0, "high": 0.0, "tied": 0, "items": 0}
            for d in mine.itertuples():
                group = by_debate.get(d.debate_id)
                if group is None:
                    continue
                reached = group[group["round"] <= stage]
                last = reached[reached["round"] == reached["round"].max()]  # a debate that stopped keeps its last
                answers = [a for a in _in_agent_order(last) if a is not None and a == a]
                tied = tied_answers(answers)
                right = [answers_equal(a, d.truth) for a in tied]
                first = bool(answers) and answers_equal(majority(answers), d.truth)
                counts["items"] += 1
                counts["first"] += first
                counts["tied"] += len(tied) > 1
                counts["random"] += sum(right) / len(tied) if tied else 0.0
                counts["low"] += all(right) if tied else 0.0
                counts["high"] += any(right)
            n = counts["items"] or float("nan")
            rows.append({"config": config, "items": counts["items"], "tied": counts["tied"] / n,
                         "accuracy": counts["first"] / n, "random_tie_break": counts["random"] / n,
                         "lowest": counts["low"] / n, "highest": counts["high"] / n})
    return pd.DataFrame(rows, columns=columns)


def vote_curve(tables: analysis.Tables, labels: dict[str, str]) -> pd.DataFrame:
    """Per self_consistency run, the accuracy of the majority of its first k samples, k = 1 .. all
    (sample 1 .. k in order; a tie to the first answer, as the runs break it), over its answered
    items, with the exact 95% bootstrap interval over items: what each added sample buys."""
    from debatekit.analysis.intervals import bootstrap_ci
    from debatekit.datasets.voting import answers_equal, majority

    columns = ["config", "k", "items", "accuracy", "low", "high"]
    rows = []
    for run in tables.runs.itertuples():
        if run.protocol != "self_consistency" or tables.rounds.empty:
            continue
        debates = tables.debates[(tables.debates["run_id"] == run.run_id) & tables.debates["status"].isin(("ok", "degraded"))]
        said = tables.rounds[(tables.rounds["run_id"] == run.run_id) & (tables.rounds["round"] == 1)]
        by_debate = {d: g for d, g in said.groupby("debate_id")}
        samples = []
        for d in debates.itertuples():
            group = by_debate.get(d.debate_id)
            if group is None:
                continue
            samples.append((_in_agent_order(group), d.truth))
        most = max((len(s) for s, _ in samples), default=0)
        for k in range(1, most + 1):
            right = [float(answers_equal(majority([a for a in answers[:k] if a is not None and a == a]), truth))
                     for answers, truth in samples]
            mean, low, high = bootstrap_ci(right)
            rows.append({"config": labels[run.run_id], "k": k, "items": len(right), "accuracy": mean, "low": low,
                         "high": high})
    return pd.DataFrame(rows, columns=columns)


def round_dynamics(tables: analysis.Tables, labels: dict[str, str]) -> pd.DataFrame:
    """Per debate run and round: agent and majority accuracy, agreement, flips, agents talked out of a
    right answer (`bullied`)."""
    metrics = analysis.round_metrics(tables)
    if metrics.empty:
        return metrics
    metrics.insert(0, "config", metrics["run_id"].map(labels))
    return metrics[metrics["config"].str.startswith(DEBATE)].drop(columns=["run_id"])


def turning_points(tables: analysis.Tables) -> dict[str, dict[str, Any] | None]:
    """Two debates picked by rule, not by hand: the first item (in item order) whose round-1 majority
    was wrong and final majority right (`fixed`), and the first where it went the other way
    (`broke`); each with who changed what in which round."""
    parts = decompose.decompose(tables)
    if parts.empty:
        return {"fixed": None, "broke": None}
    last = parts[parts["config"].str.startswith("debate@")]["round"].max()
    wide = parts.pivot_table(index=["run_id", "item_id"], columns="config", values="correct", aggfunc="first")
    final = f"debate@{last}"
    picks = {}
    for name, before, after in (("fixed", False, True), ("broke", True, False)):
        hit = wide[(wide["vote@1"] == before) & (wide[final] == after)] if final in wide else wide.iloc[0:0]
        picks[name] = _story(tables, *hit.index[0]) if len(hit) else None
    return picks


def _story(tables: analysis.Tables, run_id: str, item_id: str) -> dict[str, Any]:
    rounds = tables.rounds[(tables.rounds["run_id"] == run_id) & (tables.rounds["item_id"] == item_id)]
    debate = tables.debates[(tables.debates["run_id"] == run_id) & (tables.debates["item_id"] == item_id)].iloc[0]
    changes = [f"round {int(r.round)}: {r.agent} {r.flip.replace('_', ' ')} ({_plain(_was(rounds, r))} -> "
               f"{_plain(r.answer)})"
               for r in rounds.itertuples() if r.changed]
    return {"run_id": run_id, "item_id": item_id, "debate_id": debate["debate_id"], "truth": debate["truth"],
            "answers": {int(k): dict(zip(g["agent"], map(_plain, g["answer"]))) for k, g in rounds.groupby("round")},
            "changes": changes}


def _plain(answer: Any) -> Any:
    """A numeric answer as the model wrote it: 45, not the 45.0 a mixed answer column holds."""
    if isinstance(answer, float) and answer != answer:  # NaN: no answer in a numeric column
        return None
    return int(answer) if isinstance(answer, float) and answer.is_integer() else answer


def _was(rounds: pd.DataFrame, row) -> Any:
    before = rounds[(rounds["agent"] == row.agent) & (rounds["round"] == row.round - 1)]
    return before["answer"].iloc[0] if len(before) else None
