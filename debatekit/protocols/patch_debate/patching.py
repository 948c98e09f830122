"""Apply patch edits (the debate's `proposed_edits`, the judge's `final_patch`) to aspect tuples.

Deterministic: the same tuples and edits always give the same result and the same log. Every
edit gets one log entry, `applied` or `rejected` with a reason:

- `invalid_op`: the op is not one of the five;
- `unknown_aspect_ref`: the target (or, for merge_tuples, the value) names no current tuple;
- `invalid_value`: a polarity that is not positive/negative/neutral, an empty new term,
  a merge of a tuple into itself;
- `conflict`: edits on the same tuple that disagree (different polarities, different new
  terms or merge destinations, or a drop/merge together with any other edit of that tuple);
  all of the disagreeing edits are rejected, the tuple stays as it was;
- `duplicate`: the same edit again (the first one is applied).

Tuples are found by their normalized term (`types.normalize_term`).
"""

from __future__ import annotations

from typing import Any, Iterable, Literal

from pydantic import BaseModel

from debatekit.protocols.patch_debate.types import OPS, POLARITIES, AspectTuple, ProposedEdit, locate, normalize_term

REMOVING = ("drop_tuple", "merge_tuples")


class EditLog(BaseModel):
    """What happened to one edit."""

    index: int
    agent: str | None = None
    op: str
    aspect_ref: str
    value: str | None = None
    status: Literal["applied", "rejected"]
    reason: str | None = None
    detail: str = ""


class PatchResult(BaseModel):
    tuples: list[AspectTuple]
    log: list[EditLog]

    @property
    def applied(self) -> int:
        return sum(e.status == "applied" for e in self.log)

    @property
    def rejected(self) -> int:
        return sum(e.status == "rejected" for e in self.log)

    def reasons(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for entry in self.log:
            if entry.reason:
                counts[entry.reason] = counts.get(entry.reason, 0) + 1
        return counts


def apply_patch(tuples: Iterable[AspectTuple], edits: Iterable[ProposedEdit | dict], *, text: str | None = None,
                source: str = "debate", agents: Iterable[str | None] | None = None) -> PatchResult:
    """Apply `edits` in order to a copy of `tuples`; never raises for a bad edit.

    Args:
        tuples: the tuples before the patch (not modified).
        edits: ProposedEdit objects or raw dicts (raw dicts may carry an invalid op).
        text: the sentence, to re-locate spans of renamed terms.
        source: recorded on the tuples an edit changes.
        agents: who proposed each edit (same order as `edits`), for the log.
    """
    current = [t.model_copy() for t in tuples]
    edits = [_fields(e) for e in edits]
    agents = list(agents) if agents is not None else [None] * len(edits)
    log: list[EditLog | None] = [None] * len(edits)

    def entry(i: int, status: str, reason: str | None = None, detail: str = "") -> None:
        e = edits[i]
        log[i] = EditLog(index=i, agent=agents[i], op=e["op"], aspect_ref=e["ref"], value=e["value"],
                         status=status, reason=reason, detail=detail)

    for i in _screen(current, edits, entry):
        e = edits[i]
        at = _find(current, e["ref"])
        if at is None:
            entry(i, "rejected", "unknown_aspect_ref", "removed by an earlier edit")
            continue
        t = current[at]
        if e["op"] == "set_polarity":
            t.polarity, t.source = e["polarity"], source
            if e["confidence"] is not None:
                t.confidence = e["confidence"]
        elif e["op"] == "set_aspect_ref":
            t.term, t.source = e["term"], source
            if text is not None:
                t.span = locate(t.term, text)
        elif e["op"] == "merge_tuples":
            into = _find(current, e["value"])
            if into is None:
                entry(i, "rejected", "unknown_aspect_ref", f"merge destination {e['value']!r} not found")
                continue
            current[into].confidence = max(current[into].confidence, t.confidence)
            current.pop(at)
        elif e["op"] == "drop_tuple":
            current.pop(at)
        entry(i, "applied")
    return PatchResult(tuples=current, log=[x for x in log if x is not None])


def _screen(tuples: list[AspectTuple], edits: list[dict], entry) -> list[int]:
    """Reject invalid, unknown, duplicate and conflicting edits; return the indexes left to apply."""
    by_tuple: dict[int, list[int]] = {}
    seen: set[tuple] = set()
    for i, e in enumerate(edits):
        if e["op"] not in OPS:
            entry(i, "rejected", "invalid_op", f"op must be one of {', '.join(OPS)}")
            continue
        at = _find(tuples, e["ref"])
        if at is None:
            entry(i, "rejected", "unknown_aspect_ref", f"no tuple with term {e['ref']!r}")
            continue
        problem = _check_value(tuples, at, e)
        if problem:
            entry(i, "rejected", *problem)
            continue
        key = (at, e["op"], e["polarity"], e["term"], _norm(e["value"]) if e["op"] == "merge_tuples" else None)
        if key in seen:
            entry(i, "rejected", "duplicate", "same edit proposed earlier")
            continue
        seen.add(key)
        by_tuple.setdefault(at, []).append(i)
    keep: set[int] = set()
    for at, group in by_tuple.items():
        clash = _conflict(tuples[at], [edits[i] for i in group])
        if clash:
            for i in group:
                entry(i, "rejected", "conflict", clash)
        else:
            keep.update(group)
    return sorted(keep)


def _check_value(tuples: list[AspectTuple], at: int, e: dict) -> tuple[str, str] | None:
    if e["op"] == "set_polarity" and e["polarity"] not in POLARITIES:
        return "invalid_value", f"polarity must be one of {', '.join(POLARITIES)}"
    if e["op"] == "set_aspect_ref" and not (e["term"] or "").strip():
        return "invalid_value", "no new term given"
    if e["op"] == "merge_tuples":
        into = _find(tuples, e["value"] or "")
        if into is None:
            return "unknown_aspect_ref", f"merge destination {e['value']!r} not found"
        if into == at:
            return "invalid_value", "cannot merge a tuple into itself"
    return None


def _conflict(t: AspectTuple, group: list[dict]) -> str | None:
    """Why the edits of one tuple disagree, or None."""
    ops = {e["op"] for e in group}
    if ops & set(REMOVING) and len(group) > 1:
        return f"{'/'.join(sorted(ops & set(REMOVING)))} together with other edits of {t.term!r}"
    polarities = {e["polarity"] for e in group if e["op"] == "set_polarity"}
    confirmed = {e["confirm"] or t.polarity for e in group if e["op"] == "confirm_tuple"}
    if len(polarities) > 1:
        return f"different polarities for {t.term!r}: {', '.join(sorted(polarities))}"
    if polarities and confirmed and polarities != confirmed:
        return f"set_polarity {next(iter(polarities))} against confirm_tuple of {t.term!r}"
    if len({_norm(e["term"]) for e in group if e["op"] == "set_aspect_ref"}) > 1:
        return f"different new terms for {t.term!r}"
    return None


def _fields(edit: ProposedEdit | dict) -> dict[str, Any]:
    """The parts of an edit that patching uses, from a model or a raw dict."""
    raw = edit.model_dump() if isinstance(edit, BaseModel) else dict(edit or {})
    target = raw.get("target") or {}
    if not isinstance(target, dict):
        target = {"aspect_ref": str(target)}
    op, value = str(raw.get("op") or ""), raw.get("value")
    value = None if value is None else str(value).strip()
    target_polarity = target.get("polarity")
    return {
        "op": op, "ref": str(target.get("aspect_ref") or ""), "value": value,
        "polarity": (value.lower() if value else target_polarity) if op == "set_polarity" else None,
        "confirm": target_polarity if op == "confirm_tuple" else None,
        "term": (value or target.get("aspect_term")) if op == "set_aspect_ref" else None,
        "confidence": raw.get("confidence"),
    }


def _norm(term: str | None) -> str:
    return normalize_term(term or "")


def _find(tuples: list[AspectTuple], ref: str) -> int | None:
    key = _norm(ref)
    if not key:
        return None
    return next((i for i, t in enumerate(tuples) if _norm(t.term) == key), None)
