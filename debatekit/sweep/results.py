"""What one executed sweep point reports, shared by every executor (local processes, Dask)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class PointResult:
    point_id: str
    status: str  # complete | skipped | failed | drained
    notebook: str
    error: str | None = None
    cell: int | None = None
    cell_source: str | None = None
    attempts: int = 0
    wall_s: float = 0.0
