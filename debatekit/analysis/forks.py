"""A fork against its parent: what the intervention did to the final answers, and who followed it.

    effect = forks.fork_effect("runs/fork", "runs/parent", pushed={"q1": 17, "q2": 4})
    effect.accuracy   # final accuracy of the fork against the parent, paired by item; exact McNemar
    effect.follow     # per round from the fork on: how many agents gave the pushed answer, fork and parent
    effect.conformity # per round pair from the fork on: kept, to the majority, away, flips, fork and parent

A fork replays a recorded debate up to a round R, changes one thing there and runs on. Its run.json
names where it came from (`parent: {"run": ..., "at_round": R, "intervention": {"name": ..., "params": {...}}}`) and its debates
pair with the parent's item by item (same item ids and seeds). The second run can be the parent
itself or a control fork that changed nothing at round R: against the parent, the difference is the
intervention together with running the later rounds again (which a sampling temperature makes
differ); against an identity fork, the intervention alone.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from debatekit.analysis.conformity import MOVES, answer_transitions, no_answer, ratio_bootstrap, wilson
from debatekit.analysis.intervals import N_BOOT
from debatekit.analysis.paired import compare
from debatekit.analysis.tables import Tables, load_runs
from debatekit.datasets.voting import answers_equal

FOLLOW_COLUMNS = ["round", "items", "agents", "left_out", "fork_followed", "fork_rate", "fork_low", "fork_high",
                  "control_followed", "control_rate", "control_low", "control_high", "difference", "low", "high"]
MEASURES = ["keep", "to_majority", "away", "right_to_wrong_minority", "right_to_wrong_majority",
            "wrong_to_right_minority", "wrong_to_right_majority"]
"""What `conformity_effect` compares, in its order (`debatekit.analysis.conformity`'s moves and flips)."""
CONFORMITY_COLUMNS = ["from_round", "to_round", "measure", "items", "fork_count", "fork_of", "fork_rate",
                      "control_count", "control_of", "control_rate", "difference", "low", "high"]


@dataclass
class ForkEffect:
    accuracy: pd.DataFrame
    """One `paired.compare` row: the fork (`config`) against the control (`baseline`) on final accuracy."""
    follow: pd.DataFrame | None
    """`follow_rate`, or None when no pushed answer was given."""
    conformity: pd.DataFrame
    """`conformity_effect`: the conformity measures of the fork against the control."""


def fork_parent(run: Tables | Path | str) -> dict | None:
    """The `parent` block of a run's run.json (`run`, `at_round`, `intervention`, ...); None for a run that is
    not a fork. Read from the file as written, so it does not depend on the record's schema version."""
    path = Path(run.runs["path"].iloc[0]) if isinstance(run, Tables) else Path(run)
    block = json.loads((path / "run.json").read_text(encoding="utf-8")).get("parent")
    return block if isinstance(block, dict) else None


def fork_effect(child: Tables | Path | str, control: Tables | Path | str, pushed: Mapping | str | None = None,
                fork_round: int | None = None, agents: Sequence[str] | None = None, n_boot: int = N_BOOT,
                seed: int = 0) -> ForkEffect:
    """A fork's effect: `fork_accuracy`, `conformity_effect`, and `follow_rate` when `pushed` answers
    are given.

    Args:
        child: the fork (a run folder or its `load_runs` tables).
        control: the parent run, or a control fork of it.
        pushed: the answer pushed per item, or "truth" (`follow_rate`); None: accuracy only.
        fork_round: the round the fork changed (`follow_rate`).
        agents: the agents whose answers count (`follow_rate`).
        n_boot: bootstrap resamples.
        seed: the bootstrap's seed.
    """
    child, control = _tables(child), _tables(control)
    follow = None if pushed is None else follow_rate(child, control, pushed, fork_round, agents, n_boot, seed)
    return ForkEffect(fork_accuracy(child, control, n_boot, seed), follow,
                      conformity_effect(child, control, fork_round, n_boot, seed))


def fork_accuracy(child: Tables | Path | str, control: Tables | Path | str, n_boot: int = N_BOOT,
                  seed: int = 0) -> pd.DataFrame:
    """Final accuracy of the fork against the control, paired on item and seed (`paired.compare`).

    A pair where either side has no answer is left out (`left_out`). The difference has a bootstrap
    95% interval over items (exact with one seed) and the exact McNemar test on the discordant pairs;
    `low90`/`high90` are its 90% t-interval.

    Returns:
        One row: config "fork", baseline "control", pairs, accuracy, baseline_accuracy, difference,
        low, high, only_config, only_baseline, p_mcnemar, ... (`paired.COLUMNS`).
    """
    sides = [_tables(child).debates.assign(config="fork"), _tables(control).debates.assign(config="control")]
    return compare(pd.concat(sides, ignore_index=True), baseline="control", by="config", n_boot=n_boot, seed=seed)


def follow_rate(child: Tables | Path | str, control: Tables | Path | str, pushed: Mapping | str,
                fork_round: int | None = None, agents: Sequence[str] | None = None, n_boot: int = N_BOOT,
                seed: int = 0, level: float = 0.95) -> pd.DataFrame:
    """How often the agents give the answer the intervention pushed, from the fork round on, in the
    fork and in the control, agent by agent.

    An agent counts for an item when it is one of `agents` and did not already give the pushed answer
    at round R-1 (the history the fork shares with its parent, read from the control; with R = 1
    every agent counts). At each round t >= R it `followed` when its answer equals the pushed one. The
    two runs are paired agent by agent: an agent counts at round t where it gave an answer there in
    both runs (`agents`), and one that answered in one run only is left out (`left_out`). The rates
    are pooled over those agents, with Wilson intervals (these count the agents as independent, which
    agents that read each other are not: they are narrower than the uncertainty); the difference
    (fork minus control) has a percentile bootstrap interval that resamples items, each with its
    agents and seeds.

    Args:
        child: the fork (a run folder or its tables).
        control: the parent, or a control fork that changed nothing.
        pushed: the answer the intervention pushed, per item id (a planted wrong answer, or the right
            one), or "truth" for each item's correct answer.
        fork_round: R; default the `at_round` of the fork's run.json `parent` block.
        agents: the agents whose answers count; default every agent but those the intervention
            names under `agent` or `agents` in its `params` (the agent it spoke for follows by
            construction).

    Returns:
        One row per round t >= R: round, items, agents, left_out, then for `fork_` and `control_`:
        followed, rate, low, high; and difference, low, high.

    Raises:
        ValueError: no fork round given and the child's run.json names none.
    """
    child, control = _tables(child), _tables(control)
    parent = fork_parent(child) if fork_round is None or agents is None else None
    if fork_round is None:
        if not parent or parent.get("at_round") is None:
            raise ValueError("the child run's run.json names no parent round: pass fork_round")
        fork_round = int(parent["at_round"])
    if agents is None:
        changed = set(_named_agents((parent or {}).get("intervention") or {}))
        agents = [a for a in pd.concat([child.rounds["agent"], control.rounds["agent"]]).unique() if a not in changed]
    pushed = dict(zip(control.debates["item_id"], control.debates["truth"])) if isinstance(pushed, str) \
        and pushed == "truth" else dict(pushed)
    # round R-1 is history both runs share: read from the control, else from the fork
    prior = pd.concat([_answers(control), _answers(child)], ignore_index=True)
    prior = prior[(prior["round"] == fork_round - 1) & ~prior["answer"].map(no_answer).astype(bool)] \
        .drop_duplicates(["item_id", "seed", "agent"])
    prior = dict(zip(zip(prior["item_id"], prior["seed"], prior["agent"]), prior["answer"]))
    sides = [_followed(t, pushed, prior, fork_round, set(agents)) for t in (child, control)]
    keys = ["item_id", "seed", "agent", "round"]
    both = sides[0].merge(sides[1], on=keys, suffixes=("_f", "_c"))  # the agents that answered in both runs
    rows = []
    for r in sorted(both["round"].unique()):
        at = both[both["round"] == r]
        per_item = at.groupby("item_id").agg(sum_f=("followed_f", "sum"), sum_c=("followed_c", "sum"),
                                             count=("followed_f", "size"))
        answered = sum(len(side[side["round"] == r]) for side in sides)
        row: dict[str, Any] = {"round": int(r), "items": len(per_item), "agents": len(at),
                               "left_out": answered - 2 * len(at)}
        for name, tag in (("fork", "_f"), ("control", "_c")):
            followed = int(per_item["sum" + tag].sum())
            low, high = wilson([followed], [len(at)], level)
            row |= {f"{name}_followed": followed, f"{name}_rate": followed / len(at),
                    f"{name}_low": float(low[0]), f"{name}_high": float(high[0])}
        diff = ratio_bootstrap(per_item["sum_f"], per_item["count"], n_boot, seed, level,
                               minus=(per_item["sum_c"], per_item["count"]))
        rows.append(row | dict(zip(("difference", "low", "high"), diff)))
    return pd.DataFrame(rows, columns=FOLLOW_COLUMNS)


def conformity_effect(child: Tables | Path | str, control: Tables | Path | str, fork_round: int | None = None,
                      n_boot: int = N_BOOT, seed: int = 0) -> pd.DataFrame:
    """The conformity measures of `debatekit.analysis.conformity` in the fork and in the control, for
    each round pair that ends at or after the fork round, with their difference: the share of agents
    that kept their answer (`keep`), moved to the previous round's majority (`to_majority`) or
    elsewhere (`away`), and right->wrong and wrong->right among the agents in the minority and in the
    majority (`right_to_wrong_minority`, ..., each over the agents right, or wrong, there). Only the
    items both runs have count; the difference has a percentile bootstrap 95% interval that resamples
    items, each with its agents on both sides.

    Args:
        child: the fork (a run folder or its tables).
        control: the parent, or a control fork that changed nothing.
        fork_round: R, the first round whose answers the fork changed; default the `at_round` of the
            fork's run.json `parent` block, else every round pair.

    Returns:
        One row per round pair and measure: from_round, to_round, measure, items, fork_count, fork_of,
        fork_rate, control_count, control_of, control_rate, difference, low, high (NaN where one run has
        nobody to count).
    """
    child, control = _tables(child), _tables(control)
    if fork_round is None:
        fork_round = int((fork_parent(child) or {}).get("at_round") or 2)
    items = set(child.debates["item_id"]) & set(control.debates["item_id"])
    sides = [_conformity_counts(t.only(items), fork_round) for t in (child, control)]
    keys = ["from_round", "to_round", "measure"]
    both = sides[0].merge(sides[1], on=[*keys, "item_id"], how="outer", suffixes=("_f", "_c")).fillna(0)
    both = both.assign(_order=both["measure"].map(MEASURES.index)).sort_values(["from_round", "to_round", "_order"])
    rows = []
    for values, at in both.groupby(keys, sort=False):
        at = at[(at["of_f"] > 0) | (at["of_c"] > 0)]
        row = dict(zip(keys, values)) | {"items": len(at)}
        for name, tag in (("fork", "_f"), ("control", "_c")):
            count, of = int(at["count" + tag].sum()), int(at["of" + tag].sum())
            row |= {f"{name}_count": count, f"{name}_of": of, f"{name}_rate": count / of if of else float("nan")}
        diff = ratio_bootstrap(at["count_f"], at["of_f"], n_boot, seed, minus=(at["count_c"], at["of_c"]))
        rows.append(row | dict(zip(("difference", "low", "high"), diff)))
    return pd.DataFrame(rows, columns=CONFORMITY_COLUMNS)


def _conformity_counts(tables: Tables, fork_round: int) -> pd.DataFrame:
    """Per round pair ending at or after `fork_round`, measure and item: how many agents did it
    (`count`) of how many could (`of`)."""
    steps = answer_transitions(tables.rounds)
    steps = steps[steps["to_round"] >= fork_round]
    scored = steps["was_correct"].notna() & steps["correct"].notna()
    right_before = scored & steps["was_correct"].fillna(False).astype(bool)
    right_after = steps["correct"].fillna(False).astype(bool)
    parts = [steps.assign(measure=move, count=steps["move"] == move, of=True) for move in MOVES]
    for position in ("minority", "majority"):
        here = steps["position"] == position
        parts += [steps.assign(measure=f"right_to_wrong_{position}", count=here & right_before & ~right_after,
                               of=here & right_before),
                  steps.assign(measure=f"wrong_to_right_{position}", count=here & scored & ~right_before & right_after,
                               of=here & scored & ~right_before)]
    long = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    if long.empty:
        return pd.DataFrame(columns=["from_round", "to_round", "measure", "item_id", "count", "of"])
    return long.astype({"count": int, "of": int}).groupby(["from_round", "to_round", "measure", "item_id"], sort=False,
                                                           as_index=False)[["count", "of"]].sum()


def _followed(tables: Tables, pushed: Mapping, prior: dict, fork_round: int, agents: set) -> pd.DataFrame:
    """One row per eligible agent, item, seed and round t >= R with an answer: `followed` (0 or 1)."""
    said = _answers(tables)
    said = said[(said["round"] >= fork_round) & said["agent"].isin(agents) & said["item_id"].isin(list(pushed))]
    said = said[[not no_answer(a) for a in said["answer"]]]
    target = said["item_id"].map(pushed)
    held = [(i, s, a) in prior and answers_equal(prior[(i, s, a)], p)
            for i, s, a, p in zip(said["item_id"], said["seed"], said["agent"], target)]
    said = said.assign(_target=target)[[not h for h in held]]
    followed = [float(answers_equal(a, p)) for a, p in zip(said["answer"], said["_target"])]
    return said.assign(followed=followed)[["item_id", "seed", "agent", "round", "followed"]]


def _answers(tables: Tables) -> pd.DataFrame:
    """The rounds table with each debate's seed, so that two runs pair on item, seed and agent."""
    seeds = tables.debates[["debate_id", "seed"]].drop_duplicates("debate_id")
    return tables.rounds.drop(columns="seed", errors="ignore").merge(seeds, on="debate_id", how="left")


def _named_agents(intervention: Mapping) -> list[str]:
    """The agents an intervention speaks for: `agent` or `agents` among its parameters."""
    params = intervention.get("params") or {}
    named = params.get("agents", params.get("agent"))
    return [named] if isinstance(named, str) else list(named or [])


def _tables(run: Tables | Path | str) -> Tables:
    return run if isinstance(run, Tables) else load_runs([run])
