"""A study's sequential plan: its registration, the check of later runs against it, and its looks.

    registration = plan.register("results/studies/replication/grid.yaml")   # before any point runs
    plan.deviations("results/studies/replication/grid.yaml")                 # [] while the plan is as registered
    plan.evaluate(out, study_plan, look=1)                                   # the primary comparison at look 1

`debatekit study GRID --register` writes `registration.json` beside the grid: the plan, its sha256,
the commit and the time; it refuses once any point of the study has run, or when a registration is
there already. `debatekit study GRID` then runs the points look by look (`run_sweep(extent=...)`),
tests the primary comparison after each look (`analysis.sequential`) on the first items of the
dataset up to that look, writes each look's numbers and decision to `looks.json`, and stops at the
first look that decides. The study report shows the plan, its registration, any deviation and the
looks.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, fields
from pathlib import Path

from debatekit._base import files
from debatekit.sweep.grid import SweepError, load_grid, study_plan

REGISTRATION = "registration.json"
LOOKS = "looks.json"


def digest(plan: dict) -> str:
    """The sha256 of a plan as registered (its canonical JSON)."""
    return hashlib.sha256(json.dumps(plan, sort_keys=True).encode()).hexdigest()


def register(grid_path: Path | str, out: Path | str | None = None) -> dict:
    """Register the grid's plan: write `registration.json` beside the grid and return it.

    Raises:
        SweepError: no plan, a registration already there, or a point of the study that has run.
    """
    from debatekit.records.trace import RUN_FILE, git_commit, now

    grid_path = Path(grid_path)
    plan = study_plan(load_grid(grid_path))
    if plan is None:
        raise SweepError(f"grid {grid_path} has no `plan` to register")
    path = grid_path.parent / REGISTRATION
    if path.exists():
        raise SweepError(f"{path} exists: this study's plan was registered already; a plan is registered once")
    out = Path(out) if out else grid_path.parent
    ran = sorted(run.parent.name for run in out.glob(f"*/{RUN_FILE}")) if out.is_dir() else []
    if ran:
        raise SweepError(f"cannot register: {len(ran)} point(s) of the study have run already (first: {ran[0]}); "
                         "a plan is registered before any item runs")
    record = {"plan": plan, "plan_sha256": digest(plan), "git_commit": git_commit(), "registered_at": now(),
              "grid": grid_path.name}
    files.write_text(path, json.dumps(record, indent=2) + "\n")
    return record


def registration(grid_path: Path | str) -> dict | None:
    """The registration beside the grid, or None."""
    path = Path(grid_path).parent / REGISTRATION
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def deviations(grid_path: Path | str) -> list[str]:
    """How the grid's plan now differs from the one registered, a line each ([] when it does not, or
    when nothing was registered)."""
    registered = registration(grid_path)
    if registered is None:
        return []
    plan = study_plan(load_grid(grid_path))
    if plan is None:
        return ["the grid has no plan any more"]
    was = registered.get("plan") or {}
    lines = [f"{key}: registered {was.get(key)!r}, now {plan.get(key)!r}"
             for key in sorted(set(was) | set(plan)) if was.get(key) != plan.get(key)]
    if not lines and registered.get("plan_sha256") != digest(plan):
        lines.append("the registration's sha256 does not match its own plan")
    return lines


def registered(sweep_dir: Path | str) -> dict | None:
    """The primary comparison the study's grid names (`primary:` in its `grid.yaml`, or its `plan`'s), or None."""
    from debatekit.sweep.grid import primary_comparison

    path = Path(sweep_dir) / "grid.yaml"
    if not path.is_file():
        return None
    grid = load_grid(path)
    plan = study_plan(grid)
    return plan["primary"] if plan else primary_comparison(grid)


def plan_of(sweep_dir: Path | str) -> dict | None:
    """The sequential plan of the study's grid (`plan:` in its `grid.yaml`), or None."""
    path = Path(sweep_dir) / "grid.yaml"
    return study_plan(load_grid(path)) if path.is_file() else None


def evaluate(out: Path | str, plan: dict, look: int):
    """The primary comparison at look `look` (1-based): `sequential.decide` on the items both sides
    answered among the first `looks[look - 1]` items of the dataset.

    Raises:
        ValueError: a configuration the study does not have.
    """
    from debatekit import datasets
    from debatekit.analysis import sequential, study
    from debatekit.records.trace import RunFolder

    tables, labels = study.load(out)
    pairs = study.primary_pairs(tables, labels, plan["primary"])
    size = plan["looks"][look - 1]
    record = RunFolder(tables.runs["path"].iloc[0]).read_run()
    items, _ = datasets.load(record.config.dataset, limit=size)
    first = {item.id for item in items}
    pairs = pairs[pairs["item_id"].isin(first)]
    only_config = int((pairs["config"] & ~pairs["against"]).sum())
    only_against = int((pairs["against"] & ~pairs["config"]).sum())
    if len(pairs) < 2:
        raise ValueError(f"look {look}: {len(pairs)} item(s) that both {plan['primary']['config']} and "
                         f"{plan['primary']['against']} answered; a look needs two")
    design = sequential.Design(looks=tuple(plan["looks"]), alpha=plan["alpha"], margin=plan["margin"])
    return sequential.decide(design, look, only_config, only_against, len(pairs))


def record_look(out: Path | str, found, plan: dict) -> list[dict]:
    """Write look `found.look` to `looks.json` (replacing an earlier record of it) and return them all."""
    path = Path(out) / LOOKS
    looks = [entry for entry in _recorded(path)
             if entry.get("look") != found.look and entry.get("look", 0) < found.look]
    entry = {k: (v if not isinstance(v, float) or math.isfinite(v) else None) for k, v in asdict(found).items()}
    looks.append({**entry, "planned_items": plan["looks"][found.look - 1]})  # JSON has no infinity: None
    files.write_text(path, json.dumps(looks, indent=2, default=str) + "\n")
    return looks


def read_looks(out: Path | str) -> list[dict]:
    """The looks recorded in `looks.json` ([] before the first), each with its repeated confidence interval
    (`rci_low`, `rci_high`: `sequential.Look.repeated_interval`), the interval of the difference that holds
    whichever look stops the study."""
    from debatekit.analysis import sequential

    looks = _recorded(Path(out) / LOOKS)
    for entry in looks:
        low, high = sequential.Look(**{f.name: entry.get(f.name) for f in fields(sequential.Look)}).repeated_interval()
        entry |= {"rci_low": low, "rci_high": high}
    return looks


def _recorded(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else []


ESTIMATE_ITEMS = 10
"""Items `estimate` runs per configuration."""


def estimate(grid_path: Path | str, items: int = ESTIMATE_ITEMS, progress: bool = False):
    """Run every point of the grid on `items` items drawn outside the study's sample (the dataset's
    items after the plan's last look, or after the grid's limit) in a scratch folder, with no
    response cache (nothing it runs is reused, nor is anything reused for it), and project each
    configuration's completion tokens and busy hours, and the whole study's, at each look.

    Returns:
        A table: one row per configuration and look (`configuration` "all" sums them), with
        `items`, `completion_tokens` and `busy_h` projected from the measured rate per item.

    Raises:
        SweepError: the dataset has no `items` items past the study's sample.
    """
    import tempfile

    import pandas as pd

    from debatekit import datasets
    from debatekit.analysis import study
    from debatekit.sweep.grid import expand_grid, reused_point
    from debatekit.sweep.point import point_config, run_point

    grid_path = Path(grid_path)
    grid = load_grid(grid_path)
    plan = study_plan(grid)
    points = expand_grid(grid)
    limits = {p.parameters.get("limit") for p in points}
    sample = plan["max_items"] if plan else max((n for n in limits if n), default=None)
    if sample is None:
        raise SweepError("nothing to estimate for: the grid runs every item of its dataset (no limit, no plan)")
    looks = plan["looks"] if plan else [sample]
    with tempfile.TemporaryDirectory(prefix="debatekit-estimate-") as scratch:
        rows = []
        for point in points:
            config = point_config(point.parameters, grid_path.parent)
            all_items, _ = datasets.load(config.dataset)
            outside = all_items[sample:sample + items]
            if len(outside) < items:
                raise SweepError(f"cannot estimate: the dataset has {len(all_items)} items, {len(outside)} past the "
                                 f"study's {sample}; {items} are needed")
            data = Path(scratch) / f"{point.id}.jsonl"
            data.write_text("".join(json.dumps(item.model_dump(mode="json")) + "\n" for item in outside))
            params = dict(config.params)
            # another point's round 1, run here first
            if (named := reused_point(params.get("reuse"), points)) is not None:
                params["reuse"] = str(Path(scratch) / named.id)
            config = config.model_copy(update={"dataset": str(data), "limit": None, "cache": False, "params": params})
            result = run_point(config, str(Path(scratch) / point.id), progress=progress)
            tables, _ = study.load(result.path)
            work = study.compute(tables).iloc[0]
            done = max(len(result.debates), 1)
            for n in looks:
                rows.append({"configuration": point.id, "look_items": n, "measured_items": done,
                             "completion_tokens": work["tokens_generated"] / done * n, "busy_h": work["busy_h"] / done * n})
    table = pd.DataFrame(rows)
    total = table.groupby("look_items", as_index=False)[["completion_tokens", "busy_h"]].sum().assign(
        configuration="all", measured_items=items)
    return pd.concat([table, total], ignore_index=True)[["configuration", "look_items", "measured_items",
                                                         "completion_tokens", "busy_h"]]
