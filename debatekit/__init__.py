"""debatekit: run, trace and plot multi-agent LLM debate protocols.

    from debatekit import RunConfig, run

    result = run(RunConfig(protocol="society_of_mind", dataset="arithmetic", limit=3), "runs/first")

The names here are imported on first use, so `import debatekit` stays fast. The package, from
the bottom layer up: `models` (every model call), `records` (the run folder's format),
`datasets`, `engine` (the round loop), `registry` (`@protocol`), `protocols`, `analysis`,
`runner` (a protocol over a dataset), `sweep` (grids of notebooks, reports, forks of a run) and `cli`.
"""

from debatekit._base.lazy import exports as _exports

__version__ = "0.1.0"

__all__ = ["Debate", "Outcome", "RunConfig", "arun", "fork", "intervention", "node", "protocol", "run"]
__getattr__, __dir__ = _exports(__name__, {
    "run": "runner", "arun": "runner", "RunConfig": "records.schemas", "protocol": "registry",
    "Debate": "engine", "Outcome": "engine", "node": "protocols.nodes", "fork": "sweep.forks",
    "intervention": "sweep.forks"})
