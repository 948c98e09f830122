"""The benchmarks' measuring code still runs against today's API (tiny sizes; no timing asserted).

The benchmarks run on demand, not in CI, so a renamed import in one of them would otherwise go
unnoticed until someone re-measures."""

import asyncio

from benchmarks.overhead import measure


def test_the_overhead_benchmark_measures_every_side():
    result = asyncio.run(measure(4, 2))
    assert set(result["per_call"]) == {"debatekit", "bare_litellm_mock", "gateway_only", "litellm_custom_provider"}
    assert all(side["n"] == 4 for side in result["per_call"].values())


def test_the_table_scripts_read_the_committed_runs_where_they_are(capsys):
    from benchmarks import answer_formats, caps

    assert answer_formats.main([]) == 0 and caps.main([]) == 0
    out = capsys.readouterr().out
    assert "| all (pooled) |" in out and "judge_refine" in out


def test_the_shared_prefill_benchmark_replays_the_committed_discussion_rounds():
    from benchmarks.shared_prefill import groups
    from debatekit.models.prefix_cache import SharedPrefill

    rounds = groups()
    assert len(rounds) == 11  # 11 discussion rounds, each sent by three agents
    assert all(sum(len(m["content"]) for m in r) >= SharedPrefill().min_chars for r in rounds)  # each one shared


def test_the_engine_benchmarks_send_their_requests_all_at_once():
    import threading

    from benchmarks.common import at_once

    together = threading.Barrier(3, timeout=10)  # broken, and chat raises, unless all three are in flight

    class Engine:
        def chat(self, request):
            together.wait()
            return {"echo": request["n"]}

    replies, latencies, wall = at_once(Engine(), [{"n": n} for n in range(3)])
    assert replies == [{"echo": 0}, {"echo": 1}, {"echo": 2}] and len(latencies) == 3
    assert all(0 <= s <= wall for s in latencies)
