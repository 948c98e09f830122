"""Run folders -> pandas tables, paired statistics, plotly figures and the Jupyter explorer.

    tables = analysis.load_runs(["runs/a", "runs/b"])
    analysis.round_metrics(tables)             # accuracy per round, agreement, flips
    analysis.compare(tables, baseline="single")  # paired differences with intervals and McNemar

- `tables`: `load_runs` and the pure pandas metrics over its tables.
- `rounds`, `configs`: tables for plots and sweeps: a debate's rounds as curves; configurations side by side.
- `paired`, `intervals`, `power`: paired comparisons, bootstrap intervals, what a null result rules out.
- `conformity`: who keeps an answer, who moves to the majority, and the martingale test of Choi et al.
- `forks`: a fork against its parent: final accuracy paired by item, who followed the pushed answer, and the
  conformity measures side by side.
- `decompose`, `study`: one society_of_mind run as single / vote / debate; the study notebook's tables.
- `plots` (figures from tables, no I/O) and `widgets` (the explorer over them).
"""

from debatekit._base.lazy import exports

__all__ = ["ForkEffect", "Tables", "agent_accuracy", "answer_transitions", "compare", "compare_runs", "config_table",
           "conformity_effect", "conformity_summary", "convergence_curve", "decomposition", "detectable_difference",
           "equal_budget", "fill_rounds", "flip_flow", "flips_by_position", "follow_rate", "followers", "fork_accuracy",
           "fork_effect", "fork_parent", "items_needed", "load_runs", "martingale_test", "pareto_front",
           "round_metrics", "rounds_table", "score_trajectory", "seed_accuracy", "summarize", "switch_rates"]
__getattr__, __dir__ = exports(__name__, {
    **dict.fromkeys(("Tables", "agent_accuracy", "load_runs", "round_metrics", "rounds_table", "seed_accuracy",
                     "summarize"), "tables"),
    **dict.fromkeys(("convergence_curve", "fill_rounds", "flip_flow", "score_trajectory"), "rounds"),
    **dict.fromkeys(("config_table", "equal_budget", "pareto_front"), "configs"),
    **dict.fromkeys(("answer_transitions", "conformity_summary", "flips_by_position", "martingale_test",
                     "switch_rates"), "conformity"),
    **dict.fromkeys(("ForkEffect", "conformity_effect", "follow_rate", "followers", "fork_accuracy", "fork_effect",
                     "fork_parent"), "forks"),
    "compare": "paired", "compare_runs": "paired", "decomposition": "decompose",
    "detectable_difference": "power", "items_needed": "power"})
