"""One sweep point: run its configuration inside the notebook and record the sidecar the sweep reads."""

from __future__ import annotations

import json
import os
from pathlib import Path

from debatekit._base import files
from debatekit.sweep.grid import RESERVED

SIDECAR_VERSION = 1


def run_point(protocol: str, dataset: str, out_dir: str, *, limit: int | None = None, model: str | None = None,
              seed: int = 0, seeds: int = 1, concurrency: int = 4, call_timeout: float | None = None,
              progress: bool = True, api_base: str | None = None, api_key_env: str | None = None,
              model_options: dict | None = None, max_tokens: int | None = None, retry_degraded: bool = False,
              cache: bool = True, **params):
    """Run one configuration into `out_dir` (resuming it if a previous attempt was cut short).

    `params` are protocol parameters; None values mean "the protocol's default". `rounds` and
    `agents` mean what `debatekit run --rounds/--agents` mean (dynamics: `rounds` is `max_rounds`).
    A non-None parameter the protocol does not have is an error. `seeds` runs each item under that many
    seeds. `api_base` and `api_key_env` (the name of the variable holding the key) go with
    `model`, e.g. an OpenAI-compatible server such as `debatekit serve` (see `RunConfig`);
    other litellm arguments go in `model_options`. `retry_degraded` also runs again the debates a previous
    attempt finished as `degraded` (an answer although some of its calls failed; `debatekit run
    --resume --retry-degraded`). `cache` False runs without the response cache (`sweep.plan.estimate`).
    """
    from debatekit import registry
    from debatekit.records.schemas import RunConfig
    from debatekit.runner import run

    spec = registry.get(protocol)
    given = spec.generic({k: v for k, v in params.items() if v is not None})
    spec.validate(given)
    extra = {"max_tokens": max_tokens} if max_tokens else {}
    config = RunConfig(protocol=protocol, dataset=dataset, limit=limit, model=model, params=given, seed=seed,
                       seeds=seeds, concurrency=concurrency, call_timeout=call_timeout, api_base=api_base,
                       api_key_env=api_key_env, cache=cache, **extra)
    if model_options:
        config = config.model_copy(update={"model_options": {config.run_model: model_options}})
    return run(config, out_dir, resume=True, retry_degraded=retry_degraded, progress=progress)


def record_point(summary_path: str | None, result, parameters: dict) -> dict:
    """Write the sidecar the sweep reads: status, parameters, run folder, summary, provenance.

    `parameters` are the notebook's parameters (the sweep then stamps the point's hash on
    the file). With no `summary_path` (an interactive run) nothing is written.
    """
    point = {k: v for k, v in parameters.items() if k not in RESERVED}
    record = result.record
    where = Path(result.path).resolve()
    if summary_path:  # relative to the sidecar, so a sweep folder can move
        where = Path(os.path.relpath(where, Path(summary_path).resolve().parent))
    data = {"sidecar_version": SIDECAR_VERSION, "status": record.status, "parameters": point,
            "run_path": str(where), "run_id": record.run_id,
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
