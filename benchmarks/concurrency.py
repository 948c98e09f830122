"""Concurrency against a latency-bound API: debatekit vs a sequential loop vs the lower bound.

A loopback OpenAI-compatible server (benchmarks/fakeserver.py, 300 ms per call, own process)
is reached through litellm as `openai/fake-300ms` with `api_base` in RunConfig.model_options.
society_of_mind, 3 agents x 3 rounds (no early stop) over 50 items = 450 calls, at most 32 in
flight. The sequential side replays the very request bodies the server logged during the
debatekit run, one `litellm.acompletion` at a time (how the reference implementations of Du
et al. and MAD run). CPU per call is the client process's CPU time divided by calls: for the
sequential loop that is litellm (and httpx) alone, for debatekit it adds debatekit's share.

    python -m benchmarks concurrency [--items 50] [--latency 0.3] [--in-flight 32] [--sequential-calls N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path

from benchmarks.common import quiet_env, save
from benchmarks.fakeserver import FakeServer

MODEL = "openai/fake-300ms"
AGENTS, ROUNDS = 3, 3


def sweep_config(base_url: str, items: int, in_flight: int, cache: bool):
    from debatekit.records.schemas import RunConfig

    return RunConfig(protocol="society_of_mind", dataset="arithmetic", limit=items, model=MODEL, cache=cache,
                     concurrency=items, max_calls_in_flight=in_flight, call_timeout=30,
                     params={"agents": AGENTS, "rounds": ROUNDS, "stop_on_agreement": False},
                     model_options={MODEL: {"api_base": base_url, "api_key": "sk-fake-benchmark"}})


def timed_run(config, out: Path) -> dict:
    """One debatekit run: wall, client CPU, calls."""
    from debatekit.runner import run

    c0, t0 = time.process_time(), time.perf_counter()
    result = run(config, out, progress=False)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    s = result.summary
    return {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "calls": s["calls"],
            "provider_calls": s["provider_calls"], "cache_hits": s["cache_hits"], "failed_items": s["failed"],
            "errors": sum(d.usage.errors for d in result.debates), "items": s["items"]}


def warm_litellm(base_url: str) -> None:
    """Import litellm and make one call so neither side pays first-call costs."""
    from debatekit.models.providers import litellm_module as _litellm

    litellm = _litellm()
    asyncio.run(litellm.acompletion(model=MODEL, messages=[{"role": "user", "content": "hi"}],
                                    api_base=base_url, api_key="sk-fake-benchmark", num_retries=0))


async def sequential(bodies: list[dict], base_url: str) -> dict:
    from debatekit.models.providers import litellm_module as _litellm

    litellm = _litellm()
    c0, t0 = time.process_time(), time.perf_counter()
    for body in bodies:
        kwargs = {k: body[k] for k in ("temperature", "seed", "max_tokens", "response_format") if k in body}
        reply = await litellm.acompletion(model=MODEL, messages=body["messages"], api_base=base_url,
                                          api_key="sk-fake-benchmark", num_retries=0, **kwargs)
        assert reply.choices[0].message.content
    return {"calls": len(bodies), "wall_s": round(time.perf_counter() - t0, 3),
            "cpu_s": round(time.process_time() - c0, 3)}


def measure(items: int, latency: float, in_flight: int, sequential_calls: int | None) -> dict:
    quiet_env()
    os.environ["DEBATEKIT_CACHE_DIR"] = tempfile.mkdtemp(prefix="dk-bench-cache-")
    with FakeServer(latency=latency) as server:
        warm_litellm(server.base_url)
        server.reset()
        config = sweep_config(server.base_url, items, in_flight, cache=False)
        dk = timed_run(config, Path(tempfile.mkdtemp(prefix="dk-bench-")) / "run")
        server_stats = server.stats()
        bodies = [b for b in server.requests() if b["messages"] != [{"role": "user", "content": "hi"}]]
        replay = bodies[:sequential_calls] if sequential_calls else bodies
        seq = asyncio.run(sequential(replay, server.base_url))
    calls = dk["calls"]
    seq_wall_full = seq["wall_s"] / seq["calls"] * calls  # equals the measured wall when every call is replayed
    bound = max(calls * latency / in_flight, ROUNDS * latency)
    litellm_cpu_ms = seq["cpu_s"] / seq["calls"] * 1000
    dk_cpu_ms = dk["cpu_s"] / calls * 1000
    speedup = seq_wall_full / dk["wall_s"]
    return {
        "setup": {"items": items, "agents": AGENTS, "rounds": ROUNDS, "latency_s": latency,
                  "max_calls_in_flight": in_flight, "model": MODEL, "server": "aiohttp, 127.0.0.1, own process"},
        "debatekit": dict(dk, server_requests=server_stats["requests"],
                          server_max_in_flight=server_stats["max_in_flight"]),
        "sequential": dict(seq, extrapolated=seq["calls"] != calls,
                           wall_s_for_all_calls=round(seq_wall_full, 3)),
        "lower_bound_s": round(bound, 3),
        "speedup_vs_sequential": round(speedup, 2),
        "ratio_to_lower_bound": round(dk["wall_s"] / bound, 3),
        # a negative own share means the sequential loop pays per-call costs that concurrent calls
        # share (event-loop wake-ups, connection reuse); `overhead` isolates debatekit's own share
        "cpu_ms_per_call": {
            "litellm_alone": round(litellm_cpu_ms, 3),
            "debatekit_total": round(dk_cpu_ms, 3),
            "debatekit_own": round(dk_cpu_ms - litellm_cpu_ms, 3),
            "debatekit_share": round((dk_cpu_ms - litellm_cpu_ms) / dk_cpu_ms, 3),
        },
        "targets": {"speedup_at_least": 20, "speedup_met": speedup >= 20,
                    "within_x_of_bound": 1.5, "bound_met": dk["wall_s"] <= 1.5 * bound},
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks concurrency")
    parser.add_argument("--items", type=int, default=50)
    parser.add_argument("--latency", type=float, default=0.3)
    parser.add_argument("--in-flight", type=int, default=32)
    parser.add_argument("--sequential-calls", type=int, default=None,
                        help="replay only the first N calls sequentially and extrapolate (default: all)")
    args = parser.parse_args(argv)
    save("concurrency", measure(args.items, args.latency, args.in_flight, args.sequential_calls))
    return 0
