"""Framework overhead per model call: debatekit (scripted model) vs bare litellm mock_response.

Both sides run in the same process, interleaved in blocks so that machine load hits them
alike. The debatekit side is a whole `Debate.ask`: engine (seed, limits, event), gateway
(schema, retries, parse into the pydantic model), litellm's custom-provider dispatch, the
scripted provider and the append of the event line to events.jsonl. The bare side is
`litellm.acompletion(model=..., messages=..., mock_response=TEXT)`.

    python -m benchmarks overhead [--calls 600] [--block 50]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from benchmarks.common import dist_ms, quiet_env, save

ANSWER = '{"reasoning": "3*4=12, 5*6=30; 1+12=13, 13+2=15, 15-30=-15", "answer": -15}'


def messages(i: int) -> list[dict]:
    return [{"role": "system", "content": "You are a careful problem solver. Reply with JSON."},
            {"role": "user", "content": f"What is the result of 1+3*4+2-5*6? (variant {i})"}]


async def measure(calls: int, block: int) -> dict:
    quiet_env()
    from debatekit.datasets import Item
    from debatekit.engine import Debate
    from debatekit.models import scripted
    from debatekit.models.gateway import Gateway
    from debatekit.models.model import resolve
    from debatekit.models.providers import litellm_module as _litellm
    from debatekit.protocols.shared.answers import spec_for
    from debatekit.records.trace import EVENTS_FILE, RunFolder

    litellm = _litellm()
    model = scripted.register("bench-overhead", fn=lambda req: ANSWER)
    folder = RunFolder(Path(tempfile.mkdtemp(prefix="dk-overhead-")))
    gateway = Gateway(cache=None)
    item = Item(id="q1", question="What is the result of 1+3*4+2-5*6?", answer=-15)
    IntegerAnswer = spec_for(item, "integer", "json").output  # the structured reply of a debate's agent
    debate = Debate(item, gateway=gateway, model=resolve(model), run_id="bench", debate_id="d1",
                    on_event=lambda e: folder.append(EVENTS_FILE, e), folder=None)

    async def dk(i):
        t = time.perf_counter()
        turn = await debate.ask("agent1", messages(i), IntegerAnswer, phase="answer", round=1, temperature=0.7)
        assert turn.ok
        return time.perf_counter() - t

    async def bare(i):
        t = time.perf_counter()
        reply = await litellm.acompletion(model="openai/gpt-4o-mini", messages=messages(i), mock_response=ANSWER,
                                          temperature=0.7)
        assert reply.choices[0].message.content == ANSWER
        return time.perf_counter() - t

    async def gateway_only(i):
        t = time.perf_counter()
        c = await gateway.complete(resolve(model), messages(i), IntegerAnswer, temperature=0.7, seed=i)
        assert c.ok
        return time.perf_counter() - t

    async def litellm_custom(i):  # litellm's custom-provider path with the scripted provider, no debatekit layer
        t = time.perf_counter()
        reply = await litellm.acompletion(model=model, messages=messages(i), temperature=0.7, num_retries=0)
        assert reply.choices[0].message.content == ANSWER
        return time.perf_counter() - t

    sides = {"debatekit": dk, "bare_litellm_mock": bare, "gateway_only": gateway_only,
             "litellm_custom_provider": litellm_custom}
    for fn in sides.values():  # warm-up: imports, first-call caches
        for i in range(20):
            await fn(i)
    times: dict[str, list[float]] = {k: [] for k in sides}
    cpu: dict[str, float] = {k: 0.0 for k in sides}
    for start in range(0, calls, block):
        for name, fn in sides.items():
            c0 = time.process_time()
            for i in range(start, min(calls, start + block)):
                times[name].append(await fn(i))
            cpu[name] += time.process_time() - c0
    folder.close()
    out = {name: dict(dist_ms(ts), cpu_ms_per_call=round(cpu[name] / len(ts) * 1000, 3)) for name, ts in times.items()}
    added = out["debatekit"]["median_ms"] - out["bare_litellm_mock"]["median_ms"]
    return {
        "calls_per_side": calls,
        "per_call": out,
        "debatekit_added_median_ms": round(added, 3),
        # CPU time is far less sensitive to other processes than wall medians on a shared machine
        "debatekit_added_cpu_ms_per_call": round(out["debatekit"]["cpu_ms_per_call"]
                                                 - out["bare_litellm_mock"]["cpu_ms_per_call"], 3),
        "debatekit_own_layers_cpu_ms_per_call": round(out["debatekit"]["cpu_ms_per_call"]
                                                      - out["litellm_custom_provider"]["cpu_ms_per_call"], 3),
        "breakdown_median_ms": {
            "litellm_custom_provider_vs_mock": round(out["litellm_custom_provider"]["median_ms"]
                                                     - out["bare_litellm_mock"]["median_ms"], 3),
            "gateway_layer": round(out["gateway_only"]["median_ms"] - out["litellm_custom_provider"]["median_ms"], 3),
            "engine_and_trace_layer": round(out["debatekit"]["median_ms"] - out["gateway_only"]["median_ms"], 3),
        },
        "target": {"added_median_ms_below": 2.0, "met": added < 2.0},
    }


def runner_per_call(items: int) -> dict:
    """A whole sequential run (runner, trace, summary) with the scripted model: wall per call."""
    from debatekit.models import scripted
    from debatekit.records.schemas import RunConfig
    from debatekit.runner import run

    model = scripted.register("bench-overhead-run", fn=lambda req: ANSWER)
    with tempfile.TemporaryDirectory() as tmp:
        config = RunConfig(protocol="society_of_mind", dataset="arithmetic", limit=items, model=model, cache=False,
                           concurrency=1, params={"agents": 3, "rounds": 2, "stop_on_agreement": False})
        t = time.perf_counter()
        result = run(config, Path(tmp) / "run", progress=False)
        wall = time.perf_counter() - t
    calls = result.summary.calls
    return {"items": items, "calls": calls, "wall_s": round(wall, 3), "wall_ms_per_call": round(wall / calls * 1000, 3)}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks overhead")
    parser.add_argument("--calls", type=int, default=600)
    parser.add_argument("--block", type=int, default=50)
    parser.add_argument("--run-items", type=int, default=50)
    args = parser.parse_args(argv)
    result = asyncio.run(measure(args.calls, args.block))
    result["sequential_run"] = runner_per_call(args.run_items)
    save("overhead", result)
    return 0
