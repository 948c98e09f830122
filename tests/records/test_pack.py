"""Packed call events (`events.jsonl.gz`, `debatekit pack`): read like the plain file, appended to
after a pack by a resume, pruned like it, never written while a run holds the folder."""

from __future__ import annotations

import gzip
import json
import shutil
from collections import Counter

import pytest

from debatekit.analysis.tables import load_runs
from debatekit.cli.app import main
from debatekit.models import scripted
from debatekit.records.schemas import RunConfig
from debatekit.records.trace import RunFolder, RunFolderError, run_folders
from debatekit.runner import run
from tests.conftest import answer


def _config(arithmetic_file, broken):
    def reply(req: scripted.Request):
        if broken["on"] and (req.item_id, req.agent, req.round) == ("q2", "agent1", 2):
            return scripted.Fault("server")
        return answer(int(req.item_id[1:]) * 10)

    return RunConfig(protocol="society_of_mind", dataset=str(arithmetic_file),
                     model=scripted.register(f"pack-{id(broken)}", fn=reply),
                     params={"agents": 3, "rounds": 2, "stop_on_agreement": False})


@pytest.fixture
def finished(tmp_path, arithmetic_file):
    broken = {"on": True}
    config = _config(arithmetic_file, broken)
    out = tmp_path / "run"
    run(config, out, progress=False)
    return out, config, broken


def test_a_packed_run_reads_the_same_calls_and_tables_and_is_smaller(finished):
    out, _, _ = finished
    plain = (out / "events.jsonl").read_text().splitlines()
    events, turns = RunFolder(out).events(), load_runs([out]).turns

    before, after, _, _ = RunFolder(out).pack()

    assert not (out / "events.jsonl").exists()
    assert gzip.decompress((out / "events.jsonl.gz").read_bytes()).decode().splitlines() == plain
    assert before == sum(len(line) + 1 for line in plain) and after == (out / "events.jsonl.gz").stat().st_size
    assert after < before / 3  # the prompts repeat from call to call
    assert RunFolder(out).events() == events == [json.loads(line) for line in plain]
    assert load_runs([out]).turns.equals(turns)
    assert RunFolder(out).pack() == (after, after, 0, 0)  # packing again changes nothing


def test_packing_the_same_calls_gives_the_same_bytes(finished, tmp_path):
    out, _, _ = finished
    twin = tmp_path / "twin"
    shutil.copytree(out, twin)
    RunFolder(out).pack()
    RunFolder(twin).pack()  # no time stamp in the gzip header: a repack is no change for git
    assert (out / "events.jsonl.gz").read_bytes() == (twin / "events.jsonl.gz").read_bytes()
    assert (out / "events.jsonl.gz").read_bytes()[4:8] == b"\0\0\0\0"  # the header's time stamp


def test_a_resume_after_a_pack_appends_plain_events_that_are_read_after_the_packed_ones(finished):
    out, config, broken = finished
    RunFolder(out).pack()
    packed = RunFolder(out).events()
    broken["on"] = False
    again = run(config, out, resume=True, retry_degraded=True, progress=False)

    assert again.summary.degraded == 0
    fresh = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    assert fresh and {e["item_id"] for e in fresh} == {"q2"}
    assert RunFolder(out).events() == packed + fresh
    RunFolder(out).pack()  # the two become one packed file, in the same order
    assert not (out / "events.jsonl").exists() and RunFolder(out).events() == packed + fresh


def test_packing_says_which_lines_no_reader_reads_and_keeps_the_garbled_one(finished, capsys):
    out, _, _ = finished
    lines = (out / "events.jsonl").read_text().splitlines(keepends=True)
    garbled = lines[:3] + ["{\"item_id\": \"q1\", \"te\n"] + lines[3:] + ['{"item_id": "q1", "cut by a kill']
    (out / "events.jsonl").write_text("".join(garbled))

    assert main(["pack", str(out)]) == 0
    err = capsys.readouterr().err
    assert f"{out}: 1 garbled line(s) kept as they were; 1 torn line(s) left out (no reader reads them)" in err
    kept = gzip.decompress((out / "events.jsonl.gz").read_bytes()).decode().splitlines(keepends=True)
    assert kept == garbled[:-1] and len(RunFolder(out).events()) == len(lines)
    with open(out / "events.jsonl", "a") as f:  # a resume appends; the garbled line was counted already
        f.write(lines[0])
    assert RunFolder(out).pack()[2:] == (0, 0)
    packed = (out / "events.jsonl.gz").read_bytes()
    (out / "events.jsonl").write_text("".join(garbled[:-1]))  # a pack stopped before removing the plain file
    assert RunFolder(out).pack()[2:] == (0, 0)  # its lines, the garbled one too, are packed already: no count
    assert (out / "events.jsonl.gz").read_bytes() == packed and not (out / "events.jsonl").exists()


def test_pruning_drops_unfinished_debates_from_the_packed_file_too(finished):
    out, _, _ = finished
    with open(out / "events.jsonl", "a") as f:
        f.write(json.dumps({"debate_id": "cut-off", "item_id": "q9"}) + "\n")
    RunFolder(out).pack()
    with open(out / "events.jsonl", "a") as f:  # and one more after the pack
        f.write(json.dumps({"debate_id": "cut-off-too", "item_id": "q9"}) + "\n")

    assert len(RunFolder(out).prune_unfinished()) == 2
    ids = Counter(e["debate_id"] for e in RunFolder(out).events())
    assert "cut-off" not in ids and "cut-off-too" not in ids and len(ids) == 3


def test_a_run_writing_in_the_folder_keeps_it_unpacked(finished, capsys):
    out, _, _ = finished
    writer = RunFolder(out)
    writer.lock()
    try:
        with pytest.raises(RunFolderError, match="in use by process"):
            RunFolder(out).pack()
        assert (out / "events.jsonl").exists() and not (out / "events.jsonl.gz").exists()
        assert main(["pack", str(out)]) == 1
        err = capsys.readouterr().err
        assert "skipped " in err and "in use by process" in err and "--out" not in err
        writer.pack()  # the writer itself may pack, and keeps its lock
        assert (out / "events.jsonl.gz").exists()
        with pytest.raises(RunFolderError, match="in use by process"):
            RunFolder(out).lock()
    finally:
        writer.close()


@pytest.mark.parametrize("damage", ["cut in half", "a byte flipped"])
def test_a_damaged_packed_file_is_named_not_read_as_no_calls(finished, damage):
    out, _, _ = finished
    RunFolder(out).pack()
    path = out / "events.jsonl.gz"
    data = bytearray(path.read_bytes())
    if damage == "cut in half":
        del data[len(data) // 2:]
    else:
        data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(RunFolderError, match=r"events\.jsonl\.gz cannot be read"):
        RunFolder(out).events()


def test_pack_takes_a_sweep_folder_and_names_a_folder_without_runs(finished, tmp_path, capsys):
    out, _, _ = finished
    sweep = tmp_path / "sweep"
    for name in ("a", "b"):
        shutil.copytree(out, sweep / name)
    assert main(["pack", str(sweep)]) == 0
    said = capsys.readouterr().out
    assert "a: events" in said and "b: events" in said and "MB ->" in said
    assert sorted(p.parent.name for p in sweep.rglob("events.jsonl.gz")) == ["a", "b"]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["pack", str(empty)]) == 2
    assert "holds no run (run.json)" in capsys.readouterr().err


def test_a_pack_stopped_before_removing_the_plain_file_counts_no_call_twice(finished):
    out, config, broken = finished
    plain = (out / "events.jsonl").read_bytes()
    events = RunFolder(out).events()
    RunFolder(out).pack()
    (out / "events.jsonl").write_bytes(plain)  # as if stopped between writing the packed file and the unlink

    assert RunFolder(out).events() == events
    broken["on"] = False
    run(config, out, resume=True, retry_degraded=True, progress=False)  # appends after the stale lines
    fresh = RunFolder(out).events()[len(events):]
    assert fresh and {e["item_id"] for e in fresh} == {"q2"}
    RunFolder(out).pack()
    assert RunFolder(out).events() == events + fresh


def test_run_folders_finds_a_run_itself_or_the_runs_one_level_under_a_folder(finished, tmp_path):
    out, _, _ = finished
    sweep = tmp_path / "sweep"
    for name in ("b", "a", "deeper/c"):
        shutil.copytree(out, sweep / name)
    assert run_folders(sweep / "a") == [sweep / "a"]
    assert run_folders(sweep) == [sweep / "a", sweep / "b"]  # by name; a run two levels down is not looked for
    (sweep / "sweep.json").write_text(json.dumps({"points": [{"id": "b"}, {"id": "gone"}]}))
    assert run_folders(sweep) == [sweep / "b", sweep / "a"]  # the grid's points first, in its order
    with pytest.raises(ValueError, match="is not a folder"):
        run_folders(sweep / "a" / "run.json")
    (sweep / "empty").mkdir()
    with pytest.raises(ValueError, match="holds no run"):
        run_folders(sweep / "empty")
