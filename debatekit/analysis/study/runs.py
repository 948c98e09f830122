"""The study's runs: a sweep folder loaded and labelled, each configuration's arms (the debate run's
vote@1 and debate@t among them), what each cost, and the model work each run took."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from debatekit import analysis
from debatekit.analysis import decompose, paired as pairing
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
