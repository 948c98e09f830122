"""Reply lengths and loops in the committed runs: what chose the free-text reply limits and the loop rule.

No model is called: this reads the call events of every run under results/, packed or not (each
distinct reply once).

1. Per answer kind, from the 100-item single-agent free-text runs at 512 tokens that the limits
   were chosen from (`results/examples/<dataset>-single-text`; the StrategyQA run at the chosen
   limit, `strategyqa-single-text-limits`, is its check, in docs/answers.md):
   the completion tokens of the replies that ended by themselves (p50, p90, p98, max) and how many
   stopped at the limit they were given. `answers.REPLY_TOKENS` is chosen from these: the limit
   must sit above ~98% of the replies that end by themselves.
2. The loop rule (`debatekit.models.repetition`): how many replies that ended by themselves it would have
   flagged (false positives: the rule must flag none), how many of the replies that stopped at
   the limit it flags, and the completion tokens stopping each flagged reply at the start of its
   loop (two copies kept) would have saved, estimated by the share of the reply's characters past
   that point.

    python -m benchmarks reply_lengths [--out PATH]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from benchmarks.common import RESULTS, save

ROOT = Path(__file__).resolve().parent.parent
SINGLE_RUNS = {"integer": ["arithmetic-single-text", "gsm8k-single-text"], "choice": ["commonsenseqa-single-text"],
               "yesno": ["strategyqa-single-text"]}


KIND_OF = {"arithmetic": "integer", "gsm8k": "integer", "commonsenseqa": "choice", "strategyqa": "yesno"}


def _events(folder: Path):
    """Each call event with the token limit its run gave a free-text answer: the run's max_tokens,
    else (runs after the per-kind limits) its answer kind's default, else 512."""
    from debatekit.protocols.shared.answers import REPLY_TOKENS

    from debatekit.records.trace import RunFolder

    for path in sorted(folder.rglob("run.json")):
        run = json.loads(path.read_text())
        kind = KIND_OF.get((run.get("dataset") or {}).get("name"))
        limit = (run.get("config") or {}).get("max_tokens") or REPLY_TOKENS.get(kind, 512)
        for event in RunFolder(path.parent).events():
            yield event, limit


def lengths() -> dict:
    out = {}
    for kind, names in SINGLE_RUNS.items():
        ended, stopped, runs = [], 0, []
        for name in names:
            folder = ROOT / "results" / "examples" / name
            if not folder.exists():
                continue
            runs.append(name)
            for event, cap in _events(folder):
                if "cut_off" in event["faults"] or "loop" in event["faults"] or event["completion_tokens"] >= cap:
                    stopped += 1
                else:
                    ended.append(event["completion_tokens"])
        values = np.array(ended)
        out[kind] = {"runs": runs, "ended": len(values), "stopped_at_limit": stopped,
                     **{f"p{q}": int(np.percentile(values, q)) for q in (50, 90, 98)}, "max": int(values.max())}
    return out


def loops() -> dict:
    from debatekit.models.repetition import loop_start, trimmed

    seen, ended, stopped, flagged_ended, flagged, saved = set(), 0, 0, [], [], 0
    for event, cap in _events(ROOT / "results"):
        text = event.get("text") or ""
        if not text or text in seen:
            continue
        seen.add(text)
        at_limit = "cut_off" in event["faults"] or event["completion_tokens"] >= cap
        start = loop_start(text)
        if not at_limit and not event["faults"]:
            ended += 1
            if start is not None:
                flagged_ended.append(event["item_id"])
        elif at_limit:
            stopped += 1
            if start is not None:
                flagged.append(event["item_id"])
                kept = len(trimmed(text, start))
                saved += round(min(event["completion_tokens"], cap) * (1 - kept / len(text)))
    return {"distinct_replies_ended": ended, "flagged_among_ended": len(flagged_ended),
            "distinct_replies_stopped_at_limit": stopped, "flagged_among_stopped": len(flagged),
            "completion_tokens_saved_estimate": saved, "flagged_items": flagged}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks reply_lengths")
    parser.add_argument("--out", type=Path, default=RESULTS / "reply_lengths.json")
    args = parser.parse_args(argv)
    from debatekit.models import repetition
    from debatekit.protocols.shared.answers import REPLY_TOKENS

    rule = {k: getattr(repetition, k) for k in ("MIN_PERIOD", "MAX_PERIOD", "MIN_REPEATS", "MIN_CHARS")}
    save("reply_lengths", {"reply_tokens_default": REPLY_TOKENS, "lengths": lengths(), "loop_rule": rule,
                           "loops": loops()}, args.out)
    return 0
