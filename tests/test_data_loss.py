"""Ways a run could lose data or score a failure (issue 30), each reproduced by a test first:
two writers on one run folder, debatekit's own truncation marker, cache rows of the wrong shape,
deeply nested rows, rows that can never be scored, terminal escapes, loose parameters and paths
in a run folder's files that lead out of it."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
from pathlib import Path

import pytest

from debatekit import datasets
from debatekit._base.terminal import visible
from debatekit.cli.app import main
from debatekit.cli.show import show
from debatekit.models import scripted
from debatekit.models.reading import MAX_REPLY_CHARS, capped
from debatekit.protocols.shared.extract import extract
from debatekit.records.schemas import RunConfig
from debatekit.records.trace import RunFolder, RunFolderError
from debatekit.runner import run
from tests import faulty_model, test_crash_safety as crash

ROOT = Path(__file__).resolve().parent.parent


def numbered(tmp_path: Path, n: int) -> Path:
    """A dataset of `n` items `n0..`, each answered by its own number."""
    path = tmp_path / "items.jsonl"
    path.write_text("".join(json.dumps({"id": f"n{i}", "question": f"What is {i}?", "answer": i}) + "\n"
                            for i in range(n)))
    return path


def subprocess_env(tmp_path: Path) -> dict:
    return dict(os.environ, PYTHONPATH=str(ROOT), DEBATEKIT_CACHE_DIR=str(tmp_path / "cache"))


# --- 1. two runs on one --out folder ---------------------------------------------------------------

def stalling_args(dataset: Path, out: Path) -> list[str]:
    return ["run", "society_of_mind", "--dataset", str(dataset), "--model", faulty_model.STALLING,
            "--agents", "2", "--rounds", "1", "--no-cache", "--out", str(out), "--quiet"]


def test_a_second_writer_is_refused_naming_the_first_and_a_killed_run_still_resumes(tmp_path, capfd):
    dataset, out = numbered(tmp_path, 8), tmp_path / "run"
    # the first run answers items 0-3, then waits forever for the rest: it holds the folder until killed
    first = crash.start(stalling_args(dataset, out), {**subprocess_env(tmp_path), "STALL_FROM": "4"},
                        faulty_model.CLI)
    try:
        crash.wait_for(first, out / "debates.jsonl", 4)
        capfd.readouterr()
        for extra in ([], ["--resume"]):  # a new run, and a resume, of a folder a live run writes
            assert main([*stalling_args(dataset, out), *extra]) == 2
            err = capfd.readouterr().err.strip().splitlines()
            assert len(err) == 1 and f"run folder {out} is in use by process {first.pid}" in err[0], err
        assert "n0" in show(out)  # reading a folder in use takes no lock
    finally:
        os.kill(first.pid, signal.SIGKILL)
        first.wait()
    assert (out / ".lock").exists()  # left behind by the killed run: it must not block the resume
    assert main([*stalling_args(dataset, out), "--resume"]) == 0
    rows = [json.loads(line) for line in crash.lines(out / "debates.jsonl")]
    assert sorted(r["item_id"] for r in rows) == [f"n{i}" for i in range(8)]  # each item once
    assert all(r["correct"] for r in rows) and len({r["run_id"] for r in rows}) == 1
    assert json.loads((out / "run.json").read_text())["status"] == "complete"


def test_a_run_folder_has_one_writer_at_a_time_and_is_free_again_once_closed(tmp_path):
    holder, other = RunFolder(tmp_path), RunFolder(tmp_path)
    holder.lock()
    with pytest.raises(RunFolderError, match=rf"in use by process {os.getpid()}"):
        other.lock()
    holder.close()
    other.lock()
    other.close()

# --- 2. debatekit's own truncation marker ----------------------------------------------------------

def test_debatekits_truncation_marker_is_never_read_as_an_answer(tmp_path, model_from):
    stored = capped("x" * 2 * MAX_REPLY_CHARS + "\nAnswer: 3")  # as events.jsonl keeps it
    assert f"{MAX_REPLY_CHARS}-character limit" in stored
    for kind in ("integer", "number", "text"):
        assert extract(kind, stored) is None, kind  # its answer was cut away: unreadable, not 100000
    assert extract("integer", capped("Answer: 5\n" + "y" * 2 * MAX_REPLY_CHARS)) == 5  # said before the cut

    # a whole run: 5 MB of text, then `Answer: 3`, for an item whose truth is the marker's number
    dataset = tmp_path / "items.jsonl"
    dataset.write_text(json.dumps({"id": "big", "question": "q", "answer": MAX_REPLY_CHARS}) + "\n"
                       + json.dumps({"id": "three", "question": "q", "answer": 3}) + "\n")
    model = model_from(lambda req: "word " * 1_000_000 + "\nAnswer: 3")
    result = run(RunConfig(protocol="society_of_mind", dataset=str(dataset), model=model, cache=False,
                           params={"agents": 2, "rounds": 2, "stop_on_agreement": False}), tmp_path / "run",
                 progress=False)
    correct = {d.item_id: d.correct for d in result.debates}
    assert correct == {"big": False, "three": True} and result.summary.parse_failures == 0
    assert all(a == 3 for d in result.debates for r in d.rounds for a in r.answers.values())
    # the parsed reasoning is capped as the text is (it is stored, and shown to the other agents)
    assert (result.path / "events.jsonl").stat().st_size < 8 * 5 * (MAX_REPLY_CHARS + 10_000)


# --- 3. a cache row of the wrong shape -------------------------------------------------------------

@pytest.mark.parametrize("row", ["[1, 2]", "{}", "42", '{"text": 5}', '{"text": "Answer: 1", "cost": "free"}',
                                 "not json"])
def test_a_cache_row_that_is_no_reply_is_a_miss_with_one_warning(tmp_path, capfd, row):
    config = RunConfig(protocol="single", dataset="arithmetic", limit=2, model="scripted/schema")
    run(config, tmp_path / "first", progress=False)
    with sqlite3.connect(tmp_path / "cache" / "responses.sqlite") as db:  # the test's own cache (conftest)
        db.execute("UPDATE replies SET value = ?", (row,))
    db.close()
    capfd.readouterr()
    again = run(config, tmp_path / "again", progress=False)
    assert again.summary.failed == 0 and again.summary.cache_hits == 0 and again.summary.provider_calls == 2
    warnings = capfd.readouterr().err.strip().splitlines()
    assert len(warnings) == 1 and "asking the model again" in warnings[0], warnings
    # the reply asked for again replaced the bad row: the next run reads it from the cache
    assert run(config, tmp_path / "third", progress=False).summary.cache_hits == 2


# --- 4. a deeply nested row ------------------------------------------------------------------------

def test_a_row_nested_thousands_deep_is_one_line_and_exit_2(tmp_path, capfd):
    dataset = tmp_path / "items.jsonl"
    deep = "[" * 5000 + "]" * 5000
    dataset.write_text('{"id": "a", "question": "q", "answer": 1}\n'
                       f'{{"id": "b", "question": "q", "answer": 2, "metadata": {{"x": {deep}}}}}\n')
    assert main(["run", "single", "--dataset", str(dataset), "--model", "scripted/schema", "--quiet",
                 "--out", str(tmp_path / "run")]) == 2
    err = capfd.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "line 2 is nested too deeply" in err[0], err
    assert not (tmp_path / "run").exists()


# --- 5. rows that can never be scored --------------------------------------------------------------

@pytest.mark.parametrize("row, problem", [
    ({"choices": ["red", "blue"], "answer": "C"}, r"'C' is not the letter of one of its 2 choices \(A-B\)"),
    ({"choices": ["red", "blue"], "answer": "blue"}, r"'blue' is not the letter of one of its 2 choices"),
    ({"answer": float("nan")}, r"nan can never be scored"),
    ({"answer": float("inf")}, r"inf can never be scored"),
], ids=["letter past the choices", "option text", "NaN", "infinity"])
def test_a_truth_no_answer_can_equal_is_refused_at_load_with_its_line(tmp_path, capfd, row, problem):
    dataset = tmp_path / "items.jsonl"
    dataset.write_text(json.dumps({"id": "fine", "question": "q", "answer": 1}) + "\n"
                       + json.dumps({"id": "bad", "question": "q", **row}) + "\n")
    assert main(["run", "single", "--dataset", str(dataset), "--model", "scripted/schema", "--quiet",
                 "--out", str(tmp_path / "run")]) == 2
    err = capfd.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "line 2, field 'answer'" in err[0] and re.search(problem, err[0]), err
    assert not (tmp_path / "run").exists()


def test_no_truth_and_lower_case_letters_still_load(tmp_path):
    dataset = tmp_path / "items.jsonl"
    dataset.write_text(json.dumps({"id": "a", "question": "q", "choices": ["x", "y"], "answer": "b"}) + "\n"
                       + json.dumps({"id": "b", "question": "q", "choices": ["x", "y"], "answer": None}) + "\n"
                       + json.dumps({"id": "c", "question": "q", "answer": None}) + "\n")
    items, _ = datasets.load(str(dataset))
    assert [i.answer for i in items] == ["b", None, None]


# --- 6. terminal escapes in a question or a reply --------------------------------------------------

ESCAPES = "title \x1b]0;pwned\x07 clear \x1b[2J\x1b[H red \x1b[31mRED\x1b[0m back\r over \x9b2J flip \u202e"


def test_dataset_and_model_text_is_printed_with_its_control_characters_visible(tmp_path, capfd, model_from):
    dataset = tmp_path / "items.jsonl"
    dataset.write_text(json.dumps({"id": "esc\x1b[2J", "question": f"What is 3? {ESCAPES}", "answer": 3}) + "\n"
                       + json.dumps({"id": "down", "question": "What is 4?", "answer": 4}) + "\n")

    def reply(req):
        if req.item_id == "down":  # its error, quoting the provider, reaches the run's warning line
            return scripted.Fault("bad_request", f"refused {ESCAPES}")
        return f"Thinking.\n{ESCAPES}\nAnswer: 3"

    out = tmp_path / "run"
    assert main(["run", "single", "--dataset", str(dataset), "--model", model_from(reply), "--no-cache", "--quiet",
                 "--out", str(out)]) == 0
    run_output = capfd.readouterr()
    assert main(["show", str(out)]) == 0
    assert main(["show", str(out), "esc\x1b[2J", "--transcript"]) == 0
    shown = capfd.readouterr()
    printed = run_output.out + run_output.err + shown.out + shown.err
    assert "refused title" in run_output.err and "Thinking." in shown.out  # the text is there ...
    for raw, seen in (("\x1b", "\\x1b"), ("\x07", "\\x07"), ("\r", "\\x0d"), ("\x9b", "\\x9b"), ("\u202e", "\\u202e")):
        assert raw not in printed and seen in printed, seen  # ... each control character written out
    assert "Thinking.\ntitle" in shown.out  # newlines kept


def test_visible_keeps_text_newlines_and_tabs_and_writes_out_the_rest():
    assert visible("a\tb\nc é 中") == "a\tb\nc é 中"
    assert visible("\x1b[31mx\x00\x7f") == "\\x1b[31mx\\x00\\x7f"


# --- 7. loose --set values -------------------------------------------------------------------------

@pytest.mark.parametrize("setting, problem", [
    ("rounds=true", "parameter 'rounds': got the boolean true, but it is not a yes/no parameter"),
    ("agents=false", "give a count of agents or 1 to 16"),  # the protocol's own check, as before
    ("temperature=false", "parameter 'temperature': got the boolean false"),
    ("temperature=-5", "parameter 'temperature': a temperature must be 0 to 2, got -5"),
    ("temperature=1e308", "parameter 'temperature': a temperature must be 0 to 2, got 1e+308"),
    ("temperature=.nan", "parameter 'temperature': Input should be a finite number"),
    ("temperature=.inf", "parameter 'temperature': Input should be a finite number"),
])
def test_a_loose_parameter_value_is_one_line_and_exit_2(tmp_path, capfd, setting, problem):
    assert main(["run", "society_of_mind", "--dataset", "arithmetic", "--limit", "1", "--model", "scripted/schema",
                 "--set", setting, "--quiet", "--out", str(tmp_path / "run")]) == 2
    err = capfd.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("debatekit: error: ") and problem in err[0], err
    assert not (tmp_path / "run").exists()


def test_parameters_in_range_still_pass_and_a_judge_temperature_is_checked_too():
    from debatekit import registry

    assert registry.get("society_of_mind").validate({"temperature": 2, "rounds": 3})["temperature"] == 2
    assert registry.get("society_of_mind").validate({"stop_on_agreement": False})["stop_on_agreement"] is False
    with pytest.raises(registry.ProtocolError, match="'judge_temperature': a temperature must be 0 to 2"):
        registry.get("judged_debate").validate({"judge_temperature": 2.5})


# --- 8. paths in a run folder's own files ----------------------------------------------------------

@pytest.mark.parametrize("item_dir", ["../../outside", "items/../../outside", "{outside}", "items/link"])
def test_review_show_reads_nothing_outside_the_run_folder(tmp_path, capfd, item_dir):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.json").write_text("{}")
    run_dir = tmp_path / "runs" / "run"
    (run_dir / "items").mkdir(parents=True)
    (run_dir / "items" / "link").symlink_to(outside)
    (run_dir / "run.json").write_text("{}")
    entry = {"run_id": "r", "debate_id": "d", "item_id": "x", "protocol": "single", "queued": 0.0,
             "item_dir": item_dir.format(outside=outside)}
    (run_dir / "review_queue.jsonl").write_text(json.dumps(entry) + "\n")
    assert main(["review", str(run_dir), "--show", "x"]) == 2
    captured = capfd.readouterr()
    assert "secret.json" not in captured.out + captured.err
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and "leads out of the run folder" in err[0] and "review_queue.jsonl" in err[0], err


# --- and: a server reachable from other machines ----------------------------------------------------

@pytest.mark.parametrize("host, warned", [("0.0.0.0", True), ("192.168.1.5", True), ("myhost", True),
                                          ("127.0.0.1", False), ("::1", False), ("localhost", False)])
def test_serve_on_an_outside_address_warns_that_it_has_no_authentication(monkeypatch, capfd, host, warned):
    from debatekit.cli import serve
    from debatekit.models.errors import LocalModelError

    def no_model(*args, **kwargs):  # stop before any model is loaded
        raise LocalModelError("not loading a model in this test")

    monkeypatch.setattr(serve, "start", no_model)
    assert main(["serve", "--host", host]) == 2
    err = capfd.readouterr().err
    assert ("reachable from other machines" in err and "no authentication" in err) == warned, err


# --- all together: faults, a kill and a resume ------------------------------------------------------

def test_a_faulty_run_killed_mid_way_and_resumed_scores_each_item_once_and_no_failure(tmp_path):
    """100 items, 20% of calls failing (timeouts, 429, 500, empty replies) and every call of the
    ten items numbered ...7 failing: SIGKILL after 30 debates, then `--resume`."""
    items = 100
    dataset, out = numbered(tmp_path, items), tmp_path / "run"
    argv = ["run", "society_of_mind", "--dataset", str(dataset), "--model", faulty_model.FAULTY,
            "--concurrency", "16", "--no-cache", "--quiet", "--out", str(out)]
    first = crash.start(argv, subprocess_env(tmp_path), faulty_model.CLI)
    assert crash.kill_after(first, out / "debates.jsonl", 30) < items, "the run finished before the kill"
    assert main([*argv, "--resume"]) == 0

    rows = [json.loads(line) for line in crash.lines(out / "debates.jsonl")]
    answered = [r["item_id"] for r in rows if r["status"] in ("ok", "degraded")]
    assert len(answered) == len(set(answered)), "an item was scored twice"
    final = {r.item_id: r for r in RunFolder(out).debates()}
    assert sorted(final) == sorted(f"n{i}" for i in range(items))
    down = {f"n{i}" for i in range(items) if i % 10 == 7}
    for item_id, record in final.items():
        if item_id in down:  # failed calls: marked failed, never scored
            assert record.status == "error" and record.correct is None and record.score is None, record
        else:  # the model answers the truth: a scored item is right, whatever faults it met
            assert record.status in ("ok", "degraded") and record.correct is True, record
    summary = json.loads((out / "run.json").read_text())
    assert summary["status"] == "complete"
    assert (summary["summary"]["items"], summary["summary"]["failed"], summary["summary"]["accuracy"]) == (100, 10, 1.0)
    # every call of a final debate is traced once (those of debates the kill cut off were dropped)
    keys = [(e["debate_id"], e["agent"], e["round"]) for e in map(json.loads, crash.lines(out / "events.jsonl"))
            if e["debate_id"] in {r.debate_id for r in final.values()}]
    assert len(keys) == len(set(keys))
