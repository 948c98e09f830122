"""The cross_critique parameters as a debate reads them: the factory's validated keywords plus
what it derives from them once (the agents' system prompts, the loaded rule set)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from debatekit.protocols.cross_critique.rules import Rule


@dataclass(frozen=True)
class Params:
    """One field per parameter of `cross_critique` (checked by the registry), then the derived ones."""

    agents: list[str]
    persona_prompts: dict[str, str]
    models: dict[str, str]
    min_rounds: int
    max_rounds: int
    convergence: Literal["any", "all"]
    max_major: int
    max_change: float
    max_unsupported: float
    min_critiques: int
    max_claims: int
    rules: str | None
    rule_personas: list[str]
    passage_chars: int | None
    temperature: float
    answer_tokens: int
    critique_tokens: int
    supervisor_model: str | None
    judge_model: str | None
    prompts: dict[str, str]
    """Each agent's system prompt."""
    rule_set: list[Rule]
    """The rules of `rules`, loaded (none without)."""
