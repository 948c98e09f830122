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

from debatekit.analysis.conformity import (answer_transitions, flips_by_position, no_answer, ratio_bootstrap,
                                           switch_rates, wilson)
from debatekit.analysis.intervals import N_BOOT
from debatekit.analysis.paired import compare, mcnemar_exact
from debatekit.analysis.tables import Tables, load_runs
from debatekit.datasets.voting import answers_equal

FOLLOW_COLUMNS = ["round", "items", "agents", "left_out", "fork_followed", "fork_rate", "fork_low", "fork_high",
                  "control_followed", "control_rate", "control_low", "control_high", "difference", "low", "high",
                  "only_fork", "only_control", "p_exact"]
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
    not a fork (or tables with no run folder). Read from the file as written, so it does not depend on the
    record's schema version."""
    path = Path(run.runs["path"].iloc[0]) if isinstance(run, Tables) else Path(run)
    if not (path / "run.json").is_file():  # tables built in memory, not read from a folder
        return None
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
        pushed: the answer pushed per item, or "truth" (`follow_rate`); None: no follow table.
        fork_round: the round the fork changed (`follow_rate`, `conformity_effect`).
        agents: the agents whose answers count (`follow_rate`, `conformity_effect`).
        n_boot: bootstrap resamples.
        seed: the bootstrap's seed.
    """
    child, control = _tables(child), _tables(control)
    follow = None if pushed is None else follow_rate(child, control, pushed, fork_round, agents, n_boot, seed)
    return ForkEffect(fork_accuracy(child, control, n_boot, seed), follow,
                      conformity_effect(child, control, fork_round, agents, n_boot, seed))


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
    fork and in the control, agent by agent (`followers`).

    The two runs are paired agent by agent: an agent counts at round t where it gave an answer there in
    both runs (`agents`); one that answered in one run only is left out (`left_out`). The rates are
    pooled over those agents, with Wilson intervals (these count the agents as independent, which
    agents that read each other are not: they are narrower than the uncertainty); the difference
    (fork minus control) has a percentile bootstrap interval that resamples items, each with its
    agents and seeds, and the agents that followed in one run only (`only_fork`, `only_control`) have
    the exact McNemar test (`p_exact`, again as if the agents were independent).

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
        followed, rate, low, high; difference, low, high; only_fork, only_control, p_exact.

    Raises:
        ValueError: no fork round given and the child's run.json names none.
    """
    said = followers(child, control, pushed, fork_round, agents)
    both = said.dropna(subset=["fork", "control"])
    rows = []
    for r in sorted(both["round"].unique()):
        at = both[both["round"] == r]
        per_item = at.groupby("item_id").agg(sum_f=("fork", "sum"), sum_c=("control", "sum"), count=("fork", "size"))
        row: dict[str, Any] = {"round": int(r), "items": len(per_item), "agents": len(at),
                               "left_out": int(said[said["round"] == r][["fork", "control"]].isna().sum().sum())}
        for name in ("fork", "control"):
            followed = int(at[name].sum())
            low, high = wilson([followed], [len(at)], level)
            row |= {f"{name}_followed": followed, f"{name}_rate": followed / len(at),
                    f"{name}_low": float(low[0]), f"{name}_high": float(high[0])}
        diff = ratio_bootstrap(per_item["sum_f"], per_item["count"], n_boot, seed, level,
                               minus=(per_item["sum_c"], per_item["count"]))
        only_fork, only_control = int((at["fork"] > at["control"]).sum()), int((at["fork"] < at["control"]).sum())
        rows.append(row | dict(zip(("difference", "low", "high"), diff))
                    | {"only_fork": only_fork, "only_control": only_control,
                       "p_exact": mcnemar_exact(only_fork, only_control)})
    return pd.DataFrame(rows, columns=FOLLOW_COLUMNS)


def followers(child: Tables | Path | str, control: Tables | Path | str, pushed: Mapping | str,
              fork_round: int | None = None, agents: Sequence[str] | None = None) -> pd.DataFrame:
    """The agents `follow_rate` counts, one row each per item, seed and round t >= R, with whether it
    gave the pushed answer in the fork and in the control.

    An agent counts for an item when it is one of `agents` and did not already give the pushed answer
    at round R-1 (the history the fork shares with its parent, read from the control; with R = 1
    every agent counts; a missing answer is not the pushed one). At each round t >= R it followed
    (1.0) when its answer equals the pushed one, else not (0.0); NaN where it gave no answer in that
    run. Arguments as `follow_rate`.

    Returns:
        item_id, seed, agent, round, fork, control.
    """
    child, control = _tables(child), _tables(control)
    fork_round, agents = _fork_round_and_agents(child, control, fork_round, agents)
    pushed = dict(zip(control.debates["item_id"], control.debates["truth"])) if isinstance(pushed, str) \
        and pushed == "truth" else dict(pushed)
    # round R-1 is history both runs share: read from the control, else from the fork
    prior = pd.concat([_answers(control), _answers(child)], ignore_index=True)
    prior = prior[(prior["round"] == fork_round - 1) & ~prior["answer"].map(no_answer).astype(bool)] \
        .drop_duplicates(["item_id", "seed", "agent"])
    prior = dict(zip(zip(prior["item_id"], prior["seed"], prior["agent"]), prior["answer"]))
    keys = ["item_id", "seed", "agent", "round"]
    sides = [_followed(t, pushed, prior, fork_round, set(agents)).rename(columns={"followed": name})
             for t, name in ((child, "fork"), (control, "control"))]
    return sides[0].merge(sides[1], on=keys, how="outer").sort_values(keys, ignore_index=True)


def conformity_effect(child: Tables | Path | str, control: Tables | Path | str, fork_round: int | None = None,
                      agents: Sequence[str] | None = None, n_boot: int = N_BOOT, seed: int = 0) -> pd.DataFrame:
    """The conformity measures of `debatekit.analysis.conformity` in the fork and in the control, for
    each round pair that ends at or after the fork round, with their difference: the share of agents
    that kept their answer (`keep`), moved to the previous round's majority (`to_majority`) or
    elsewhere (`away`), and right->wrong and wrong->right among the agents in the minority and in the
    majority (`right_to_wrong_minority`, ..., each over the agents right, or wrong, there).

    Only `agents` count (default, as `follow_rate`: all but those the intervention speaks for), and
    only the transitions both runs have (the same agent of the same debate answered in both rounds
    in both runs). The difference has a percentile bootstrap 95% interval that resamples items, each
    with its agents on both sides; a measure with few agents to count may have none (a resample that
    draws none of them has no rate). Two cautions. Past the fork round, an agent's position and
    correctness at t-1 are themselves outcomes of the intervention, so a flip rate compares different
    groups of agents: a description, not an effect. And the majority at R-1 is read from the recorded
    answers: where the intervention changed what the agents were shown at R (`replace`), the R-1 -> R
    measures are taken against a majority they did not read.

    Args:
        child: the fork (a run folder or its tables).
        control: the parent, or a control fork that changed nothing.
        fork_round: R; default the `at_round` of the fork's run.json `parent` block, else 2.
        agents: the agents whose transitions count.

    Returns:
        One row per round pair and measure (`MEASURES`): from_round, to_round, measure, items,
        fork_count, fork_of, fork_rate, control_count, control_of, control_rate, difference, low, high
        (NaN where one run has nobody to count).
    """
    child, control = _tables(child), _tables(control)
    fork_round, agents = _fork_round_and_agents(child, control, fork_round, agents, default_round=2)
    keys = ["item_id", "seed", "agent", "to_round"]
    steps = [answer_transitions(_answers(t)) for t in (child, control)]
    steps = [s[(s["to_round"] >= fork_round) & s["agent"].isin(agents)] for s in steps]
    shared = steps[0][keys].merge(steps[1][keys], on=keys)  # the same transition in both runs
    counts = [_conformity_counts(s.merge(shared, on=keys)) for s in steps]
    measure = ["from_round", "to_round", "measure"]
    both = counts[0].merge(counts[1], on=[*measure, "item_id"], how="outer", suffixes=("_f", "_c")).fillna(0)
    both = both.assign(_order=both["measure"].map(MEASURES.index)).sort_values(["from_round", "to_round", "_order"])
    rows = []
    for values, at in both.groupby(measure, sort=False):
        at = at[(at["of_f"] > 0) | (at["of_c"] > 0)]
        row = dict(zip(measure, values)) | {"items": len(at)}
        for name, tag in (("fork", "_f"), ("control", "_c")):
            count, of = int(at["count" + tag].sum()), int(at["of" + tag].sum())
            row |= {f"{name}_count": count, f"{name}_of": of, f"{name}_rate": count / of if of else float("nan")}
        diff = ratio_bootstrap(at["count_f"], at["of_f"], n_boot, seed, minus=(at["count_c"], at["of_c"]))
        rows.append(row | dict(zip(("difference", "low", "high"), diff)))
    return pd.DataFrame(rows, columns=CONFORMITY_COLUMNS)


def _conformity_counts(steps: pd.DataFrame) -> pd.DataFrame:
    """Per round pair, measure and item: how many agents did it (`count`) of how many could (`of`),
    from `switch_rates` and `flips_by_position` by item."""
    keys = ["from_round", "to_round", "measure", "item_id", "count", "of"]
    if steps.empty:
        return pd.DataFrame(columns=keys)
    moves = switch_rates(steps, by=["item_id"]).rename(columns={"move": "measure", "transitions": "of"})
    flips = flips_by_position(steps, by=["item_id"])
    flips = flips[flips["position"].isin(["minority", "majority"])]
    flips = flips.assign(measure=flips["flip"] + "_" + flips["position"]).rename(columns={"at_risk": "of"})
    return pd.concat([moves[keys], flips[keys]], ignore_index=True)


def _fork_round_and_agents(child: Tables, control: Tables, fork_round: int | None, agents: Sequence[str] | None,
                           default_round: int | None = None) -> tuple[int, list[str]]:
    """The fork round (given, else the child's run.json `at_round`, else `default_round`) and the agents
    that count (given, else all but those the intervention speaks for)."""
    parent = fork_parent(child) if fork_round is None or agents is None else None
    if fork_round is None:
        if parent and parent.get("at_round") is not None:
            fork_round = int(parent["at_round"])
        elif default_round is not None:
            fork_round = default_round
        else:
            raise ValueError("the child run's run.json names no parent round: pass fork_round")
    if agents is None:
        changed = set(_named_agents((parent or {}).get("intervention") or {}))
        agents = [a for a in pd.concat([child.rounds["agent"], control.rounds["agent"]]).unique() if a not in changed]
    return fork_round, list(agents)


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
