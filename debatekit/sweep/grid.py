"""Sweep grids: a YAML mapping of fixed `parameters`, `grid` lists (a cartesian product) and explicit `points`."""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import yaml

RESERVED = {"out_dir", "summary_path", "retry_degraded"}
"""Notebook parameters the sweep sets itself (`retry_degraded` by `--retry-degraded`), never a grid."""
SPEED_ONLY = {"concurrency"}
"""Point parameters that change how fast a point runs, not what it computes (the runner leaves
them out of a run's configuration hash too): left out of a point's hash and name, so that a
grid may raise them part way through and its points keep their folders and finished runs."""
GRID_KEYS = {"parameters", "grid", "points"}
STUDY_KEYS = {"primary", "plan"}
"""Top-level keys a study's grid may hold besides its points: `primary`, the one comparison it
reports first (`primary_comparison`), and `plan`, the sequential plan it registers (`study_plan`);
they make no point."""
STOPPING = {"lan-demets-obrien-fleming"}
"""The stopping rules a plan may name (`debatekit.analysis.sequential`)."""


class SweepError(ValueError):
    """A grid or sweep folder that cannot be used; the message says why."""


@dataclass(frozen=True)
class Point:
    """One configuration of a sweep: its id (a file name) and its notebook parameters."""

    id: str
    parameters: dict = field(hash=False)

    @property
    def digest(self) -> str:
        return params_hash(self.parameters)


def params_hash(parameters: dict) -> str:
    """A point's digest: a hash of its parameters but the `SPEED_ONLY` ones."""
    kept = {k: v for k, v in parameters.items() if k not in SPEED_ONLY}
    return hashlib.sha256(json.dumps(kept, sort_keys=True, default=str).encode()).hexdigest()[:8]


MAX_GRID_BYTES = 1_000_000
"""A grid file larger than this is refused before it is read (a grid is a few lines)."""
MAX_GRID_NODES = 10_000
"""Values a grid may hold once its YAML aliases are expanded (an alias bomb holds billions)."""
MAX_POINTS = 10_000
"""Points a grid may expand to, counted before they are built; refused even with `--yes`."""


def load_grid(path: Path | str) -> dict:
    """Read a grid YAML file.

    Raises:
        SweepError: unreadable, over `MAX_GRID_BYTES`, not YAML, not a mapping, or holding more than
            `MAX_GRID_NODES` values once its aliases are expanded.
    """
    try:
        size = Path(path).stat().st_size
        if size > MAX_GRID_BYTES:
            raise SweepError(f"grid {path} is {size:,} bytes; a grid file may be {MAX_GRID_BYTES:,} at most")
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise SweepError(f"cannot read grid {path}: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise SweepError(f"grid {path} is not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise SweepError(f"grid {path} must be a mapping with `parameters`, `grid` and/or `points`")
    if (nodes := _expanded_size(data, {})) > MAX_GRID_NODES:
        raise SweepError(f"grid {path} holds {nodes:,} values once its YAML aliases are expanded; "
                         f"{MAX_GRID_NODES:,} at most")
    return data


def _expanded_size(value, seen: dict[int, int]) -> int:
    """How many values `value` holds with every alias expanded, counted once per distinct object
    (an alias is the same object met again), so a bomb is measured without being expanded."""
    if not isinstance(value, (dict, list)):
        return 1
    if id(value) in seen:
        return seen[id(value)]
    seen[id(value)] = MAX_GRID_NODES + 1  # a cycle (an alias inside itself) counts as too many
    children = value.items() if isinstance(value, dict) else enumerate(value)
    total = 1
    for _, child in children:
        total += _expanded_size(child, seen)
        if total > MAX_GRID_NODES:
            break
    seen[id(value)] = total
    return total


def expand_grid(grid: dict) -> list[Point]:
    """The points of a grid: the product of `grid` lists plus explicit `points`, each over `parameters`.

    A mapping without any of the keys `parameters`, `grid`, `points` is read as `grid`.
    A scalar in `grid` is a one-value list. Duplicate points are kept once.

    Raises:
        SweepError: unknown top-level keys, malformed sections, or no points at all.
    """
    if not GRID_KEYS & set(grid):
        grid = {"grid": grid}
    unknown = sorted(set(grid) - GRID_KEYS - STUDY_KEYS)
    if unknown:
        raise SweepError(f"grid has unknown key(s) {', '.join(unknown)}; use parameters, grid, points, primary")
    primary_comparison(grid)  # a malformed `primary` or `plan` is refused before any point runs
    plan = study_plan(grid)
    fixed, axes, explicit = grid.get("parameters") or {}, grid.get("grid") or {}, grid.get("points") or []
    if not isinstance(fixed, dict) or not isinstance(axes, dict) or not isinstance(explicit, list):
        raise SweepError("grid: `parameters` and `grid` must be mappings, `points` a list of mappings")
    for key in RESERVED & (set(fixed) | set(axes) | {k for p in explicit if isinstance(p, dict) for k in p}):
        how = " (--retry-degraded)" if key == "retry_degraded" else ""
        raise SweepError(f"grid sets {key!r}, which the sweep sets itself{how}")
    if (nodes := _expanded_size(grid, {})) > MAX_GRID_NODES:
        raise SweepError(f"grid holds {nodes:,} values once its YAML aliases are expanded; {MAX_GRID_NODES:,} at most")
    points: list[dict] = []
    values = [v if isinstance(v, list) else [v] for v in axes.values()]
    count = math.prod(len(v) for v in values) * bool(axes) + len(explicit)
    if count > MAX_POINTS:
        raise SweepError(f"grid expands to {count:,} points; {MAX_POINTS:,} at most (split it into several sweeps)")
    if axes:
        names = list(axes)
        points += [{**fixed, **dict(zip(names, combo))} for combo in itertools.product(*values)]
    for i, extra in enumerate(explicit):
        if not isinstance(extra, dict):
            raise SweepError(f"grid: point {i + 1} is not a mapping: {extra!r}")
        points.append({**fixed, **extra})
    if not points:
        raise SweepError("the grid has no points: give `grid` lists with at least one value each, or `points`")
    if plan is not None:  # each point runs up to the plan's last look; the looks set how far it has got
        wrong = sorted({p["limit"] for p in points if p.get("limit") not in (None, plan["max_items"])}, key=str)
        if wrong:
            raise SweepError(f"grid: a point's limit {wrong[0]!r} is not the plan's max_items {plan['max_items']}")
        points = [{**p, "limit": plan["max_items"]} for p in points]
    unique = list({params_hash(p): p for p in points}.values())
    varying = [k for k in dict.fromkeys(k for p in unique for k in p)
               if k not in SPEED_ONLY and len({json.dumps(p.get(k), sort_keys=True, default=str) for p in unique}) > 1]
    return [Point(point_id(p, varying), p) for p in unique]


def point_id(parameters: dict, varying: Iterable[str]) -> str:
    """A readable, stable file name: the varying values, then a hash of all parameters."""
    parts = []
    for key in varying:
        if key in parameters:
            value = parameters[key]
            text = value if isinstance(value, str) else json.dumps(value, default=str)
            parts.append(text if key == "protocol" else f"{key}{text}")
    name = "-".join(parts)
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:80]
    return f"{name}-{params_hash(parameters)}" if name else params_hash(parameters)


def primary_comparison(grid: dict) -> dict | None:
    """A grid's registered primary comparison: `{"config": ..., "against": ..., "margin": ...}`, or None.

        primary: {config: society_of_mind@3, against: self_consistency, margin: 0.10}

    `config` and `against` name configurations as the study report labels them (a protocol, or
    `society_of_mind@3`: the debate run's majority after round 3; `society_of_mind@vote`: its round-1
    vote); `margin` is the equivalence margin of the report's TOSTs (None: `paired.EQUIVALENCE_MARGIN`).

    Raises:
        SweepError: `primary` is not such a mapping.
    """
    primary = grid.get("primary")
    if primary is None:
        return None
    if not isinstance(primary, dict) or not {"config", "against"} <= set(primary) or set(primary) - {"config", "against",
                                                                                                    "margin"}:
        raise SweepError("grid: `primary` must be a mapping with `config` and `against` (and optionally `margin`), "
                         "e.g. {config: society_of_mind@3, against: self_consistency}")
    names = [primary["config"], primary["against"]]
    if not all(isinstance(n, str) and n.strip() for n in names) or names[0] == names[1]:
        raise SweepError("grid: `primary.config` and `primary.against` must name two different configurations")
    margin = primary.get("margin")
    if margin is not None and (isinstance(margin, bool) or not isinstance(margin, (int, float)) or not 0 < margin < 1):
        raise SweepError(f"grid: `primary.margin` must be a number between 0 and 1, got {margin!r}")
    return {"config": names[0].strip(), "against": names[1].strip(), "margin": None if margin is None else float(margin)}


def study_plan(grid: dict) -> dict | None:
    """A grid's sequential plan, checked and complete, or None:

        plan:
          primary: {config: society_of_mind@3, against: self_consistency}
          alpha: 0.05
          margin: 0.10
          looks: [50, 100, 150]        # items per point at each look; the last is max_items
          stopping: lan-demets-obrien-fleming

    The endpoint is the paired accuracy difference of the primary comparison (the grid's
    `primary`, if it has one, must be the plan's). `max_items` (the last look, unless given) is each
    point's `limit`.

    Raises:
        SweepError: a malformed plan, naming what is wrong.
    """
    plan = grid.get("plan")
    if plan is None:
        return None
    known = {"primary", "endpoint", "alpha", "margin", "looks", "max_items", "stopping"}
    if not isinstance(plan, dict) or "primary" not in plan or "looks" not in plan or set(plan) - known:
        raise SweepError("grid: `plan` must be a mapping with `primary` and `looks` (and optionally endpoint, alpha, "
                         f"margin, max_items, stopping); it has {sorted(plan) if isinstance(plan, dict) else plan!r}")
    primary = primary_comparison({"primary": plan["primary"]})
    if grid.get("primary") is not None and primary_comparison(grid) != primary:
        raise SweepError("grid: `primary` and `plan.primary` name different comparisons; give it once, in the plan")
    looks = plan["looks"]
    if (not isinstance(looks, list) or not looks or not all(isinstance(n, int) and not isinstance(n, bool) and n > 1
                                                            for n in looks) or looks != sorted(set(looks))):
        raise SweepError(f"grid: `plan.looks` must be increasing item counts above 1, got {looks!r}")
    max_items = plan.get("max_items", looks[-1])
    if max_items != looks[-1]:
        raise SweepError(f"grid: `plan.max_items` ({max_items!r}) must be the last look ({looks[-1]})")
    alpha, margin = plan.get("alpha", 0.05), plan.get("margin", primary["margin"] or 0.10)
    for name, value, top in (("alpha", alpha, 0.5), ("margin", margin, 1)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < top:
            raise SweepError(f"grid: `plan.{name}` must be a number between 0 and {top}, got {value!r}")
    endpoint = plan.get("endpoint", "paired accuracy difference")
    if endpoint != "paired accuracy difference":
        raise SweepError(f"grid: `plan.endpoint` can only be 'paired accuracy difference', got {endpoint!r}")
    stopping = plan.get("stopping", "lan-demets-obrien-fleming")
    if stopping not in STOPPING:
        raise SweepError(f"grid: `plan.stopping` must be one of {', '.join(sorted(STOPPING))}, got {stopping!r}")
    return {"primary": {**primary, "margin": float(margin)}, "endpoint": endpoint, "alpha": float(alpha),
            "margin": float(margin), "looks": list(looks), "max_items": looks[-1], "stopping": stopping}


def reused_point(name, points: list[Point]) -> Point | None:
    """The point a `reuse` parameter names by its protocol (a vote reusing a debate's round-1 answers,
    `self_consistency(reuse=...)`), or None when it is a path (or no text).

    Raises:
        SweepError: no point, or more than one, runs that protocol.
    """
    if not isinstance(name, str) or "/" in name:
        return None
    matches = [p for p in points if p.parameters.get("protocol") == name]
    if len(matches) != 1:
        raise SweepError(f"reuse: {len(matches)} points of the grid run {name!r}; name one debate point")
    return matches[0]


RUN_OVERRIDES = ("model", "api_base", "api_key_env")
"""Run settings `retargeted` may set on every point of a grid (`debatekit study --model ...`)."""


def retargeted(grid: dict, run: dict, sets: dict) -> dict:
    """The same design on another model: `grid` with its points listed one by one, each taking
    `run` (model, api_base, api_key_env) and each protocol parameter of `sets` that its protocol has.
    Each point keeps the readable part of its id (what varies between points) and gets another
    hash, so its run folder is never the original's; `primary` and `plan` carry over.

    Raises:
        SweepError: a run setting not in `RUN_OVERRIDES`, or a parameter of `sets` that no point's protocol has.
    """
    from debatekit import registry

    unknown = sorted(set(run) - set(RUN_OVERRIDES))
    if unknown:
        raise SweepError(f"cannot set {', '.join(unknown)} on every point; only {', '.join(RUN_OVERRIDES)}")
    points = [dict(p.parameters) for p in expand_grid(grid)]
    for key, value in sets.items():
        taking = [p for p in points if registry.get(p.get("protocol", "")).accepts(key)]
        if not taking:
            raise SweepError(f"no point's protocol has parameter {key!r}")
        for p in taking:
            p[key] = value
    shape = grid if GRID_KEYS & set(grid) else {"grid": grid}
    return {"points": [{**p, **run} for p in points], **{k: v for k, v in shape.items() if k in STUDY_KEYS}}
