"""What the patch debate's model calls return (the seed's schemas/agent_outputs.py), and the personas.

Free-text fields carry a `maxLength` and lists a `max_length` so a small local model's
constrained output stays bounded.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, Field

from debatekit.protocols.patch_debate.types import Polarity, ProposedEdit, SentenceLabel

# `max_reply_tokens` on a reply schema is the completion budget of that call (engine.reply_budget).

Confidence = Annotated[float, Field(ge=0, le=1, description="0 to 1.")]

class ExtractedAspect(BaseModel):
    term: str = Field(description="Aspect term copied exactly from the sentence.", json_schema_extra={"maxLength": 30})
    polarity: Polarity
    confidence: Confidence


class Extraction(BaseModel):
    """Stage-1 ATE/ATSA."""
    max_reply_tokens: ClassVar[int] = 220
    aspects: list[ExtractedAspect] = Field(max_length=4)
    sentence_label: SentenceLabel
    confidence: Confidence


class Issue(BaseModel):
    type: Literal["negation", "irony", "contrast", "other"]
    aspect_ref: str = Field(description="The extracted term concerned.", json_schema_extra={"maxLength": 30})
    severity: Literal["low", "high"]
    confidence: Confidence


class Correction(BaseModel):
    type: Literal["FLIP_POLARITY", "DROP_ASPECT", "REVISE_SPAN"]
    aspect_ref: str = Field(json_schema_extra={"maxLength": 30})
    value: str = Field("", description="New polarity or corrected term.", json_schema_extra={"maxLength": 30})


class ValidatorReport(BaseModel):
    """Stage-1 validator."""
    max_reply_tokens: ClassVar[int] = 260
    issues: list[Issue] = Field(max_length=3)
    corrections: list[Correction] = Field(max_length=3)
    suggested_label: SentenceLabel | None
    confidence: Confidence


class TurnEdits(BaseModel):
    """A debate turn: proposed edits only."""
    max_reply_tokens: ClassVar[int] = 260
    proposed_edits: list[ProposedEdit] = Field(max_length=2)


class FinalTuple(BaseModel):
    aspect_ref: str = Field(json_schema_extra={"maxLength": 30})
    polarity: Polarity


class DebateSummary(BaseModel):
    """The judge's (CJ) decision."""
    max_reply_tokens: ClassVar[int] = 380
    final_patch: list[ProposedEdit] = Field(max_length=3)
    final_tuples: list[FinalTuple] = Field(max_length=4)
    unresolved_conflicts: list[str] = Field(max_length=2, json_schema_extra={"items": {"type": "string", "maxLength": 40}})
    sentence_polarity: SentenceLabel
    sentence_evidence_spans: list[str] = Field(max_length=2, json_schema_extra={"items": {"type": "string", "maxLength": 60}})


class AspectAction(BaseModel):
    action: Literal["revise_span", "drop", "add"]
    aspect_ref: str = Field(description="Stage-1 term (or the new term for add).", json_schema_extra={"maxLength": 30})
    value: str = Field("", description="Corrected term (revise_span).", json_schema_extra={"maxLength": 30})


class AteReview(BaseModel):
    """Stage-2 ATE review."""
    max_reply_tokens: ClassVar[int] = 200
    aspect_review: list[AspectAction] = Field(max_length=3)
    sentence_label: SentenceLabel
    confidence: Confidence


class SentimentAction(BaseModel):
    action: Literal["maintain", "flip_polarity", "drop", "add"]
    aspect_ref: str = Field(json_schema_extra={"maxLength": 30})
    polarity: Polarity
    confidence: Confidence


class AtsaReview(BaseModel):
    """Stage-2 ATSA review."""
    max_reply_tokens: ClassVar[int] = 260
    sentiment_review: list[SentimentAction] = Field(max_length=4)


class DebatePersona(BaseModel):
    name: str
    role: str
    goal: str


DEFAULT_PERSONAS = {
    "epm": DebatePersona(name="EPM", role="Evidence-Polarity Mapper",
                         goal="Check that each polarity is backed by words of the sentence (negation, irony, contrast)."),
    "tan": DebatePersona(name="TAN", role="Target-Aspect Normalizer",
                         goal="Fix null, duplicate or misaligned aspect terms: rename, merge or drop them."),
    "cj": DebatePersona(name="CJ", role="Consistency Judge",
                        goal="One polarity per aspect, no judgement without evidence, no over-editing."),
}
