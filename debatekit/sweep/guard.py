"""Checks before a sweep starts any kernel: every point's configuration, and the size of the grid.

A wrong value (`agents: three`, `limit: 0`, an unknown parameter, protocol or dataset) fails the whole sweep at once,
naming the point, instead of after a kernel has started for each point. A grid of more than
`LARGE` points to run says how many and roughly how long first, and asks before starting when
stdin is a terminal (`--yes` skips the question).
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Callable

from debatekit.sweep.grid import Point, SweepError

LARGE = 200
"""Points to run above which `debatekit sweep` asks before starting (at a terminal)."""
SECONDS_PER_POINT = 4.0
"""What a point costs beside its run: a Jupyter kernel starts, runs the notebook, stops."""
def check_points(points: list[Point], base: Path | None = None) -> list:
    """The configuration of every point, in order (`point.point_config`; a protocol file relative to
    `base`, the grid's folder), its protocol parameters validated.

    Raises:
        SweepError: the first point with an unknown protocol or dataset, an unknown parameter, a wrong
            value or a run setting `RunConfig` refuses.
    """
    from pydantic import ValidationError

    from debatekit import registry
    from debatekit._base.validation import first_error
    from debatekit.sweep.point import point_config

    from debatekit.datasets import DatasetError, resolve

    checked, found, configs = set(), set(), []
    for point in points:
        try:
            config = point_config(point.parameters, base)
            if config.dataset not in found:  # the kernels run in this folder: a dataset it cannot find, they cannot
                resolve(config.dataset)
                found.add(config.dataset)
            key = json.dumps([config.protocol, config.params], sort_keys=True, default=str)
            if key not in checked:  # points that differ only in run settings (seed, dataset) are checked once
                checked.add(key)
                registry.get(config.protocol).validate(config.params)
        except (registry.ProtocolError, DatasetError) as exc:
            raise SweepError(f"point {point.id}: {exc}") from exc
        except ValidationError as exc:
            field, message = first_error(exc)
            raise SweepError(f"point {point.id}: run setting {field!r}: {message}") from exc
        configs.append(config)
    return configs


def estimate_seconds(out: Path, to_run: int, workers: int) -> float | None:
    """Rough wall time of `to_run` points: the median run time recorded in the points' sidecars in
    `out` (each point's latest session) over `workers` at once; None when none has one, since a
    point's time depends on its model and items (seconds on a scripted model, hours on the local one)."""
    times = []
    for sidecar in out.glob("*.json"):
        try:
            wall = json.loads(sidecar.read_text(encoding="utf-8")).get("summary", {}).get("wall_s")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(wall, (int, float)):
            times.append(wall + SECONDS_PER_POINT)
    if not times:
        return None
    return statistics.median(times) * to_run / max(1, workers)


def announce(to_run: int, skipped: int, seconds: float | None, *, yes: bool = False,
             ask: Callable[[str], str] | None = None, interactive: bool | None = None) -> bool:
    """Print the size of the sweep (and its time, once a finished point gives one); over LARGE points
    at a terminal, ask unless `yes`. True: go ahead."""
    if not to_run:
        how_long = ""
    elif seconds is None:
        how_long = "; time unknown: no finished point here to time them from"
    else:
        how_long = "; roughly " + (f"{seconds / 3600:.1f} h" if seconds >= 3600 else (
            f"{seconds / 60:.0f} min" if seconds >= 60 else f"{seconds:.0f} s"))
    print(f"sweep: {to_run} points to run ({skipped} already complete){how_long}", file=sys.stderr)
    interactive = sys.stdin.isatty() if interactive is None else interactive
    if to_run <= LARGE or yes or not interactive:
        return True
    return (ask or input)(f"start {to_run} points? [y/N] ").strip().lower() in ("y", "yes")
