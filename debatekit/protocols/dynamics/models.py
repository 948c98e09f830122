"""Items and structured outputs of the debate-dynamics protocol (seed 003), and how positions read.

The output models are sent as JSON schema; free-text fields carry a `maxLength` and lists a
`max_length`, so a small local model's generation stays bounded.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from debatekit.protocols.dynamics.rules import LETTERS, Stance, content_words, option_letter


def _text(n: int, description: str):
    return Field(description=description, json_schema_extra={"maxLength": n})


Short = Annotated[str, Field(json_schema_extra={"maxLength": 90})]
Risk = Literal["cost", "revenue", "customers", "delivery", "security", "legal", "people", "reputation"]
Timing = Literal["immediately", "next_quarter", "within_a_year", "later"]


class Decision(BaseModel):
    """One decision to debate (a row of `datasets/decisions.jsonl`)."""

    model_config = ConfigDict(extra="forbid")
    id: str
    question: str
    options: list[str] = Field(min_length=2, max_length=len(LETTERS))
    knowledge: str
    """Folder under `datasets/knowledge/` holding the knowledge base (S3.5)."""
    value_at_risk: float | None = None
    reversible: bool | None = None
    critical: bool = False
    """Routing hint: straight to the council (S3.1)."""
    expected_agreement: bool | None = None
    reference: str | None = None
    sources: list[str] = []
    metadata: dict[str, Any] = {}


class Position(BaseModel):
    """An agent's position (S3.2): what it recommends, why, on what evidence, how sure."""

    recommendation: str = _text(40, "The letter of the option you recommend.")
    position: str = _text(200, "Your position in 2-3 sentences.")
    reasoning: str = _text(240, "Why, citing the evidence as [RAG:chunk_id].")
    premises: list[Short] = Field(min_length=1, max_length=2, description="The 1-2 facts your position rests on.")
    risks: list[Risk] = Field(min_length=1, max_length=2, description="The main kinds of risk.")
    timing: Timing = Field(description="When to act.")
    evidence: list[Annotated[str, Field(json_schema_extra={"maxLength": 12})]] = Field(
        max_length=3, description="Chunk ids of the evidence used.")
    confidence: int = Field(ge=0, le=100, description="Confidence, 0-100.")
    limitations: str = _text(120, "What you do not know.")
    rag_query: str = _text(60, "Words to search the knowledge base for missing evidence, or empty.")


class Rebuttal(BaseModel):
    """A rebuttal (round 2) or refinement (round 3+): the review of the others, then the updated position."""

    agreements: list[Short] = Field(max_length=2, description="Where you agree with the others.")
    divergences: list[Short] = Field(max_length=2, description="Where you disagree, with the evidence.")
    blind_spots: list[Short] = Field(max_length=2, description="What the others overlooked.")
    keeps_position: Literal["yes", "no", "partially"]
    updated: Position


class Synthesis(BaseModel):
    recommendation: str = _text(40, "The letter of the recommended option.")
    decision: str = _text(240, "The decision, clear and actionable.")
    consensus: list[Short] = Field(max_length=3, description="Points the agents agree on.")
    divergences: list[Short] = Field(max_length=3, description="Divergences not resolved.")
    critical_divergence: bool = Field(description="True if an unresolved divergence could change the decision.")
    risk_level: Literal["low", "medium", "high", "catastrophic"]
    in_scope: bool = Field(description="False if the evidence does not cover the question.")
    confidence: int = Field(ge=0, le=100)


class Route(BaseModel):
    route: Literal["simple", "debate", "council"]
    reason: str = _text(120, "Why, in one sentence.")


class Vote(BaseModel):
    recommendation: str = _text(40, "The letter of the option you vote for.")
    rationale: str = _text(200, "Why, in 1-2 sentences.")
    confidence: int = Field(ge=0, le=100)


def letter(p: Position | None, options: list[str]) -> str | None:
    """The option letter a position recommends (None if it names no option)."""
    return option_letter(p.recommendation, options) if p else None


def answer(p: Position | None, options: list[str]) -> str | None:
    """The text of the option a position recommends."""
    chosen = letter(p, options)
    return options[LETTERS.index(chosen)] if chosen else None


def stance(agent: str, p: Position, options: list[str]) -> Stance:
    """The comparable part of a position, for convergence and loop detection."""
    return Stance(agent, letter(p, options), content_words(p.premises), frozenset(p.risks), p.timing, p.confidence)


def describe(p: Position | None, options: list[str]) -> str:
    """A position in one line, as other agents, the synthesizer and the council read it."""
    if p is None:
        return "none yet"
    return (f"option {letter(p, options) or p.recommendation} ({p.confidence}%), timing {p.timing}, risks "
            f"{', '.join(p.risks) or 'none'}; premises: {'; '.join(p.premises) or 'none'}. {p.position}")


class EscalationOutput(BaseModel):
    """Where the decision went (S3.6): none, the council or a human, and why."""

    model_config = ConfigDict(extra="forbid")
    to: Literal["none", "council", "human"]
    reasons: list[str]
    council: dict[str, Any] | None
    human_reasons: list[str]


class DynamicsOutput(BaseModel):
    """`Outcome.output` of dynamics: route, convergence, breaker, synthesis, escalation, retrieval."""

    model_config = ConfigDict(extra="forbid")
    route: Literal["simple", "debate", "council"]
    recommendation: str | None
    time_limits_s: dict[str, float] | None = None
    """The scaled time limits; absent from runs made before limits were scaled (an older example)."""
    convergence: float | None
    points: dict[str, float]
    circuit_breaker: str | None
    synthesis: dict[str, Any] | None
    escalation: EscalationOutput
    rag: dict[str, Any]
    agreement_as_expected: bool | None
    source_recall: float | None
