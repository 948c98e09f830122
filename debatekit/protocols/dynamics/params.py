"""The dynamics parameters as a debate reads them: the factory's validated keywords plus the reply
model transform of `text_caps`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal

from pydantic import BaseModel


@dataclass(frozen=True)
class Params:
    """One field per parameter of `dynamics` (checked by the registry), then the derived one. A
    debate's copy has its time limits stretched by its `time_scale` (a number by then)."""

    agents: list[str]
    route: Literal["auto", "simple", "debate", "council"]
    min_rounds: int
    max_rounds: int
    max_iterations: int
    max_refinements: int
    loop_repeats: int
    convergence_threshold: float
    emit_threshold: float
    human_threshold: float
    council_threshold: float
    value_at_risk_threshold: float
    council_size: int
    council_roles: list[str]
    agent_timeout_s: float
    round_timeout_s: float
    total_timeout_s: float
    council_timeout_s: float
    rag_max_queries: int
    rag_timeout_s: float
    time_scale: float | Literal["auto"]
    rag_top_k: int
    premise_overlap: float
    risk_overlap: float
    evidence_chars: int
    knowledge_dir: str | None
    temperature: float
    text_caps: bool
    out: Callable[[type[BaseModel]], type[BaseModel]]
    """A reply model as sent: with its character caps or without (`text_caps`)."""
