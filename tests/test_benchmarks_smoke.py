"""The benchmarks' measuring code still runs against today's API (tiny sizes; no timing asserted).

The benchmarks run on demand, not in CI, so a renamed import in one of them would otherwise go
unnoticed until someone re-measures."""

import asyncio

from benchmarks.overhead import measure


def test_the_overhead_benchmark_measures_every_side():
    result = asyncio.run(measure(4, 2))
    assert set(result["per_call"]) == {"debatekit", "bare_litellm_mock", "gateway_only", "litellm_custom_provider"}
    assert all(side["n"] == 4 for side in result["per_call"].values())
