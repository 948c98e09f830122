"""Why the JSON answer format loses on arithmetic: the constrained decoding, or the JSON prompt?

    python -m benchmarks json_constraint_probe [--items 20] [--out PATH]

Sends the `single` protocol's own JSON-format request (its system prompt and question, temperature
0, seed 0, 512 tokens) for the first N arithmetic items to the embedded model three ways:
`constrained`, with the JSON-schema `response_format` debatekit sends (llama.cpp turns it into a
grammar, so the reply is a JSON object whose `reasoning` is one string); `unconstrained`, the same
messages and no `response_format` (the model may write anything); and `constrained_steps`, a
grammar whose `reasoning` is a list of strings, the shape the model chose when left free. A reply
is read as `{reasoning, answer}` with `reasoning` a string or a list of strings (JSON found inside
code fences too). For each way it counts right answers, replies whose reasoning writes a
computation (an `=`), replies with no readable object, and completion tokens, and writes them to
`results/examples/json_constraint_probe.json`. Items are sent one at a time, so each reply is
the same at the same seed.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from pydantic import create_model

from debatekit import datasets
from debatekit.models.local import engine as local
from debatekit.models.local import weights
from debatekit.models.reading import extract_json, response_format
from debatekit.protocols.shared.answers import AnswerSpec, first_messages

HERE = Path(__file__).resolve().parent.parent / "results" / "examples"  # where its JSON is committed


Steps = create_model("IntegerAnswer", reasoning=(list[str], ...), answer=(int, ...))
Either = create_model("Either", reasoning=(str | list[str], ...), answer=(int, ...))


def ask(engine, messages: list[dict], grammar) -> dict:
    request = {"messages": messages, "temperature": 0.0, "seed": 0, "max_tokens": 512}
    if grammar is not None:
        request["response_format"] = response_format(grammar)
    reply = engine.chat(request)
    text = reply["choices"][0]["message"].get("content") or ""
    try:
        parsed = Either.model_validate_json(extract_json(text)).model_dump()
        if isinstance(parsed["reasoning"], list):
            parsed["reasoning"] = "\n".join(parsed["reasoning"])
    except ValueError:
        parsed = None
    return {"text": text, "parsed": parsed, "completion_tokens": reply.get("usage", {}).get("completion_tokens", 0)}


def summary(rows: list[dict], truth: dict) -> dict:
    parsed = [r for r in rows if r["parsed"] is not None]
    works = [r for r in parsed if "=" in r["parsed"]["reasoning"]]
    right = [r for r in parsed if r["parsed"]["answer"] == truth[r["item"]]]
    return {"items": len(rows), "right": len(right), "unreadable": len(rows) - len(parsed),
            "reasoning_with_computation": len(works),
            "right_among_those": sum(r["parsed"]["answer"] == truth[r["item"]] for r in works),
            "completion_tokens_per_item": round(sum(r["completion_tokens"] for r in rows) / max(1, len(rows)), 1),
            "starts_with_json": sum(r["text"].lstrip().startswith("{") for r in rows)}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks json_constraint_probe")
    parser.add_argument("--items", type=int, default=20)
    parser.add_argument("--out", type=Path, default=HERE / "json_constraint_probe.json")
    args = parser.parse_args(argv)
    items, _ = datasets.load("arithmetic", limit=args.items)
    spec = AnswerSpec("integer", "json")
    engine = local.engine()
    truth = {item.id: item.answer for item in items}
    result = {"model": weights.DEFAULT_MODEL, "dataset": "arithmetic", "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
              "system_prompt": spec.system(), "sides": {}}
    for side, grammar in (("constrained", spec.output), ("unconstrained", None), ("constrained_steps", Steps)):
        started = time.perf_counter()
        rows = [{"item": item.id, **ask(engine, first_messages(spec, item.question), grammar)}
                for item in items]
        result["sides"][side] = {**summary(rows, truth), "wall_s": round(time.perf_counter() - started, 1),
                                 "replies": rows}
        print(side, {k: v for k, v in result["sides"][side].items() if k != "replies"}, flush=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0
