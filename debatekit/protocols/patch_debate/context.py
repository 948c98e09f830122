"""The Debate Review Context (seed 002, 4): what Stage 2 learns from the debate.

`build_review_context` returns the full JSON (written to the trace); `prompt_view` is the
short form the Stage-2 reviewers read (the local model reads ~60 tokens/s).
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any, Iterable

from debatekit.protocols.patch_debate.mapping import SYNONYMS, Hint, MappingStats, MappingThresholds, map_ref, warnings
from debatekit.protocols.patch_debate.types import AspectTuple, ProposedEdit, normalize_term

REVIEW_GUIDANCE = ("Use the debate as evidence, not as a verdict: keep a Stage-1 tuple unless the sentence "
                   "supports the change. Aspect hints with higher weight carry more agreement.")
FALLBACK_POLICY = ("An edit whose aspect_ref does not match a Stage-1 term exactly is mapped through synonyms "
                   "or term containment (fallback) and counted as fallback_used; unmatched edits are ignored.")


def build_review_context(summary: dict | None, turns: Iterable[dict], stage1: list[AspectTuple],
                         hints: dict[str, list[Hint]], stats: MappingStats,
                         thresholds: MappingThresholds = MappingThresholds()) -> dict[str, Any]:
    """The review context from the judge's summary, the speakers' turns and the mapping.

    Args:
        summary: the judge's DebateSummary as a dict (None if the judge failed).
        turns: `{agent, round, proposed_edits}` per speaker turn.
        stage1: the Stage-1 tuples (the mapping's reference terms).
        hints, stats: from `mapping.build_hints`.
    """
    terms = [t.term for t in stage1]
    points = []
    for turn in turns:
        edits = [ProposedEdit.model_validate(e) for e in turn["proposed_edits"]]
        mapped = [m for e in edits if (m := map_ref(e.target.aspect_ref, terms)[0])]
        signs = Counter(h for e in edits if (h := _sign(e)))
        weights = [e.confidence for e in edits if e.confidence is not None]
        points.append({
            "speaker": turn["agent"], "round": turn.get("round"),
            "proposed_edits": [e.model_dump(exclude_none=True) for e in edits],
            "aspect_terms": sorted(set(mapped)),
            "weight": round(sum(weights) / len(weights), 3) if weights else None,
            "polarity_hint": signs.most_common(1)[0][0] if signs else None,
            "provenance_hint": "proposed_edits",
        })
    return {
        "summary": summary,
        "rebuttal_points": points,
        "aspect_terms": terms,
        "synonym_hints": {t: synonyms(t) for t in terms if synonyms(t)},
        "aspect_hints": {a: [h.model_dump() for h in hs] for a, hs in hints.items()},
        "mapping_stats": {**stats.model_dump(exclude={"fail_reasons"}), **stats.metrics()},
        "mapping_fail_reasons": dict(stats.fail_reasons),
        "mapping_warnings": warnings(stats, thresholds),
        "review_guidance": REVIEW_GUIDANCE,
        "fallback_mapping_policy": FALLBACK_POLICY,
    }


def prompt_view(context: dict[str, Any] | None) -> str:
    """A compact JSON of the context for the reviewers: judge's tuples and label, hint scores."""
    if not context:
        return "{}"
    summary = context.get("summary") or {}
    scores = {}
    for aspect, hs in context.get("aspect_hints", {}).items():
        votes = Counter()
        for h in hs:
            if h["polarity_hint"]:
                votes[h["polarity_hint"]] += h["weight"]
        scores[aspect] = {k: round(v, 2) for k, v in votes.items()}
    view = {"judge_tuples": summary.get("final_tuples", []),
            "judge_sentence_polarity": summary.get("sentence_polarity"),
            "unresolved": summary.get("unresolved_conflicts", []),
            "aspect_votes": scores,
            "synonyms": {t: s[:4] for t, s in context.get("synonym_hints", {}).items()}}
    return json.dumps(view, ensure_ascii=False, separators=(",", ":"))


def synonyms(term: str) -> list[str]:
    """Other words of the term's synonym group (empty if it has none)."""
    key = normalize_term(term)
    for group in SYNONYMS:
        if key in {normalize_term(s) for s in group}:
            return sorted(s for s in group if normalize_term(s) != key)
    return []


def _sign(edit: ProposedEdit) -> str | None:
    if edit.op == "set_polarity":
        return edit.value or edit.target.polarity
    if edit.op == "confirm_tuple":
        return edit.target.polarity
    return None
