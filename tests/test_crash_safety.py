"""Crash safety: a CLI run killed with SIGKILL mid-way, then resumed, ends as an uninterrupted run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from debatekit.cli.app import main
from tests import slow_model

ROOT = Path(__file__).resolve().parent.parent
ITEMS = 24


def args(dataset: Path, out: Path) -> list[str]:
    return ["run", "society_of_mind", "--dataset", str(dataset), "--model", slow_model.MODEL, "--agents", "3",
            "--rounds", "2", "--set", "stop_on_agreement=false", "--concurrency", "2", "--no-cache",
            "--out", str(out), "--quiet"]


def start(argv: list[str], env: dict, cli: str = slow_model.CLI) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", cli, *argv], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines(keepends=True) if path.exists() else []


def wait_for(proc: subprocess.Popen, debates: Path, at_least: int, timeout: float = 120) -> None:
    """Return once `debates` holds `at_least` finished items while the run in `proc` still runs."""
    deadline = time.monotonic() + timeout
    while len(lines(debates)) < at_least:
        if proc.poll() is not None:
            pytest.fail(f"the run ended before it could be killed: {proc.stderr.read().decode()[-2000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail("the run made no progress")
        time.sleep(0.01)


def kill_after(proc: subprocess.Popen, debates: Path, at_least: int, timeout: float = 120) -> int:
    """SIGKILL the run once `debates` holds `at_least` finished items; returns how many there were."""
    wait_for(proc, debates, at_least, timeout)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    return len(lines(debates))


def completed(folder: Path) -> dict[str, tuple]:
    rows = [json.loads(line) for line in lines(folder / "debates.jsonl")]
    ids = [r["item_id"] for r in rows if r["status"] == "ok"]
    assert len(ids) == len(set(ids)), "an item was completed twice"
    return {r["item_id"]: (r["status"], r["final_answer"], r["correct"], len(r["rounds"])) for r in rows}


def test_sigkill_then_resume_ends_like_an_uninterrupted_run(tmp_path):
    dataset = tmp_path / "items.jsonl"
    dataset.write_text("".join(json.dumps({"id": f"n{i}", "question": f"What is {i}?", "answer": i}) + "\n"
                               for i in range(ITEMS)))
    env = dict(os.environ, PYTHONPATH=str(ROOT), DEBATEKIT_CACHE_DIR=str(tmp_path / "cache"))

    whole = tmp_path / "whole"
    assert main(args(dataset, whole)) == 0

    killed = tmp_path / "killed"
    first = kill_after(start(args(dataset, killed), env), killed / "debates.jsonl", 4)
    assert first < ITEMS, "the run finished before the kill"
    assert json.loads((killed / "run.json").read_text())["status"] == "running"  # no clean shutdown happened
    second = kill_after(start([*args(dataset, killed), "--resume"], env), killed / "debates.jsonl", first + 4)
    assert second < ITEMS, "the resumed run finished before the second kill"
    done = start([*args(dataset, killed), "--resume"], env)
    _, err = done.communicate(timeout=180)
    assert done.returncode == 0, err.decode()[-2000:]

    assert completed(killed) == completed(whole) and len(completed(whole)) == ITEMS
    assert json.loads((killed / "run.json").read_text())["status"] == "complete"
    assert json.loads((killed / "run.json").read_text())["summary"]["items"] == ITEMS
    for name in ("debates.jsonl", "events.jsonl"):
        for line in lines(killed / name):
            assert line.endswith("\n") and json.loads(line), f"truncated line in {name}: {line[:80]!r}"
    # every finished debate's calls are traced once (calls of debates cut by the kill are traced too)
    final = {json.loads(line)["debate_id"] for line in lines(killed / "debates.jsonl")}
    calls = [json.loads(line) for line in lines(killed / "events.jsonl")]
    keys = [(c["debate_id"], c["agent"], c["round"]) for c in calls if c["debate_id"] in final]
    assert len(keys) == len(set(keys)) == ITEMS * 3 * 2
