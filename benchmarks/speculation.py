"""Speculative decoding on the local engine, side by side with none, on a debate's own prompts.

`python -m benchmarks local_engine --speculation ngram_simple` (or this module directly) replays
the prompts of the committed GSM8K study's society_of_mind debate (3 agents, every round run) for
its first items, round by round as a debate sends them (all of a round's calls at once, the next
round after the last reply), into a freshly loaded engine of each slot count, once with no
speculation and once with each kind asked for. Both sides get the very same prompts and the same
seed per call, so every reply is paired: the rounds of a live debate would drift apart after the
first differing reply, and with them the prompts.

Per slot count, side and phase (`answer`: round 1; `revise`: later rounds): wall seconds,
completion tokens, completion tokens per wall second, tokens drafted and accepted (llama.cpp's
timings), and the speedup of each kind over `off`. At temperature 0.7 (the study's): how many
replies are identical, the accuracy of each side on the same calls (read as the study reads them)
with a paired interval, and the reply lengths. At temperature 0 (`--greedy N`, one slot): N revise
prompts with the two most likely tokens at each position; a reply that differs shows where, and
how close the two top tokens were there under `off`.

    python -m benchmarks speculation [--kinds ngram_simple] [--plan 1:3,4:5,32:10] [--rounds 2]
        [--greedy 6] [--out PATH]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import math
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from benchmarks.common import save

STUDY_RUN = (Path(__file__).resolve().parent.parent / "results" / "studies" / "gsm8k"
             / "society_of_mind-agents3-rounds3-stop_on_agreementfalse-3ea484a1")
TEMPERATURE = 0.7
MAX_TOKENS = 768  # what the study's free-text integer answers were allowed (answers.REPLY_TOKENS)


def calls(items: int, rounds: int) -> list[dict]:
    """The study debate's calls for its first `items` items and rounds up to `rounds`, in order."""
    order, out = [], []
    with gzip.open(STUDY_RUN / "events.jsonl.gz", "rt") as f:
        for line in f:
            e = json.loads(line)
            if e["item_id"] not in order:
                order.append(e["item_id"])
            if order.index(e["item_id"]) < items and e["round"] <= rounds:
                out.append({k: e[k] for k in ("item_id", "round", "phase", "agent", "messages")})
    return out


def seed(call: dict) -> int:
    """The same seed for a call on every side."""
    key = f"{call['item_id']}/{call['round']}/{call['agent']}".encode()
    return int.from_bytes(hashlib.sha256(key).digest()[:4], "big")


def keys() -> dict[str, float]:
    """GSM8K answers by item id."""
    from debatekit.datasets.loading import load

    return {item.id: float(item.answer) for item in load("gsm8k")[0]}


def correct(text: str, answer: float) -> bool:
    from debatekit.protocols.shared.extract import extract

    found = extract("number", text)
    return isinstance(found, (int, float)) and math.isclose(float(found), answer, rel_tol=1e-9, abs_tol=1e-9)


def engine(slots: int, kind: str):
    """A freshly loaded engine with `slots` slots and speculation `kind`, after a short warm-up call."""
    import gc

    from debatekit.models.local import engine as local
    from debatekit.models.local import weights
    from debatekit.models.local.speculation import parse

    local._engines.clear()
    gc.collect()
    path = weights.pull(say=lambda msg: None)
    made = local.Engine(path, slots, speculation=parse(kind))
    made.chat({"messages": [{"role": "user", "content": "Say OK."}], "max_tokens": 4})
    return made


def side(slots: int, kind: str, work: list[dict]) -> dict:
    """Replay `work` round by round on a fresh engine; per call its reply text and counts."""
    made = engine(slots, kind)
    replies, walls = [], {}
    with ThreadPoolExecutor(max_workers=max(len(work), 1)) as pool:
        for r in sorted({c["round"] for c in work}):
            batch = [c for c in work if c["round"] == r]
            start = time.perf_counter()
            done = list(pool.map(lambda c: made.chat({"messages": c["messages"], "temperature": TEMPERATURE,
                                                      "seed": seed(c), "max_tokens": MAX_TOKENS}), batch))
            walls[r] = time.perf_counter() - start
            for c, reply in zip(batch, done):
                timings = reply.get("timings") or {}
                replies.append({"round": r, "phase": c["phase"], "item_id": c["item_id"], "agent": c["agent"],
                                "text": reply["choices"][0]["message"].get("content") or "",
                                "completion_tokens": (reply.get("usage") or {}).get("completion_tokens", 0),
                                "drafted": timings.get("draft_n", 0), "accepted": timings.get("draft_n_accepted", 0),
                                "decode_s": (timings.get("predicted_ms") or 0) / 1000,
                                "prompt_read": timings.get("prompt_n", 0),
                                "prompt_s": (timings.get("prompt_ms") or 0) / 1000})
    return {"walls": walls, "replies": replies}


def isolated(fn, *args):
    """`fn(*args)` in a child process of its own: an engine and its threads end with it, so no engine
    of an earlier side lingers beside the next one."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(fn, *args).result()


def phases(run: dict) -> dict:
    """Per phase: wall, completion tokens, tok/s, drafted and accepted tokens."""
    out = {}
    for phase in ("answer", "revise"):
        rows = [r for r in run["replies"] if r["phase"] == phase]
        if not rows:
            continue
        wall = sum(w for r, w in run["walls"].items() if (r == 1) == (phase == "answer"))
        tokens = sum(r["completion_tokens"] for r in rows)
        drafted, accepted = sum(r["drafted"] for r in rows), sum(r["accepted"] for r in rows)
        decode_s, prompt_s = sum(r["decode_s"] for r in rows), sum(r["prompt_s"] for r in rows)
        out[phase] = {"calls": len(rows), "wall_s": round(wall, 1), "completion_tokens": tokens,
                      "tok_per_s": round(tokens / wall, 2), "drafted": drafted, "accepted": accepted,
                      "acceptance": round(accepted / drafted, 3) if drafted else None,
                      "prompt_tokens_read": sum(r["prompt_read"] for r in rows),
                      "engine_prompt_s": round(prompt_s, 1), "engine_decode_s": round(decode_s, 1),
                      "decode_tok_per_slot_s": round(tokens / decode_s, 2) if decode_s else None}
    wall = sum(run["walls"].values())
    tokens = sum(r["completion_tokens"] for r in run["replies"])
    out["all"] = {"calls": len(run["replies"]), "wall_s": round(wall, 1), "completion_tokens": tokens,
                  "tok_per_s": round(tokens / wall, 2)}
    return out


def paired(base: dict, other: dict, answers: dict[str, float]) -> dict:
    """Identical replies, accuracy of each side on the same calls with a paired 95% interval, lengths."""
    from scipy import stats

    from debatekit.analysis.intervals import bootstrap_ci

    a = {(r["item_id"], r["round"], r["agent"]): r for r in base["replies"]}
    b = {(r["item_id"], r["round"], r["agent"]): r for r in other["replies"]}
    shared = sorted(a.keys() & b.keys())
    right_a = [correct(a[k]["text"], answers[k[0]]) for k in shared]
    right_b = [correct(b[k]["text"], answers[k[0]]) for k in shared]
    mean, low, high = bootstrap_ci([float(y) - float(x) for x, y in zip(right_a, right_b)])
    diff = {"mean": round(mean, 3), "ci95": [round(low, 3), round(high, 3)]}
    lengths_a = [a[k]["completion_tokens"] for k in shared]
    lengths_b = [b[k]["completion_tokens"] for k in shared]
    return {"calls": len(shared), "identical_replies": sum(a[k]["text"] == b[k]["text"] for k in shared),
            "accuracy_off": round(sum(right_a) / len(shared), 3), "accuracy_on": round(sum(right_b) / len(shared), 3),
            "accuracy_difference": diff, "only_on_right": sum(y and not x for x, y in zip(right_a, right_b)),
            "only_off_right": sum(x and not y for x, y in zip(right_a, right_b)),
            "mean_tokens_off": round(sum(lengths_a) / len(shared), 1),
            "mean_tokens_on": round(sum(lengths_b) / len(shared), 1),
            "lengths_ks_p": round(float(stats.ks_2samp(lengths_a, lengths_b).pvalue), 3)}


def greedy(kind: str, work: list[dict]) -> dict:
    """Temperature 0 on one slot, off against `kind`: identical replies, and for each reply that
    differs, the first differing token with the two most likely tokens there under `off`."""
    requests = [{"messages": c["messages"], "temperature": 0.0, "max_tokens": MAX_TOKENS,
                 "logprobs": True, "top_logprobs": 2} for c in work]
    got = {name: isolated(_replies, name, requests) for name in ("off", kind)}
    rows = []
    for c, x, y in zip(work, got["off"], got[kind]):
        tx, ty = (_tokens(x), _tokens(y))
        row = {"item_id": c["item_id"], "round": c["round"], "agent": c["agent"],
               "identical": [t["token"] for t in tx] == [t["token"] for t in ty], "tokens": len(tx)}
        at = next((i for i, (p, q) in enumerate(zip(tx, ty)) if p["token"] != q["token"]), None)
        if at is None and len(tx) != len(ty):
            at = min(len(tx), len(ty))
        if at is not None and at < len(tx):
            top = tx[at].get("top_logprobs") or []
            row.update(first_difference=at, off_token=tx[at]["token"], on_token=ty[at]["token"] if at < len(ty) else None,
                       off_top2=[(t["token"], round(t["logprob"], 4)) for t in top[:2]],
                       top2_gap=round(top[0]["logprob"] - top[1]["logprob"], 4) if len(top) > 1 else None)
        rows.append(row)
    return {"calls": len(rows), "identical": sum(r["identical"] for r in rows), "replies": rows}


def _replies(kind: str, requests: list[dict]) -> list[dict]:
    made = engine(1, kind)
    return [made.server.handle_chat_completions(r) for r in requests]


def _tokens(reply: dict) -> list[dict]:
    return (((reply.get("choices") or [{}])[0].get("logprobs") or {}).get("content")) or []


def plan(text: str) -> list[tuple[int, int]]:
    """`1:3,4:5,32:10` as [(slots, items), ...]."""
    return [(int(s), int(n)) for s, n in (part.split(":") for part in text.split(","))]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks speculation")
    parser.add_argument("--kinds", default="ngram_simple", help="comma-separated speculation kinds against off")
    parser.add_argument("--plan", default="1:3,4:5,32:10", help="slots:items pairs, e.g. 1:3,4:5,32:10")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of the debate replayed (1: answer only)")
    parser.add_argument("--greedy", type=int, default=6, help="revise prompts replayed at temperature 0 on 1 slot")
    parser.add_argument("--out", type=Path, help="result file (default benchmarks/results/speculation.json)")
    args = parser.parse_args(argv)
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    answers = keys()
    result: dict = {"setup": {"replayed": str(STUDY_RUN.relative_to(STUDY_RUN.parents[3])), "rounds": args.rounds,
                              "temperature": TEMPERATURE, "max_tokens": MAX_TOKENS, "kinds": kinds,
                              "model": "local/qwen2.5-coder-1.5b-instruct", "plan": args.plan}, "by_slots": {}}
    for slots, items in plan(args.plan):
        work = calls(items, args.rounds)
        order = ("off", *kinds) if len(result["by_slots"]) % 2 == 0 else (*kinds, "off")  # alternate who goes first
        runs = {name: isolated(side, slots, name, work) for name in order}
        row = {"items": items, "calls": len(work), "sides": {name: phases(run) for name, run in runs.items()}}
        for name in kinds:
            off, on = row["sides"]["off"], row["sides"][name]
            row[f"speedup_{name}"] = {p: round(on[p]["tok_per_s"] / off[p]["tok_per_s"], 3) for p in off if p in on}
            row[f"paired_{name}"] = paired(runs["off"], runs[name], answers)
        result["by_slots"][str(slots)] = row
        print(json.dumps({slots: {k: v for k, v in row.items() if k.startswith("speedup")}}), flush=True)
    if args.greedy:
        revise = [c for c in calls(args.greedy, 2) if c["phase"] == "revise"][: args.greedy]
        result["greedy"] = {name: greedy(name, revise) for name in kinds}
    save("speculation", result, path=args.out)
    return 0
