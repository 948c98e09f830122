"""Shared records of the aspect-sentiment pipeline (seed 002): tuples, patch edits, labels.

A tuple is one (aspect term, polarity) with its confidence and character span. The debate
speaks in `ProposedEdit`s whose `target.aspect_ref` names a Stage-1 aspect term.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Iterable, Literal

from pydantic import BaseModel, Field

from debatekit.protocols.shared.fields import Probability

Polarity = Literal["positive", "negative", "neutral"]
SentenceLabel = Literal["positive", "negative", "neutral", "mixed"]
Op = Literal["set_polarity", "set_aspect_ref", "merge_tuples", "drop_tuple", "confirm_tuple"]
POLARITIES: tuple[str, ...] = ("positive", "negative", "neutral")
LABELS: tuple[str, ...] = (*POLARITIES, "mixed")
OPS: tuple[str, ...] = ("set_polarity", "set_aspect_ref", "merge_tuples", "drop_tuple", "confirm_tuple")
_ARTICLES = re.compile(r"^(the|a|an|my|our|their|this|that|these|those)\s+")


class AspectTuple(BaseModel):
    """One aspect term with its polarity (the unit that is extracted, patched and scored)."""

    term: str
    polarity: Polarity
    confidence: float = 0.5
    span: tuple[int, int] | None = None
    """Character offsets in the sentence (`text[start:end]`), located in code; None if not found."""
    source: str = "stage1"
    """Which step last set it: stage1, debate, validator, ate_review, atsa_review, debate_override."""


class EditTarget(BaseModel):
    """What an edit is about: always a Stage-1 aspect term."""

    aspect_ref: str = Field(description="A Stage-1 aspect term, copied exactly.",
                            json_schema_extra={"maxLength": 40})
    aspect_term: str = Field("", description="Optional corrected term.",
                                    json_schema_extra={"maxLength": 40})
    polarity: Polarity | None = Field(None, description="Optional polarity the edit is about.")


class ProposedEdit(BaseModel):
    """One patch operation proposed by a debate speaker or the judge (seed 002, 2.2)."""

    op: Op = Field(description="set_polarity | set_aspect_ref | merge_tuples | drop_tuple | confirm_tuple")
    target: EditTarget
    value: str = Field("", description="New polarity (set_polarity), new term (set_aspect_ref) "
                              "or the aspect_ref to merge into (merge_tuples).", json_schema_extra={"maxLength": 40})
    evidence: str = Field("", description="Words of the sentence that support the edit.",
                                 json_schema_extra={"maxLength": 60})
    confidence: Probability | None = Field(None, description="0 to 1.")


_KO_PARTICLE = re.compile(r"(?<=[\uac00-\ud7a3])(에서|으로|은|는|이|가|을|를|도|의|에|과|와|로|만)$")


def normalize_term(term: str) -> str:
    """Comparable form of an aspect term: NFC, lower case, no punctuation, no leading article, and no
    trailing Korean particle after a Hangul word (서비스가 -> 서비스), since models copy it from the sentence."""
    text = unicodedata.normalize("NFC", term or "").lower().strip()
    text = _ARTICLES.sub("", text)
    text = "".join(ch for ch in text if ch.isalnum())
    return _KO_PARTICLE.sub("", text)


def locate(term: str, text: str) -> tuple[int, int] | None:
    """Character span of `term` in `text` (case-insensitive, first occurrence), or None."""
    if not term:
        return None
    start = text.lower().find(term.lower())
    return None if start < 0 else (start, start + len(term))


def sentence_label(polarities: Iterable[str]) -> SentenceLabel | None:
    """Sentence label implied by tuple polarities: mixed when both signs occur; None if no tuples."""
    found = set(polarities)
    if not found:
        return None
    if {"positive", "negative"} <= found:
        return "mixed"
    for sign in ("positive", "negative"):
        if sign in found:
            return sign
    return "neutral"


def history_line(agent: str, edit: ProposedEdit) -> str:
    """The seed's history line: `agent: op target=... value=... evidence=...`."""
    target = edit.target.aspect_ref
    if edit.target.aspect_term and edit.target.aspect_term != target:
        target += f"->{edit.target.aspect_term}"
    if edit.target.polarity:
        target += f"/{edit.target.polarity}"
    evidence = f'"{edit.evidence}"' if edit.evidence else "-"
    return f"{agent}: {edit.op} target={target} value={edit.value or '-'} evidence={evidence}"
