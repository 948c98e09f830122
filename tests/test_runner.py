import asyncio
import json
import os
import signal
import subprocess
import sys
import threading

import pytest

from debatekit import registry
from debatekit._base.signals import Terminated
from debatekit.engine import Outcome
from debatekit.models import scripted
from debatekit.records.schemas import RunConfig
from debatekit.records.trace import RunFolderError
from debatekit.runner import run
from tests.conftest import answer


def config(dataset, model, **kw):
    return RunConfig(protocol="society_of_mind", dataset=str(dataset), model=model,
                     params={"agents": 2, "rounds": 2}, **kw)


def test_run_folder_holds_run_events_and_debates(tmp_path, arithmetic_file, model_from):
    model = model_from(lambda req: answer(int(req.item_id[1:]) * 10))
    result = run(config(arithmetic_file, model), tmp_path / "r", progress=False)
    record = json.loads((tmp_path / "r" / "run.json").read_text())
    assert record["status"] == "complete" and record["schema_version"] == 1
    assert record["model"] == model and record["dataset"]["items"] == 3 and len(record["dataset"]["sha256"]) == 64
    assert record["config"]["params"] == {"agents": 2, "rounds": 2} and record["debatekit_version"]
    assert record["summary"]["accuracy"] == 1.0 and record["summary"]["items"] == 3
    assert len((tmp_path / "r" / "debates.jsonl").read_text().splitlines()) == 3
    assert len((tmp_path / "r" / "events.jsonl").read_text().splitlines()) == 6  # agreement after round 1
    assert result.summary.calls == 6


def test_the_summary_is_typed_and_run_json_keeps_it_as_the_summary_functions_give_it(tmp_path, arithmetic_file,
                                                                                     model_from):
    from debatekit.analysis import summarize
    from debatekit.records import review
    from debatekit.records.schemas import RunSummary

    model = model_from(lambda req: answer(int(req.item_id[1:]) * 10))
    result = run(config(arithmetic_file, model), tmp_path / "r", progress=False)
    assert isinstance(result.summary, RunSummary) and result.summary.accuracy == 1.0 and result.summary.items == 3
    written = json.loads((tmp_path / "r" / "run.json").read_text())["summary"]
    expected = {**summarize(result.debates), **review.counts(tmp_path / "r"), "wall_s": written["wall_s"]}
    assert json.dumps(written) == json.dumps(expected, default=str)  # the same keys, in order, and values
    assert set(RunSummary.model_fields) == set(written)  # a field for every key written


def test_no_function_of_the_run_loop_is_long():
    import ast
    from pathlib import Path

    import debatekit.runner

    tree = ast.parse(Path(debatekit.runner.__file__).read_text(encoding="utf-8"))
    long = [f"{node.name}: {node.end_lineno - node.lineno + 1} lines" for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 60]
    assert long == []


def test_rerun_with_cache_makes_zero_model_calls(tmp_path, arithmetic_file, model_from):
    calls = []
    model = model_from(lambda req: calls.append(1) or answer(req.params["seed"] % 7))
    first = run(config(arithmetic_file, model), tmp_path / "a", progress=False)
    n = len(calls)
    second = run(config(arithmetic_file, model), tmp_path / "b", progress=False)
    assert len(calls) == n and second.summary.provider_calls == 0
    assert second.summary.cache_hits == second.summary.calls == first.summary.calls
    assert sorted(d.final_answer for d in second.debates) == sorted(d.final_answer for d in first.debates)


def test_no_cache_calls_the_model_again(tmp_path, arithmetic_file, model_from):
    calls = []
    model = model_from(lambda req: calls.append(1) or answer(1))
    run(config(arithmetic_file, model, cache=False), tmp_path / "a", progress=False)
    n = len(calls)
    run(config(arithmetic_file, model, cache=False), tmp_path / "b", progress=False)
    assert len(calls) == 2 * n


def test_resume_skips_finished_items(tmp_path, arithmetic_file, model_from):
    asked = []
    model = model_from(lambda req: asked.append(req.item_id) or answer(10))
    run(config(arithmetic_file, model, limit=2, cache=False), tmp_path / "r", progress=False)
    assert set(asked) == {"q1", "q2"}
    asked.clear()
    with pytest.raises(RunFolderError, match=r"configuration differs \(params.rounds: 2 -> 3\)"):
        run(config(arithmetic_file, model, limit=2, cache=False).model_copy(update={"params": {"agents": 2, "rounds": 3}}),
            tmp_path / "r", resume=True, progress=False)
    # the same config, with one debate line removed as if the run had been killed
    path = tmp_path / "r" / "debates.jsonl"
    path.write_text(path.read_text().splitlines()[0] + "\n" + '{"torn": ')
    result = run(config(arithmetic_file, model, limit=2, cache=False), tmp_path / "r", resume=True, progress=False)
    assert len(set(asked)) == 1 and sorted(d.item_id for d in result.debates) == ["q1", "q2"]
    # the half line is gone, not left in the middle of the file for other readers (pandas, jq) to trip on
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [row["item_id"] for row in rows] == ["q1", "q2"]


def test_resume_finds_a_debate_recorded_before_seeds_were_recorded_under_the_run_seed(tmp_path, arithmetic_file,
                                                                                      model_from):
    asked = []
    model = model_from(lambda req: asked.append(req.item_id) or answer(10))
    run(config(arithmetic_file, model, limit=2, cache=False, seed=7), tmp_path / "r", progress=False)
    path = tmp_path / "r" / "debates.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [row.pop("seed") for row in rows] == [7, 7]  # as an older run wrote them: no seed of their own
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    asked.clear()
    result = run(config(arithmetic_file, model, limit=2, cache=False, seed=7), tmp_path / "r", resume=True,
                 progress=False)
    assert asked == [] and sorted(d.item_id for d in result.debates) == ["q1", "q2"]  # nothing run twice


def test_resume_may_raise_the_limit_but_not_lower_it(tmp_path, arithmetic_file, model_from):
    asked = []
    model = model_from(lambda req: asked.append(req.item_id) or answer(10))
    run(config(arithmetic_file, model, limit=1, cache=False), tmp_path / "r", progress=False)
    asked.clear()
    result = run(config(arithmetic_file, model, limit=2, cache=False), tmp_path / "r", resume=True, progress=False)
    assert set(asked) == {"q2"} and sorted(d.item_id for d in result.debates) == ["q1", "q2"]
    record = json.loads((tmp_path / "r" / "run.json").read_text())
    assert record["config"]["limit"] == 2 and record["summary"]["items"] == 2
    result = run(config(arithmetic_file, model, cache=False), tmp_path / "r", resume=True, progress=False)
    assert sorted(d.item_id for d in result.debates) == ["q1", "q2", "q3"]
    # each resume is in the provenance: the code it ran, how far the run was, the limit it went to
    record = json.loads((tmp_path / "r" / "run.json").read_text())
    assert [(r["answered"], r["limit"]) for r in record["resumes"]] == [(1, 2), (2, None)]
    assert all(r["git_commit"] == record["git_commit"] and r["at"] >= record["created"] for r in record["resumes"])
    with pytest.raises(RunFolderError, match="limit: None -> 2"):  # fewer items would strand finished ones
        run(config(arithmetic_file, model, limit=2, cache=False), tmp_path / "r", resume=True, progress=False)


def test_existing_run_folder_is_not_overwritten(tmp_path, arithmetic_file, model_from):
    model = model_from(lambda req: answer(1))
    run(config(arithmetic_file, model, limit=1), tmp_path / "r", progress=False)
    with pytest.raises(RunFolderError, match="already holds a run"):
        run(config(arithmetic_file, model, limit=1), tmp_path / "r", progress=False)


def test_a_run_that_got_no_answer_resumes_under_the_fixed_setting_and_one_that_did_does_not(
        tmp_path, arithmetic_file, model_from):
    """A wrong model name fails every call: the run holds nothing to keep, so `--resume` with the
    model fixed starts it again there (the advice printed on failure). Once a debate has an answer,
    a changed setting is refused as before: it would mix two configurations in one run."""
    typo = model_from(lambda req: scripted.Fault("not_found", "model gpt-4o-mnii does not exist"))
    result = run(config(arithmetic_file, typo, limit=2, cache=False), tmp_path / "r", progress=False)
    assert result.record.status == "failed" and not any(d.answered for d in result.debates)
    good = model_from(lambda req: answer(10))
    result = run(config(arithmetic_file, good, limit=2, cache=False), tmp_path / "r", resume=True, progress=False)
    assert result.record.status == "complete" and result.record.config.model == good
    assert [d.status for d in result.debates] == ["ok", "ok"] and not result.record.resumes
    events = [json.loads(line) for line in (tmp_path / "r" / "events.jsonl").read_text().splitlines()]
    assert {e["model"] for e in events} == {good}
    with pytest.raises(RunFolderError, match="configuration differs"):
        run(config(arithmetic_file, typo, limit=2, cache=False), tmp_path / "r", resume=True, progress=False)


def test_a_crashing_debate_is_recorded_as_failed_and_the_run_goes_on(tmp_path, arithmetic_file, model_from):
    @registry.protocol("test_crashes_on_q2")
    def crashes():
        async def solve(item, debate):
            if item.id == "q2":
                raise RuntimeError("boom")
            return Outcome(final_answer=item.answer)
        return solve

    result = run(RunConfig(protocol="test_crashes_on_q2", dataset=str(arithmetic_file), model="scripted/schema"),
                 tmp_path / "r", progress=False)
    by_id = {d.item_id: d for d in result.debates}
    assert by_id["q2"].status == "failed" and "boom" in by_id["q2"].error
    assert by_id["q1"].correct and by_id["q3"].correct
    # a crash is not the model's answer: counted in `failed`, left out of accuracy (not scored as wrong)
    assert result.summary.failed == 1 and result.summary.accuracy == 1.0


def test_credentials_in_model_options_never_reach_the_trace(tmp_path, arithmetic_file, model_from):
    model = model_from(lambda req: answer(10))
    secret = "sk-test-PLANTED-SECRET-123"
    run(config(arithmetic_file, model, limit=1, model_options={model: {"api_key": secret}}),
        tmp_path / "r", progress=False)
    for path in (tmp_path / "r").iterdir():
        assert secret not in path.read_text()


def test_call_timeout_defaults_by_model_and_is_recorded(tmp_path):
    from debatekit.models.kinds import policy

    assert policy("local/qwen2.5-coder-1.5b-instruct").call_timeout == 900
    assert policy("openai/gpt-4o-mini").call_timeout == 120
    first = run(RunConfig(protocol="single", dataset="arithmetic", limit=1, model="scripted/schema"),
                tmp_path / "a", progress=False)
    assert first.record.config.call_timeout == 120
    result = run(RunConfig(protocol="single", dataset="arithmetic", limit=1, model="scripted/schema",
                           call_timeout=7), tmp_path / "b", progress=False)
    assert result.record.config.call_timeout == 7
    # resuming with the same (unset) timeout is the same configuration, not a hash mismatch
    again = run(RunConfig(protocol="single", dataset="arithmetic", limit=1, model="scripted/schema"),
                tmp_path / "a", resume=True, progress=False)
    assert again.record.run_id == first.record.run_id


def test_every_field_a_protocol_decides_reaches_the_debate_record():
    import asyncio

    from debatekit.datasets import Item
    from debatekit.engine import Debate, Outcome
    from debatekit.models.gateway import Gateway
    from debatekit.models.model import resolve
    from debatekit.records.schemas import DebateRecord, DebateVerdict
    from debatekit.engine.scoring import run_debate

    decided = Outcome(final_answer=4, correct=False, score=0.25, converged=False, needs_human_review=True,
                      escalation_reason="split", escalated_to="council", output={"why": ["a", "b"]})

    async def solver(item, debate):
        return decided

    item = Item(id="i1", question="q?", answer=3)
    debate = Debate(item, gateway=Gateway(), model=resolve("scripted/schema"), run_id="r", debate_id="d")
    record = asyncio.run(run_debate(solver, item, debate, "custom"))
    assert {k: getattr(record, k) for k in DebateVerdict.model_fields} == decided.model_dump()
    assert set(Outcome.model_fields) == set(DebateVerdict.model_fields) < set(DebateRecord.model_fields)
    # what the runner derives when the protocol leaves it open: correctness against the truth, the score
    record = asyncio.run(run_debate(lambda item, debate: _outcome(Outcome(final_answer=3)), item, debate, "custom"))
    assert (record.correct, record.score, record.escalated_to) == (True, 1.0, None)


async def _outcome(outcome):
    return outcome


def test_a_run_without_a_model_resolves_the_default_once_and_records_it(tmp_path, monkeypatch):
    monkeypatch.setenv("DEBATEKIT_MODEL", "scripted/schema")
    config = RunConfig(protocol="single", dataset="arithmetic", limit=1)
    assert config.run_model == "scripted/schema" and RunConfig(**{**config.model_dump(), "model": "x/y"}).run_model == "x/y"
    result = run(config, tmp_path / "r", progress=False)
    assert result.record.model == "scripted/schema" and result.record.config.call_timeout == 120
    assert all(d.status == "ok" for d in result.debates)


def test_a_drained_run_finishes_the_debates_it_started_starts_no_other_and_resume_runs_the_rest(
        tmp_path, arithmetic_file, model_from):
    from debatekit._base.signals import DRAIN_FILE, Drained

    out, asked = tmp_path / "r", []

    def reply(req):
        asked.append((req.item_id, req.round))
        if req.item_id == "q1" and req.round == 1:
            (out / DRAIN_FILE).write_text("")  # `debatekit drain` while q1's first round runs
        return answer(int(req.item_id[1:]) * 10 + (req.round == 1 and req.agent == "agent2"))

    model = model_from(reply)
    one_at_a_time = config(arithmetic_file, model, cache=False).model_copy(update={"concurrency": 1})
    with pytest.raises(Drained, match=r"2 item\(s\) left for --resume"):
        run(one_at_a_time, out, progress=False)
    # q1 ran both its rounds (the agents disagreed in round 1); q2 and q3 never started
    assert sorted(set(asked)) == [("q1", 1), ("q1", 2)]
    record = json.loads((out / "run.json").read_text())
    assert record["status"] == "interrupted" and record["reason"].startswith("drained")
    assert [json.loads(line)["item_id"] for line in (out / "debates.jsonl").read_text().splitlines()] == ["q1"]
    asked.clear()
    result = run(one_at_a_time, out, resume=True, progress=False)  # the request is spent: the rest runs
    assert not (out / DRAIN_FILE).exists() and {i for i, _ in asked} == {"q2", "q3"}
    assert sorted(d.item_id for d in result.debates) == ["q1", "q2", "q3"] and result.record.status == "complete"


def test_a_drain_file_in_the_folder_above_drains_a_sweeps_point(tmp_path, arithmetic_file, model_from):
    from debatekit._base.signals import DRAIN_FILE, Drained

    (tmp_path / DRAIN_FILE).write_text("")  # the sweep's folder: its points start nothing new
    model = model_from(lambda req: answer(10))
    with pytest.raises(Drained, match=r"3 item\(s\)"):
        run(config(arithmetic_file, model, cache=False), tmp_path / "point", progress=False)
    assert (tmp_path / DRAIN_FILE).exists()  # the sweep's request, for the sweep to clear


def _cut_off(folder, keep: int) -> None:
    """Leave the first `keep` debate records, as if a stop had cut off the debates after them."""
    path = folder / "debates.jsonl"
    path.write_text("".join(path.read_text().splitlines(keepends=True)[:keep]))


def test_a_resume_on_a_machine_without_the_cache_restores_the_replies_of_cut_off_debates(
        tmp_path, arithmetic_file, model_from, monkeypatch):
    asked = []
    model = model_from(lambda req: asked.append(req.item_id) or answer(req.params["seed"] % 7))
    first = run(config(arithmetic_file, model), tmp_path / "r", progress=False)
    before = {d.item_id: d.final_answer for d in first.debates}
    events = [json.loads(line) for line in (tmp_path / "r" / "events.jsonl").read_text().splitlines()]
    cut = [e for e in events if e["item_id"] != "q1"]
    assert all(len(e["replies"]) == 1 and e["replies"][0]["chars"] == len(e["text"]) for e in events)
    _cut_off(tmp_path / "r", keep=1)
    monkeypatch.setenv("DEBATEKIT_CACHE_DIR", str(tmp_path / "another-machine"))  # an empty cache
    asked.clear()

    resumed = run(config(arithmetic_file, model), tmp_path / "r", resume=True, progress=False)
    assert asked == []  # every call of the two cut-off debates was answered from their own events
    assert {d.item_id: d.final_answer for d in resumed.debates} == before
    record = json.loads((tmp_path / "r" / "run.json").read_text())
    assert record["resumes"][-1]["restored_replies"] == len(cut) > 0
    again = [json.loads(line) for line in (tmp_path / "r" / "events.jsonl").read_text().splitlines()]
    assert len(again) == len(events)  # each call counted once: the cut-off events were pruned, then rerun
    assert sorted(e["text"] for e in again if e["item_id"] != "q1") == sorted(e["text"] for e in cut)
    assert all(e["cache_hit"] for e in again if e["item_id"] != "q1")


def test_restored_replies_include_the_repaired_ones(tmp_path, arithmetic_file, model_from, monkeypatch):
    asked = []

    def reply(req):
        asked.append(req.item_id)
        repairing = "could not be used" in req.messages[-1]["content"]
        return answer(10) if repairing or req.item_id != "q2" else "no JSON here"

    model = model_from(reply)
    run(config(arithmetic_file, model, limit=2), tmp_path / "r", progress=False)
    events = [json.loads(line) for line in (tmp_path / "r" / "events.jsonl").read_text().splitlines()]
    repaired = [e for e in events if e["repairs"]]
    assert repaired and all(len(e["replies"]) == 2 for e in repaired)
    _cut_off(tmp_path / "r", keep=1)
    monkeypatch.setenv("DEBATEKIT_CACHE_DIR", str(tmp_path / "another-machine"))
    asked.clear()
    resumed = run(config(arithmetic_file, model, limit=2), tmp_path / "r", resume=True, progress=False)
    again = [json.loads(line) for line in (tmp_path / "r" / "events.jsonl").read_text().splitlines()]
    assert asked == [] and all(e["cache_hit"] for e in again if e["item_id"] == "q2")
    assert resumed.summary.parse_failures == sum(e["parse_failures"] for e in events) > 0


def test_a_resume_restores_nothing_the_cache_already_holds_and_nothing_from_runs_recorded_before(
        tmp_path, arithmetic_file, model_from, monkeypatch):
    asked = []
    model = model_from(lambda req: asked.append(req.item_id) or answer(1))
    run(config(arithmetic_file, model), tmp_path / "r", progress=False)
    _cut_off(tmp_path / "r", keep=1)
    run(config(arithmetic_file, model), tmp_path / "r", resume=True, progress=False)
    record = json.loads((tmp_path / "r" / "run.json").read_text())
    assert record["resumes"][-1]["restored_replies"] == 0  # the same machine's cache held them all

    path = tmp_path / "r" / "events.jsonl"  # as written before replies were kept
    path.write_text("".join(json.dumps({k: v for k, v in json.loads(line).items() if k != "replies"}) + "\n"
                            for line in path.read_text().splitlines()))
    _cut_off(tmp_path / "r", keep=1)
    monkeypatch.setenv("DEBATEKIT_CACHE_DIR", str(tmp_path / "another-machine"))
    asked.clear()
    run(config(arithmetic_file, model), tmp_path / "r", resume=True, progress=False)
    record = json.loads((tmp_path / "r" / "run.json").read_text())
    assert record["resumes"][-1]["restored_replies"] == 0 and set(asked) == {"q2", "q3"}


def test_the_work_of_cut_off_debates_still_counts_in_the_runs_compute(tmp_path, arithmetic_file, model_from):
    from debatekit.analysis import load_runs
    from debatekit.analysis.study import compute

    model = model_from(lambda req: answer(req.params["seed"] % 7))
    first = run(config(arithmetic_file, model), tmp_path / "r", progress=False)
    whole = compute(load_runs([tmp_path / "r"])).iloc[0]
    assert whole["calls_made"] == first.summary.provider_calls > 0
    events = [json.loads(line) for line in (tmp_path / "r" / "events.jsonl").read_text().splitlines()]
    cut = [e for e in events if e["item_id"] != "q1"]
    _cut_off(tmp_path / "r", keep=1)
    run(config(arithmetic_file, model), tmp_path / "r", resume=True, progress=False)  # replayed: cache hits

    record = json.loads((tmp_path / "r" / "run.json").read_text())
    work = record["resumes"][-1]["cut_off_work"]
    assert work["calls"] == len(cut) and work["tokens"] == sum(e["completion_tokens"] for e in cut)
    assert 0 <= work["busy_s"] <= sum(e["latency_s"] for e in cut)
    after = compute(load_runs([tmp_path / "r"])).iloc[0]
    assert after["calls_made"] == whole["calls_made"] and after["tokens_generated"] == whole["tokens_generated"]
    assert after["busy_h"] == pytest.approx(whole["busy_h"], abs=1e-6)  # busy_s is kept to the millisecond


@pytest.fixture
def sigint_raises(request):
    """Run the test in an interpreter of its own, where Ctrl-C raises KeyboardInterrupt as at a
    terminal; True there, False in the suite's process once that run has passed. Signals are the
    process's: in the suite's long-lived process, a signal the test sent itself was once seen to go
    unanswered for two minutes, and a shell starts a command it puts in the background with SIGINT
    ignored, which Python keeps."""
    if os.environ.get("DEBATEKIT_ISOLATED_TEST") != request.node.nodeid:
        child = subprocess.run([sys.executable, "-m", "pytest", request.node.nodeid, "-q", "-p", "no:cacheprovider"],
                               env={**os.environ, "DEBATEKIT_ISOLATED_TEST": request.node.nodeid},
                               cwd=request.config.rootpath, capture_output=True, text=True, timeout=600)
        assert child.returncode == 0, child.stdout[-4000:] + child.stderr[-2000:]
        assert " passed" in child.stdout and "skipped" not in child.stdout, child.stdout[-2000:]
        yield False
        return
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield True
    signal.signal(signal.SIGINT, before)


@pytest.mark.parametrize("sig, raised, reason", [(signal.SIGTERM, Terminated, "stopped by SIGTERM"),
                                                  (signal.SIGINT, KeyboardInterrupt, "stopped by SIGINT (Ctrl-C)")])
def test_a_signal_while_a_notebook_waits_stops_the_run_in_its_thread_and_says_why(
        tmp_path, arithmetic_file, model_from, sig, raised, reason, sigint_raises):
    """In Jupyter, run() waits for a thread that runs the debates: a kernel interrupt (SIGINT) or a
    sweep ending a point's kernel (SIGTERM) must stop those debates and mark run.json, not leave
    them running behind the notebook or the record saying "running"."""
    if not sigint_raises:  # it ran, and passed, in its own interpreter
        return
    asked = threading.Event()
    model = model_from(lambda req: asked.set() or scripted.Delayed(600, answer(1)))
    before = signal.getsignal(signal.SIGTERM)

    def send_when_asked():
        assert asked.wait(60)
        os.kill(os.getpid(), sig)

    async def cell():  # a notebook cell: an event loop is running in this (the main) thread
        return run(config(arithmetic_file, model), tmp_path / "r", progress=False)

    threading.Thread(target=send_when_asked, daemon=True).start()
    loop = asyncio.new_event_loop()  # as a kernel's: asyncio.run would take Ctrl-C for itself
    with pytest.raises(raised) as stopped:
        loop.run_until_complete(cell())
    loop.close()
    assert isinstance(stopped.value, Terminated) == (sig == signal.SIGTERM)
    record = json.loads((tmp_path / "r" / "run.json").read_text())
    assert (record["status"], record["reason"]) == ("interrupted", reason)
    assert not [t for t in threading.enumerate() if t.name == "debatekit-run"]
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_second_interrupt_stops_waiting_for_a_run_that_is_slow_to_stop(tmp_path, arithmetic_file, capfd,
                                                                         sigint_raises):
    if not sigint_raises:  # it ran, and passed, in its own interpreter
        return
    asked, release = threading.Event(), threading.Event()

    @registry.protocol("test_slow_to_stop")
    def slow_to_stop():
        async def solve(item, debate):
            asked.set()
            await asyncio.to_thread(release.wait, 120)  # cancelled at once, but asyncio.run waits for the thread
            return Outcome(final_answer=item.answer)
        return solve

    def interrupt_twice():
        assert asked.wait(60)
        os.kill(os.getpid(), signal.SIGINT)
        run_json = tmp_path / "r" / "run.json"
        for _ in range(1200):  # the run has stopped and said so; only its thread lingers
            if '"interrupted"' in run_json.read_text():
                break
            threading.Event().wait(0.05)
        os.kill(os.getpid(), signal.SIGINT)

    async def cell():
        return run(RunConfig(protocol="test_slow_to_stop", dataset=str(arithmetic_file), model="scripted/schema"),
                   tmp_path / "r", progress=False)

    threading.Thread(target=interrupt_twice, daemon=True).start()
    loop = asyncio.new_event_loop()
    try:
        with pytest.raises(KeyboardInterrupt):
            loop.run_until_complete(cell())
        assert [t for t in threading.enumerate() if t.name == "debatekit-run"], "the run's thread had ended"
        assert "no longer waiting; the run is still stopping" in capfd.readouterr().err
        assert json.loads((tmp_path / "r" / "run.json").read_text())["status"] == "interrupted"
    finally:
        release.set()
        loop.close()


@pytest.mark.parametrize("value, stored", [("int64", 20), ("int32", 20), ("bool_", True), ("float32", 20.0)])
def test_a_numpy_scalar_answer_is_stored_as_the_number_it_is(tmp_path, arithmetic_file, value, stored):
    import numpy as np

    @registry.protocol(f"test_numpy_{value}")
    def numpy_answer():
        async def solve(item, debate):
            kind = getattr(np, value)
            answer = kind(True) if value == "bool_" else kind(20)
            return Outcome(final_answer=answer, output={"votes": [kind(1), kind(2)], "best": answer})
        return solve

    try:
        result = run(RunConfig(protocol=f"test_numpy_{value}", dataset=str(arithmetic_file), model="scripted/schema"),
                     tmp_path / "r", progress=False)
    finally:
        registry._protocols.pop(f"test_numpy_{value}", None)
    rows = {json.loads(line)["item_id"]: json.loads(line) for line in (tmp_path / "r" / "debates.jsonl").open()}
    assert all(r["status"] == "ok" and r["final_answer"] == stored and type(r["final_answer"]) is type(stored)
               for r in rows.values())
    assert rows["q2"]["correct"] is (stored == 20)  # q2's truth is 20
    assert len(result.debates) == 3


def test_an_answer_that_cannot_be_stored_fails_its_debate_only_naming_the_item(tmp_path, arithmetic_file):
    @registry.protocol("test_unstorable")
    def unstorable():
        async def solve(item, debate):
            return Outcome(final_answer=object() if item.id == "q2" else item.answer)
        return solve

    try:
        result = run(RunConfig(protocol="test_unstorable", dataset=str(arithmetic_file), model="scripted/schema"),
                     tmp_path / "r", progress=False)
    finally:
        registry._protocols.pop("test_unstorable", None)
    by_id = {d.item_id: d for d in result.debates}
    assert by_id["q1"].status == by_id["q3"].status == "ok" and result.record.status == "complete"
    assert by_id["q2"].status == "failed" and "item q2" in by_id["q2"].error and by_id["q2"].correct is None
