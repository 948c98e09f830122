"""Scoring arbitration against `metric_reports` truth: detection, resolution accuracy, flag rate.

Truth entries name a pair of agents in report order, so `agent1_correct` / `use_agent1` refer
to the first agent of `agents` (positional, like the seed's Contradiction); `correct_agent`
names the right agent by id. A truth entry is matched to the detected contradiction of the
same pair of agents whose metric names are closest to the truth's canonical key; it counts as
resolved correctly when the arbitrator's resolution picks the same agent (or says both_valid /
neither_valid as expected), and its action correctly when the final action (after the
no-hallucination and consensus checks) is the expected one.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from debatekit.protocols.arbitration.consensus import Action, Arbitration, Resolution
from debatekit.protocols.arbitration.contradictions import Contradiction, metric_key, metric_match


class TruthEntry(BaseModel):
    """One expected contradiction of a `metric_reports` item."""

    model_config = ConfigDict(extra="forbid")

    metric: str
    agents: list[str]
    kind: Literal["value", "source", "interpretation", "confidence"]
    expected_resolution: Resolution
    expected_value: float | None = None
    expected_action: Action
    correct_agent: str | None = None


def _words(text: str) -> set[str]:
    return set(metric_key(text).words)


def _similarity(truth: TruthEntry, c: Contradiction) -> float:
    want = _words(truth.metric)
    have = _words(c.agent1_finding.metric) | _words(c.agent2_finding.metric)
    return len(want & have) / len(want | have) if want | have else 0.0


def match_truth(truth: list[TruthEntry], found: list[Contradiction]) -> list[int | None]:
    """For each truth entry, the index of its detected contradiction (same pair, closest metric) or None."""
    scored = []
    for t, entry in enumerate(truth):
        for i, c in enumerate(found):
            if {c.agent1_name, c.agent2_name} == set(entry.agents):
                scored.append((-_similarity(entry, c), t, i))
    result: list[int | None] = [None] * len(truth)
    used = set()
    for score, t, i in sorted(scored):
        if score < 0 and result[t] is None and i not in used:
            result[t], _ = i, used.add(i)
    return result


def _picked(resolution_or_action: str | None, c: Contradiction) -> str | None:
    """The agent id a positional resolution/action names (agent1_correct, use_agent2), else the label."""
    if resolution_or_action in ("agent1_correct", "use_agent1"):
        return c.agent1_name
    if resolution_or_action in ("agent2_correct", "use_agent2"):
        return c.agent2_name
    return resolution_or_action


def _expected(label: str, entry: TruthEntry) -> str:
    if label in ("agent1_correct", "use_agent1"):
        return entry.agents[0]
    if label in ("agent2_correct", "use_agent2"):
        return entry.agents[1]
    return label


def score_resolutions(truth: list[TruthEntry], found: list[Contradiction], verdicts: list[Arbitration]) -> dict:
    """Detection precision/recall, resolution and action accuracy, flag rates, and one row per truth entry."""
    matches = match_truth(truth, found)
    rows, right, acted = [], 0, 0
    for entry, i in zip(truth, matches):
        row = {"metric": entry.metric, "agents": entry.agents, "kind": entry.kind,
               "expected_resolution": entry.expected_resolution, "expected_action": entry.expected_action,
               "correct_agent": entry.correct_agent, "contradiction": None, "resolution": None, "action": None,
               "resolution_correct": False, "action_correct": False}
        if i is not None:
            c, v = found[i], verdicts[i]
            row.update(contradiction=c.id, detected_kind=c.kind, resolution=v.resolution, action=v.action,
                       flag_reason=v.flag_reason,
                       resolution_correct=_picked(v.resolution, c) == _expected(entry.expected_resolution, entry),
                       action_correct=_picked(v.action, c) == _expected(entry.expected_action, entry))
        right += row["resolution_correct"]
        acted += row["action_correct"]
        rows.append(row)
    matched = sum(i is not None for i in matches)
    flagged = sum(v.flagged for v in verdicts)
    ratio = lambda a, b: round(a / b, 4) if b else None  # noqa: E731
    return {
        "truth": len(truth), "detected": len(found), "matched": matched,
        "detection_precision": ratio(matched, len(found)), "detection_recall": ratio(matched, len(truth)),
        "resolution_accuracy": ratio(right, len(truth)), "action_accuracy": ratio(acted, len(truth)),
        "flagged": flagged, "flag_rate": ratio(flagged, len(found)),
        "truth_flag_rate": ratio(sum(t.expected_action == "flag_for_review" for t in truth), len(truth)),
        "entries": rows,
    }


def score_values(truth: list[TruthEntry], adjusted_reports: list[dict], tolerance: float = 0.01) -> dict:
    """Analyst mode: for each truth metric with an expected value, does an adjusted, unflagged finding hold it?"""
    wanted = {}
    for entry in truth:
        if entry.expected_value is not None:
            wanted.setdefault(entry.metric, entry.expected_value)
    rows = []
    for metric, value in wanted.items():
        key = metric_key(metric)
        held = [f["value"] for r in adjusted_reports for f in r["findings"]
                if f.get("debate", {}).get("status") != "flagged_for_review"
                and metric_match(key, metric_key(f["metric"], f.get("unit", ""))) is not None]
        ok = bool(held) and all(abs(h - value) <= tolerance * max(abs(value), 1e-9) for h in held)
        rows.append({"metric": metric, "expected_value": value, "values": held, "correct": ok})
    return {"value_accuracy": round(sum(r["correct"] for r in rows) / len(rows), 4) if rows else None,
            "values": rows}



def run_report(path) -> str:
    """Pooled over a run's items: detection precision/recall, resolution and action accuracy, flags."""
    from debatekit.records.trace import RunFolder

    scores = [d.output["score"] for d in RunFolder(path).debates()
              if d.answered and "resolution_accuracy" in (d.output.get("score") or {})]
    entries = [e for s in scores for e in s["entries"]]
    if not scores:
        return ""
    total = lambda key: sum(s[key] for s in scores)  # noqa: E731
    ratio = lambda a, b: f"{a / b:.2f} ({a}/{b})" if b else "n/a"  # noqa: E731
    right = sum(e["resolution_correct"] for e in entries)
    acted = sum(e["action_correct"] for e in entries)
    return (f"{len(scores)} items, {total('truth')} true contradictions, {total('detected')} detected\n"
            f"detection precision {ratio(total('matched'), total('detected'))}, "
            f"recall {ratio(total('matched'), total('truth'))}\n"
            f"resolution accuracy {ratio(right, len(entries))}, action accuracy {ratio(acted, len(entries))}, "
            f"flagged for review {ratio(total('flagged'), total('detected'))}")
