"""Prefix reuse and engine efficiency on the embedded local model, before/after, in one run.

1. `before`: debatekit runs society_of_mind (3 agents, 2 rounds, stop on agreement as by default)
   over N arithmetic items, 12 debates at once, on a freshly loaded engine with llama.cpp's own
   slot choice (by prompt similarity, `DEBATEKIT_LOCAL_PREFIX_REUSE=off`, 8192 MiB host cache):
   the engine as debatekit configured it before issue 17.
2. `after`: the same run on a fresh engine with debatekit's default `local.PrefixCache`.
3. `raw`: a fresh engine with the `after` settings replays the requests captured in 2, in the
   order they started, straight into `handle_chat_completions` with as many in flight as slots
   (no litellm, no debatekit): the engine-efficiency ratio of debatekit against it.

With `--engine shared` (debatekit's default since issue 27) the `after` side's calls go the way
every process's calls go by default: over the shared engine's Unix socket to a daemon, here
hosted in this process (in a private folder) around the freshly loaded engine, so the ratio to
raw prices the socket hop and the streaming too. `--only-after` skips the `before` side.

Per side and per round: prompt tokens, cached (reused) tokens, their share, and the engine's
own prompt-processing and generation seconds (llama.cpp timings, summed over requests, as
recorded in events.jsonl). Tokens per second = tokens the engine reported / wall time of the
side (model load excluded). `same_replies` compares each call of `after` with the same call
(item, round, agent, phase) of `before`: identical text, and whether the prompt was identical.
`predicted_after_wall_s` scales `before`'s wall by the share of its engine time spent on the
prompt tokens that `after` no longer processes.

    python -m benchmarks local_engine [--items 12] [--agents 3] [--rounds 2] [--concurrency 12]
        [--answer-format text|json] [--no-stop] [--no-raw] [--engine process|shared] [--only-after]
        [--out PATH]
    python -m benchmarks local_engine --speculation [options of `python -m benchmarks speculation`]
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

BEFORE_RAM_MIB = 8192  # llama.cpp's default --cache-ram, which debatekit left as it was


def sides():
    """The engine settings of the `before` and `after` sides."""
    from debatekit.models.local.prefix_cache import PrefixCache

    return {"before": PrefixCache(ram_mib=BEFORE_RAM_MIB, reuse=False), "after": PrefixCache()}


def fresh_engine(cache):
    """A newly loaded engine with `cache` settings, registered as the process's engine."""
    from debatekit.models.local import engine as local
    from debatekit.models.local import settings, weights

    local._engines.clear()
    gc.collect()
    path = weights.pull(say=lambda msg: None)
    t = time.perf_counter()
    engine = local.Engine(path, settings.slots(), cache=cache)
    local._engines[path] = engine
    return engine, time.perf_counter() - t


def capture(engine) -> list[dict]:
    """Wrap the engine's blocking chat so every request and reply is recorded."""
    log, lock, inner = [], threading.Lock(), engine.chat

    def chat(request: dict, cancelled: threading.Event | None = None) -> dict:
        start = time.perf_counter()
        reply = inner(request, cancelled)
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


def host_shared(engine) -> None:
    """Serve `engine` as the machine's shared engine from a thread of this process, in a private
    folder (so no other process's engine is disturbed), and route this process's calls to it."""
    import os

    from debatekit.models.local import daemon as engine_daemon, shared as shared_engine

    where = Path(tempfile.mkdtemp(prefix="dk-bench-engine-"))
    shared_engine.folder = lambda: where
    os.environ["DEBATEKIT_LOCAL_ENGINE"] = "shared"
    daemon = engine_daemon.Daemon(lambda model: engine, idle=None)
    ready = threading.Event()
    threading.Thread(target=lambda: asyncio.run(daemon.serve(where, ready.set)), daemon=True).start()
    ready.wait(30)


def debatekit_side(cache, args, shared: bool = False) -> tuple[dict, list[dict], Path]:
    import os

    from debatekit.records.schemas import RunConfig
    from debatekit.runner import run

    engine, load_s = fresh_engine(cache)
    log = capture(engine)
    if shared:
        host_shared(engine)
    else:
        os.environ["DEBATEKIT_LOCAL_ENGINE"] = "process"
    out = Path(tempfile.mkdtemp(prefix="dk-bench-local-")) / "run"
    params = {"agents": args.agents, "rounds": args.rounds, "stop_on_agreement": not args.no_stop,
              "answer_format": args.answer_format}
    config = RunConfig(protocol="society_of_mind", dataset="arithmetic", limit=args.items, cache=False,
                       concurrency=args.concurrency, call_timeout=args.call_timeout, params=params)
    t = time.perf_counter()
    result = run(config, out, progress=False)
    wall = time.perf_counter() - t
    side = {"settings": {"cache_ram_mib": cache.ram_mib, "prefix_reuse": cache.reuse,
                         "slot_prompt_similarity": cache.slot_similarity,
                         "engine": "shared" if shared else "process"}}
    side.update(tokens([c["usage"] for c in log], wall))
    side.update(load_s=round(load_s, 2), accuracy=result.summary.accuracy, failed_items=result.summary.failed,
                parse_failures=result.summary.parse_failures, timeouts=result.summary.timeouts,
                call_errors=result.summary.errors, slots=engine.slots, by_round=by_round(out))
    return side, sorted(log, key=lambda c: c["start"]), out


async def replay(engine, requests: list[dict], in_flight: int) -> list[dict]:
    gate = asyncio.Semaphore(in_flight)
    loop = asyncio.get_running_loop()

    async def one(request):
        async with gate:
            return await loop.run_in_executor(engine.pool, engine.server.handle_chat_completions, request)

    return await asyncio.gather(*(one(r) for r in requests))


def raw_side(cache, captured: list[dict]) -> dict:
    engine, load_s = fresh_engine(cache)
    t = time.perf_counter()
    replies = asyncio.run(replay(engine, [c["request"] for c in captured], engine.slots))
    wall = time.perf_counter() - t
    side = tokens([r.get("usage", {}) for r in replies], wall)
    side.update(load_s=round(load_s, 2), in_flight=engine.slots)
    return side


def _events(run_folder: Path) -> list[dict]:
    from debatekit.records.storage import read_jsonl

    return list(read_jsonl(run_folder / "events.jsonl"))


def by_round(run_folder: Path) -> list[dict]:
    """Per round: calls, prompt and cached tokens, reuse share, engine prompt and generation seconds.

    From round 2 on, also the most a prefix cache can reuse: `own_tokens`, the tokens of each
    agent's own conversation up to its previous call (that call's prompt and reply, which open
    the new prompt; capped at the new prompt), `reuse_ceiling` = own_tokens / prompt_tokens, and
    `of_ceiling` = cached_tokens / own_tokens. The other agents' answers and the new instruction
    are new text in every round-2 prompt, so no cache can reuse them.
    """
    keys = ("prompt_tokens", "cached_tokens", "completion_tokens", "prompt_seconds", "generation_seconds")
    sums: dict[int, dict] = defaultdict(lambda: dict.fromkeys(("calls", *keys), 0))
    own: dict[int, int] = defaultdict(int)
    last: dict[tuple, dict] = {}  # (debate, agent) -> its latest call
    for e in _events(run_folder):
        s = sums[e["round"]]
        s["calls"] += 1
        for key in keys:
            s[key] += e.get(key, 0)
        conversation = (e.get("debate_id"), e["item_id"], e["agent"])
        if conversation in last:
            before = last[conversation]
            own[e["round"]] += min(e.get("prompt_tokens", 0),
                                   before.get("prompt_tokens", 0) + before.get("completion_tokens", 0))
        last[conversation] = e
    rows = []
    for r, s in sorted(sums.items()):
        row = dict(round=r, **{k: round(v, 2) if isinstance(v, float) else v for k, v in s.items()},
                   reuse=round(s["cached_tokens"] / max(1, s["prompt_tokens"]), 3))
        if r > 1:
            row.update(own_tokens=own[r], reuse_ceiling=round(own[r] / max(1, s["prompt_tokens"]), 3),
                       of_ceiling=round(s["cached_tokens"] / max(1, own[r]), 3))
        rows.append(row)
    return rows


def same_replies(before: Path, after: Path) -> dict:
    """How many calls of `after` got the very reply of the same call of `before`.

    A reply that differs after an identical prompt is the engine's doing (its arithmetic differs
    with the batch a token is computed in); one after a different prompt inherits an earlier
    difference of the same debate.
    """
    def key(e):
        return e["item_id"], e["round"], e["agent"], e["phase"]

    first = {key(e): e for e in _events(before)}
    compared = same = same_prompt_other_reply = 0
    for e in _events(after):
        b = first.get(key(e))
        if b is None:
            continue
        compared += 1
        same += b["text"] == e["text"]
        same_prompt_other_reply += b["prompt_hash"] == e["prompt_hash"] and b["text"] != e["text"]
    return {"calls_compared": compared, "identical_replies": same,
            "different_reply_after_identical_prompt": same_prompt_other_reply,
            "calls_only_in_one_side": len(first) + len(_events(after)) - 2 * compared}


def engine_seconds(side: dict) -> tuple[float, float]:
    """Summed engine prompt and generation seconds of a side."""
    return (sum(r["prompt_seconds"] for r in side["by_round"]), sum(r["generation_seconds"] for r in side["by_round"]))


def predicted_wall(before: dict, after: dict) -> float | None:
    """`before`'s wall less its prompt-time share times the fraction of its unreused tokens `after` reuses."""
    prompt_s, gen_s = engine_seconds(before)
    fresh_before = before["prompt_tokens"] - before["cached_prompt_tokens"]
    fresh_after = after["prompt_tokens"] - after["cached_prompt_tokens"]
    if prompt_s + gen_s <= 0 or fresh_before <= 0:
        return None
    saved = max(0.0, 1 - fresh_after / fresh_before)
    return round(before["wall_s"] * (1 - prompt_s / (prompt_s + gen_s) * saved), 2)


def reuse_targets(side: dict) -> dict:
    """Round 2's reuse against the issue's 45% and against the most a cache could reuse there (see `by_round`)."""
    r2 = next((r for r in side["by_round"] if r["round"] == 2), None)
    targets = {"round2_reuse_at_least": 0.45, "round2_reuse": r2 and r2["reuse"],
               "round2_reuse_met": r2 is not None and r2["reuse"] >= 0.45}
    if r2 is not None:
        targets.update(round2_reuse_ceiling=r2["reuse_ceiling"], round2_reuse_of_ceiling=r2["of_ceiling"])
    return targets


def main(argv: list[str]) -> int:
    if argv[:1] == ["--speculation"]:  # the side-by-side of speculative decoding against none
        from benchmarks import speculation

        return speculation.main(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m benchmarks local_engine")
    parser.add_argument("--items", type=int, default=12)
    parser.add_argument("--agents", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=12,
                        help="debates at once: more than the 4 slots, so round barriers leave no slot idle "
                             "(4 measured 0.81)")
    parser.add_argument("--call-timeout", type=float, default=3600.0,
                        help="seconds per call: generous, this measures throughput (a timed-out call keeps its slot busy)")
    parser.add_argument("--no-stop", action="store_true",
                        help="every debate runs all rounds (no stop on agreement): round 2 always happens")
    parser.add_argument("--answer-format", choices=("text", "json"), default="text",
                        help="society_of_mind's answer_format (text is debatekit's default)")
    parser.add_argument("--no-raw", action="store_true", help="skip the raw xllamacpp replay (no efficiency ratio)")
    parser.add_argument("--engine", choices=("process", "shared"), default="process",
                        help="how the `after` side reaches its engine: in this process, or over the shared "
                             "engine's socket as every debatekit process does by default (`before` is in-process)")
    parser.add_argument("--only-after", action="store_true", help="skip the `before` side")
    parser.add_argument("--out", type=Path, help="result file (default benchmarks/results/local_engine.json)")
    args = parser.parse_args(argv)
    result: dict = {"setup": {"protocol": "society_of_mind", "items": args.items, "agents": args.agents,
                              "rounds": args.rounds, "stop_on_agreement": not args.no_stop,
                              "answer_format": args.answer_format, "after_engine": args.engine,
                              "debates_at_once": args.concurrency, "call_timeout_s": args.call_timeout,
                              "model": "local/qwen2.5-coder-1.5b-instruct", "requested_items_in_issue": 12}}
    folders, captured = {}, {}
    for name, cache in sides().items():
        if name == "before" and args.only_after:
            continue
        result[name], captured[name], folders[name] = debatekit_side(
            cache, args, shared=name == "after" and args.engine == "shared")
    after = result["after"]
    if "before" in result:
        before = result["before"]
        result["same_replies"] = same_replies(folders["before"], folders["after"])
        result["wall_speedup"] = round(before["wall_s"] / after["wall_s"], 3)
        result["predicted_after_wall_s"] = predicted_wall(before, after)
    targets = reuse_targets(after)
    if not args.no_raw:
        raw = result["raw_xllamacpp_after"] = raw_side(sides()["after"], captured["after"])
        ratio = after["completion_tok_per_s"] / raw["completion_tok_per_s"]
        result["ratio_completion_tok_per_s"] = round(ratio, 3)
        result["ratio_total_tok_per_s"] = round(after["total_tok_per_s"] / raw["total_tok_per_s"], 3)
        targets.update(ratio_at_least=0.9, ratio_met=ratio >= 0.9)
    result["targets"] = targets
    save("local_engine", result, path=args.out)
    return 0
