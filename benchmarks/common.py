"""Shared helpers: machine description, timing statistics, result files."""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def machine() -> dict:
    """What the numbers were measured on (CPU, cores, memory, load, versions)."""
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem_gib = round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    from importlib.metadata import PackageNotFoundError, version

    def ver(name):
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).parent).stdout.strip() or None
    return {
        "cpu": cpu, "cores": os.cpu_count(), "memory_gib": mem_gib,
        "load_avg_1m_5m_15m": [round(x, 2) for x in os.getloadavg()],
        "os": platform.platform(), "python": sys.version.split()[0],
        "versions": {p: ver(p) for p in ("debatekit", "litellm", "pydantic", "xllamacpp", "httpx", "aiohttp")},
        "git_commit": commit,
        "note": "shared machine: other processes may have been running (see load_avg)",
    }


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def dist_ms(seconds: list[float]) -> dict:
    """Median, p10, p90, mean of durations in milliseconds."""
    ms = [s * 1000 for s in seconds]
    return {"n": len(ms), "median_ms": round(statistics.median(ms), 3), "p10_ms": round(pct(ms, 0.1), 3),
            "p90_ms": round(pct(ms, 0.9), 3), "mean_ms": round(statistics.fmean(ms), 3)}


def save(name: str, result: dict, path: Path | None = None) -> Path:
    """Write `results/NAME.json` (or `path`) with the machine description and a timestamp; print it."""
    data = {"benchmark": name, "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "machine": machine(), **result}
    path = path or RESULTS / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n")
    print(json.dumps(data, indent=2))
    print(f"written: {path}", file=sys.stderr)
    return path


def quiet_env() -> None:
    """Offline litellm settings (the gateway sets them too; bare-litellm baselines need them first)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_TELEMETRY", "False")


def fresh_engine(slots: int, model: str | None = None, warm_up: dict | None = None):
    """A freshly loaded local engine of `model` (default the 1.5B) with `slots` slots, after one
    untimed call (`warm_up`, default a 4-token "Say OK."): the first call pays for warm-up."""
    import gc

    from benchmarks.two_models import BIG
    from debatekit.models.local import engine as local
    from debatekit.models.local import weights

    gc.collect()
    engine = local.Engine(weights.pull(model or BIG, say=lambda msg: None), slots)
    engine.chat(warm_up or {"messages": [{"role": "user", "content": "Say OK."}], "max_tokens": 4})
    return engine


def at_once(engine, requests: list[dict]) -> tuple[list[dict], list[float], float]:
    """Every request sent to `engine` at the same moment, one thread each: the replies, each
    request's latency in seconds, and the wall time from the first send to the last reply."""
    from concurrent.futures import ThreadPoolExecutor

    def timed(req: dict) -> tuple[dict, float]:
        start = time.perf_counter()
        reply = engine.chat(req)
        return reply, time.perf_counter() - start

    with ThreadPoolExecutor(max_workers=len(requests)) as pool:
        start = time.perf_counter()
        done = list(pool.map(timed, requests))
        wall = time.perf_counter() - start
    return [r for r, _ in done], [s for _, s in done], wall
