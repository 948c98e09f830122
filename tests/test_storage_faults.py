"""Faults of the disk a run writes to: a damaged response cache, an unwritable --out or cache folder,
a full disk (RLIMIT_FSIZE in a subprocess), SIGTERM, item ids that collide on disk, bad resumes."""

from __future__ import annotations

import errno
import json
import os
import resource
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from debatekit import datasets
from debatekit.analysis import load_runs
from debatekit.cli.app import main
from debatekit.models.cache import ResponseCache
from debatekit.models.gateway import Gateway
from debatekit.records.schemas import RunConfig
from debatekit.records.storage import TraceWriteError, read_jsonl
from debatekit.records.trace import RunFolder, RunFolderError, item_folder_name
from debatekit.runner import run
from tests import slow_model

ROOT = Path(__file__).resolve().parent.parent


def numbers(path: Path, n: int, **extra) -> Path:
    path.write_text("".join(json.dumps({"id": f"n{i}", "question": f"What is {i}?", "answer": i, **extra}) + "\n"
                            for i in range(n)))
    return path


def cli_args(dataset: Path, out: Path, *more: str) -> list[str]:
    return ["run", "society_of_mind", "--dataset", str(dataset), "--model", "scripted/schema", "--agents", "2",
            "--rounds", "1", "--out", str(out), "--quiet", *more]


def error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.strip()]


# --- 1. a damaged response cache ------------------------------------------------------------

def _half(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _random(path: Path) -> None:
    path.write_bytes(os.urandom(path.stat().st_size))


def _random_after_8k(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:8192] + os.urandom(len(data) - 8192))


@pytest.mark.parametrize("damage", [_half, _random, _random_after_8k])
def test_a_damaged_cache_is_moved_aside_and_the_run_goes_on(tmp_path, capfd, damage):
    dataset = numbers(tmp_path / "items.jsonl", 40)
    assert main(cli_args(dataset, tmp_path / "first")) == 0
    cache = tmp_path / "cache" / "responses.sqlite"
    sqlite3.connect(cache).execute("PRAGMA wal_checkpoint(TRUNCATE)").close()
    assert cache.stat().st_size > 16384
    damage(cache)
    capfd.readouterr()

    assert main(cli_args(dataset, tmp_path / "second")) == 0
    err = capfd.readouterr().err
    warnings = [line for line in err.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "damaged" in warnings[0] and len(error_lines(err)) == 1, err
    assert "Traceback" not in err and "never retrieved" not in err
    aside = list(cache.parent.glob("responses.sqlite.corrupt-*"))
    assert len(aside) == 1
    record = json.loads((tmp_path / "second" / "run.json").read_text())
    assert record["status"] == "complete" and record["summary"]["failed"] == 0
    assert record["summary"]["cache_hits"] == 0  # the run went on with an empty cache ...
    assert len(ResponseCache(cache)) > 0  # ... which it filled


class _Broken:
    """A sqlite connection whose every statement fails, as a file damaged after it was opened."""

    def execute(self, *args):
        raise sqlite3.DatabaseError("database disk image is malformed")

    def commit(self):
        raise sqlite3.DatabaseError("database disk image is malformed")

    def close(self):
        pass


def test_a_cache_read_error_mid_run_is_a_miss_not_a_failed_item(tmp_path, arithmetic_file, capfd):
    cache = ResponseCache(tmp_path / "c.sqlite")
    cache._db = _Broken()
    config = RunConfig(protocol="society_of_mind", dataset=str(arithmetic_file), model="scripted/schema",
                       params={"agents": 2, "rounds": 1})
    result = run(config, tmp_path / "run", progress=False, gateway=Gateway(cache=cache))
    assert result.summary.failed == 0 and result.summary.calls == 6
    err = capfd.readouterr().err
    assert err.count("response cache") == 2  # one warning for reads, one for writes


# --- 2. an output or cache folder that cannot be written -------------------------------------

@pytest.mark.parametrize("where", ["file", "/proc/debatekit-probe/run", "/sys/debatekit-probe"])
def test_an_unwritable_out_is_one_line_and_exit_2(tmp_path, arithmetic_file, capfd, where):
    out = tmp_path / "a-file" if where == "file" else Path(where)
    if where == "file":
        out.write_text("not a folder")
    assert main(cli_args(arithmetic_file, out)) == 2
    lines = error_lines(capfd.readouterr().err)
    assert len(lines) == 1 and lines[0].startswith("debatekit: error:") and str(out) in lines[0], lines
    assert "Traceback" not in lines[0]
    assert where != "file" or out.read_text() == "not a folder"


def test_an_unusable_cache_dir_is_one_line_and_nothing_is_written(tmp_path, arithmetic_file, capfd, monkeypatch):
    monkeypatch.setenv("DEBATEKIT_CACHE_DIR", "/proc/x")
    assert main(cli_args(arithmetic_file, tmp_path / "run")) == 2
    lines = error_lines(capfd.readouterr().err)
    assert len(lines) == 1 and lines[0].startswith("debatekit: error:") and "/proc/x" in lines[0], lines
    assert not (tmp_path / "run").exists()


# --- 3. a full disk ---------------------------------------------------------------------------

def _limit_file_size(limit: int):
    def apply():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


def test_a_full_disk_stops_the_run_whole_lines_only_and_resume_finishes(tmp_path):
    dataset = numbers(tmp_path / "items.jsonl", 100)
    out = tmp_path / "run"
    env = dict(os.environ, PYTHONPATH=str(ROOT), DEBATEKIT_CACHE_DIR=str(tmp_path / "cache"))
    argv = [sys.executable, "-c", slow_model.CLI, *cli_args(dataset, out, "--no-cache")]
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
                          preexec_fn=_limit_file_size(100 * 1024))
    assert done.returncode == 1, done.stderr[-2000:]
    lines = error_lines(done.stderr)
    assert len(lines) == 1 and lines[0].startswith("debatekit: error:") and "interrupted" in lines[0], lines
    record = json.loads((out / "run.json").read_text())
    assert record["status"] == "interrupted" and record["reason"].startswith("cannot write")
    for name in ("events.jsonl", "debates.jsonl"):
        text = (out / name).read_text()
        assert text.endswith("\n") and all(json.loads(line) for line in text.splitlines())
    rows = [json.loads(line) for line in (out / "debates.jsonl").read_text().splitlines()]
    assert rows and all(r["status"] == "ok" for r in rows)  # a write failure fails no item
    assert len(rows) < 100

    resumed = subprocess.run([*argv, "--resume"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    record = json.loads((out / "run.json").read_text())
    assert record["status"] == "complete" and record["summary"]["items"] == 100 and record["summary"]["failed"] == 0


def test_a_full_disk_on_a_per_item_file_stops_the_run_too(tmp_path, monkeypatch):
    def full(path, data):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr("debatekit.engine.write_json_atomic", full)
    src = (datasets.datasets_dir() / "metric_reports.jsonl").read_text().splitlines()[:2]
    dataset = tmp_path / "items.jsonl"
    dataset.write_text("\n".join(src) + "\n")
    config = RunConfig(protocol="arbitration", dataset=str(dataset), model="scripted/schema", cache=False)
    with pytest.raises(TraceWriteError, match="No space left on device"):
        run(config, tmp_path / "run", progress=False)
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    assert record["status"] == "interrupted" and "No space left" in record["reason"]
    assert not (tmp_path / "run" / "debates.jsonl").exists()  # no item was recorded as failed


def test_a_disk_too_full_for_a_new_run_json_still_says_interrupted_and_leaves_no_temporary_file(
        tmp_path, monkeypatch, capsys):
    """The disk fills while the run writes its events; run.json's atomic rewrite then fails too (its
    temporary copy cannot be written): run.json is marked in its own bytes, the copy is removed."""
    import debatekit.records.storage as storage

    real_append, real_fdopen, full = RunFolder.append, os.fdopen, {"on": False}

    def append(self, name, record):
        if name == "debates.jsonl" and full["on"]:
            raise TraceWriteError(errno.ENOSPC, "No space left on device", str(self.path / name))
        full["on"] = True  # after the first line: the disk is full
        return real_append(self, name, record)

    class FullFile:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def write(self, text):
            raise OSError(errno.ENOSPC, "No space left on device")

    def fdopen(fd, *args, **kwargs):
        f = real_fdopen(fd, *args, **kwargs)
        return FullFile(f) if full["on"] else f

    monkeypatch.setattr(RunFolder, "append", append)
    monkeypatch.setattr(storage.os, "fdopen", fdopen)
    out = tmp_path / "run"
    code = main(["run", "single", "--dataset", str(numbers(tmp_path / "items.jsonl", 5)), "--model", "scripted/schema",
                 "--out", str(out), "--quiet", "--no-cache", "--concurrency", "1"])
    err = capsys.readouterr().err.strip()
    assert code == 1 and err.count("\n") == 0 and "interrupted" in err
    record = json.loads((out / "run.json").read_text())
    assert record["status"] == "interrupted" and "No space left" in record["reason"] and record["finished"]
    assert [p.name for p in out.iterdir() if p.name.startswith(".run.json")] == []


# --- 4. SIGTERM ---------------------------------------------------------------------------------

def test_sigterm_is_handled_like_sigint_and_resume_counts_each_call_once(tmp_path):
    dataset = numbers(tmp_path / "items.jsonl", 30)
    out = tmp_path / "run"
    env = dict(os.environ, PYTHONPATH=str(ROOT), DEBATEKIT_CACHE_DIR=str(tmp_path / "cache"))
    argv = [sys.executable, "-c", slow_model.CLI, "run", "society_of_mind", "--dataset", str(dataset),
            "--model", slow_model.MODEL, "--agents", "3", "--rounds", "2", "--set", "stop_on_agreement=false",
            "--concurrency", "4", "--no-cache", "--out", str(out), "--quiet"]
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    debates = out / "debates.jsonl"
    deadline = time.monotonic() + 120
    while not (len(_ids(debates)) >= 4 and _ids(out / "events.jsonl") - _ids(debates)):  # some cut mid-debate
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()[-2000:]
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err[-2000:]
    assert "Traceback" not in err and "--resume" in err
    record = json.loads((out / "run.json").read_text())
    assert record["status"] == "interrupted" and record["reason"] == "stopped by SIGTERM"
    assert record["summary"]["items"] >= 4
    assert _ids(out / "events.jsonl") - _ids(debates)  # debates were cut off mid-way

    resumed = subprocess.run([*argv, "--resume"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    tables = load_runs([out])
    assert tables.runs["status"][0] == "complete" and len(tables.debates) == 30
    assert len(tables.turns) == 30 * 3 * 2  # each call once: the cut-off debates' events were pruned
    assert set(tables.turns["debate_id"]) == set(tables.debates["debate_id"])


def _ids(path: Path) -> set[str]:
    return {row["debate_id"] for row in read_jsonl(path)}


# --- 6. item ids that collide on disk ------------------------------------------------------------

def test_item_folders_are_injective_and_stay_under_items(tmp_path, arithmetic_file):
    ids = ["x/1", "x_1", "..", ".", "", "a" * 300, "n1", "über"]
    names = [item_folder_name(i) for i in ids]
    assert len(set(names)) == len(ids)
    assert names[1] == "x_1" and names[6] == "n1"  # a safe id is its own folder
    for name in names:
        assert name and "/" not in name and name.strip(".") and len(name) < 100
    shipped = (datasets.datasets_dir() / "metric_reports.jsonl").read_text().splitlines()[:3]
    rows = [{**json.loads(line), "id": i} for line, i in zip(shipped, ["x/1", "x_1", ".."])]
    dataset = tmp_path / "ids.jsonl"
    dataset.write_text("".join(json.dumps(r) + "\n" for r in rows))
    config = RunConfig(protocol="arbitration", dataset=str(dataset), model="scripted/schema")
    result = run(config, tmp_path / "run", progress=False)
    folders = sorted(p.name for p in (result.path / "items").iterdir())
    assert len(folders) == 3 and folders == sorted(item_folder_name(i) for i in ["x/1", "x_1", ".."])
    assert {p.name for p in result.path.iterdir()} <= {"items", "run.json", "events.jsonl", "debates.jsonl",
                                                         "review.jsonl", ".lock"}


def test_ids_that_would_share_a_folder_are_rejected_at_load(tmp_path):
    clash = item_folder_name("x/1")  # an id spelled as another id's folder
    dataset = tmp_path / "clash.jsonl"
    dataset.write_text(json.dumps({"id": "x/1", "question": "q"}) + "\n" + json.dumps({"id": "n", "question": "q"})
                       + "\n" + json.dumps({"id": clash, "question": "q"}) + "\n")
    with pytest.raises(datasets.DatasetError, match=r"lines 1 and 3: .* would share the item folder"):
        datasets.load(str(dataset))


# --- 9. resume and debates.jsonl messages -------------------------------------------------------

def test_resume_with_other_settings_names_them(tmp_path, arithmetic_file, capfd):
    out = tmp_path / "run"
    assert main(cli_args(arithmetic_file, out)) == 0
    capfd.readouterr()
    assert main([*cli_args(arithmetic_file, out), "--resume", "--seed", "4", "--set", "temperature=0.3"]) == 2
    err = capfd.readouterr().err
    assert "seed: 0 -> 4" in err and "params.temperature: None -> 0.3" in err, err


def test_resume_of_a_folder_that_does_not_exist_refuses(tmp_path, arithmetic_file, capfd):
    assert main([*cli_args(arithmetic_file, tmp_path / "nowhere"), "--resume"]) == 2
    err = capfd.readouterr().err
    assert "no run there" in err and str(tmp_path / "nowhere") in err
    assert not (tmp_path / "nowhere").exists()


def test_a_debates_line_that_does_not_validate_is_named_by_file_and_line(tmp_path, arithmetic_file):
    config = RunConfig(protocol="society_of_mind", dataset=str(arithmetic_file), model="scripted/schema",
                       params={"agents": 2, "rounds": 1})
    result = run(config, tmp_path / "run", progress=False)
    path = result.path / "debates.jsonl"
    lines = path.read_text().splitlines()
    broken = json.loads(lines[1])
    broken["status"] = "maybe"
    path.write_text("\n".join([lines[0], json.dumps(broken), *lines[2:]]) + "\n")
    with pytest.raises(RunFolderError, match=rf"{path}: line 2, field 'status'"):
        RunFolder(result.path).debates()


def test_resume_of_a_comparison_cut_off_part_way_starts_the_protocols_never_begun(tmp_path, arithmetic_file, capfd):
    out = tmp_path / "cmp"
    first = ["run", "single", "--dataset", str(arithmetic_file), "--model", "scripted/schema", "--out",
             str(out / "single"), "--quiet"]
    assert main(first) == 0  # as if `run single society_of_mind --out cmp` had stopped after single
    capfd.readouterr()
    both = ["run", "single", "society_of_mind", "--dataset", str(arithmetic_file), "--model", "scripted/schema",
            "--agents", "2", "--rounds", "1", "--out", str(out), "--quiet", "--resume"]
    assert main(both) == 0
    captured = capfd.readouterr()
    assert f"{out / 'society_of_mind'} was never begun; starting it" in captured.err
    assert f"{out / 'single'} was never begun" not in captured.err
    assert RunFolder(out / "society_of_mind").exists
    assert "paired against single" in captured.out  # the comparison is printed over both runs
    items = len(arithmetic_file.read_text().splitlines())
    assert len(RunFolder(out / "single").debates()) == items  # the finished run was not redone or doubled


def test_resume_of_a_comparison_none_of_which_began_refuses(tmp_path, arithmetic_file, capfd):
    both = ["run", "single", "society_of_mind", "--dataset", str(arithmetic_file), "--model", "scripted/schema",
            "--agents", "2", "--rounds", "1", "--out", str(tmp_path / "cmp"), "--quiet", "--resume"]
    assert main(both) == 2
    assert "no run there" in capfd.readouterr().err
    assert not (tmp_path / "cmp").exists()


def test_a_writer_that_took_the_lock_an_instant_ago_is_named_not_unknown(tmp_path):
    import fcntl
    import threading

    folder = tmp_path / "run"
    folder.mkdir()
    holder = os.open(folder / ".lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(holder, fcntl.LOCK_EX)  # locked, its pid not written yet: two runs started together
    threading.Timer(0.05, lambda: os.pwrite(holder, b"31337\n", 0)).start()
    try:
        with pytest.raises(RunFolderError, match="in use by process 31337"):
            RunFolder(folder).lock()
    finally:
        os.close(holder)
