"""llama.cpp's CPU knobs on the local engine: does any of them read prompts or decode faster here?

The README's first command spends its time in two places: decoding (about 3,300 completion
tokens) and, in a debate's second round, reading prompts of about 1,100 tokens that are mostly
the other agents' replies. This benchmark replays the committed GSM8K study debate's calls (its
first `--items` items, rounds 1 and 2, all of a round's calls at once, the same seed per call on
every side, as `benchmarks.speculation` does) into a freshly loaded debatekit engine per setting,
each in a process of its own, and reports per setting and phase (`answer`: round 1; `revise`:
round 2) the prompt tokens read per second of prompt reading and the completion tokens per wall
second, from llama.cpp's own timings.

Settings (each changes one thing of the engine's defaults, set on the parameters just before
the server loads):

- `default`: the engine as debatekit loads it;
- `flash_attn_off`, `flash_attn_on`: llama.cpp's flash attention forced off or on (default: auto);
- `no_polling`: the compute threads sleep between steps instead of spinning (poll 0; default 50);
- `ubatch_256`: prompts read in micro-batches of 256 tokens (default 512);
- `kv_q8`: the KV cache stored as 8-bit (flash attention on, which it needs).

`default` runs first and again last: the two say how far the machine drifts on its own.

    python -m benchmarks engine_knobs [--items 1] [--slots 6] [--max-tokens 160] [--out PATH]
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from benchmarks.common import save
from benchmarks.speculation import STUDY_RUN, calls, isolated, seed

SETTINGS = ("default", "flash_attn_off", "flash_attn_on", "no_polling", "ubatch_256", "kv_q8")


def adjust(params, setting: str) -> None:
    """Change one knob of `params` (an `xllamacpp.CommonParams`) for `setting`."""
    import xllamacpp

    if setting == "flash_attn_off":
        params.flash_attn_type = 0
    elif setting == "flash_attn_on":
        params.flash_attn_type = 1
    elif setting == "no_polling":
        params.cpuparams.poll = 0
        params.cpuparams_batch.poll = 0
    elif setting == "ubatch_256":
        params.n_ubatch = 256
    elif setting == "kv_q8":
        params.flash_attn_type = 1
        params.cache_type_k = params.cache_type_v = xllamacpp.ggml_type.GGML_TYPE_Q8_0
    elif setting != "default":
        raise ValueError(f"unknown setting {setting!r}: one of {', '.join(SETTINGS)}")


def side(setting: str, slots: int, max_tokens: int, work: list[dict]) -> dict:
    """Load a fresh engine with `setting` and replay `work` round by round; per phase its rates."""
    import gc

    import xllamacpp

    from debatekit.models.local import engine as local
    from debatekit.models.local import weights

    server = xllamacpp.Server

    def loaded(params):
        adjust(params, setting)
        return server(params)

    xllamacpp.Server = loaded  # the engine looks it up when it loads
    local._engines.clear()
    gc.collect()
    start = time.perf_counter()
    made = local.Engine(weights.pull(say=lambda msg: None), slots)
    load_s = time.perf_counter() - start
    made.chat({"messages": [{"role": "user", "content": "Say OK."}], "max_tokens": 4})
    out = {"load_s": round(load_s, 2)}
    with ThreadPoolExecutor(max_workers=max(len(work), 1)) as pool:
        for r in sorted({c["round"] for c in work}):
            batch = [c for c in work if c["round"] == r]
            begin = time.perf_counter()
            replies = list(pool.map(lambda c: made.chat({"messages": c["messages"], "temperature": 0.7,
                                                         "seed": seed(c), "max_tokens": max_tokens}), batch))
            wall = time.perf_counter() - begin
            timings = [reply.get("timings") or {} for reply in replies]
            read = sum(t.get("prompt_n", 0) for t in timings)
            reading = sum(t.get("prompt_ms") or 0 for t in timings) / 1000
            completion = sum((reply.get("usage") or {}).get("completion_tokens", 0) for reply in replies)
            out[batch[0]["phase"]] = {
                "calls": len(batch), "wall_s": round(wall, 1), "prompt_tokens_read": read,
                "prompt_read_tok_per_s": round(read / reading, 1) if reading else None,
                "completion_tokens": completion, "completion_tok_per_s": round(completion / wall, 1)}
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks engine_knobs", description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=1, help="items of the study debate replayed (3 calls a round)")
    parser.add_argument("--slots", type=int, default=6)
    parser.add_argument("--max-tokens", type=int, default=160, help="completion tokens at most per call")
    parser.add_argument("--settings", default=",".join(SETTINGS), help="comma-separated, default first and last")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    work = calls(args.items, 2)
    order = args.settings.split(",")
    if order[0] == "default" and order[-1] != "default":
        order.append("default")
    runs = []
    for setting in order:
        if setting not in SETTINGS:
            parser.error(f"unknown setting {setting!r}: one of {', '.join(SETTINGS)}")
        result = isolated(side, setting, args.slots, args.max_tokens, work)
        runs.append({"setting": setting, **result})
        print(setting, result, flush=True)
    replayed = STUDY_RUN.relative_to(STUDY_RUN.parents[3]).as_posix()
    save("engine_knobs", {"setup": {"replayed": replayed, "items": args.items,
                                    "rounds": 2, "slots": args.slots, "max_tokens": args.max_tokens,
                                    "temperature": 0.7, "order": order},
                          "runs": runs}, args.out)
    return 0
