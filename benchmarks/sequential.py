"""Error rates and power of the sequential designs a study plan may use, by simulation.

    python -m benchmarks sequential [--sims 40000]

For each design (looks and margin, alpha 0.05; `debatekit.analysis.sequential`) it draws studies
at a true paired difference and discordance and counts how they end. Per design: the type-I
error of *efficacy* (declaring a difference) at no difference, the type-I error of *equivalence*
(declaring the two within the margin) at a difference of exactly +-margin, each the largest over
the discordances tried (0.12 to 0.6: where an exact-test design has the fewest items to go on, up
to where the arms disagree on most items), and the power to find a difference of 0.10 and 0.15,
and to declare equivalence at no difference, at a discordance of 0.2 (the GSM8K study's debate
against its vote had 18 discordant items of 100). A design ships (`shipped: true`) when both
type-I errors stay at or below alpha plus the simulation's own error (2 standard errors).
Writes `benchmarks/results/sequential.json`.
"""

from __future__ import annotations

import argparse
import math

from benchmarks.common import save
from debatekit.analysis import sequential

DESIGNS = [
    {"looks": (50, 100, 150), "margin": 0.10},
    {"looks": (100, 200), "margin": 0.10},
    {"looks": (50, 100, 150, 200), "margin": 0.10},
    {"looks": (150,), "margin": 0.10},
]
DISCORDANCES = (0.12, 0.2, 0.3, 0.4, 0.6)


def measure(design: sequential.Design, sims: int) -> dict:
    efficacy = {disc: sequential.simulate(design, 0.0, disc, sims, seed=1)["different"] for disc in DISCORDANCES}
    equivalence = {disc: max(sequential.simulate(design, sign * design.margin, disc, sims, seed=2)["equivalent"]
                             for sign in (1, -1)) for disc in DISCORDANCES if disc >= design.margin}
    power = {f"difference {d:.2f}": sequential.simulate(design, d, 0.2, sims, seed=3) for d in (0.10, 0.15)}
    power["no difference"] = sequential.simulate(design, 0.0, 0.2, sims, seed=4)
    worst = max(max(efficacy.values()), max(equivalence.values()))
    slack = 2 * math.sqrt(design.alpha * (1 - design.alpha) / sims)
    return {"looks": list(design.looks), "alpha": design.alpha, "margin": design.margin,
            "efficacy_boundaries": [round(c, 4) for c in design.efficacy()],
            "equivalence_boundaries": [round(c, 4) for c in design.equivalence()],
            "type_i_error": {"efficacy": round(max(efficacy.values()), 4), "equivalence": round(max(equivalence.values()), 4),
                             "efficacy_by_discordance": {str(k): round(v, 4) for k, v in efficacy.items()},
                             "equivalence_by_discordance": {str(k): round(v, 4) for k, v in equivalence.items()}},
            "power": {k: {"different": round(v["different"], 4), "equivalent": round(v["equivalent"], 4),
                          "expected_items": round(v["expected_items"], 1)} for k, v in power.items()},
            "n_sims": sims, "shipped": worst <= design.alpha + slack}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks sequential", description=__doc__.split("\n")[0])
    parser.add_argument("--sims", type=int, default=40_000, help="studies drawn per setting")
    args = parser.parse_args(argv)
    designs = [measure(sequential.Design(looks=d["looks"], margin=d["margin"]), args.sims) for d in DESIGNS]
    save("sequential", {"designs": designs, "discordances": list(DISCORDANCES),
                        "statistic": "paired difference over its standard error, McNemar's continuity correction, "
                                     "boundaries as t-quantiles; Lan-DeMets O'Brien-Fleming spending"})
    return 0
