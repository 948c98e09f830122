"""The README's first command, its `debatekit run` part, timed the newcomer's way, A against B.

Each side is a checkout of debatekit (a `git worktree` pinned to a commit); its code is imported
from there (PYTHONPATH) by this interpreter. Each run starts with no engine running and an empty
response cache: a private `DEBATEKIT_HOME` whose `models` folder links to the assembled models,
and a fresh `DEBATEKIT_CACHE_DIR`; the engine a run starts is waited for until it has exited
(`DEBATEKIT_ENGINE_IDLE`) before the next run begins. Sides alternate (A, B, A, B, ...), so that a
machine that slows down part-way slows both. Per run: wall seconds of the whole command (imports,
engine start, both protocols, the tables), and from its run folders the calls, completion tokens and
rounds of each protocol (the agents sample: a debate whose agents disagree runs a second round).

    python -m benchmarks first_command --side main=/work/a --side new=/work/b [--repeats 3]
        [--command "run single society_of_mind --dataset commonsenseqa --limit 2"] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import save

COMMAND = "run single society_of_mind --dataset commonsenseqa --limit 2"
MODELS = Path.home() / ".cache" / "debatekit" / "models"


def once(checkout: Path, command: str, env_extra: dict[str, str]) -> dict:
    """One timed run of `debatekit COMMAND` from `checkout` in fresh folders."""
    scratch = Path(tempfile.mkdtemp(prefix="dk-first-"))
    home = scratch / "home"
    home.mkdir()
    (home / "models").symlink_to(MODELS)
    out = scratch / "run"
    env = {**os.environ, "PYTHONPATH": str(checkout), "DEBATEKIT_HOME": str(home),
           "DEBATEKIT_CACHE_DIR": str(scratch / "cache"), "DEBATEKIT_ENGINE_IDLE": "3", **env_extra}
    argv = [sys.executable, "-m", "debatekit.cli", *shlex.split(command), "--out", str(out), "--quiet"]
    load = os.getloadavg()[0]
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=checkout, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    _wait_engine_gone(home)
    runs = {}
    for events in sorted([*out.glob("events.jsonl"), *out.glob("*/events.jsonl")]):
        rows = [json.loads(line) for line in events.read_text().splitlines() if line.strip()]
        asked = [e for e in rows if not e.get("cache_hit")]
        runs[events.parent.name if events.parent != out else "run"] = {"calls": len(asked), "served_from_another_call": len(rows) - len(asked),
                                    "completion_tokens": sum(e.get("completion_tokens", 0) for e in asked),
                                    "rounds": max((e.get("round", 1) for e in rows), default=0)}
    return {"wall_s": round(wall, 1), "exit": done.returncode, "load_1min_before": round(load, 2), "runs": runs,
            "stdout": done.stdout[-3000:], "stderr_tail": done.stderr[-500:]}


def _wait_engine_gone(home: Path, limit: float = 120.0) -> None:
    """Until the engine the run started has exited (its lock is free)."""
    import fcntl

    lock = home / "engine" / "engine.lock"
    deadline = time.monotonic() + limit
    while lock.exists() and time.monotonic() < deadline:
        with open(lock) as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                time.sleep(1)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks first_command")
    parser.add_argument("--side", action="append", required=True, help="NAME=CHECKOUT, or NAME=CHECKOUT:ENV=VALUE")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--command", default=COMMAND)
    parser.add_argument("--out", type=Path, help="result file (default benchmarks/results/first_command.json)")
    args = parser.parse_args(argv)
    sides = {}
    for text in args.side:
        name, rest = text.split("=", 1)
        checkout, *extra = rest.split(":")
        sides[name] = (Path(checkout).resolve(), dict(e.split("=", 1) for e in extra))
    commits = {name: subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=path, capture_output=True,
                                    text=True).stdout.strip() for name, (path, _) in sides.items()}
    runs: dict[str, list] = {name: [] for name in sides}
    for k in range(args.repeats):
        for name, (path, extra) in sides.items():
            runs[name].append(once(path, args.command, extra))
            print(json.dumps({"repeat": k + 1, "side": name, **{key: value for key, value in runs[name][-1].items()
                                                                  if key not in ("stdout", "stderr_tail")}}), flush=True)
    result = {"command": f"debatekit {args.command}", "sides": {
        name: {"commit": commits[name], "env": sides[name][1], "median_wall_s": statistics.median(r["wall_s"] for r in rs),
               "runs": rs} for name, rs in runs.items()}}
    names = list(sides)
    if len(names) == 2:
        a, b = (result["sides"][n]["median_wall_s"] for n in names)
        result[f"speedup_{names[1]}_over_{names[0]}"] = round(a / b, 3)
    save("first_command", result, path=args.out)
    return 0
