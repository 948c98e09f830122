"""`debatekit rerecord`: a recording checked against today's code, and recorded again where it is
stale, the model asked only for what the recording lacks."""

from __future__ import annotations

import json

import pytest

from debatekit.cli.app import main
from debatekit.models import reading as reader
from debatekit.records.schemas import RunConfig
from debatekit.records.trace import RunFolder
from debatekit.runner import run
from debatekit.sweep.rerecord import rerecord
from tests.conftest import answer

HEDGED = "it is 20, not 25"


def replies(req):
    """Each agent answers its item's truth, except agent1 on q2 in the last round, who hedges and states 25."""
    truth = int(req.item_id[1:]) * 10
    hedges = (req.item_id, req.call["agent"], req.call["round"]) == ("q2", "agent1", 2)
    return answer(25, HEDGED) if hedges else answer(truth)


@pytest.fixture
def recorded(tmp_path, arithmetic_file, model_from):
    asked = []
    model = model_from(lambda req: asked.append((req.item_id, req.call["agent"], req.call["round"])) or replies(req))
    run(RunConfig(protocol="society_of_mind", dataset=str(arithmetic_file), model=model,
                  params={"agents": 3, "rounds": 2, "stop_on_agreement": False}), tmp_path / "r", progress=False)
    asked.clear()
    return tmp_path / "r", asked


def files(folder):
    return {name: (folder / name).read_bytes() for name in ("run.json", "debates.jsonl", "events.jsonl")}


def change_prompt(folder, item, agent, round_):
    """Make the recording hold another prompt for one call, as if today's protocol asked it otherwise."""
    path = folder / "events.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    for row in rows:
        if (row["item_id"], row["agent"], row["round"]) == (item, agent, round_):
            row["messages"][-1]["content"] += " (worded as it once was)"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


def unreadable_when_hedged(monkeypatch):
    """Today's reader, stricter: a hedged reply no longer reads."""
    reading = reader.parse

    def parse(output, text, free_text, ending):
        if HEDGED in text:
            raise ValueError("hedged: no answer stated")
        return reading(output, text, free_text, ending)

    monkeypatch.setattr(reader, "parse", parse)


def test_a_current_recording_is_played_back_whole_and_left_as_it_is(recorded):
    folder, asked = recorded
    before = files(folder)
    check = rerecord(folder, ask_model=False)
    assert not check.stale and (check.debates, check.calls) == (3, 18)
    assert check.describe().endswith("current; 3 debates played back from 18 recorded calls")
    again = rerecord(folder)
    assert not again.stale and not again.written and asked == []
    assert files(folder) == before


def test_a_changed_prompt_is_the_only_call_asked_of_the_model(recorded):
    folder, asked = recorded
    change_prompt(folder, "q2", "agent3", 2)
    check = rerecord(folder, ask_model=False)
    assert check.stale and [(p[0], p[2], p[4]) for p in check.asked] == [("q2", "agent3", 2)]
    assert [(p[0], p[2], p[4]) for p in check.unasked] == [("q2", "agent3", 2)]  # its reply to the old wording
    assert "prompts not recorded 1 (first: item q2, agent3" in check.describe() and asked == []
    debates_before = (folder / "debates.jsonl").read_text().splitlines()

    done = rerecord(folder)
    assert done.written and asked == [("q2", "agent3", 2)]  # the one stale call, nothing else
    assert not rerecord(folder, ask_model=False).stale
    record = json.loads((folder / "run.json").read_text())
    assert record["rerecords"][-1]["asked"] == 1 and record["status"] == "complete"
    after = (folder / "debates.jsonl").read_text().splitlines()
    kept = [line for line in after if json.loads(line)["item_id"] != "q2"]
    assert kept == [line for line in debates_before if json.loads(line)["item_id"] != "q2"]  # line for line
    events = RunFolder(folder).events()
    assert len(events) == 18 and len({e["run_id"] for e in events}) == 1
    assert [e["cache_hit"] for e in events if (e["item_id"], e["agent"], e["round"]) == ("q2", "agent3", 2)] == [False]
    assert not list(folder.parent.glob(".rerecord-*")) and not list(folder.parent.glob(".r.old-*"))


def test_a_reply_that_no_longer_reads_is_a_parse_failure_never_a_repair_call(recorded, monkeypatch):
    folder, asked = recorded
    unreadable_when_hedged(monkeypatch)
    check = rerecord(folder, ask_model=False)
    assert [(u[0], u[2], u[4]) for u in check.unreadable] == [("q2", "agent1", 2)]
    assert check.asked == [] and check.stale

    done = rerecord(folder)
    assert done.written and asked == []  # recording it again cost no model call
    rows = [e for e in RunFolder(folder).events() if (e["item_id"], e["agent"], e["round"]) == ("q2", "agent1", 2)]
    assert [(e["error_kind"], e["repairs"], e["output"]) for e in rows] == [("parse", [], None)]
    assert not rerecord(folder, ask_model=False).stale  # read today as recorded: current


def test_a_run_not_finished_is_refused_in_one_line(recorded):
    folder, _ = recorded
    record = json.loads((folder / "run.json").read_text())
    (folder / "run.json").write_text(json.dumps({**record, "status": "interrupted"}))
    with pytest.raises(ValueError, match="the run is interrupted; finish it with --resume"):
        rerecord(folder, ask_model=False)


def test_the_command_says_what_is_stale_and_records_it_again(recorded, capsys):
    folder, asked = recorded
    change_prompt(folder, "q1", "agent1", 1)
    assert main(["rerecord", "--check", str(folder)]) == 1
    out = capsys.readouterr().out
    # without the model, agent1's round-1 reply is missing, so every round-2 prompt on q1 differs too
    assert out.startswith(f"{folder}: stale; prompts not recorded 4 (first: item q1, agent1") and asked == []
    assert main(["rerecord", str(folder)]) == 0
    assert f"{folder}: recorded again; prompts not recorded 1" in capsys.readouterr().out
    assert asked == [("q1", "agent1", 1)]  # the model gave the reply it gave before: round 2 played back
    assert main(["rerecord", "--check", str(folder)]) == 0
    assert "current" in capsys.readouterr().out
    assert main(["rerecord", "--check", str(folder / "nowhere")]) == 2
    assert "is not a folder" in capsys.readouterr().err
