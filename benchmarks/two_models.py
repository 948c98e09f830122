"""Two local models in one process on 2 cores: how should their engines share the cores?

A debate that mixes models (issue 33: agents on the 1.5B and the 0.5B model, or a 0.5B judge)
loads one engine per model in the same process. Three ways for them to share the cores, each on
freshly loaded engines, each given the same workload:

- `turns` (`DEBATEKIT_LOCAL_MIX=turns`): both engines use every core and take turns
  (`cores.Turns`): one engine generates while the other has nothing running, calls of one engine
  batched together.
- `together` (debatekit's default, since it measured fastest): both engines use every core and
  generate at the same moment (twice as many threads as cores).
- `split`: each engine gets half of the cores and they generate at the same moment.

The workload is `--rounds` mixed rounds, like a debate round of agents on (1.5B, 1.5B, 0.5B): in each,
two GSM8K questions go to the 1.5B model and one to the 0.5B model at once, temperature 0,
`--max-tokens` each; a round ends when its three replies are in. Reported per policy: wall time per
round, completion tokens per second overall and per model.

`--alone` also measures each model alone (one request, then as many at once as it has slots): the
speed the issue asks of the small model, beside the default's.

    python -m benchmarks two_models [--rounds 3] [--max-tokens 200] [--alone] [--out PATH]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from benchmarks.common import save

BIG, SMALL = "qwen2.5-coder-1.5b-instruct", "qwen2.5-coder-0.5b-instruct"
SYSTEM = "Solve the math problem step by step, then end with: The answer is N."


def questions(n: int) -> list[str]:
    from debatekit.datasets import loading

    items, _ = loading.load("gsm8k", limit=n)
    return [item.question for item in items]


def request(question: str, max_tokens: int) -> dict:
    return {"messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}],
            "temperature": 0.0, "max_tokens": max_tokens, "seed": 0}


def load(policy: str) -> dict:
    """Fresh engines for both models under `policy`."""
    from debatekit.models.local import cores
    from debatekit.models.local import engine as local
    from debatekit.models.local import settings, weights

    gc.collect()
    total = max(1, os.cpu_count() or 1)
    shared = cores.Turns()
    engines = {}
    for name in (BIG, SMALL):
        path = weights.pull(name, say=lambda msg: None)
        threads = max(1, total // 2) if policy == "split" else total
        turns = shared if policy == "turns" else cores.Turns()
        engines[name] = local.Engine(path, settings.slots(), threads=threads, turns=turns)
    return engines


def timed(engine, req: dict) -> dict:
    start = time.perf_counter()
    reply = engine.chat(req)
    return {"s": time.perf_counter() - start, "completion_tokens": reply["usage"]["completion_tokens"]}


def mixed_rounds(engines: dict, qs: list[str], rounds: int, max_tokens: int) -> dict:
    walls, per_model = [], {BIG: 0, SMALL: 0}
    with ThreadPoolExecutor(max_workers=3) as pool:
        for r in range(rounds):
            plan = [(BIG, qs[3 * r]), (BIG, qs[3 * r + 1]), (SMALL, qs[3 * r + 2])]
            start = time.perf_counter()
            futures = [(name, pool.submit(timed, engines[name], request(q, max_tokens))) for name, q in plan]
            done = [(name, f.result()) for name, f in futures]
            walls.append(time.perf_counter() - start)
            for name, d in done:
                per_model[name] += d["completion_tokens"]
    total_wall = sum(walls)
    completion = sum(per_model.values())
    return {"round_wall_s": [round(w, 2) for w in walls], "wall_s": round(total_wall, 2),
            "completion_tokens": completion, "completion_tok_per_s": round(completion / total_wall, 2),
            "completion_tokens_by_model": per_model}


def alone(engine, qs: list[str], max_tokens: int) -> dict:
    one = timed(engine, request(qs[0], max_tokens))
    with ThreadPoolExecutor(max_workers=engine.slots) as pool:
        start = time.perf_counter()
        many = list(pool.map(lambda q: timed(engine, request(q, max_tokens)), qs[1:1 + engine.slots]))
        wall = time.perf_counter() - start
    tokens = sum(m["completion_tokens"] for m in many)
    return {"one_slot_tok_per_s": round(one["completion_tokens"] / one["s"], 2),
            "all_slots": engine.slots, "all_slots_tok_per_s": round(tokens / wall, 2)}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks two_models")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=200)
    parser.add_argument("--policies", default="turns,together,split")
    parser.add_argument("--alone", action="store_true")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    qs = questions(3 * args.rounds + 8)
    result: dict = {"workload": {"rounds": args.rounds, "max_tokens": args.max_tokens, "per_round": "2 x 1.5B + 1 x 0.5B",
                                 "dataset": "gsm8k", "temperature": 0.0, "cores": os.cpu_count()},
                    "policies": {}}
    for policy in args.policies.split(","):
        engines = load(policy)
        t = time.perf_counter()
        timed(engines[BIG], request("Say OK.", 4))  # first call pays for warm-up: not timed below
        timed(engines[SMALL], request("Say OK.", 4))
        result["policies"][policy] = {"threads": {n: e.threads for n, e in engines.items()},
                                      "warmup_s": round(time.perf_counter() - t, 2),
                                      **mixed_rounds(engines, qs, args.rounds, args.max_tokens)}
        print(policy, json.dumps(result["policies"][policy]), flush=True)
        if args.alone and policy == "turns":
            result["alone"] = {name: alone(engines[name], qs[3 * args.rounds:], args.max_tokens) for name in (BIG, SMALL)}
            print("alone", json.dumps(result["alone"]), flush=True)
        del engines
    best = max(result["policies"], key=lambda p: result["policies"][p]["completion_tok_per_s"])
    result["fastest"] = best
    save("two_models", result, args.out)
    return 0
