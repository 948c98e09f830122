"""Task functions for Dask executor tests (importable by worker processes)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from debatekit.sweep import PointResult


def finish_or_die(task: dict) -> PointResult:
    """Writes the point's own result file, except point `dies`, which kills its worker mid-point."""
    if task["point_id"] == "dies":
        os._exit(1)
    Path(task["output"]).write_text(json.dumps({"status": "complete", "pid": os.getpid()}))
    return PointResult(task["point_id"], "complete", task["output"])
