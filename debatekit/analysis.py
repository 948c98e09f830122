"""Run folders -> tidy pandas tables, and the metrics computed from them (pure pandas).

    tables = load_runs(["runs/a", "runs/b"])
    tables.debates          # one row per debate
    tables.rounds           # one row per debate x round x agent (answers, flips, reliance)
    tables.turns            # one row per model call (events.jsonl)
    round_metrics(tables)   # per run and round: accuracy per agent and majority, agreement, flips
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import pandas as pd

from debatekit.metrics import agreement_rate, answers_equal, bootstrap_ci, majority
from debatekit.schemas import DebateRecord


@dataclass
class Tables:
    runs: pd.DataFrame
    debates: pd.DataFrame
    rounds: pd.DataFrame
    turns: pd.DataFrame


def summarize(debates: Iterable[DebateRecord]) -> dict:
    """Run summary: accuracy with a bootstrap 95% interval, dynamics, cost. Failed items count as wrong."""
    debates = list(debates)
    scored = [d for d in debates if d.truth is not None or d.correct is not None]
    acc, low, high = bootstrap_ci([float(bool(d.correct)) for d in scored]) if scored else (None,) * 3
    total = {key: sum(getattr(d.usage, key) for d in debates) for key in
             ("calls", "provider_calls", "prompt_tokens", "completion_tokens", "cost", "cache_hits",
              "parse_failures", "retries", "timeouts", "errors")}
    stops: dict[str, int] = {}
    for d in debates:
        stops[d.stop_reason or "none"] = stops.get(d.stop_reason or "none", 0) + 1
    return {
        "items": len(debates),
        "ok": sum(d.status == "ok" for d in debates),
        "failed": sum(d.status == "failed" for d in debates),
        "accuracy": acc, "accuracy_ci": [low, high],
        "mean_rounds": (sum(len(d.rounds) for d in debates) / len(debates)) if debates else None,
        "converged": sum(bool(d.converged) for d in debates),
        "needs_human_review": sum(d.needs_human_review for d in debates),
        "stop_reasons": stops,
        **total,
        "wall_s_sum": round(sum(d.wall_s for d in debates), 2),
    }


def load_runs(paths: Iterable[Path | str]) -> Tables:
    """Load run folders into tables (several runs concatenate; `run_id` tells them apart)."""
    from debatekit.trace import RunFolder

    runs, debates, rounds, turns = [], [], [], []
    for path in paths:
        folder = RunFolder(path)
        record = folder.read_run()
        run_row = {"run_id": record.run_id, "path": str(folder.path), "protocol": record.config.protocol,
                   "dataset": record.dataset.name, "model": record.model, "config_hash": record.config_hash,
                   "seed": record.config.seed, "status": record.status, "created": record.created,
                   **{f"param_{k}": v for k, v in record.config.params.items()},
                   **{k: v for k, v in record.summary.items() if not isinstance(v, (dict, list))}}
        runs.append(run_row)
        for d in folder.debates():
            debates.append(_debate_row(d, run_row))
            rounds.extend(_round_rows(d))
        turns.extend(folder.events())
    return Tables(pd.DataFrame(runs), pd.DataFrame(debates), pd.DataFrame(rounds), _turns_frame(turns))


def _debate_row(d: DebateRecord, run: dict) -> dict:
    return {"run_id": d.run_id, "protocol": d.protocol, "model": run["model"], "config_hash": run["config_hash"],
            "item_id": d.item_id, "debate_id": d.debate_id, "status": d.status, "error": d.error,
            "final_answer": d.final_answer, "truth": d.truth, "correct": d.correct, "score": d.score,
            "stop_reason": d.stop_reason, "converged": d.converged, "rounds_used": len(d.rounds),
            "needs_human_review": d.needs_human_review, "wall_s": d.wall_s, **d.usage.model_dump()}


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
                "run_id": d.run_id, "item_id": d.item_id, "debate_id": d.debate_id, "round": r.round,
                "agent": agent, "answer": answer, "correct": correct,
                "majority": top, "majority_correct": None if d.truth is None or top is None
                else answers_equal(top, d.truth),
                "agreement": agree, "changed": changed, "relied": relied,
                "bullied": bool(relied and was_correct and correct is False),
                "flip": _flip(was_correct, correct) if changed else "unchanged",
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
    return frame


def round_metrics(tables: Tables) -> pd.DataFrame:
    """Per run and round: agent and majority accuracy, agreement, changes, flips, parse failures."""
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
        parse = t.groupby(["run_id", "round"])["parse_failures"].sum().rename("parse_failures")
        out = out.join(parse)
    return out.reset_index()


def agent_accuracy(tables: Tables) -> pd.DataFrame:
    """Accuracy per run, round and agent."""
    r = tables.rounds
    return r.groupby(["run_id", "round", "agent"])["correct"].mean().rename("accuracy").reset_index()
