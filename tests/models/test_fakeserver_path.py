"""An OpenAI-compatible server through litellm: structured answers, bounded calls in flight,
prompt-cache usage in the trace (benchmarks/fakeserver.py, the server the benchmarks use)."""

import json

from benchmarks.fakeserver import FakeServer
from debatekit.records.schemas import RunConfig
from debatekit.runner import run


def test_openai_compatible_server_through_litellm(tmp_path):
    model = "openai/fake"
    with FakeServer(latency=0.05, lifetime=120, idle=30) as server:
        config = RunConfig(protocol="society_of_mind", dataset="arithmetic", limit=4, model=model,
                           max_calls_in_flight=3, concurrency=4,
                           params={"agents": 3, "rounds": 2, "stop_on_agreement": False},
                           model_options={model: {"api_base": server.base_url, "api_key": "sk-fake"}})
        result = run(config, tmp_path / "run", progress=False)
        stats = server.stats()
    assert result.summary.calls == stats["requests"] == 4 * 3 * 2 and result.summary.errors == 0
    assert stats["max_in_flight"] <= 3
    events = [json.loads(line) for line in (result.path / "events.jsonl").read_text().splitlines()]
    assert all(isinstance(e["output"]["answer"], int) for e in events)
    # round 2 extends each agent's own conversation: the provider reports the reused prefix
    assert all(e["cached_tokens"] == 0 for e in events if e["round"] == 1)
    assert all(0 < e["cached_tokens"] < e["prompt_tokens"] for e in events if e["round"] == 2)
