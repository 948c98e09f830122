"""A sweep can be stopped (Ctrl-C or SIGTERM: queued points dropped, running ones ended with their
kernels, exit 130/143), wrong grid values fail before any kernel starts, and a large grid asks first."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from debatekit import sweep
from debatekit._base.signals import _alive, descendants, stop_process_tree
from debatekit.cli.app import main
from debatekit.sweep import guard
from tests.sweep_helpers import NOTEBOOK, scripted_grid

ROOT = Path(__file__).resolve().parents[2]


def _kernels(pids: list[int]) -> list[int]:
    found = []
    for pid in pids:
        try:
            if b"ipykernel" in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
        except OSError:
            pass
    return found


def _outliving(pids: list[int], seconds: float) -> list[int]:
    """The processes of `pids` still there after `seconds` (a killed one takes a moment to leave
    /proc); they are killed, so that a failing test leaves none behind."""
    deadline = time.monotonic() + seconds
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [pid for pid in pids if _alive(pid)]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    return left


def _as_at_a_terminal() -> None:
    """Give the sweep Ctrl-C's default disposition, as a shell does for a command in the foreground.

    A command a non-interactive shell starts in the background (`pytest ... &` in a script) starts
    with SIGINT ignored, and Python keeps it ignored in every child: the sweep then never sees the
    Ctrl-C this test sends (its kernels, which set their own handler, still do).
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("how, status, executor", [("SIGTERM", 143, "local"), ("Ctrl-C", 130, "local"),
                                                   ("SIGTERM", 143, "dask")])
def test_a_sweep_stops_at_the_first_signal_with_no_process_left(tmp_path, how, status, executor):
    grid = tmp_path / "grid.json"
    grid.write_text(json.dumps(scripted_grid(tmp_path, grid={"seed": list(range(12))})))
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=str(ROOT), DEBATEKIT_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.Popen([sys.executable, "-m", "debatekit.cli", "sweep", str(NOTEBOOK), "--grid", str(grid),
                             "--out", str(out), "--workers", "2", "--executor", executor, "--quiet"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=_as_at_a_terminal)
    try:
        deadline = time.monotonic() + 120
        while not _kernels(descendants(proc.pid)):  # signal while a point's kernel is running
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()[-2000:]
            time.sleep(0.05)
        tree = descendants(proc.pid)
        if executor == "local":  # first ask where it waits: the stacks go to stderr and it runs on
            proc.send_signal(signal.SIGUSR1)
            time.sleep(1)
            assert proc.poll() is None
        if how == "SIGTERM":
            proc.send_signal(signal.SIGTERM)
        else:  # a terminal's Ctrl-C goes to the whole foreground process group
            os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == status, err[-2000:]
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines[-1].startswith("debatekit: sweep stopped") and "same `debatekit sweep` command" in lines[-1]
    assert "--resume" not in err and "Traceback" not in err, err[-2000:]
    if executor == "local":
        assert "most recent call first" in err and "in as_completed" in err, err[-2000:]
    assert _outliving(tree, 20) == [], "worker or kernel processes outlived the sweep"
    complete = [p for p in out.glob("*.json") if p.name != "sweep.json" and "point_hash" in p.read_text()]
    assert len(complete) < 12  # queued points were cancelled, not drained


STALL = """
import asyncio

from debatekit import protocol
from debatekit.engine import Outcome


@protocol("stall")
def stall():
    \"\"\"Waits far longer than any test: only a stop from outside ends it.\"\"\"

    async def run(item, debate):
        await asyncio.sleep(600)
        return Outcome(final_answer=None)

    return run
"""


def test_a_point_stopped_with_its_sweep_says_so_in_its_run_json(tmp_path):
    """The sweep ends a running point's kernel with SIGTERM: the run inside it stops as a command's
    would, and its run.json says interrupted and why, not "running"."""
    (tmp_path / "stall.py").write_text(STALL)
    grid = tmp_path / "grid.json"
    grid.write_text(json.dumps({"parameters": {"dataset": "arithmetic", "limit": 2, "model": "scripted/schema"},
                                "points": [{"protocol": "./stall.py:stall"}]}))
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=str(ROOT), DEBATEKIT_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.Popen([sys.executable, "-m", "debatekit.cli", "sweep", str(NOTEBOOK), "--grid", str(grid),
                             "--out", str(out), "--quiet"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not list(out.glob("*/run.json")):  # the point's run has begun
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()[-2000:]
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err[-2000:]
    (run_json,) = out.glob("*/run.json")
    record = json.loads(run_json.read_text())
    assert (record["status"], record["reason"]) == ("interrupted", "stopped by SIGTERM")
    assert record["summary"]["items"] == 0


# a parent that starts a child and waits; the child, on SIGTERM, waits up to 2 s for its parent to
# go (as ipykernel's parent poller would notice it) and writes down whether it was still there
TREE = """
import os, signal, subprocess, sys, time
if sys.argv[1] == "parent":
    subprocess.Popen([sys.executable, __file__, "child", sys.argv[2]])
    time.sleep(600)
else:
    parent = os.getppid()
    def on_term(signum, frame):
        deadline = time.monotonic() + 2
        while os.getppid() == parent and time.monotonic() < deadline:
            time.sleep(0.02)
        with open(sys.argv[2], "w") as f:
            f.write("parent there" if os.getppid() == parent else "parent gone")
        sys.exit(0)
    signal.signal(signal.SIGTERM, on_term)
    open(sys.argv[2] + ".ready", "w").close()
    time.sleep(600)
"""


@pytest.mark.parametrize("child_named", [False, True])
def test_stopping_a_process_tree_ends_children_while_their_parents_still_run(tmp_path, child_named):
    """A sweep's stop ends a point's kernel before its worker: a kernel whose parent dies exits
    within a second (ipykernel's parent poller), before the run it is stopping has saved. Also
    when the child is named beside its parent (the dask executor names every process it started)."""
    script, said = tmp_path / "tree.py", tmp_path / "said"
    script.write_text(TREE)
    parent = subprocess.Popen([sys.executable, str(script), "parent", str(said)])
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "said.ready").exists():
            assert time.monotonic() < deadline and parent.poll() is None
            time.sleep(0.02)
        (child,) = descendants(parent.pid)
        stop_process_tree([parent.pid, child] if child_named else [parent.pid], grace=10)
        assert parent.wait(timeout=30) is not None and not _alive(child)
    finally:
        if parent.poll() is None:
            parent.kill()
    assert said.read_text() == "parent there"


@pytest.mark.parametrize("values, message", [
    ({"agents": ["three"]}, "parameter 'agents'"),
    ({"agentz": [2]}, "has no parameter 'agentz'"),
    ({"protocol": ["society_of_mind", "no_such_protocol"]}, "no_such_protocol"),
])
def test_wrong_grid_values_fail_before_any_kernel_starts(tmp_path, capfd, values, message):
    grid = tmp_path / "grid.json"
    grid.write_text(json.dumps(scripted_grid(tmp_path, grid=values)))
    assert main(["sweep", str(NOTEBOOK), "--grid", str(grid), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    lines = capfd.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("debatekit: error: point ") and message in lines[0], lines
    assert not list(tmp_path.rglob("*.ipynb")), "a kernel ran before the grid was checked"


def test_a_large_grid_says_its_size_and_asks_at_a_terminal(tmp_path, capfd, monkeypatch):
    grid = tmp_path / "grid.json"
    grid.write_text(json.dumps(scripted_grid(tmp_path, grid={"seed": list(range(300))})))
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True, raising=False)
    asked = []
    monkeypatch.setattr("builtins.input", lambda prompt: asked.append(prompt) or "n")
    assert main(["sweep", str(NOTEBOOK), "--grid", str(grid), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    err = capfd.readouterr().err
    assert "300 points to run (0 already complete)" in err and "not started" in err and "--yes" in err
    assert asked == ["start 300 points? [y/N] "]
    assert not list(tmp_path.rglob("*.ipynb"))


def test_announce_asks_only_over_the_threshold_at_a_terminal_without_yes(capfd):
    def never(prompt):
        raise AssertionError("asked")

    assert guard.announce(guard.LARGE + 1, 0, 4000.0, yes=True, ask=never, interactive=True)
    assert guard.announce(guard.LARGE + 1, 0, 4000.0, ask=never, interactive=False)  # a batch job: no question
    assert guard.announce(guard.LARGE, 0, 10.0, ask=never, interactive=True)
    assert guard.announce(guard.LARGE + 1, 3, 4000.0, ask=lambda p: "y", interactive=True)
    assert "1.1 h" in capfd.readouterr().err
    assert guard.announce(3, 0, None)
    assert "3 points to run (0 already complete); time unknown: no finished point" in capfd.readouterr().err
    assert guard.announce(0, 4, None)
    assert capfd.readouterr().err == "sweep: 0 points to run (4 already complete)\n"


def test_the_estimate_uses_points_already_complete(tmp_path):
    assert guard.estimate_seconds(tmp_path, 100, 2) is None  # nothing timed: no guess (4 s or 4 h)
    for i, wall in enumerate((6.0, 8.0, 10.0)):
        (tmp_path / f"p{i}.json").write_text(json.dumps({"status": "complete", "summary": {"wall_s": wall}}))
    assert guard.estimate_seconds(tmp_path, 10, 1) == 10 * (8.0 + guard.SECONDS_PER_POINT)


def test_run_sweep_confirm_false_starts_nothing(tmp_path):
    calls = []
    with pytest.raises(sweep.SweepError, match="not started"):
        sweep.run_sweep(NOTEBOOK, scripted_grid(tmp_path, grid={"agents": [1, 2]}), tmp_path / "out",
                        confirm=lambda *a: calls.append(a) or False)
    assert calls and calls[0][:2] == (2, 0)
    assert not list(tmp_path.rglob("*.ipynb"))


def test_run_settings_in_a_grid_are_not_taken_for_protocol_parameters():
    points = sweep.expand_grid({"parameters": {"protocol": "society_of_mind", "dataset": "arithmetic", "seeds": 2,
                                               "api_key_env": "KEY", "timeout": 30, "limit": 3,
                                               "extra": {"temperature": 0.2}},
                                "grid": {"agents": [1, 2]}})
    configs = guard.check_points(points)
    assert [c.params for c in configs] == [{"temperature": 0.2, "agents": 1}, {"temperature": 0.2, "agents": 2}]
    assert (configs[0].seeds, configs[0].api_key_env, configs[0].call_timeout, configs[0].limit) == (2, "KEY", 30, 3)
    with pytest.raises(sweep.SweepError, match="temperature"):
        guard.check_points(sweep.expand_grid({"protocol": ["society_of_mind"], "dataset": "arithmetic",
                                              "extra": [{"temperature": "hot"}]}))


def test_a_grids_rounds_pass_the_check_for_dynamics_whose_rounds_parameter_is_max_rounds():
    configs = guard.check_points(sweep.expand_grid({"parameters": {"protocol": "dynamics", "dataset": "decisions"},
                                                    "grid": {"rounds": [1, 2]}}))
    assert [c.params for c in configs] == [{"max_rounds": 1}, {"max_rounds": 2}]
    with pytest.raises(sweep.SweepError, match="max_rounds"):
        guard.check_points(sweep.expand_grid({"parameters": {"protocol": "dynamics", "dataset": "decisions"},
                                              "grid": {"rounds": [0]}}))


@pytest.mark.parametrize("setting, message", [
    ({"limit": 0}, "run setting 'limit': Input should be greater than or equal to 1"),
    ({"timeout": -5}, "run setting 'call_timeout'"),
    ({"seeds": "two"}, "run setting 'seeds'"),
    ({"dataset": None}, "run setting 'dataset': Field required"),
    ({"dataset": "nosuch"}, "unknown dataset 'nosuch'"),
    ({"dataset": "no/such/file.jsonl"}, "dataset file not found"),
])
def test_a_wrong_run_setting_in_a_grid_names_the_point_before_any_kernel_starts(setting, message):
    points = sweep.expand_grid({"protocol": "single", "dataset": "arithmetic", **setting})
    with pytest.raises(sweep.SweepError, match=f"point {points[0].id}: {message}"):
        guard.check_points(points)


def test_a_grid_key_named_like_a_run_config_field_sets_that_field():
    """A RunConfig field is a grid key by its name, with no list of them to keep (a setting added to
    RunConfig is a grid key at once); `timeout`, `agents`, `rounds`, `extra`, `thresholds` are shorthands."""
    values = {"limit": 2, "model": "scripted/schema", "seed": 3, "seeds": 2, "concurrency": 7, "max_calls_in_flight": 2,
              "call_timeout": 9.0, "round_timeout": 8.0, "debate_timeout": 7.0, "token_budget": 100, "max_tokens": 50,
              "cache": False, "model_options": {"scripted/schema": {"x": 1}}, "api_base": "http://h/v1",
              "api_key_env": "K"}
    config = sweep.point_config({"protocol": "single", "dataset": "arithmetic", **values})
    assert {k: v for k, v in config.model_dump().items() if k in values} == values and config.params == {}
    shorthand = sweep.point_config({"protocol": "society_of_mind", "dataset": "arithmetic", "timeout": 30, "agents": 2,
                                    "rounds": None, "personas": ["skeptic", "optimist"],
                                    "thresholds": {"min_total": 1}, "params": {"temperature": 0.2}})
    assert shorthand.call_timeout == 30 and shorthand.params == {
        "agents": 2, "personas": ["skeptic", "optimist"], "min_total": 1, "temperature": 0.2}


def test_a_sweep_killed_outright_takes_its_workers_and_kernels_with_it_and_the_same_command_finishes(tmp_path):
    """SIGKILL leaves the sweep no chance to stop anything: its workers must die with it (a parent-death
    signal), their kernels with them, so that no point runs unsupervised or holds its run folder."""
    grid = tmp_path / "grid.json"
    grid.write_text(json.dumps(scripted_grid(tmp_path, grid={"seed": list(range(6))})))
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=str(ROOT), DEBATEKIT_CACHE_DIR=str(tmp_path / "cache"))
    argv = [sys.executable, "-m", "debatekit.cli", "sweep", str(NOTEBOOK), "--grid", str(grid), "--out", str(out),
            "--workers", "2", "--quiet"]
    proc = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not _kernels(descendants(proc.pid)):
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()[-2000:]
            time.sleep(0.05)
        tree = descendants(proc.pid)
        proc.kill()
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert _outliving(tree, 30) == [], "workers, kernels or the resource tracker outlived a killed sweep"
    again = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "6 points" in again.stdout and "0 failed" in again.stdout
