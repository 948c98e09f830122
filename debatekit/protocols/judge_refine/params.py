"""The judge_refine parameters as a debate reads them: the factory's validated keywords plus what
it derives from them once (the reasoners, their focus prompts, the reply models)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from pydantic import BaseModel


@dataclass(frozen=True)
class Params:
    """One field per parameter of `judge_refine` (checked by the registry), then the derived ones."""

    agents: list[str]
    focus: dict[str, str]
    hypotheses: int
    rounds: int
    min_improvement: float
    stop_on_consensus: bool
    shuffle: bool
    judge_log_lines: int
    temperature: float
    judge_temperature: float
    score_with_judge: bool
    models: dict[str, str]
    judge_model: str | None
    text_caps: bool
    names: list[str]
    """The reasoners' names."""
    focus_of: dict[str, str]
    """Each reasoner's focus prompt."""
    hyp_model: type[BaseModel]
    """The reply model of a first-round answer (`hypotheses` hypotheses at most)."""
    out: Callable[[type[BaseModel]], type[BaseModel]]
    """A reply model as sent: with its character caps or without (`text_caps`)."""
