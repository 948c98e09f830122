"""`python -m benchmarks NAME [options]`; `python -m benchmarks` lists them."""

from __future__ import annotations

import importlib
import sys

BENCHMARKS = {
    "overhead": "framework overhead per model call vs bare litellm mock_response",
    "concurrency": "450 calls to a 300 ms loopback OpenAI-compatible server: vs sequential and the lower bound",
    "cache_replay": "re-running the concurrency sweep from the cache: zero calls, share of first wall time",
    "footprint": "import time of debatekit and peak memory of a 100-item scripted run",
    "local_engine": "tokens/s of debatekit on the local model vs the raw xllamacpp engine, prompt-cache reuse",
    "reply_lengths": "completion tokens of the committed free-text replies per answer kind, and the loop rule on them",
    "slots": "one queue of GSM8K calls on the local model at 4, 8, 16, 32 slots: tokens/s, latency, KV memory",
    "two_models": "two local models in one process (a mixed debate): engines taking turns vs sharing the cores",
    "shared_prefill": "reconcile's identical discussion prompts on the local model: read once (shared) vs once per slot",
    "concurrent_runs": "two local runs at once: aggregate tok/s and each one's share, own engines vs one shared engine",
    "answer_formats": "the answer-format tables (text, json-steps, json-string) from the committed runs",
    "caps": "the reply-cap tables of dynamics and judge_refine from the committed runs",
    "json_constraint_probe": "the local model with and without a JSON grammar on 20 arithmetic items",
    "speculation": "speculative decoding against none on the GSM8K debate's own prompts, per slot count and phase",
    "first_command": "the README's first command, its run part, timed the newcomer's way: checkout A against B",
    "engine_knobs": "llama.cpp's CPU knobs (flash attention, polling, micro-batch, 8-bit KV) on a debate's prompts",
    "sequential": "type-I error and power of the sequential study designs, by simulation (no model)",
}


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in BENCHMARKS:
        print("usage: python -m benchmarks NAME [options]  (NAME --help for options)\n")
        for name, what in BENCHMARKS.items():
            print(f"  {name:14} {what}")
        return 0 if not argv else 2
    module = importlib.import_module(f"benchmarks.{argv[0]}")
    return module.main(argv[1:]) or 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
