"""Run folders -> tidy pandas tables, and the metrics computed from them (pure pandas).

    tables = load_runs(["runs/a", "runs/b"])
    tables.debates          # one row per debate
    tables.rounds           # one row per debate x round x agent (answers, flips, reliance)
    tables.turns            # one row per model call (events.jsonl)
    round_metrics(tables)   # per run and round: accuracy per agent and majority, agreement, flips
    seed_accuracy(tables)   # per run and seed: accuracy over answered debates, failed debates

Curves over the rounds and tables of configurations live beside it in `debatekit.analysis.rounds`
and `.configs`; paired comparisons, the decomposition of a debate and study planning in
`debatekit.analysis.paired`, `.decompose` and `.power`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import pandas as pd

from debatekit.analysis.intervals import nested_bootstrap_ci
from debatekit.datasets.voting import agreement_rate, answers_equal, majority
from debatekit.records.schemas import ANSWERED, DebateRecord, cut_offs


@dataclass
class Tables:
    runs: pd.DataFrame
    debates: pd.DataFrame
    rounds: pd.DataFrame
    turns: pd.DataFrame

    def only(self, items: Iterable) -> "Tables":
        """The same tables restricted to the debates of `items` (item ids), rounds and calls included,
        so that runs compared against each other pair the same debates."""
        items = set(items)
        debates = self.debates[self.debates["item_id"].isin(items)]
        keep = set(debates["debate_id"])
        rounds = self.rounds[self.rounds["debate_id"].isin(keep)] if not self.rounds.empty else self.rounds
        turns = self.turns[self.turns["debate_id"].isin(keep)] if "debate_id" in self.turns else self.turns
        return Tables(self.runs, debates, rounds, turns)


def summarize(debates: Iterable[DebateRecord]) -> dict:
    """Run summary: accuracy with a bootstrap 95% interval (over items, then seeds), dynamics, cost.

    Debates without an answer because calls failed (`error`) or the protocol raised (`failed`)
    are counted in `failed` and left out of accuracy; `degraded` ones are scored and counted.
    """
    debates = list(debates)
    scored = [d for d in debates if d.answered and (d.truth is not None or d.correct is not None)]
    acc, low, high = nested_bootstrap_ci(_by_item(scored, lambda d: float(bool(d.correct)))) if scored \
        else (None,) * 3
    total = {key: _total([getattr(d.usage, key) for d in debates]) for key in
             ("calls", "provider_calls", "prompt_tokens", "completion_tokens", "cost", "cache_hits",
              "parse_failures", "cut_off", "cut_off_unread", "echoes", "looped", "retries", "timeouts", "errors")}
    stops = dict(Counter(d.stopped or "none" for d in debates))
    return {
        "items": len({d.item_id for d in debates}),
        "debates": len(debates),
        "ok": sum(d.status == "ok" for d in debates),
        "degraded": sum(d.status == "degraded" for d in debates),
        "failed": sum(not d.answered for d in debates),
        "first_error": next((d.error for d in debates if not d.answered and d.error), None),
        "seeds": len({d.seed for d in debates}) if debates else 0,
        "accuracy": acc, "accuracy_ci": [low, high],
        "accuracy_by_seed": _accuracy_by_seed(scored),
        **_score_summary(debates),
        "mean_rounds": (sum(len(d.rounds) for d in debates) / len(debates)) if debates else None,
        "converged": sum(bool(d.converged) for d in debates),
        "needs_human_review": sum(d.needs_human_review for d in debates),
        "escalated_to": _escalations(debates),
        "stop_reasons": stops,
        **total,
        "wall_s_sum": round(sum(d.wall_s for d in debates), 2),
    }


def _total(counts: list):
    """The sum of a count over debates; None if a debate did not count it (a record written before)."""
    return None if any(c is None for c in counts) else sum(counts)


def _by_item(debates: list[DebateRecord], value) -> list[list[float]]:
    """`value(d)` grouped by item (one group per item, one value per seed), for nested intervals."""
    groups: dict[str, list[float]] = {}
    for d in debates:
        groups.setdefault(d.item_id, []).append(value(d))
    return list(groups.values())


def _accuracy_by_seed(scored: list[DebateRecord]) -> dict[str, float]:
    seeds = sorted({d.seed for d in scored}, key=lambda s: (s is None, s))
    return {str(s): sum(bool(d.correct) for d in scored if d.seed == s) / sum(d.seed == s for d in scored)
            for s in seeds}


def _escalations(debates: list[DebateRecord]) -> dict[str, int]:
    """Escalated debates by target, e.g. {"council": 2, "human": 1}."""
    targets = [d.escalated_to for d in debates if d.escalated_to]
    return {t: targets.count(t) for t in sorted(set(targets))}


def _score_summary(debates: list[DebateRecord]) -> dict:
    """Mean protocol score (judge score, resolution accuracy, F1...) with a bootstrap 95% interval."""
    scored = [d for d in debates if d.answered and d.score is not None]
    mean, low, high = nested_bootstrap_ci(_by_item(scored, lambda d: d.score)) if scored else (None,) * 3
    return {"score": mean, "score_ci": [low, high]}


def load_runs(paths: Iterable[Path | str] | Path | str) -> Tables:
    """Load run folders into tables (several runs concatenate; `run_id` tells them apart); one
    folder may be given alone."""
    from debatekit.records.trace import RunFolder

    if isinstance(paths, (str, Path)):  # a string would otherwise be read as folders of one letter each
        paths = [paths]

    runs, debates, rounds, turns = [], [], [], []
    for path in paths:
        folder = RunFolder(path)
        record = folder.read_run()
        run_row = {"run_id": record.run_id, "path": str(folder.path), "protocol": record.config.protocol,
                   "dataset": record.dataset.name, "dataset_sha256": record.dataset.sha256, "model": record.model, "config_hash": record.config_hash,
                   "seed": record.config.seed, "status": record.status, "created": record.created,
                   "finished": record.finished, "commits": _commits(record),
                   **_cut_off_work(record),
                   **{f"param_{k}": v for k, v in record.config.params.items()},
                   **{k: v for k, v in record.summary.items() if not isinstance(v, (dict, list))}}
        runs.append(run_row)
        for d in folder.debates():
            debates.append(_debate_row(d, run_row))
            rounds.extend(_round_rows(d))
        turns.extend(folder.events())
    calls = _turns_frame(turns)
    return Tables(pd.DataFrame(runs), pd.DataFrame(debates), _with_models(pd.DataFrame(rounds), calls), calls)


def _cut_off_work(record) -> dict:
    """The model work of the debates stops cut off (dropped from the events by each resume), summed."""
    works = [r["cut_off_work"] for r in record.resumes if isinstance(r.get("cut_off_work"), dict)]
    return {f"cut_off_{key}": sum(w.get(key) or 0 for w in works) for key in ("calls", "tokens", "busy_s")}


def _commits(record) -> str:
    """The commits that wrote the run, in order (the one that began it, then each resume's), short."""
    seen = [record.git_commit] + [r.get("git_commit") for r in record.resumes]
    return " ".join(dict.fromkeys((c or "unknown")[:7] for c in seen))


def _with_models(rounds: pd.DataFrame, calls: pd.DataFrame) -> pd.DataFrame:
    """Each agent's model in each round, from its calls, so a mixed-model debate splits by model."""
    if rounds.empty or calls.empty or not {"debate_id", "round", "agent", "model"} <= set(calls):
        return rounds
    used = calls.groupby(["debate_id", "round", "agent"])["model"].last().reset_index()
    return rounds.merge(used, on=["debate_id", "round", "agent"], how="left")


def _debate_row(d: DebateRecord, run: dict) -> dict:
    return {"run_id": d.run_id, "protocol": d.protocol, "model": run["model"], "config_hash": run["config_hash"],
            "item_id": d.item_id, "seed": d.seed_under(run["seed"]), "debate_id": d.debate_id,
            "status": d.status, "error": d.error,
            "final_answer": d.final_answer, "truth": d.truth, "correct": d.correct, "score": d.score,
            "stop_reason": d.stopped, "converged": d.converged, "rounds_used": len(d.rounds),
            "needs_human_review": d.needs_human_review, "wall_s": d.wall_s, **d.usage.model_dump()}


def rounds_table(debates: Iterable[DebateRecord]) -> pd.DataFrame:
    """`Tables.rounds` of some debates without reading their run's calls (so without the `model` column)."""
    return pd.DataFrame([row for d in debates for row in _round_rows(d)])


def _round_rows(d: DebateRecord) -> list[dict]:
    """Per agent and round: answer, correctness, change, reliance on others, bullying, flips."""
    rows, previous = [], {}
    for r in d.rounds:
        answers = r.answers
        top = majority(answers.values())
        agree = agreement_rate(list(answers.values()))
        for agent, answer in answers.items():
            before = previous.get(agent)
            others_before = [a for other, a in previous.items() if other != agent and a is not None]
            correct = None if d.truth is None or answer is None else answers_equal(answer, d.truth)
            was_correct = None if d.truth is None or before is None else answers_equal(before, d.truth)
            changed = before is not None and answer is not None and not answers_equal(answer, before)
            relied = changed and any(answers_equal(answer, o) for o in others_before)
            rows.append({
                "run_id": d.run_id, "item_id": d.item_id, "debate_id": d.debate_id, "status": d.status,
                "round": r.round,
                "agent": agent, "answer": answer, "correct": correct,
                "majority": top, "majority_correct": None if d.truth is None or top is None
                else answers_equal(top, d.truth),
                "agreement": agree, "changed": changed, "relied": relied,
                "bullied": bool(relied and was_correct and correct is False),
                "flip": _flip(was_correct, correct) if changed else "unchanged",
                # kept or took a reply by an update rule (society_of_mind conformist, follower): no call
                "adopted": agent in ((r.extra or {}).get("adopted") or {}),
            })
        previous = {agent: a for agent, a in answers.items()}
    return rows


def _flip(before: bool | None, after: bool | None) -> str:
    if before is None or after is None:
        return "unknown"
    if before and not after:
        return "right_to_wrong"
    if after and not before:
        return "wrong_to_right"
    return "changed"


def _turns_frame(events: list[dict]) -> pd.DataFrame:
    frame = pd.DataFrame(events)
    if not frame.empty:
        frame["tokens"] = frame["prompt_tokens"] + frame["completion_tokens"]
        # replies cut off at the token limit, read or not (NaN where an event recorded before cannot say),
        # and those of them whose reading failed; whether the answer read was an echo (NaN: not checked)
        frame["cut_off"] = pd.array([cut_offs(e) for e in events], dtype="Int64").astype("float")
        frame["cut_off_unread"] = [(e.get("faults") or []).count("cut_off") for e in events]
        frame["echo"] = [float(e["echo"]) if "echo" in e else float("nan") for e in events]
    return frame


def round_metrics(tables: Tables) -> pd.DataFrame:
    """Per run and round: agent and majority accuracy, agreement, changes, flips, parse failures, replies
    cut off at the token limit (`cut_off`; `cut_off_unread` those that could not be read) and the share of
    calls whose answer was an echo of the prompt (`echo_rate`; NaN for calls recorded before it was checked)."""
    r = tables.rounds
    if r.empty:
        return pd.DataFrame()
    per_agent = r.groupby(["run_id", "round"]).agg(
        agent_accuracy=("correct", "mean"), agreement=("agreement", "mean"), changed=("changed", "sum"),
        relied=("relied", "sum"), bullied=("bullied", "sum"),
        right_to_wrong=("flip", lambda s: int((s == "right_to_wrong").sum())),
        wrong_to_right=("flip", lambda s: int((s == "wrong_to_right").sum())))
    per_debate = r.drop_duplicates(["run_id", "debate_id", "round"])
    majority_acc = per_debate.groupby(["run_id", "round"])["majority_correct"].mean().rename("majority_accuracy")
    debates = per_debate.groupby(["run_id", "round"])["debate_id"].nunique().rename("debates")
    out = per_agent.join(majority_acc).join(debates)
    t = tables.turns
    if not t.empty and "round" in t:
        by_round = t.groupby(["run_id", "round"])
        known = by_round["cut_off"].agg(lambda s: s.sum() if s.notna().all() else float("nan"))  # one unknown: unknown
        out = out.join(by_round["parse_failures"].sum()).join(known) \
            .join(by_round["cut_off_unread"].sum()).join(by_round["echo"].mean().rename("echo_rate"))
    for column in ("parse_failures", "cut_off", "cut_off_unread", "echo_rate"):  # no calls recorded: unknown
        if column not in out:
            out[column] = float("nan")
    return out.reset_index()


def seed_accuracy(tables: Tables) -> pd.DataFrame:
    """Accuracy per run and seed over the answered debates, with the debates that failed per seed.

    Returns:
        Columns: run_id, protocol, seed, accuracy, scored, failed.
    """
    d = tables.debates
    if d.empty:
        return pd.DataFrame(columns=["run_id", "protocol", "seed", "accuracy", "scored", "failed"])
    answered = d["status"].isin(ANSWERED)
    frame = d.assign(_c=as_float(d["correct"]).where(answered), _failed=~answered)
    out = frame.groupby(["run_id", "protocol", "seed"]).agg(
        accuracy=("_c", "mean"), scored=("_c", "count"), failed=("_failed", "sum"))
    return out.reset_index()


def agent_accuracy(tables: Tables) -> pd.DataFrame:
    """Accuracy per run, round and agent."""
    r = tables.rounds
    return r.groupby(["run_id", "round", "agent"])["correct"].mean().rename("accuracy").reset_index()


def as_float(series: pd.Series) -> pd.Series:
    """Booleans with missing values as floats (True 1.0, False 0.0, missing NaN)."""
    return series.astype("object").where(series.notna(), None).astype(float)
