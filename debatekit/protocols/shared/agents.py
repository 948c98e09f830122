"""Agents as a count or names, and their models: parameters several protocols share.

`agents` is a count (named agent1..N) or a list of distinct names; `models` maps agent names to
models, or is a list dealt out over the agents in turn.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import PlainValidator

from debatekit.registry import ProtocolError

MAX_AGENTS = 16


def _agents(value: object) -> int | list[str]:
    if isinstance(value, int) and not isinstance(value, bool):
        if 1 <= value <= MAX_AGENTS:
            return value
        raise ValueError(f"a count of agents must be 1 to {MAX_AGENTS}, got {value}")
    if (isinstance(value, list) and 1 <= len(value) <= MAX_AGENTS and len(set(map(str, value))) == len(value)
            and all(isinstance(name, str) and name.strip() for name in value)):
        return list(value)
    raise ValueError(f"give a count of agents or 1 to {MAX_AGENTS} distinct, non-blank agent names, got {value!r}")


def _models(value: object) -> dict[str, str] | list[str]:
    if isinstance(value, list) and all(isinstance(model, str) for model in value):
        return list(value)
    if isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        return dict(value)
    raise ValueError(f"give {{agent name: model}} or a list of models dealt out to the agents in turn, got {value!r}")


Agents = Annotated[int | list[str], PlainValidator(_agents)]
Models = Annotated[dict[str, str] | list[str], PlainValidator(_models)]


def agent_names(agents: int | list[str]) -> list[str]:
    """The agents' names: agent1..N for a count, else the given names."""
    return [f"agent{i + 1}" for i in range(agents)] if isinstance(agents, int) else list(agents)


def models_of(names: list[str], models: dict[str, str] | list[str],
              protocol: str = "society_of_mind") -> dict[str, str | None]:
    """Each agent's model (None: the run's): `models` maps agent names to models, or is a list taken in
    turn over the agents; a name not among `names`, or a list longer than the agents (some models
    would never be asked), is an error that names `protocol`."""
    if isinstance(models, list) and len(models) > len(names):
        raise ProtocolError(f"{protocol}: {len(models)} models for {len(names)} agents: give at most one "
                            "per agent (a shorter list is dealt out in turn)")
    if isinstance(models, dict):
        stray = sorted(set(models) - set(names))
        if stray:
            raise ProtocolError(f"{protocol}: models given for {', '.join(map(repr, stray))}, "
                                f"not among agents {names}")
        return {name: models.get(name) for name in names}
    return {name: models[i % len(models)] if models else None for i, name in enumerate(names)}
