"""The study of a sweep: one agent, majority vote and debate on the same items, at what cost.

`notebooks/study.ipynb` calls these over a sweep folder (`debatekit sweep ... --grid
results/studies/NAME/grid.yaml --out results/studies/NAME`); each is a pure function of the
loaded tables, so a test can check it on a scripted sweep.

    tables, labels = study.load("results/studies/gsm8k")
    study.paired(tables, labels, "single")      # every configuration against single (and self_consistency)
    study.decomposition(tables)                # vote@1 - single, debate@t - vote@1 inside the debate run
    study.costs(tables, labels)                # accuracy against calls, completion tokens, wall time; Pareto
    study.rules_out(paired_rows)               # the smallest difference each comparison could detect
    study.turning_points(tables)               # a debate that fixed a wrong vote, one that broke a right one
    study.conclusion(...)                      # the report's last paragraph, written from the numbers
    study.provenance(tables, labels)           # per run: status, items, when, the commits that wrote it,
                                               # and the model work it took (calls, tokens, busy hours)
    sweep.plan.registered("results/studies/gsm8k")  # the grid's `primary` comparison, or None (sweep layer)
    study.primary(tables, labels, registered)  # that comparison alone: difference, 95% and 90% intervals, TOST
    study.holm({"against single": rows, ...})  # Holm-adjusted p over the report's exploratory comparisons
    study.headline(against_single, against_vote)  # the rows the headline figure draws: the first that has any
    study.ties(tables, labels)                 # each vote's tied items and its accuracy under any tie-break

The report's statistics: every paired difference has a 95% bootstrap interval over items
(`intervals.N_BOOT` resamples, so its second decimal does not move with the seed) and the exact
McNemar test; what a null rules out is its 90% interval against the study's equivalence margin
(TOST, `paired.equivalence`); the p-values of the exploratory comparisons are Holm-adjusted over
the family the report tests (statsmodels' `multipletests`), while the registered primary comparison
is tested alone, at 0.05, before them. `rules_out` (the power of the exact test at the discordance
seen) is a planning tool: how many items a next study needs, not what this one ruled out.
"""

from debatekit.analysis.study.comparisons import (ALPHA, distinct, equivalence, headline, holm, margin_of, paired,
                                                  primary, primary_pairs, resolve, rules_out)
from debatekit.analysis.study.dynamics import VOTES, round_dynamics, ties, turning_points, vote_curve
from debatekit.analysis.study.report import conclusion
from debatekit.analysis.study.runs import (COMPUTE, CUT_OFF, DEBATE, arms, compute, costs, decomposition, labelled,
                                           load, provenance, shared_samples)

__all__ = ["ALPHA", "COMPUTE", "CUT_OFF", "DEBATE", "VOTES", "arms", "compute", "conclusion", "costs", "decomposition",
           "distinct", "equivalence", "headline", "holm", "labelled", "load", "margin_of", "paired",
           "primary", "primary_pairs", "provenance", "resolve", "round_dynamics", "rules_out",
           "shared_samples", "ties", "turning_points", "vote_curve"]
