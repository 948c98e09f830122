"""Parameter sweeps: expand a grid, execute a parameterized notebook per point with papermill, aggregate.

    from debatekit import sweep
    result = sweep.run_sweep("notebooks/run_debate.ipynb", "grid.yaml", "results/NAME", workers=2)
    result.failed                    # points that failed, with the failing cell
    data = sweep.load("results/NAME")  # .summary (one row per point and item), .rounds, .points

A grid file (YAML):

    parameters: {protocol: society_of_mind, dataset: arithmetic, limit: 10}   # every point
    grid: {agents: [1, 3], rounds: [1, 2, 3]}                               # cartesian product
    points: [{protocol: single}, {protocol: self_consistency, samples: 6}]  # explicit extra points

The sweep folder holds `<point-id>.ipynb` (the executed notebook, parameters in its
metadata), `<point-id>.json` (the sidecar the notebook writes: summary and provenance),
`<point-id>/` (the point's run folder), `sweep.json`, `summary.parquet` and `rounds.parquet`.
A point whose sidecar says complete is skipped on a re-run. Points run in worker processes
(papermill is not thread-safe); they share the response cache (one sqlite file), and since
every call's seed derives from the run seed, item, agent and round, points that share a
configuration prefix (same agents, fewer rounds) reuse each other's model calls.

`rescore` reads a finished run (a point of a sweep or study) again from its recorded replies, with
today's answer readers and no model (`debatekit rescore`).
"""

from debatekit.sweep.execute import (  # noqa: F401
    EXECUTORS, Executor, LocalExecutor, PointResult, SweepResult, execute_point, is_complete, notebook_parameters,
    run_sweep)
from debatekit.sweep.grid import Point, SweepError, expand_grid, load_grid, params_hash, point_id  # noqa: F401
from debatekit.sweep.point import (  # noqa: F401
    SIDECAR_VERSION, is_complete_sidecar, point_config, record_point, run_point)
from debatekit.sweep.tables import SweepData, collect, load  # noqa: F401
