"""How many slots should a local engine have on this machine? Completion rate of one queue of
calls at several slot counts.

A long run on the embedded model keeps many calls waiting (a self_consistency point: 12 items of
9 samples each; a society_of_mind point: 12 debates of 3 agents). The engine batches the calls
of its busy slots into each step, so more slots can mean more tokens a second, until the cores
are the limit; each call runs slower as more share a step, and each slot's KV cache takes memory.
For each `--slots` count, a freshly loaded engine of the 1.5B model gets the same `--requests`
GSM8K questions at once (temperature 0.7, the i-th with seed i, at most `--max-tokens` tokens),
after one untimed warm-up call. Reported per count: wall time, completion tokens a second, each
call's latency (median and slowest) and the KV cache's size (`settings.KV_BYTES_PER_TOKEN` bound).

    python -m benchmarks slots [--slots 4,8,16,32] [--requests 64] [--max-tokens 192] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from benchmarks.common import at_once, fresh_engine, save
from benchmarks.two_models import BIG, SYSTEM, questions


def request(question: str, seed: int, max_tokens: int) -> dict:
    return {"messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}],
            "temperature": 0.7, "max_tokens": max_tokens, "seed": seed}


def measure(slots: int, qs: list[str], max_tokens: int) -> dict:
    """One freshly loaded engine with `slots` slots, all of `qs` sent at once."""
    from debatekit.models.local import settings

    engine = fresh_engine(slots, BIG, request("Say OK.", 0, 4))
    replies, latencies, wall = at_once(engine, [request(q, i, max_tokens) for i, q in enumerate(qs)])
    tokens = sum(r["usage"]["completion_tokens"] for r in replies)
    return {"slots": slots, "requests": len(qs), "wall_s": round(wall, 1), "completion_tokens": tokens,
            "completion_tok_per_s": round(tokens / wall, 2), "latency_median_s": round(statistics.median(latencies), 1),
            "latency_max_s": round(max(latencies), 1),
            "kv_cache_gib_bound": round(slots * settings.ctx() * settings.KV_BYTES_PER_TOKEN / 2**30, 2)}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks slots")
    parser.add_argument("--slots", default="4,8,16,32")
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--max-tokens", type=int, default=192)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    qs = questions(args.requests)
    result: dict = {"workload": {"model": BIG, "dataset": "gsm8k", "requests": args.requests,
                                 "max_tokens": args.max_tokens, "temperature": 0.7}, "counts": []}
    for count in (int(c) for c in args.slots.split(",")):
        row = measure(count, qs, args.max_tokens)
        result["counts"].append(row)
        print(json.dumps(row), flush=True)
    best = max(result["counts"], key=lambda r: r["completion_tok_per_s"])
    result["fastest_slots"] = best["slots"]
    save("slots", result, args.out)
    return 0
