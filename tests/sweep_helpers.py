"""A small sweep folder built without papermill (scripted model, real runs, real sidecars)."""

from __future__ import annotations

import json
from pathlib import Path

from debatekit import sweep
from debatekit.models import scripted
from debatekit.runner import run
from debatekit.sweep.execute import write_meta
from debatekit.sweep.point import stamp

TRUTHS = {f"q{i}": i * 10 for i in range(1, 5)}


def arithmetic(path: Path) -> Path:
    path.write_text("".join(json.dumps({"id": k, "question": f"What is {v}?", "answer": v}) + "\n"
                            for k, v in TRUTHS.items()))
    return path


NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "run_debate.ipynb"


def scripted_grid(root: Path, **sections) -> dict:
    """A grid over a 2-item arithmetic file in `root`: society_of_mind on the schema-filling scripted model."""
    dataset = root / "arith.jsonl"
    dataset.write_text("".join(json.dumps({"id": f"q{i}", "question": f"What is {i}?", "answer": i}) + "\n"
                               for i in (1, 2)))
    return {"parameters": {"dataset": str(dataset), "model": "scripted/schema", "protocol": "society_of_mind"},
            **sections}


class InProcess:
    """A sweep executor that runs points in this process, so that a monkeypatched papermill applies."""

    def map_unordered(self, fn, tasks):
        return map(fn, tasks)


def reply(req):
    """agent1 is always right; the others are wrong on q1 and q2 in round 1 and copy agent1 afterwards."""
    truth = TRUTHS[req.item_id]
    wrong = req.agent not in ("agent1", "sample1") and req.item_id in ("q1", "q2") and req.round == 1
    return {"reasoning": f"{req.agent} thinks", "answer": truth + 1 if wrong else truth}


def make_sweep(root: Path) -> Path:
    """A sweep folder: society_of_mind agents {1, 3} x rounds {1, 2}, single, self_consistency 3."""
    model = scripted.register(f"sweep-fixture-{id(root)}", fn=reply)
    dataset = arithmetic(root / "arith.jsonl")
    out = root / "sweep"
    out.mkdir()
    grid = {"parameters": {"dataset": str(dataset), "model": model},
            "grid": {"protocol": "society_of_mind", "agents": [1, 3], "rounds": [1, 2]},
            "points": [{"protocol": "single"}, {"protocol": "self_consistency", "samples": 3}]}
    points = sweep.expand_grid(grid)
    write_meta(out, Path("notebooks/run_debate.ipynb"), grid, points)
    for point in points:
        result = run(sweep.point_config({**point.parameters, "cache": False}), out / point.id, progress=False)
        sidecar = out / f"{point.id}.json"
        sweep.record_point(str(sidecar), result)
        assert stamp(sidecar, point.digest)
    sweep.collect(out)
    return out
