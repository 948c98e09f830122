"""Counterfactual debates: fork a recorded run at a round, change one thing, see who follows.

    from debatekit.sweep.forks import fork, replace
    fork("runs/som", at_round=2, out="runs/som-wrong", intervention=replace("agent1", by="wrong"))

- `forking`: `fork` (the rounds before the fork round played back from the parent's record, the
  rest asked of a model), `wrong_answer` and its fallback.
- `interventions`: `Intervention` (what changes: what an agent reads, an added instruction, another
  model), `Context`, the `@intervention` registration and lookup (`make`, `available`).
- `builtin`: `replace`, `adversarial`, `swap_model`, `persona`, `hide`, `reorder`, `anonymise`.

`debatekit fork RUN --at-round R --out NEW [--replace A=wrong | --adversarial A | ...]` is the same
from the command line; docs/guides/forks.md describes both.
"""

from debatekit.engine import Shown
from debatekit.sweep.forks.builtin import adversarial, anonymise, hide, persona, reorder, replace, swap_model
from debatekit.sweep.forks.forking import ForkError, fallback_wrong, fork, wrong_answer
from debatekit.sweep.forks.interventions import (Context, Intervention, InterventionError, available, intervention,
                                                 make)

__all__ = ["Context", "ForkError", "Intervention", "InterventionError", "Shown", "adversarial", "anonymise",
           "available", "fallback_wrong", "fork", "hide", "intervention", "make", "persona", "reorder", "replace",
           "swap_model", "wrong_answer"]
