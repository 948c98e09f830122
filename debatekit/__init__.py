"""debatekit: run, trace and plot multi-agent LLM debate protocols."""

__version__ = "0.1.0"


async def node(name: str, state: dict, **kwargs) -> dict:
    """Run protocol `name` as one workflow-graph node over `state`; see `debatekit.nodes.node`."""
    from debatekit.nodes import node as run_node

    return await run_node(name, state, **kwargs)
