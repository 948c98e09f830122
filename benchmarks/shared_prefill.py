"""Do identical prompts sent together cost one reading on the local engine (`SharedPrefill`)?

ReConcile's agents send the same round-table prompt at once in rounds 2 and 3. This replays the
discussion prompts of the committed CommonsenseQA reconcile example (groups of three identical
messages, 700 to 1,200 tokens) on a freshly loaded engine of the 1.5B model, every request of
`--groups` groups at once (temperature 0.7, seeds 0, 1, 2 within a group, at most `--max-tokens`
tokens), once with sharing on and once off (`Engine.shared = None`), after one untimed warm-up
call each. Reported per side: wall time, prompt tokens the engine read (`prompt_tokens` less
`cached_tokens`, the primers counted on the requests that ran them), completion tokens and their
rate. Run it with nothing else decoding.

    python -m benchmarks shared_prefill [--groups 6] [--slots 12] [--max-tokens 96] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from benchmarks.common import at_once, fresh_engine, save

EVENTS = Path(__file__).resolve().parent.parent / "results/examples/lit-commonsenseqa/reconcile/events.jsonl"


def groups(path: Path = EVENTS) -> list[list[dict]]:
    """The messages of each discussion round of the run at `path`, in order, one entry per round."""
    seen: dict[tuple, list[dict]] = {}
    for line in path.read_text().splitlines():
        event = json.loads(line)
        if event.get("phase") == "discuss" and event.get("messages"):
            seen.setdefault((event["debate_id"], event["round"]), event["messages"])
    return list(seen.values())


def measure(shared: bool, rounds: list[list[dict]], slots: int, max_tokens: int) -> dict:
    engine = fresh_engine(slots)
    if not shared:
        engine.shared = None
    requests = [{"messages": messages, "temperature": 0.7, "seed": seed, "max_tokens": max_tokens}
                for messages in rounds for seed in range(3)]
    replies, _, wall = at_once(engine, requests)
    read = sum(r["usage"]["prompt_tokens"] - r["usage"]["prompt_tokens_details"]["cached_tokens"] for r in replies)
    completion = sum(r["usage"]["completion_tokens"] for r in replies)
    del engine
    return {"shared": shared, "requests": len(requests), "wall_s": round(wall, 1),
            "prompt_tokens": sum(r["usage"]["prompt_tokens"] for r in replies), "prompt_tokens_read": read,
            "completion_tokens": completion, "completion_tok_s": round(completion / wall, 2)}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks shared_prefill", description=__doc__.split("\n")[0])
    parser.add_argument("--groups", type=int, default=6, help="discussion rounds replayed (three requests each)")
    parser.add_argument("--slots", type=int, default=12)
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--out", type=Path, default=None, help="default benchmarks/results/shared_prefill.json")
    args = parser.parse_args(argv)
    rounds = groups()[:args.groups]
    sides = [measure(shared, rounds, args.slots, args.max_tokens) for shared in (True, False)]
    save("shared_prefill", {"groups": len(rounds), "slots": args.slots, "max_tokens": args.max_tokens, "sides": sides},
         args.out)
    return 0
