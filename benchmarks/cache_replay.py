"""Cache replay: the concurrency sweep (450 calls to the 300 ms loopback server) run twice
with debatekit's response cache; the second run must make zero model calls and take under
5% of the first run's wall time.

    python -m benchmarks cache_replay [--items 50] [--latency 0.3]
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from benchmarks.common import quiet_env, save
from benchmarks.concurrency import sweep_config, timed_run, warm_litellm
from benchmarks.fakeserver import FakeServer


def measure(items: int, latency: float, in_flight: int) -> dict:
    quiet_env()
    os.environ["DEBATEKIT_CACHE_DIR"] = tempfile.mkdtemp(prefix="dk-bench-cache-")  # an empty cache
    runs = Path(tempfile.mkdtemp(prefix="dk-bench-"))
    with FakeServer(latency=latency) as server:
        warm_litellm(server.base_url)
        server.reset()
        config = sweep_config(server.base_url, items, in_flight, cache=True)
        first = timed_run(config, runs / "first")
        after_first = server.stats()["requests"]
        second = timed_run(config, runs / "second")
        after_second = server.stats()["requests"]
    share = second["wall_s"] / first["wall_s"]
    return {
        "setup": {"items": items, "agents": 3, "rounds": 3, "latency_s": latency, "max_calls_in_flight": in_flight,
                  "cache": "debatekit sqlite response cache, empty before the first run"},
        "first_run": dict(first, server_requests=after_first),
        "replay_run": dict(second, server_requests=after_second - after_first),
        "replay_share_of_first_wall": round(share, 4),
        "targets": {"zero_model_calls": second["provider_calls"] == 0 and after_second == after_first,
                    "share_below": 0.05, "share_met": share < 0.05},
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks cache_replay")
    parser.add_argument("--items", type=int, default=50)
    parser.add_argument("--latency", type=float, default=0.3)
    parser.add_argument("--in-flight", type=int, default=32)
    args = parser.parse_args(argv)
    save("cache_replay", measure(args.items, args.latency, args.in_flight))
    return 0
