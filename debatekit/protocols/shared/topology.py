"""Communication topologies: whose previous-round answers each agent of a debate reads.

A topology is resolved against the agents' names into a mapping agent -> the agents it reads,
listed in the agents' order. The named ones:

- `full`: every agent reads every other agent (Du et al. 2023).
- `ring`: the agents sit in a circle in the order given; each reads its two neighbours, the one
  before and the one after (the first and last are neighbours). Reading goes both ways, so every
  agent reads 2 others: Li et al.'s (2024) "neighbour-connected" graph, density 2/(N-1). With 3
  agents or fewer this is the full graph.
- `star`: the first agent is the hub and reads all the others; every other agent reads only the
  hub. Order the agents (or give an adjacency) to choose another hub.

An explicit adjacency `{agent: [agents it reads]}` names every agent once as a key; its lists
hold other agents' names, each once, in any order. An empty list is allowed: that agent reads
nobody and is asked to check its own answer. Edges are directed (`{a: [b], b: []}`: a reads b,
b does not read a).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import PlainValidator

from debatekit.registry import ProtocolError

NAMED = ("full", "ring", "star")


def _shape(value: object) -> str | dict[str, list[str]]:
    if isinstance(value, str) and value in NAMED:
        return value
    if isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, list) and all(isinstance(x, str) for x in v)
                                       for k, v in value.items()):
        return {k: list(v) for k, v in value.items()}
    raise ValueError(f"give one of {', '.join(NAMED)} or {{agent: [agents it reads]}}, got {value!r}")


Topology = Annotated[str | dict[str, list[str]], PlainValidator(_shape)]
"""A protocol parameter: a topology's name, or an explicit adjacency (agent -> agents it reads)."""


def resolve(topology: str | dict[str, list[str]], names: list[str], protocol: str) -> dict[str, list[str]]:
    """Who reads whom: each agent (in order) -> the agents whose answers it reads, in agent order.

    Args:
        topology: `full`, `ring`, `star`, or an explicit adjacency.
        names: the debate's agents, in order.
        protocol: the protocol's name, for error messages.

    Raises:
        ProtocolError: an adjacency that misses an agent, names an unknown one, lets an agent read
            itself, or lists an agent twice.
    """
    n = len(names)
    if topology == "full":
        return {a: [b for b in names if b != a] for a in names}
    if topology == "ring":
        return {a: [b for j, b in enumerate(names) if j != i and (j - i) % n in (1, n - 1)]
                for i, a in enumerate(names)}
    if topology == "star":
        return {a: [b for b in names if b != a] if i == 0 else names[:1] for i, a in enumerate(names)}
    return {a: [b for b in names if b in _checked(topology, names, protocol)[a]] for a in names}


def _checked(adjacency: dict[str, list[str]], names: list[str], protocol: str) -> dict[str, list[str]]:
    def fail(problem: str) -> ProtocolError:
        return ProtocolError(f"{protocol}: topology {problem}; agents are {names}")

    if stray := [k for k in adjacency if k not in names]:
        raise fail(f"has an entry for unknown agent {stray[0]!r}")
    if missing := [a for a in names if a not in adjacency]:
        raise fail(f"has no entry for agent {missing[0]!r} (give [] for an agent that reads nobody)")
    for agent, read in adjacency.items():
        if unknown := [b for b in read if b not in names]:
            raise fail(f"lets {agent!r} read unknown agent {unknown[0]!r}")
        if agent in read:
            raise fail(f"lets {agent!r} read itself (its own answer is already in its conversation)")
        if len(set(read)) < len(read):
            raise fail(f"lists an agent twice for {agent!r}")
    return adjacency
