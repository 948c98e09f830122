"""One sweep point: its configuration (`point_config`), run inside the notebook (`run_point`), and the
sidecar the sweep reads (`record_point`)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from debatekit._base import files

if TYPE_CHECKING:
    from debatekit.records.schemas import RunConfig

SIDECAR_VERSION = 2
"""2: the sidecar holds the run's `config` (version 1 held the notebook's parameters)."""
GRID_NAMES = {"timeout": "call_timeout"}
"""Grid keys that name a `RunConfig` field another way: a grid's `timeout` is the run's `call_timeout`,
as `debatekit run --timeout` is."""
PARAMS_IN = ("params", "extra", "thresholds")
"""Grid keys whose mapping holds protocol parameters: `params`, as in `RunConfig`; `extra` and
`thresholds`, as grids wrote them when the notebook took its parameters one by one."""


def anchored(protocol, base: Path | None):
    """A protocol name as a kernel must see it: a relative `file.py:name` taken from `base` (the
    grid file's folder), made absolute; any other name unchanged."""
    from debatekit import registry

    if base is None or not isinstance(protocol, str) or not registry.is_file_reference(protocol):
        return protocol
    path, _, name = protocol.rpartition(":")
    return protocol if Path(path).is_absolute() else f"{(base / path).resolve()}:{name}"


def point_config(parameters: dict, base: Path | None = None) -> RunConfig:
    """The `RunConfig` a grid point runs: the one place where a grid's keys become a run's configuration.

    A key that is a `RunConfig` field (or `timeout`, `GRID_NAMES`) sets that field; every other key, and
    each one of a mapping under `params`, `extra` or `thresholds`, is a protocol parameter, where
    `agents` and `rounds` mean what `debatekit run --agents/--rounds` mean (dynamics' `rounds` is its
    `max_rounds`: `ProtocolSpec.generic`). A None value is the default (the run's or the protocol's).
    A protocol file's relative path is taken from `base`, the grid's folder. The protocol parameters
    are checked when the run builds its protocol (before any kernel starts: `guard.check_points`).

    Raises:
        pydantic.ValidationError: a run setting `RunConfig` refuses (or no protocol or dataset).
        ProtocolError: an unknown protocol.
    """
    from debatekit import registry
    from debatekit.records.schemas import RunConfig

    fields, params, nested = {}, {}, {}
    for key, value in parameters.items():
        name = GRID_NAMES.get(key, key)
        if name in PARAMS_IN and isinstance(value, dict):
            nested.update(value)
        elif name in RunConfig.model_fields and name != "params":
            fields[name] = value
        else:
            params[key] = value
    fields = {k: v for k, v in fields.items() if v is not None}
    if "protocol" in fields:
        fields["protocol"] = anchored(fields["protocol"], base)
        spec = registry.get(str(fields["protocol"]))
        params = spec.generic({k: v for k, v in {**params, **nested}.items() if v is not None})
    return RunConfig(**fields, params=params)


def run_point(config: RunConfig | dict, out_dir: str | Path, *, retry_degraded: bool = False, progress: bool = True):
    """Run one configuration into `out_dir` (resuming it if a previous attempt was cut short).

    Args:
        config: a `RunConfig`, or its dict (what `debatekit sweep` gives the notebook: `point_config`).
        retry_degraded: also run again the debates a previous attempt finished as `degraded` (an answer
            although some of its calls failed; `debatekit run --resume --retry-degraded`).
    """
    from debatekit.records.schemas import RunConfig
    from debatekit.runner import run

    return run(RunConfig.model_validate(config), out_dir, resume=True, retry_degraded=retry_degraded,
               progress=progress)


def record_point(summary_path: str | None, result) -> dict:
    """Write the sidecar the sweep reads: status, the run's configuration, run folder, summary, provenance.

    The sweep then stamps the point's hash on the file. With no `summary_path` (an interactive run)
    nothing is written.
    """
    record = result.record
    where = Path(result.path).resolve()
    if summary_path:  # relative to the sidecar, so a sweep folder can move
        where = Path(os.path.relpath(where, Path(summary_path).resolve().parent))
    data = {"sidecar_version": SIDECAR_VERSION, "status": record.status,
            "config": record.config.model_dump(mode="json"), "run_path": str(where), "run_id": record.run_id,
            "config_hash": record.config_hash, "model": record.model, "seed": record.config.seed,
            "protocol": record.config.protocol, "dataset": record.dataset.name,
            "debatekit_version": record.debatekit_version, "git_commit": record.git_commit,
            "summary": record.summary}
    if summary_path:
        files.write_text(summary_path, json.dumps(data, indent=2, default=str))
    return data


def stamp(sidecar: Path, digest: str) -> bool:
    """Mark a sidecar the notebook wrote as this point's result; False if it is missing or incomplete."""
    data = _read(sidecar)
    if data is None or data.get("status") != "complete":
        return False
    files.write_text(sidecar, json.dumps({**data, "point_hash": digest}, indent=2, default=str))
    return True


def is_complete_sidecar(path: Path, digest: str) -> bool:
    """Whether `path` is a complete sidecar stamped for the point with this parameter digest."""
    data = _read(path)
    return data is not None and data.get("status") == "complete" and data.get("point_hash") == digest


def items_done(path: Path) -> int:
    """How many items the point's sidecar says its run has (0 without a readable one)."""
    data = _read(path)
    summary = data.get("summary") if data else None
    items = summary.get("items") if isinstance(summary, dict) else None
    return items if isinstance(items, int) else 0


def unanswered_debates(path: Path) -> int:
    """How many debates the point's sidecar counts as unanswered (failed: their calls failed, or the
    protocol raised); the next run of the sweep runs the point again to retry them."""
    data = _read(path)
    summary = data.get("summary") if data else None
    failed = summary.get("failed") if isinstance(summary, dict) else None
    return failed if isinstance(failed, int) else 0


def degraded_debates(path: Path) -> int:
    """How many debates the point's sidecar counts as degraded (answered although some calls failed)."""
    data = _read(path)
    summary = data.get("summary") if data else None
    degraded = summary.get("degraded") if isinstance(summary, dict) else None
    return degraded if isinstance(degraded, int) else 0


def _read(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
