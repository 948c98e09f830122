"""Stage-2 corrections applied to the tuples in the seed's order (seed 002, 5), before the override.

1. validator correction_proposals: FLIP_POLARITY, DROP_ASPECT, REVISE_SPAN
2. ATE aspect_review: revise_span, drop, add
3. ATSA sentiment_review: maintain, flip_polarity, drop, add

Each action is translated into a patch edit (`patching.apply_patch`, same rejection rules)
except `add`, which adds a tuple only for a term found in the sentence and not present yet.
Every action leaves one log line `step: action term -> applied|rejected (reason)`.
"""

from __future__ import annotations

from typing import Any, Iterable

from debatekit.protocols.patch_debate.patching import apply_patch
from debatekit.protocols.patch_debate.types import POLARITIES, AspectTuple, locate, normalize_term

FLIP = {"positive": "negative", "negative": "positive"}


def apply_reviews(base: Iterable[AspectTuple], text: str, *, corrections: Iterable[dict] = (),
                  aspect_review: Iterable[dict] = (), sentiment_review: Iterable[dict] = ()
                  ) -> tuple[list[AspectTuple], list[str]]:
    """Apply the three reviews in order to a copy of `base`; returns the tuples and the log."""
    tuples, log = [t.model_copy() for t in base], []
    steps = [("validator", corrections, _validator_edit), ("ate_review", aspect_review, _ate_edit),
             ("atsa_review", sentiment_review, _atsa_edit)]
    for step, actions, translate in steps:
        edits, shown, adds = [], [], []
        for action in actions:
            action = dict(action)
            kind = str(action.get("type") or action.get("action") or "")
            if kind == "add":
                adds.append(action)
                continue
            edits.append(translate(kind, action, tuples))
            shown.append(f"{step}: {kind} {action.get('aspect_ref')!r}")
        result = apply_patch(tuples, edits, text=text, source=step)
        tuples = result.tuples
        for entry, line in zip(result.log, shown):
            log.append(f"{line} -> {entry.status}" + (f" ({entry.reason})" if entry.reason else ""))
        for action in adds:
            tuples, line = _add(tuples, action, text, step)
            log.append(line)
    return tuples, log


def _validator_edit(kind: str, a: dict, tuples: list[AspectTuple]) -> dict:
    ref, value = str(a.get("aspect_ref") or ""), a.get("value")
    if kind == "FLIP_POLARITY":
        if str(value or "").lower() not in POLARITIES:  # no new polarity given: flip the sign
            current = next((t.polarity for t in tuples if normalize_term(t.term) == normalize_term(ref)), "")
            value = FLIP.get(current, value)
        return {"op": "set_polarity", "target": {"aspect_ref": ref}, "value": value}
    if kind == "DROP_ASPECT":
        return {"op": "drop_tuple", "target": {"aspect_ref": ref}}
    if kind == "REVISE_SPAN":
        return {"op": "set_aspect_ref", "target": {"aspect_ref": ref}, "value": value}
    return {"op": kind, "target": {"aspect_ref": ref}}


def _ate_edit(kind: str, a: dict, tuples: list[AspectTuple]) -> dict:
    ref = str(a.get("aspect_ref") or "")
    op = {"revise_span": "set_aspect_ref", "drop": "drop_tuple"}.get(kind, kind)
    return {"op": op, "target": {"aspect_ref": ref}, "value": a.get("value")}


def _atsa_edit(kind: str, a: dict, tuples: list[AspectTuple]) -> dict:
    ref, polarity, conf = str(a.get("aspect_ref") or ""), a.get("polarity"), a.get("confidence")
    if kind == "maintain":  # keeps the polarity, records the reviewer's confidence
        polarity = next((t.polarity for t in tuples if normalize_term(t.term) == normalize_term(ref)), polarity)
        return {"op": "set_polarity", "target": {"aspect_ref": ref}, "value": polarity, "confidence": conf}
    if kind == "flip_polarity":
        return {"op": "set_polarity", "target": {"aspect_ref": ref}, "value": polarity, "confidence": conf}
    if kind == "drop":
        return {"op": "drop_tuple", "target": {"aspect_ref": ref}}
    return {"op": kind, "target": {"aspect_ref": ref}}


def _add(tuples: list[AspectTuple], a: dict, text: str, step: str) -> tuple[list[AspectTuple], str]:
    term = str(a.get("aspect_ref") or a.get("value") or "").strip()
    polarity = str(a.get("polarity") or "neutral").lower()
    span = locate(term, text)
    line = f"{step}: add {term!r}"
    if span is None:
        return tuples, f"{line} -> rejected (not_in_sentence)"
    if any(normalize_term(t.term) == normalize_term(term) for t in tuples):
        return tuples, f"{line} -> rejected (already_present)"
    if polarity not in POLARITIES:
        return tuples, f"{line} -> rejected (invalid_value)"
    conf = a.get("confidence")
    added = AspectTuple(term=text[span[0]:span[1]], polarity=polarity, span=span, source=step,
                        confidence=0.5 if conf is None else float(conf))
    return [*tuples, added], f"{line} -> applied"


def as_dicts(items: Iterable[Any]) -> list[dict]:
    """Pydantic objects or dicts as dicts (reviews arrive as parsed model objects)."""
    return [i.model_dump() if hasattr(i, "model_dump") else dict(i) for i in items]
