"""The benchmarks' measuring code still runs against today's API (tiny sizes; no timing asserted).

The benchmarks run on demand, not in CI, so a renamed import in one of them would otherwise go
unnoticed until someone re-measures."""

import asyncio
from pathlib import Path

from benchmarks.overhead import measure


def test_the_overhead_benchmark_measures_every_side():
    result = asyncio.run(measure(4, 2))
    assert set(result["per_call"]) == {"debatekit", "bare_litellm_mock", "gateway_only", "litellm_custom_provider"}
    assert all(side["n"] == 4 for side in result["per_call"].values())


def test_the_table_scripts_read_the_committed_runs_where_they_are(capsys):
    from benchmarks import answer_formats, caps

    assert answer_formats.main([]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ") and "| dataset |" not in line]
    assert len(rows) == 15 and "| all (pooled) |" in rows[4]
    page = (Path(__file__).resolve().parent.parent / "docs" / "results" / "answer-formats.md").read_text()
    assert [row for row in rows if row not in page] == []  # the page quotes the runs as they read today
    assert caps.main([]) == 0 and "judge_refine" in capsys.readouterr().out


def test_the_shared_prefill_benchmark_replays_the_committed_discussion_rounds():
    from benchmarks.shared_prefill import groups
    from debatekit.models.local.prefix_cache import SharedPrefill

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


def test_the_speculation_benchmark_pairs_each_call_of_the_debate_it_replays():
    from benchmarks import speculation

    work = speculation.calls(2, 2)
    assert [(c["round"], c["phase"]) for c in work] == [(1, "answer")] * 6 + [(2, "revise")] * 6
    assert speculation.seed(work[0]) == speculation.seed(dict(work[0])) != speculation.seed(work[1])
    assert speculation.plan("1:3,32:10") == [(1, 3), (32, 10)]

    def replies(texts):
        return {"walls": {1: 2.0, 2: 4.0}, "replies": [
            {**{k: c[k] for k in ("item_id", "round", "agent", "phase")}, "text": t, "completion_tokens": 10,
             "drafted": 4, "accepted": 2, "decode_s": 1.0, "prompt_read": 5, "prompt_s": 0.5}
            for c, t in zip(work, texts)]}

    keys = speculation.keys()
    right = [f"Answer: {keys[c['item_id']]:g}" for c in work]
    off, on = replies(right), replies(right[:-1] + ["Answer: -1"])
    paired = speculation.paired(off, on, keys)
    assert paired["calls"] == 12 and paired["identical_replies"] == 11 and paired["only_off_right"] == 1
    assert paired["accuracy_off"] == 1.0 and paired["accuracy_on"] == round(11 / 12, 3)
    rows = speculation.phases(on)
    assert rows["answer"]["tok_per_s"] == 30.0 and rows["revise"]["acceptance"] == 0.5 and rows["all"]["calls"] == 12


def test_the_first_command_benchmark_times_a_command_in_fresh_folders(tmp_path):
    from pathlib import Path

    from benchmarks import first_command

    repo = Path(__file__).resolve().parent.parent
    done = first_command.once(repo, "run single --dataset arithmetic --limit 2 --model scripted/schema", {})
    assert done["exit"] == 0 and done["runs"]["run"]["calls"] == 2 and "single" in done["stdout"]


def test_the_engine_knobs_benchmark_changes_one_knob_per_setting():
    import pytest

    xllamacpp = pytest.importorskip("xllamacpp")
    from benchmarks import engine_knobs

    def params(setting):
        made = xllamacpp.CommonParams()
        engine_knobs.adjust(made, setting)
        return made

    default = params("default")
    assert params("flash_attn_off").flash_attn_type == 0 and params("flash_attn_on").flash_attn_type == 1
    assert params("no_polling").cpuparams.poll == 0 != default.cpuparams.poll
    assert params("ubatch_256").n_ubatch == 256 != default.n_ubatch
    assert params("kv_q8").cache_type_k == xllamacpp.ggml_type.GGML_TYPE_Q8_0 != default.cache_type_k
    with pytest.raises(ValueError, match="unknown setting"):
        engine_knobs.adjust(default, "turbo")
