"""Any registered protocol as one node of a workflow graph (LangGraph and the like).

    state = await debatekit.node("arbitration", {"agent_reports": [...]}, batch_size=4)

The protocol says how a state becomes its item and how the outcome goes back into the state
(`registry.Node`); this module builds the debate once for all of them.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from debatekit import registry
from debatekit.engine import Debate, Limits
from debatekit.models.gateway import Gateway
from debatekit.models.model import resolve


async def node(name: str, state: dict, *, model: str | None = None, folder: str | Path | None = None,
               gateway: Gateway | None = None, limits: Limits | None = None, **params: Any) -> dict:
    """Run one debate of protocol `name` over a workflow state; the new state.

    Args:
        name: a registered protocol with a node form.
        state: the workflow state the protocol reads its item from.
        model: the model (default: debatekit's default model).
        folder: where the debate's own files go (none kept without it).
        gateway: a gateway to share between nodes (default: a new one).
        limits: time and token limits of the debate.
        **params: protocol parameters.

    Raises:
        registry.ProtocolError: unknown protocol, no node form, or bad parameters.
    """
    spec = registry.get(name)
    if spec.node is None:
        raise registry.ProtocolError(f"protocol {name!r} has no workflow-node form")
    item = spec.node.item(state)
    solver = spec.build({**spec.node.params(state), **params})
    debate = Debate(item, gateway=gateway or Gateway(), model=resolve(model), run_id="node",
                    debate_id=uuid.uuid4().hex[:12], limits=limits, folder=Path(folder) if folder else None)
    outcome = await solver(item, debate)
    return spec.node.result(state, outcome, debate)
