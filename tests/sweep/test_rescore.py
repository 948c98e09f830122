"""`debatekit rescore`: a finished run read again from its recorded replies, without a model."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from debatekit import analysis
from debatekit.analysis import study
from debatekit.cli.app import main
from debatekit.models import reading as reader
from debatekit.models.model import resolve
from debatekit.models.recorded import attempts
from debatekit.records.schemas import RunConfig
from debatekit.records.trace import RunFolder
from debatekit.runner import run
from debatekit.sweep.rescore import SCORED, rescore
from tests.conftest import answer

HEDGED = "it is 20, not 25"
"""A reply whose stated answer (25) a mended reader reads as 20."""


def society(dataset, model, **kw):
    return RunConfig(protocol="society_of_mind", dataset=str(dataset), model=model,
                     params={"agents": 3, "rounds": 2, "stop_on_agreement": False}, **kw)


def replies(req):
    """Each agent answers its item's truth, except agent1 on q2, who hedges and states 25."""
    truth = int(req.item_id[1:]) * 10
    return answer(25, HEDGED) if (req.item_id, req.call["agent"]) == ("q2", "agent1") else answer(truth)


@pytest.fixture
def recorded(tmp_path, arithmetic_file, model_from):
    asked = []
    model = model_from(lambda req: asked.append(req.item_id) or replies(req))
    run(society(arithmetic_file, model), tmp_path / "r", progress=False)
    asked.clear()
    return tmp_path / "r", asked


def mended_reader(monkeypatch):
    """Today's reader, mended: a hedged reply is read as the number before its 'not'."""
    reading = reader.parse

    def parse(output, text, free_text, ending):
        parsed = reading(output, text, free_text, ending)
        return parsed.model_copy(update={"answer": 20}) if HEDGED in text else parsed

    monkeypatch.setattr(reader, "parse", parse)


def lines(path):
    return path.read_text(encoding="utf-8").splitlines(keepends=True)


def test_a_run_read_by_the_same_code_comes_out_the_same_without_a_model_call(recorded):
    folder, asked = recorded
    before = (lines(folder / "debates.jsonl"), lines(folder / "events.jsonl"))
    result = rescore(folder)
    assert asked == []
    assert (result.debates, result.calls) == (3, 18)  # 3 items, 3 agents, 2 rounds
    assert result.changed == result.readings == result.kept == [] and not result.written
    assert (lines(folder / "debates.jsonl"), lines(folder / "events.jsonl")) == before  # nothing written


def test_write_brings_a_summary_made_by_older_interval_code_to_todays(recorded):
    folder, asked = recorded
    today = json.loads((folder / "run.json").read_text())["summary"]
    stale = json.loads((folder / "run.json").read_text())
    stale["summary"]["accuracy_ci"] = [0.1234, 0.9876]  # as an older bootstrap wrote it
    (folder / "run.json").write_text(json.dumps(stale))
    assert not rescore(folder).written  # a look changes nothing
    assert "call records change" not in rescore(folder).describe()  # the readings are today's
    result = rescore(folder, write=True)
    assert result.written and result.changed == result.readings == [] and asked == []
    record = json.loads((folder / "run.json").read_text())
    assert record["summary"]["accuracy_ci"] == today["accuracy_ci"] != [0.1234, 0.9876]
    assert record["rescores"][-1]["changed"] == 0
    assert not rescore(folder, write=True).written  # nothing stale is left


def test_events_recorded_before_a_field_existed_are_told_apart_from_readings_that_changed(recorded):
    folder, _ = recorded
    rows = [json.loads(line) for line in lines(folder / "events.jsonl")]
    for row in rows[:4]:
        del row["echo"]  # as a run made before echoes were checked recorded it
    (folder / "events.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    said = rescore(folder).describe()
    assert "4 gain fields recorded since their run" in said and "call records change" not in said


def test_a_mended_reader_changes_the_answers_it_reads_and_the_debates_they_decide(recorded, monkeypatch):
    folder, asked = recorded
    old = {d.item_id: d for d in RunFolder(folder).debates()}
    assert old["q2"].rounds[0].answers["agent1"] == 25
    mended_reader(monkeypatch)
    result = rescore(folder)
    assert asked == [] and result.kept == []
    # agent1's two replies on q2 (rounds 1 and 2) read 20 now; the majority was 20 before and after
    assert sorted((r["item_id"], r["agent"], r["round"], r["before"]["answer"], r["after"]["answer"])
                  for r in result.readings) == [("q2", "agent1", 1, 25, 20), ("q2", "agent1", 2, 25, 20)]
    # the debate's answer stands; now that all three agree, it converged
    assert [(c["item_id"], c["final_answer"], c["converged"]) for c in result.changed] == \
        [("q2", (20, 20), (False, True))]
    assert "2 replies read differently, 0 kept as recorded, 2 call records change" in result.describe()
    assert "debate q2: converged False -> True" in result.describe()


def test_write_puts_the_new_readings_in_the_records_and_keeps_the_work_as_it_was_done(
        tmp_path, arithmetic_file, model_from, monkeypatch):
    # two agents: agent1's hedge (25) against agent2's 20 is a tie the protocol breaks; read as 20, it is not
    model = model_from(replies)
    config = society(arithmetic_file, model).model_copy(update={"params": {"agents": 2, "rounds": 1}})
    run(config, tmp_path / "r", progress=False)
    folder = tmp_path / "r"
    old_debates, old_events = lines(folder / "debates.jsonl"), lines(folder / "events.jsonl")
    tables = analysis.load_runs([folder])
    work = study.compute(tables).drop(columns="run_id").to_dict("records")
    mended_reader(monkeypatch)

    (tmp_path / "r.json").write_text(json.dumps({"run_id": json.loads((folder / "run.json").read_text())["run_id"],
                                                 "summary": {"accuracy": 2 / 3}}))
    result = rescore(folder, write=True)
    assert result.written and len(result.readings) == 1
    new_debates, new_events = lines(folder / "debates.jsonl"), lines(folder / "events.jsonl")
    changed = [(a, b) for a, b in zip(old_events, new_events) if a != b]
    assert len(new_events) == len(old_events) and len(changed) == 1  # every other line byte for byte
    before, after = (json.loads(line) for line in changed[0])
    assert (before["item_id"], before["agent"], before["output"]["answer"], after["output"]["answer"]) == \
        ("q2", "agent1", 25, 20)
    kept = ("run_id", "debate_id", "ts", "latency_s", "prompt_tokens", "completion_tokens", "calls", "cache_hit")
    assert {k: after[k] for k in kept} == {k: before[k] for k in kept} and after["cache_hit"] is False
    q2 = [json.loads(line) for line in new_debates if json.loads(line)["item_id"] == "q2"][0]
    old_q2 = [json.loads(line) for line in old_debates if json.loads(line)["item_id"] == "q2"][0]
    assert q2["rounds"][0]["answers"]["agent1"] == 20 and q2["final_answer"] == 20 and q2["correct"] is True
    assert {k: q2[k] for k in ("run_id", "debate_id", "wall_s", "usage")} == \
        {k: old_q2[k] for k in ("run_id", "debate_id", "wall_s", "usage")}
    assert [line for line in new_debates if '"q2"' not in line] == [line for line in old_debates if '"q2"' not in line]
    assert study.compute(analysis.load_runs([folder])).drop(columns="run_id").to_dict("records") == work
    record = json.loads((folder / "run.json").read_text())
    sidecar = json.loads((tmp_path / "r.json").read_text())  # the sweep's sidecar of this point
    assert sidecar["summary"] == record["summary"] and sidecar["summary"]["accuracy"] == 1.0
    assert record["rescores"][-1]["readings"] == 1 and "git_commit" in record["rescores"][-1]
    assert record["summary"]["accuracy"] == 1.0
    # the tie went to the first answer, 25, before: the debate changed, and says so
    assert [(c["item_id"], c["final_answer"], c["correct"], c["converged"]) for c in result.changed] == \
        [("q2", (25, 20), (False, True), (False, True))]
    assert "1 changed (1 wrong -> right, 0 right -> wrong)" in result.describe()
    assert rescore(folder).readings == []  # written: read again, nothing left to change


def test_a_packed_run_is_rewritten_packed(recorded, monkeypatch):
    folder, _ = recorded
    RunFolder(folder).pack()
    mended_reader(monkeypatch)
    assert rescore(folder, write=True).written
    assert not (folder / "events.jsonl").exists()
    events = [json.loads(line) for line in gzip.open(folder / "events.jsonl.gz", "rt", encoding="utf-8")]
    assert sorted(e["output"]["answer"] for e in events if e["item_id"] == "q2") == [20] * 6


def test_write_keeps_the_faults_of_the_work_and_counts_a_reading_fault_once(
        tmp_path, arithmetic_file, model_from, monkeypatch):
    from debatekit.models import scripted

    tried = set()

    def reply(req):
        where = (req.item_id, req.call["agent"], req.call["round"])
        if where == ("q1", "agent1", 1) and where not in tried:  # a rate limit, retried
            tried.add(where)
            return scripted.Fault("rate_limit", "slow down")
        return replies(req)

    run(society(arithmetic_file, model_from(reply)), tmp_path / "r", progress=False)
    events = [json.loads(line) for line in lines(tmp_path / "r" / "events.jsonl")]
    retried = [e for e in events if e["faults"] == ["rate_limit"]]
    assert len(retried) == 1 and retried[0]["retries"] == 1
    mended_reader(monkeypatch)
    assert rescore(tmp_path / "r", write=True).written
    after = [json.loads(line) for line in lines(tmp_path / "r" / "events.jsonl")]
    assert [e["faults"] for e in after if e["ts"] == retried[0]["ts"]] == [["rate_limit"]]


def test_a_reply_that_reads_where_the_run_repaired_it_keeps_its_debate(tmp_path, arithmetic_file, model_from,
                                                                        monkeypatch):
    def reply(req):
        repairing = "could not be used" in req.messages[-1]["content"]
        if (req.item_id, req.call["agent"]) == ("q2", "agent1") and not repairing:
            return "I think it is twenty."
        return replies(req) if req.item_id != "q2" else answer(20)

    one_round = society(arithmetic_file, model_from(reply)).model_copy(update={"params": {"agents": 3, "rounds": 1}})
    run(one_round, tmp_path / "r", progress=False)
    before = lines(tmp_path / "r" / "events.jsonl")
    assert sum(bool(json.loads(line)["repairs"]) for line in before) == 1
    reading = reader.parse

    def lenient(output, text, free_text, ending):  # a reader that now reads the prose reply
        if "twenty" in text:
            return output.model_validate({"reasoning": text, "answer": 20})
        return reading(output, text, free_text, ending)

    monkeypatch.setattr(reader, "parse", lenient)
    result = rescore(tmp_path / "r", write=True)
    assert [(k["item_id"], k["why"]) for k in result.kept] == \
        [("q2", "the reply of agent1 (answer, round 1) reads in 1 attempt(s) where the run took 2")]
    assert lines(tmp_path / "r" / "events.jsonl") == before  # the repaired reply is not lost


def test_a_repair_that_failed_counts_its_cut_off_reply_once():
    import asyncio

    from pydantic import BaseModel

    from debatekit.models.model import Caller
    from debatekit.models.recorded import Recorded

    class Reply(BaseModel):
        answer: int

    asked = [{"role": "user", "content": "Q"}]
    # an old event: the first reply was cut off and unreadable, and its repair timed out
    event = {"debate_id": "d", "item_id": "q1", "agent": "a", "phase": "answer", "round": 1, "messages": asked,
             "text": "long...", "faults": ["parse", "cut_off", "timeout"], "parse_failures": 1,
             "error": "timeout: call time limit reached", "error_kind": "timeout", "completion_tokens": 800,
             "repairs": [{"text": "long...", "repair_prompt": "?"}]}
    seen = []

    class Watched(Recorded):
        async def _fetch(self, model, messages, *args):
            seen.append(messages)
            return await super()._fetch(model, messages, *args)

    async def play(events):
        caller = Caller(agent="a", phase="answer", round=1, item_id="q1", seed=0)
        return await Watched(events, {"d": 0}).complete(resolve("m"), asked, Reply, caller=caller, max_tokens=800)

    asyncio.run(play([event]))
    event["repairs"][0]["repair_prompt"] = seen[-1][-1]["content"]  # the repair as the gateway words it
    done = asyncio.run(play([event]))
    assert done.faults == ["parse", "cut_off", "timeout"] and done.cut_off_unread == 1 and done.cut_off == 1
    assert done.error_kind == "timeout"


def test_runs_of_an_item_under_two_seeds_are_played_back_apart(tmp_path, arithmetic_file, model_from, monkeypatch):
    model = model_from(lambda req: answer(req.params["seed"] % 1000))  # each seed answers its own number
    run(society(arithmetic_file, model, seeds=2), tmp_path / "r", progress=False)
    result = rescore(tmp_path / "r")
    assert result.debates == 6 and result.kept == result.readings == result.changed == []


def test_a_call_recorded_as_failed_fails_again(tmp_path, arithmetic_file, model_from):
    def reply(req):
        if (req.item_id, req.call["agent"], req.call["round"]) == ("q1", "agent3", 2):
            from debatekit.models import scripted
            return scripted.Fault("bad_request", "the model refused")
        return replies(req)

    model = model_from(reply)
    first = run(society(arithmetic_file, model), tmp_path / "r", progress=False)
    assert {d.item_id: d.status for d in first.debates}["q1"] == "degraded"
    result = rescore(tmp_path / "r")
    assert result.kept == result.changed == result.readings == []


def test_a_debate_that_cannot_be_played_back_whole_keeps_its_record(recorded, monkeypatch):
    folder, _ = recorded
    path = folder / "events.jsonl"
    events = [json.loads(line) for line in lines(path)]
    # as a run recorded before call events kept repaired replies: q3's agent2 was repaired in round 1
    for e in events:
        if (e["item_id"], e["agent"], e["round"]) == ("q3", "agent2", 1):
            e.pop("repairs")
            e["parse_failures"], e["faults"], e["calls"] = 1, ["parse"], 2
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    mended_reader(monkeypatch)
    result = rescore(folder, write=True)
    assert [(d["item_id"], d["why"].split(";")[0]) for d in result.kept] == \
        [("q3", "4 call(s) not played back")]  # its own, and the round-2 calls that would have shown it
    assert "did not record the replies it repaired (agent2, answer, round 1" in result.kept[0]["why"]
    after = [json.loads(line) for line in lines(path)]
    assert [e for e in after if e["item_id"] == "q3"] == [e for e in events if e["item_id"] == "q3"]


def test_an_old_event_gives_each_repaired_reply_the_ending_its_faults_recorded():
    messages = [{"role": "user", "content": "Q"}]
    event = {"messages": messages, "text": "Answer: 3", "faults": ["parse", "cut_off"], "parse_failures": 1,
             "completion_tokens": 800, "repairs": [{"text": "long...", "repair_prompt": "again, shorter"}]}
    (first, cut), (second, last) = attempts(event)
    assert first == messages and cut == {"text": "long...", "finish_reason": "length"}
    assert second == [*messages, {"role": "assistant", "content": "long..."}, {"role": "user", "content": "again, shorter"}]
    assert last["text"] == "Answer: 3" and last["finish_reason"] == "stop" and last["completion_tokens"] == 800
    assert attempts({**event, "error": "timeout: call time limit reached", "error_kind": "timeout",
                     "faults": ["timeout"], "repairs": [], "text": ""}) == \
        [(messages, {"error": "timeout: call time limit reached", "error_kind": "timeout", "faults": ["timeout"]})]


def test_the_command_reads_a_study_folder_and_skips_a_run_in_use(recorded, capsys):
    folder, _ = recorded
    assert main(["rescore", str(folder.parent)]) == 0
    assert "3 of 3 debates played back whole from 18 recorded calls (no model); 0 changed" in capsys.readouterr().out
    busy = RunFolder(folder)
    busy.lock()
    try:
        assert main(["rescore", str(folder), "--write"]) == 1
    finally:
        busy.close()
    assert "in use by process" in capsys.readouterr().err


def test_a_run_that_cannot_be_played_back_is_named_and_the_others_go_on(tmp_path, arithmetic_file, model_from,
                                                                         monkeypatch, capsys):
    model = model_from(replies)
    monkeypatch.setenv("SOME_KEY", "secret")
    run(society(arithmetic_file, model, api_key_env="SOME_KEY"), tmp_path / "runs" / "a", progress=False)
    run(society(arithmetic_file, model), tmp_path / "runs" / "b", progress=False)
    monkeypatch.delenv("SOME_KEY")  # no key on this machine: a play-back needs none
    record = json.loads((tmp_path / "runs" / "b" / "run.json").read_text())
    record["config"]["protocol"] = "no_such_protocol"
    (tmp_path / "runs" / "b" / "run.json").write_text(json.dumps(record))
    assert main(["rescore", str(tmp_path / "runs")]) == 1
    out, err = capsys.readouterr()
    assert "runs/a: 3 of 3 debates played back whole" in out
    assert "skipped" in err and "runs/b" in err and "no_such_protocol" in err


STUDIES = Path(__file__).resolve().parents[2] / "results" / "studies"


@pytest.mark.parametrize("part", sorted(p.name for p in STUDIES.iterdir() if any(p.glob("*/run.json"))))
def test_the_committed_study_reads_as_recorded_with_todays_readers(part):
    # a reader changed since the study's runs were read: `debatekit rescore --write results/studies/<part>`.
    # The command runs in a process of its own, as a user runs it, free of what other tests changed.
    # The debates a rescore keeps as recorded are those its last `--write` listed in run.json, for the
    # reason it gave (a reply repaired before repairs were recorded, a reading that changed a later prompt).
    import re
    import subprocess
    import sys

    study = STUDIES / part
    done = subprocess.run([sys.executable, "-m", "debatekit.cli", "rescore", str(study)], capture_output=True,
                          text=True, check=True)
    heads = [line for line in done.stdout.splitlines() if not line.startswith("  ")]
    points = sorted(p.parent.name for p in study.glob("*/run.json"))
    assert len(heads) == len(points) > 0
    kept_lines = [line for line in done.stdout.splitlines() if line.startswith("  kept")]
    listed = []
    for line in heads:
        point = line.split(":")[0].rsplit("/", 1)[1]
        record = json.loads((study / point / "run.json").read_text())
        kept = record["rescores"][-1]["kept_debates"] if record.get("rescores") else []
        listed += [(k["item_id"], k["why"]) for k in kept]
        numbers = re.search(r"(\d+) changed .* (\d+) replies read differently, (\d+) kept as recorded", line)
        assert numbers, line
        assert [int(n) for n in numbers.groups()] == [0, 0, len(kept)], line
        assert "call records change" not in line, line  # an echo flag or fault today's reader sets otherwise
    assert sorted(kept_lines) == sorted(f"  kept {item}: {why}" for item, why in listed)
    assert part != "gsm8k" or sum("did not record the replies it repaired" in why for _, why in listed) == 11


RESULTS = STUDIES.parent


@pytest.mark.parametrize("folder", sorted(str(p.parent.relative_to(RESULTS)) for p in RESULTS.rglob("run.json")))
def test_a_committed_run_states_the_scores_and_intervals_of_its_debates(folder):
    # a run summarised by older interval code: `debatekit rescore --write results/<folder>` restates it
    record = json.loads((RESULTS / folder / "run.json").read_text())
    today = analysis.summarize(RunFolder(RESULTS / folder).debates())
    assert {k: record["summary"].get(k) for k in SCORED} == {k: today[k] for k in SCORED}
