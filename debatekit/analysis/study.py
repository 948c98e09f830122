"""The study of a sweep: one agent, majority vote and debate on the same items, at what cost.

`notebooks/study.ipynb` calls these over a sweep folder (`debatekit sweep ... --grid
results/studies/NAME/grid.yaml --out results/studies/NAME`); each is a pure function of the
loaded tables, so a test can check it on a scripted sweep.

    tables, labels = study.load("results/studies/gsm8k")
    study.paired(tables, labels, "single")      # every configuration against single (and self_consistency)
    study.decomposition(tables)                # vote@1 - single, debate@t - vote@1 inside the debate run
    study.costs(tables, labels)                # accuracy against calls, completion tokens, wall time; Pareto
    study.rules_out(paired_rows)               # the smallest difference each comparison could detect
    study.turning_points(tables)               # a debate that fixed a wrong vote, one that broke a right one
    study.conclusion(...)                      # the report's last paragraph, written from the numbers
    study.provenance(tables, labels)           # per run: status, items, when, the commits that wrote it,
                                               # and the model work it took (calls, tokens, busy hours)
    sweep.plan.registered("results/studies/gsm8k")  # the grid's `primary` comparison, or None (sweep layer)
    study.primary(tables, labels, registered)  # that comparison alone: difference, 95% and 90% intervals, TOST
    study.holm({"against single": rows, ...})  # Holm-adjusted p over the report's exploratory comparisons
    study.ties(tables, labels)                 # each vote's tied items and its accuracy under any tie-break

The report's statistics: every paired difference has a 95% bootstrap interval over items
(`intervals.N_BOOT` resamples, so its second decimal does not move with the seed) and the exact
McNemar test; what a null rules out is its 90% interval against the study's equivalence margin
(TOST, `paired.equivalence`); the p-values of the exploratory comparisons are Holm-adjusted over
the family the report tests (statsmodels' `multipletests`), while the registered primary comparison
is tested alone, at 0.05, before them. `rules_out` (the power of the exact test at the discordance
seen) is a planning tool: how many items a next study needs, not what this one ruled out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from debatekit import analysis
from debatekit.analysis import decompose, paired as pairing, power
from debatekit.records.trace import RunFolder, run_folders
from debatekit.records.work import busy_seconds

DEBATE = "society_of_mind"


def load(sweep_dir: Path | str) -> tuple[analysis.Tables, dict[str, str]]:
    """The runs of a sweep folder (each point's run folder) as tables, with a label per run id."""
    folders = run_folders(sweep_dir)
    records = [RunFolder(f).read_run() for f in folders]
    return analysis.load_runs(folders), pairing.run_labels(records)


def provenance(tables: analysis.Tables, labels: dict[str, str]) -> pd.DataFrame:
    """One row per run: its label, status, items, model, when it began and finished, and the commits
    of the code that wrote it (the one that began it, then each `--resume`'s), so that a study run
    over several sessions says which code made which part, and the model work it took (`compute`)."""
    runs = tables.runs.assign(config=tables.runs["run_id"].map(labels)).merge(compute(tables), on="run_id", how="left",
                                                                            validate="many_to_one")
    columns = ["config", "status", "items", "model", "created", "finished", "commits", *COMPUTE]
    return runs.reindex(columns=columns).sort_values("config", kind="stable").reset_index(drop=True)


COMPUTE = ["calls_made", "tokens_generated", "busy_h"]
CUT_OFF = ["cut_off_calls", "cut_off_tokens", "cut_off_busy_s"]
"""Columns of `load_runs(...).runs`: the work of the debates stops cut off, summed over the run's resumes."""


def compute(tables: analysis.Tables) -> pd.DataFrame:
    """Per run, the model work it took over all its sessions, from its call events: `calls_made`
    (provider calls, repairs and retries included, none served from the response cache),
    `tokens_generated` (their completion tokens) and `busy_h`, the hours in which at least one of
    its calls was in flight, each from its start (waiting for a slot included) to its reply: the
    union of the calls' spans, so calls side by side count once and the gaps between sessions not
    at all. The calls of debates a stop cut off count too: a resume drops their events and records
    their work (`records.work.work_of`), and their replay from the cache is a cache hit. A run replayed from the
    cache adds nothing. Summed over runs that ran side by side,
    `busy_h` counts their overlap twice (`busy_seconds` over all their spans does not). A call the
    engine gave up on at its time limit is recorded without its attempts or time, so it adds none."""
    calls = tables.turns
    needed = {"run_id", "cache_hit", "ts", "latency_s", "calls", "completion_tokens"}
    if calls.empty or not needed <= set(calls):
        return pd.DataFrame(columns=["run_id", *COMPUTE])
    made = calls[~calls["cache_hit"].eq(True)]
    cut = tables.runs.drop_duplicates("run_id").set_index("run_id").reindex(columns=CUT_OFF).fillna(0)
    rows = []
    for run_id in tables.runs["run_id"].unique():
        mine = made[made["run_id"] == run_id]
        timed = mine.dropna(subset=["ts", "latency_s"])
        dropped = cut.loc[run_id]
        rows.append({"run_id": run_id, "calls_made": int(mine["calls"].sum() + dropped["cut_off_calls"]),
                     "tokens_generated": int(mine["completion_tokens"].sum() + dropped["cut_off_tokens"]),
                     "busy_h": (busy_seconds(zip(timed["ts"] - timed["latency_s"], timed["ts"]))
                                + dropped["cut_off_busy_s"]) / 3600})
    return pd.DataFrame(rows, columns=["run_id", *COMPUTE])


def labelled(tables: analysis.Tables, labels: dict[str, str]) -> pd.DataFrame:
    """The debates table with each run's label in `config`."""
    return tables.debates.assign(config=tables.debates["run_id"].map(labels))


def arms(tables: analysis.Tables, labels: dict[str, str]) -> pd.DataFrame:
    """One row per configuration, item and seed: correct, status, completion tokens; the debate run's
    vote@1 and debate@t are configurations of their own (`X vote@1`, `X debate@t`)."""
    frame = labelled(tables, labels)[["config", "item_id", "seed", "correct", "status", "completion_tokens"]]
    parts = decompose.decompose(tables)
    if not parts.empty:
        extra = parts[parts["config"] != "single"].assign(config=lambda f: f["config"].map(lambda c: f"{DEBATE} {c}"))
        frame = pd.concat([frame, extra[frame.columns]], ignore_index=True)
    return frame


def primary_pairs(tables: analysis.Tables, labels: dict[str, str], registration: dict) -> pd.DataFrame:
    """The items both sides of the registered comparison answered: item_id, and whether `config` and
    `against` got each right (bools), in the order the debates were recorded.

    Raises:
        ValueError: a configuration the study does not have.
    """
    frame = arms(tables, labels)
    config, against = _resolved(registration, frame, tables, labels)
    answered = frame[frame["status"].isin(("ok", "degraded"))]
    sides = {name: answered[answered["config"] == label].drop_duplicates("item_id", keep="last")
             .set_index("item_id")["correct"].eq(True) for name, label in (("config", config), ("against", against))}
    both = sides["config"].index.intersection(sides["against"].index, sort=False)
    return pd.DataFrame({"item_id": list(both), "config": sides["config"].loc[both].to_numpy(),
                         "against": sides["against"].loc[both].to_numpy()})


def paired(tables: analysis.Tables, labels: dict[str, str], baseline: str,
           margin: float = pairing.EQUIVALENCE_MARGIN) -> pd.DataFrame:
    """Every configuration against `baseline` on the items both answered (`paired.compare` rows),
    with the decomposition's vote@1 and debate@t added as configurations when a debate run is there."""
    frame = arms(tables, labels)
    if baseline not in set(frame["config"]):
        return pd.DataFrame(columns=pairing.COLUMNS)
    return pairing.compare(frame, baseline=baseline, by="config", margin=margin)


def decomposition(tables: analysis.Tables) -> pd.DataFrame:
    """vote@1 - single, debate@t - vote@1 and debate@t - single inside the debate run(s)."""
    return decompose.decomposition(tables)


def costs(tables: analysis.Tables, labels: dict[str, str]) -> pd.DataFrame:
    """One row per configuration: accuracy [95% interval], calls, completion tokens and wall seconds
    per item, and whether it is on the Pareto front of completion tokens against accuracy."""
    frame = labelled(tables, labels)
    table = analysis.config_table(frame, ["config"])
    parts = decompose.decompose(tables)
    if not parts.empty:
        agents = tables.runs.set_index("run_id").get("param_agents", pd.Series(dtype=float))
        inner = parts[parts["config"] != "single"].assign(
            config=lambda f: f"{DEBATE} " + f["config"],
            calls=lambda f: f["round"] * f["run_id"].map(agents).fillna(3).astype(float),
            prompt_tokens=float("nan"), cost=0.0, wall_s=float("nan"))
        table = pd.concat([table, analysis.config_table(inner, ["config"])], ignore_index=True)
    table = table.rename(columns={"config": "label"})
    for row in shared_samples(tables, labels).itertuples():  # a vote that reused a debate's round 1 paid for it there
        table.loc[table["label"] == row.config, "completion_tokens"] += row.shared_tokens_per_item
    table["pareto"] = analysis.pareto_front(table, "completion_tokens", "accuracy")
    return table


def shared_samples(tables: analysis.Tables, labels: dict[str, str]) -> pd.DataFrame:
    """The vote runs that reused a debate's round-1 answers as their first samples
    (`self_consistency(reuse=...)`): which run, how many samples, and the completion tokens per item
    those shared calls cost (in the debate run's events; `costs` adds them to the vote's)."""
    columns = ["config", "shared_from", "shared_samples", "shared_tokens_per_item"]
    rows = []
    for run in tables.runs.itertuples():
        if run.protocol != "self_consistency":
            continue
        shared = [d.output.get("shared") for d in RunFolder(run.path).debates() if isinstance(d.output.get("shared"), dict)]
        if shared:
            rows.append({"config": labels[run.run_id], "shared_from": shared[0].get("from"),
                         "shared_samples": shared[0].get("samples"),
                         "shared_tokens_per_item": sum(s.get("completion_tokens") or 0 for s in shared) / len(shared)})
    return pd.DataFrame(rows, columns=columns)


def rules_out(rows: pd.DataFrame, power_wanted: float = 0.8) -> pd.DataFrame:
    """For each paired comparison, its discordance and the smallest accuracy difference the exact test
    has `power_wanted` to detect at alpha 0.05 at that discordance (`power.detectable_difference`),
    and the items a study needs for 5 points. A planning tool for the next study, from this one's
    discordance as a pilot's: conditioned on the discordance observed, it is no statement of what
    this study ruled out (that is the 90% interval against the margin: `equivalence`)."""
    out = []
    for r in rows.itertuples():
        discordant = r.only_config + r.only_baseline
        rate = discordant / r.pairs if r.pairs else 0.0
        found = power.detectable_difference(int(r.pairs), rate, power_wanted) if rate > 0 else None
        out.append({"config": r.config, "baseline": r.baseline, "pairs": r.pairs, "discordance": rate,
                    "difference": r.difference, "p_mcnemar": r.p_mcnemar, "detectable": found,
                    "items_for_5_points": power.items_needed(0.05, max(rate, 0.05), power_wanted)})
    return pd.DataFrame(out)


def equivalence(rows: pd.DataFrame) -> pd.DataFrame:
    """What each comparison rules out: its 90% interval against the equivalence margin (TOST): `verdict`
    is "equivalent" (the interval lies inside +-margin), "different" (the 95% interval excludes zero)
    or "undecided" (neither: the interval reaches past the margin)."""
    if not len(rows):
        return pd.DataFrame(columns=["config", "baseline", "pairs", "difference", "low90", "high90", "margin",
                                     "p_tost", "verdict"])
    verdict = ["different" if (r.low > 0 or r.high < 0) else "equivalent" if r.p_tost < ALPHA else "undecided"
               for r in rows.itertuples()]
    return rows[["config", "baseline", "pairs", "difference", "low90", "high90", "margin", "p_tost"]].assign(
        verdict=verdict).reset_index(drop=True)


def margin_of(registration: dict | None) -> float:
    """The equivalence margin the study states: its primary comparison's, else `paired.EQUIVALENCE_MARGIN`."""
    return (registration or {}).get("margin") or pairing.EQUIVALENCE_MARGIN


def resolve(name: str, available: list[str], last_rounds: dict[str, int] | None = None) -> str:
    """The report's label for a configuration named in a grid: itself, or `X@t` as the debate run's
    `X debate@t` (its own label `X` when t is its last round, `last_rounds[X]`) and `X@vote` as `X vote@1`.

    Raises:
        ValueError: no such configuration, naming the ones there are.
    """
    base, _, stage = name.partition("@")
    wanted = [name] if not stage else [f"{base} vote@1"] if stage == "vote" else [f"{base} debate@{stage}", base]
    found = next((w for w in wanted if w in available), None)
    if found == base and stage and stage != "vote" and str((last_rounds or {}).get(base)) != stage:
        found = None  # `X@5` of a run whose last round is not 5
    if found is None:
        raise ValueError(f"the study has no configuration {name!r}; it has {', '.join(available)}")
    return found


def _resolved(registration: dict, frame: pd.DataFrame, tables: analysis.Tables, labels: dict[str, str]) -> tuple[str, str]:
    """The report labels of the registered `config` and `against` among the configurations of `arms`;
    `X debate@t` of a run's last round is the run `X` itself (as `distinct` shows it)."""
    last_rounds = _last_rounds(tables, labels)
    shown = [c for c in dict.fromkeys(frame["config"])
             if not (" debate@" in c and str(last_rounds.get(c.split(" debate@")[0])) == c.rsplit("@", 1)[1])]
    return tuple(resolve(registration[k], shown, last_rounds) for k in ("config", "against"))


def _last_rounds(tables: analysis.Tables, labels: dict[str, str]) -> dict[str, int]:
    """Each run's last round, by its label."""
    last = tables.rounds.groupby("run_id")["round"].max() if not tables.rounds.empty else pd.Series(dtype=int)
    return {labels[run]: int(top) for run, top in last.items() if run in labels}


def _in_agent_order(said: pd.DataFrame) -> list:
    """The answers of one round, agent1 .. agent9 then agent10 (sample1 .. sample10): shorter names first."""
    return [answer for _, answer in sorted(zip(said["agent"], said["answer"]), key=lambda pair: (len(pair[0]), pair[0]))]


def primary(tables: analysis.Tables, labels: dict[str, str], registration: dict | None) -> pd.DataFrame:
    """The registered comparison alone (a `paired` row, with its 90% interval and TOST at the study's
    margin), empty when the grid registers none.

    Raises:
        ValueError: a configuration the study does not have.
    """
    if not registration:
        return pd.DataFrame(columns=pairing.COLUMNS)
    margin = margin_of(registration)
    config, against = _resolved(registration, arms(tables, labels), tables, labels)
    rows = distinct(paired(tables, labels, against, margin))  # `X@3`, the run's last round, is the run `X`
    return rows[rows["config"] == config].reset_index(drop=True)


def holm(families: dict[str, pd.DataFrame], exclude: tuple[str, str] | None = None) -> dict[str, pd.DataFrame]:
    """Each table with `p_holm`: its McNemar p adjusted by Holm's method (statsmodels) over the family of
    every distinct comparison in all the tables (a pair met twice, either way round, counts once), but
    `exclude` (the registered primary comparison, tested alone: its `p_holm` is NaN)."""
    from statsmodels.stats.multitest import multipletests

    def key(config: str, baseline: str) -> frozenset:
        return frozenset((config, baseline))

    skip = key(*exclude) if exclude else None
    pvalues: dict[frozenset, float] = {}
    for rows in families.values():
        for r in rows.itertuples():
            if key(r.config, r.baseline) != skip and pd.notna(r.p_mcnemar):
                pvalues.setdefault(key(r.config, r.baseline), float(r.p_mcnemar))
    adjusted = dict(zip(pvalues, multipletests(list(pvalues.values()), method="holm")[1])) if pvalues else {}
    return {name: rows.assign(p_holm=[adjusted.get(key(r.config, r.baseline), float("nan"))
                                      for r in rows.itertuples()]) for name, rows in families.items()}


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


ALPHA = 0.05


def conclusion(against_single: pd.DataFrame, inner: pd.DataFrame, dataset: str, agreement: float | None,
               against_reference: pd.DataFrame | None = None, primary_row: pd.DataFrame | None = None) -> str:
    """The study's conclusion in plain sentences, every number taken from the tables passed in.

    `primary_row` (`primary`: the comparison the grid registers) comes first, tested alone at
    `ALPHA`. `against_reference` (`paired` against self-consistency, the vote at the debate's budget)
    adds the equal-cost question: each configuration but one agent against it, with both budgets as
    measured (completion tokens per item on the shared items).

    An exploratory difference separates only where its bootstrap interval excludes zero *and* the
    exact McNemar test rejects at `ALPHA` after Holm's adjustment (`p_holm`, where the tables carry
    it; the raw p otherwise); where only the interval excludes zero, the sentence says so. A
    comparison that does not separate says what its 90% interval rules out against the margin.
    """
    def say(row) -> str:
        holm = getattr(row, "p_holm", float("nan"))
        adjusted = f", Holm p = {holm:.2g}" if pd.notna(holm) else ""
        return (f"{row.difference:+.2f} [{row.low:+.2f}, {row.high:+.2f}], McNemar p = {row.p_mcnemar:.2g}{adjusted}, "
                f"{row.pairs} items")

    def verdict(row, up: str, down: str, neither: str, what: str) -> str:
        side = up if row.low > 0 else down if row.high < 0 else None
        if side is None:
            return f"{neither} {what}"
        return f"{side} {what}" + ("" if _separates(row) else " by its interval only, not by the exact test")

    lines = []
    registered_pairs = set()
    for r in (primary_row if primary_row is not None else pd.DataFrame()).itertuples():
        registered_pairs.add((r.config, r.baseline))
        v = verdict(r, "above", "below", "not separable from", r.baseline)
        lines.append(f"- Primary comparison (registered in the grid, tested alone): {r.config} is {v} "
                     f"({r.difference:+.2f} [{r.low:+.2f}, {r.high:+.2f}], McNemar p = {r.p_mcnemar:.2g}, "
                     f"{r.pairs} items); {_equivalence(r)}.")
    for r in distinct(against_single).itertuples():
        lines.append(f"- {r.config}: {verdict(r, 'above', 'below', 'not separable from', 'one agent')} ({say(r)}).")
    for r in inner.itertuples():
        if r.baseline == "vote@1":
            v = verdict(r, "adds to", "takes from", "does not separate from", "the round-1 majority vote")
            lines.append(f"- Inside the debate run, {r.config} {v} ({say(r)}).")
    for r in distinct(against_reference if against_reference is not None else pd.DataFrame()).itertuples():
        if r.config == "single" or not r.pairs > 0 or (r.config, r.baseline) in registered_pairs:
            continue  # one agent is no equal-cost rival; the primary comparison was said first
        v = verdict(r, "above", "below", "not separable from", r.baseline)
        lines.append(f"- Against {r.baseline}{_tokens(r.baseline_completion_tokens, ' per item')}, {r.config}"
                     f"{_cost_share(r)} is {v} ({say(r)}).")
    lines += _what_nulls_rule_out(against_single)
    if agreement is not None:
        lines.append(f"- The three agents gave the same round-1 answer on {agreement:.0%} of items: there the vote is "
                     f"one agent repeated.")
    return f"On {dataset}:\n" + "\n".join(lines)


def distinct(rows: pd.DataFrame) -> pd.DataFrame:
    """`paired` rows less a `X debate@t` row that repeats its run's own row `X`: the run's answer is
    its last round's majority, so its debate@<last round> says the same."""
    if not len(rows):
        return rows
    same = ["difference", "low", "high", "pairs", "only_config", "only_baseline", "completion_tokens"]
    keyed = {r.config: tuple(getattr(r, c, None) for c in same) for r in rows.itertuples()}
    repeats = [" debate@" in r.config and keyed.get(r.config.split(" debate@")[0]) == keyed[r.config]
               for r in rows.itertuples()]
    return rows[[not repeat for repeat in repeats]]


def _tokens(value, unit: str = "") -> str:
    """` (N completion tokens<unit>)`, or nothing where the count is unknown or zero (a provider that reports no usage)."""
    return f" ({value:,.0f} completion tokens{unit})" if pd.notna(value) and value > 0 else ""


def _cost_share(row) -> str:
    """The configuration's completion tokens per item against the baseline's: equal cost within 10%
    (the budget the study sets self-consistency to), else the share."""
    mine, theirs = row.completion_tokens, row.baseline_completion_tokens
    if not (pd.notna(mine) and pd.notna(theirs) and theirs > 0):
        return ""
    share = mine / theirs
    said = "the same cost within 10%" if abs(share - 1) <= 0.10 else f"{share:.0%} of its cost"
    return f" ({mine:,.0f}, {said})"


def _separates(row) -> bool:
    """The interval excludes zero and the exact test rejects (after Holm's adjustment where the row has it)."""
    holm = getattr(row, "p_holm", float("nan"))
    return (row.low > 0 or row.high < 0) and (holm if pd.notna(holm) else row.p_mcnemar) < ALPHA


def _equivalence(row) -> str:
    """What a comparison's 90% interval says against its margin (TOST)."""
    if not pd.notna(getattr(row, "low90", float("nan"))):
        return "no interval to test equivalence on"
    where = f"90% interval [{row.low90:+.2f}, {row.high90:+.2f}]"
    if row.p_tost < ALPHA:
        return f"{where}: equivalent within +-{row.margin:.2f} (TOST p = {row.p_tost:.2g})"
    return f"{where}: not shown equivalent within +-{row.margin:.2f} (TOST p = {row.p_tost:.2g})"


def _what_nulls_rule_out(against_single: pd.DataFrame) -> list[str]:
    """How many comparisons with one agent did not separate, and what the 90% interval of each whose
    95% interval holds zero rules out against the margin (TOST)."""
    rows = list(distinct(against_single).itertuples())
    nulls = [r for r in rows if not _separates(r)]
    if not nulls:
        return []
    line = (f"- None of the {len(rows)} comparisons with one agent separates." if len(nulls) == len(rows)
            else f"- {len(nulls)} of {len(rows)} comparisons with one agent do not separate.")
    flat = [r for r in nulls if r.low <= 0 <= r.high]  # the interval-only ones are not nulls to bound
    if flat:
        line += " What each rules out: " + "; ".join(f"{r.config}, {_equivalence(r)}" for r in flat) + "."
    return [line]
