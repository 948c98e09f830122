"""A sweep folder's tables: `summary` (one row per point and item) and `rounds`, built from complete points."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from debatekit._base import files
from debatekit.sweep.grid import SweepError
from debatekit.sweep.point import is_complete_sidecar


@dataclass
class SweepData:
    path: Path
    summary: pd.DataFrame
    rounds: pd.DataFrame
    points: list[dict]


def collect(out: Path | str) -> pd.DataFrame:
    """Build `summary.parquet` (one row per point and item) and `rounds.parquet` from the complete points."""
    from debatekit import analysis, registry

    out = Path(out)
    meta = json.loads((out / "sweep.json").read_text(encoding="utf-8"))
    summary, rounds = [], []
    for entry in meta["points"]:
        sidecar = out / f"{entry['id']}.json"
        if not is_complete_sidecar(sidecar, entry["hash"]):
            continue
        side = json.loads(sidecar.read_text(encoding="utf-8"))
        run_path = out / side["run_path"]
        run_path = run_path if (run_path / "run.json").exists() else out / entry["id"]
        tables = analysis.load_runs([run_path])
        spec_defaults = registry.get(side["protocol"]).defaults()
        params = {**spec_defaults, **{k: v for k, v in entry["parameters"].items() if v is not None}}
        columns = {"point_id": entry["id"], **{k: _cell(v) for k, v in params.items()},
                   "protocol": side["protocol"], "dataset": side["dataset"], "model": side["model"],
                   "seed": side["seed"], "config_hash": side["config_hash"],
                   "debatekit_version": side["debatekit_version"], "git_commit": side["git_commit"]}
        debates = tables.debates.drop(columns=["protocol", "model", "config_hash"], errors="ignore")
        if "seed" in debates:  # each debate's own seed (a point may run several)
            columns.pop("seed")
        summary.append(debates.assign(**_no_clash(columns, debates)))
        keep = {k: v for k, v in columns.items() if k in ("point_id", "protocol", "seed", *params)}
        rounds.append(tables.rounds.assign(**_no_clash(keep, tables.rounds)))
    frame = _tidy(pd.concat(summary, ignore_index=True) if summary else pd.DataFrame())
    _write_table(_tidy(pd.concat(rounds, ignore_index=True) if rounds else pd.DataFrame()), out / "rounds")
    _write_table(frame, out / "summary")
    return frame


def _no_clash(columns: dict, frame: pd.DataFrame) -> dict:
    """Parameter columns named like a column of the table (e.g. `answer`) get a `param_` prefix."""
    return {(f"param_{k}" if k in frame.columns else k): v for k, v in columns.items()}


def _cell(value: Any) -> Any:
    return json.dumps(value) if isinstance(value, (list, dict)) else value


def _tidy(frame: pd.DataFrame) -> pd.DataFrame:
    """Answers as text (their types differ between items), so the table stores in parquet."""
    for col in ("final_answer", "truth", "answer", "majority"):
        if col in frame:
            frame[col] = frame[col].map(lambda v: None if v is None else str(v))
    return frame


def _write_table(frame: pd.DataFrame, stem: Path) -> None:
    try:
        frame.to_parquet(files.refuse_link(stem.with_suffix(".parquet")), index=False)
    except ImportError:
        frame.to_csv(files.refuse_link(stem.with_suffix(".csv")), index=False)


def _read_table(stem: Path) -> pd.DataFrame:
    if stem.with_suffix(".parquet").exists():
        return pd.read_parquet(stem.with_suffix(".parquet"))
    if stem.with_suffix(".csv").exists():
        return pd.read_csv(stem.with_suffix(".csv"))
    raise SweepError(f"{stem.parent} has no {stem.name}.parquet or .csv: not a sweep folder (run `debatekit sweep`)")


def load(out: Path | str) -> SweepData:
    """Load a sweep folder's tables (summary per point and item, rounds per point, item, round and agent)."""
    out = Path(out)
    if not (out / "sweep.json").exists():
        raise SweepError(f"{out} is not a sweep folder (no sweep.json)")
    meta = json.loads((out / "sweep.json").read_text(encoding="utf-8"))
    return SweepData(out, _read_table(out / "summary"), _read_table(out / "rounds"), meta["points"])
