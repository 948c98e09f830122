"""Scores of aspect tuples and sentence labels per stage, and their aggregation per run.

A predicted tuple is a true positive when an unmatched gold tuple has the same normalized
term (case, punctuation and a leading article ignored) and the same polarity; matching is
one to one. Aggregation is micro (summed tp/fp/fn over items) and also reports macro F1.

    from debatekit.protocols.patch_debate.scoring import stage_table
    stage_table(["runs/a"])   # one row per run and stage: precision, recall, f1, sentence_accuracy
    debate_kpis(["runs/a"])   # one row per run: mapping metrics, override counters, warnings
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

import pandas as pd
from pydantic import BaseModel

from debatekit.protocols.patch_debate.mapping import MappingStats, MappingThresholds, merge, warnings
from debatekit.protocols.patch_debate.override import OUTCOMES
from debatekit.protocols.patch_debate.types import normalize_term

STAGES = ("stage1", "debate", "final")


def tuple_scores(predicted: Iterable[Any], gold: Iterable[Any]) -> dict[str, float | int]:
    """tp, fp, fn, precision, recall, f1 of predicted (term, polarity) tuples against gold ones."""
    left = [_key(g) for g in gold]
    tp = 0
    predicted = [_key(p) for p in predicted]
    for key in predicted:
        if key in left:
            left.remove(key)
            tp += 1
    fp, fn = len(predicted) - tp, len(left)
    return {"tp": tp, "fp": fp, "fn": fn, **_prf(tp, fp, fn)}


def stage_scores(predicted: Iterable[Any], label: str | None, gold: Iterable[Any], gold_label: str) -> dict:
    """Tuple scores plus the stage's sentence label and whether it is right."""
    return {**tuple_scores(predicted, gold), "sentence_label": label, "sentence_correct": label == gold_label}


def stage_rows(debates: Iterable[Any]) -> pd.DataFrame:
    """One row per debate and stage from DebateRecords (or dicts) whose output has `metrics`."""
    rows = []
    for d in debates:
        d = d.model_dump() if isinstance(d, BaseModel) else d
        metrics = (d.get("output") or {}).get("metrics") or {}
        for stage in STAGES:
            if stage in metrics:
                rows.append({"run_id": d["run_id"], "item_id": d["item_id"], "lang": d["output"].get("lang"),
                             "stage": stage, **metrics[stage]})
    return pd.DataFrame(rows)


def aggregate(rows: pd.DataFrame, by: Iterable[str] = ("run_id", "stage")) -> pd.DataFrame:
    """Micro precision/recall/F1, macro F1 and sentence accuracy per group of `stage_rows`."""
    by = list(by)
    if rows.empty:
        return pd.DataFrame(columns=[*by, "items", "precision", "recall", "f1", "macro_f1", "sentence_accuracy"])
    g = rows.groupby(by, sort=False)
    out = g.agg(items=("item_id", "nunique"), tp=("tp", "sum"), fp=("fp", "sum"), fn=("fn", "sum"),
                macro_f1=("f1", "mean"), sentence_accuracy=("sentence_correct", "mean")).reset_index()
    prf = out.apply(lambda r: pd.Series(_prf(int(r.tp), int(r.fp), int(r.fn))), axis=1)
    out = pd.concat([out, prf], axis=1)
    if "stage" in by:  # stages in pipeline order
        out["stage"] = pd.Categorical(out["stage"], STAGES, ordered=True)
        out = out.sort_values([c for c in by if c != "stage"] + ["stage"]).reset_index(drop=True)
    return out[[*by, "items", "tp", "fp", "fn", "precision", "recall", "f1", "macro_f1", "sentence_accuracy"]]


def stage_table(paths: Iterable[Path | str], by: Iterable[str] = ("run_id", "stage")) -> pd.DataFrame:
    """`aggregate` over the debates of run folders (failed debates have no metrics and are left out)."""
    from debatekit.records.trace import RunFolder

    debates = [d for p in paths for d in RunFolder(p).debates()]
    return aggregate(stage_rows(debates), by)


def stage_report(path: Path | str) -> str:
    """Tuple P/R/F1 and sentence accuracy after Stage 1, after the debate and after the moderator."""
    table = stage_table([path])
    if table.empty:
        return ""
    lines = ["tuples and sentence label by stage (micro over items)",
             "stage   items  precision  recall  f1     sentence acc"]
    lines += [f"{r.stage:<6}  {r.items:<5}  {r.precision:<9.2f}  {r.recall:<6.2f}  {r.f1:<5.2f}  {r.sentence_accuracy:.2f}"
              for r in table.itertuples()]
    return "\n".join(lines)


def debate_kpis(paths: Iterable[Path | str], thresholds: MappingThresholds = MappingThresholds()) -> pd.DataFrame:
    """Per run: mapping metrics over all items' edits, override counters, and the mapping warnings."""
    from debatekit.records.trace import RunFolder

    rows = []
    for path in paths:
        debates = [d for d in RunFolder(path).debates() if d.answered]
        stats = merge(MappingStats.model_validate(d.output["mapping"]) for d in debates if d.output.get("mapping"))
        over = {k: sum(d.output.get("override", {}).get(k) or 0 for d in debates) for k in
                (f"debate_override_{o}" for o in OUTCOMES)}
        decided = sum(over.values())
        over["debate_override_skipped_already_confident_rate"] = (
            over["debate_override_skipped_already_confident"] / decided if decided else None)
        rows.append({"run_id": debates[0].run_id if debates else None, "items": len(debates), **stats.metrics(),
                     **over, "warnings": warnings(stats, thresholds)})
    return pd.DataFrame(rows)


def _key(t: Any) -> tuple[str, str]:
    get = t.get if isinstance(t, dict) else (lambda k, default=None: getattr(t, k, default))
    return normalize_term(get("term") or ""), str(get("polarity") or "").lower()


def _prf(tp: int, fp: int, fn: int) -> dict[str, float]:
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    if tp + fp + fn == 0:  # nothing predicted and nothing to find: perfect
        p = r = 1.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return {"precision": round(p, 6), "recall": round(r, 6), "f1": round(f, 6)}
