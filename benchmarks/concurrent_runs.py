"""Two local runs at once: aggregate throughput and each one's share, per-process engines vs one shared engine.

The same local workload (`debatekit run single` on the first N GSM8K items, free text,
temperature 0.7, no response cache) is run
  (a) alone,
  (b) as two processes started together (seeds 1 and 2: the same prompts, different samples),
  (c) as a sweep of those two points with `--workers 2` (papermill kernels),
on three sides: `before`, each process loads its own engine with a thread per core, as debatekit
did before the shared engine (`DEBATEKIT_LOCAL_ENGINE=process`, `DEBATEKIT_LOCAL_THREADS` = cores);
`budget`, each its own engine with threads from the machine-wide budget (`process` alone); `after`,
the default shared engine. Each side runs in its own DEBATEKIT_HOME (the model file linked in), so a
shared engine already running on the machine is not used, and the side's engine starts cold.

Completion tokens per second of a process = the completion tokens in its events.jsonl / its wall
time. `aggregate_ratio` = both processes' completion tokens / the wall time until both finished,
over (a); `min_share` = the slower process's tokens per second over (a). A process that has not
finished after `--cap` times (a)'s wall time is stopped and measured on what it recorded.

    python -m benchmarks concurrent_runs [--items 8] [--cap 4] [--sides before,budget,after] [--out PATH]

`--unequal` measures instead how a small run fares beside a big one on the shared engine: the
2-item `single` run alone, then beside a 30-call self_consistency run and beside a protocol of
long structured prompts (cross_critique, one item); `small_vs_alone` is its wall time beside the
big run over alone (`benchmarks/results/concurrent_runs_unequal.json`).

    python -m benchmarks concurrent_runs --unequal [unequal_pair,unequal_pair_long_prompts] [--head-start 20]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import RESULTS, save

ROOT = Path(__file__).resolve().parent.parent


def _tokens(folder: Path) -> int:
    total = 0
    for events in folder.rglob("events.jsonl"):
        for line in events.read_text().splitlines():
            if line.strip():
                total += json.loads(line).get("completion_tokens", 0)
    return total


def _run_args(out: Path, items: int, seed: int) -> list[str]:
    return [sys.executable, "-m", "debatekit.cli", "run", "single", "--dataset", "gsm8k", "--limit", str(items),
            "--seed", str(seed), "--set", "temperature=0.7", "--no-cache", "--out", str(out), "--quiet"]


def _launch(args: list[str], env: dict, log: Path) -> subprocess.Popen:
    return subprocess.Popen(args, env=env, cwd=ROOT, stdout=open(log, "w"), stderr=subprocess.STDOUT,
                            start_new_session=True)


def _wait(procs: list[subprocess.Popen], deadline: float) -> list[float]:
    """Each process's wall time; one still running at `deadline` is stopped there."""
    started, ended = time.monotonic(), [None] * len(procs)
    while any(e is None for e in ended):
        for k, p in enumerate(procs):
            if ended[k] is None and p.poll() is not None:
                ended[k] = time.monotonic() - started
        if time.monotonic() - started > deadline:
            for k, p in enumerate(procs):
                if ended[k] is None:
                    os.killpg(p.pid, signal.SIGTERM)
                    p.wait()
                    ended[k] = time.monotonic() - started
        time.sleep(0.2)
    return ended


def _engine_status(env: dict) -> dict:
    """The status of the side's shared engine (`shared.status()`), {} if none answers."""
    code = "import json\nfrom debatekit.models.local import shared as s\nprint(json.dumps(s.status() or {}))"
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True)
    return json.loads(done.stdout or "{}")


def _stop_engine(env: dict) -> None:
    """Stop the side's shared engine, if it started one, so the next phase starts cold."""
    code = "import os, signal\nfrom debatekit.models.local import shared as s\ni = s.status()\nif i: os.kill(i['pid'], signal.SIGTERM)"
    subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT)
    time.sleep(1.0)


SIDES = {
    "before": ("process", True),  # each process loads its own engine with a thread per core (debatekit before)
    "budget": ("process", False),  # each process its own engine, threads from the machine-wide budget
    "after": ("shared", False),  # one engine per machine, shared (the default)
}


def side(name: str, items: int, cap: float, work: Path) -> dict:
    from debatekit.models.local import weights

    mode, all_cores = SIDES[name]
    work = work / name
    home = work / mode / "home"
    (home / "models").mkdir(parents=True)
    model = weights.pull(say=lambda msg: None)
    (home / "models" / model.name).symlink_to(model)
    env = {**os.environ, "DEBATEKIT_HOME": str(home), "DEBATEKIT_LOCAL_ENGINE": mode, "DEBATEKIT_ENGINE_IDLE": "600"}
    env.pop("DEBATEKIT_LOCAL_THREADS", None)
    if all_cores:
        env["DEBATEKIT_LOCAL_THREADS"] = str(os.cpu_count() or 1)
    result: dict = {"engine": mode, "threads_per_engine": env.get("DEBATEKIT_LOCAL_THREADS", "budget")}

    out = work / mode / "alone"
    wall = _wait([_launch(_run_args(out, items, 1), env, work / mode / "alone.log")], 3600)[0]
    alone = _tokens(out) / wall
    result["alone"] = {"wall_s": round(wall, 1), "completion_tokens": _tokens(out), "tok_s": round(alone, 2)}
    _stop_engine(env)

    outs = [work / mode / f"pair{s}" for s in (1, 2)]
    procs = [_launch(_run_args(o, items, s), env, work / mode / f"pair{s}.log") for o, s in zip(outs, (1, 2))]
    walls = _wait(procs, cap * wall)
    result["two_processes"] = _pair(outs, walls, alone)
    _stop_engine(env)

    grid = work / mode / "grid.yaml"
    grid.write_text(f"parameters: {{dataset: gsm8k, limit: {items}, protocol: single, extra: {{temperature: 0.7}}}}\n"
                    f"points:\n  - {{seed: 1}}\n  - {{seed: 2}}\n")
    sweep_out = work / mode / "sweep"
    proc = _launch([sys.executable, "-m", "debatekit.cli", "sweep", str(ROOT / "notebooks" / "run_debate.ipynb"),
                    "--grid", str(grid), "--out", str(sweep_out), "--workers", "2", "--quiet"],
                   {**env, "DEBATEKIT_CACHE_DIR": str(work / mode / "nocache")}, work / mode / "sweep.log")
    sweep_wall = _wait([proc], cap * wall + 120)[0]
    points = sorted(p for p in sweep_out.iterdir() if p.is_dir()) if sweep_out.exists() else []
    per_point = [_tokens(p) for p in points]
    result["sweep_workers_2"] = {
        "wall_s": round(sweep_wall, 1), "completion_tokens": per_point,
        "aggregate_ratio": round(sum(per_point) / sweep_wall / alone, 3) if per_point else None,
        "note": "sweep wall includes starting two kernels; per-point walls are not recorded, so no min_share",
    }
    _stop_engine(env)
    return result


UNEQUAL = {
    # the 2-item `single` run beside a 30-call self_consistency run (6 items x 5 samples)
    "unequal_pair": ["self_consistency", "--dataset", "gsm8k", "--limit", "6", "--set", "samples=5"],
    # beside a protocol of long structured prompts, one item
    "unequal_pair_long_prompts": ["cross_critique", "--dataset", "legal_conflicts", "--limit", "1"],
}


def unequal(work: Path, head_start: float, only: list[str] | None = None) -> dict:
    """The small run (2-item `single`) alone, then beside each big run of `UNEQUAL`, on one shared
    engine kept warm (the model load is in neither). The big run starts `head_start` seconds before
    the small one, so its calls are on the engine when the small one's arrive, and is stopped once
    the small one finishes. `small_vs_alone`: the small run's wall time beside it over alone."""
    from debatekit.models.local import weights

    home = work / "unequal" / "home"
    (home / "models").mkdir(parents=True)
    model = weights.pull(say=lambda msg: None)
    (home / "models" / model.name).symlink_to(model)
    env = {**os.environ, "DEBATEKIT_HOME": str(home), "DEBATEKIT_LOCAL_ENGINE": "shared", "DEBATEKIT_ENGINE_IDLE": "600"}
    env.pop("DEBATEKIT_LOCAL_THREADS", None)
    warm = [sys.executable, "-m", "debatekit.cli", "run", "single", "--dataset", "gsm8k", "--limit", "1", "--no-cache",
            "--out", str(work / "unequal" / "warm"), "--quiet"]
    subprocess.run(warm, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    small_out = work / "unequal" / "alone"
    alone = _wait([_launch(_run_args(small_out, 2, 1), env, work / "unequal" / "alone.log")], 3600)[0]
    result: dict = {"small": "single, gsm8k, 2 items, temperature 0.7, no cache", "head_start_s": head_start,
                    "alone": {"wall_s": round(alone, 1), "completion_tokens": _tokens(small_out)}}
    engine = _engine_status(env)
    result["engine"] = {"slots": engine.get("slots"), "fair": engine.get("fair", False)}
    taken_back = engine.get("preempted", 0)
    for name, big_args in UNEQUAL.items():
        if only and name not in only:
            continue
        big_out, small_out = work / "unequal" / f"{name}-big", work / "unequal" / f"{name}-small"
        big = _launch([sys.executable, "-m", "debatekit.cli", "run", *big_args, "--seed", "3",
                       "--no-cache", "--out", str(big_out), "--quiet"], env, work / "unequal" / f"{name}-big.log")
        time.sleep(head_start)
        beside = _wait([_launch(_run_args(small_out, 2, 1), env, work / "unequal" / f"{name}-small.log")], 3600)[0]
        big_still_running = big.poll() is None
        preempted = _engine_status(env).get("preempted", 0) - taken_back
        taken_back += preempted
        if big_still_running:
            os.killpg(big.pid, signal.SIGTERM)
            big.wait()
        result[name] = {"big": " ".join(big_args), "wall_s": round(beside, 1),
                        "big_generations_taken_back": preempted,
                        "completion_tokens": _tokens(small_out), "big_completion_tokens": _tokens(big_out),
                        "big_still_running_at_the_end": big_still_running,
                        "small_vs_alone": round(beside / alone, 3)}
    _stop_engine(env)
    return result


def _pair(outs: list[Path], walls: list[float], alone: float) -> dict:
    tokens = [_tokens(o) for o in outs]
    rates = [t / w for t, w in zip(tokens, walls)]
    return {"wall_s": [round(w, 1) for w in walls], "completion_tokens": tokens, "tok_s": [round(r, 2) for r in rates],
            "aggregate_ratio": round(sum(tokens) / max(walls) / alone, 3), "min_share": round(min(rates) / alone, 3)}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks concurrent_runs", description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=8)
    parser.add_argument("--cap", type=float, default=4.0, help="stop a process after this many times the alone wall")
    parser.add_argument("--sides", default="before,after", help=f"comma-separated, of {', '.join(SIDES)}")
    parser.add_argument("--out", type=Path, default=RESULTS / "concurrent_runs.json")
    parser.add_argument("--unequal", nargs="?", const="all", default=None,
                        help=f"instead: the small run beside a big one ({', '.join(UNEQUAL)}, or all), written to "
                             "concurrent_runs_unequal.json")
    parser.add_argument("--head-start", type=float, default=20.0, help="seconds the big run starts before the small")
    args = parser.parse_args(argv)
    if args.unequal:
        only = None if args.unequal == "all" else args.unequal.split(",")
        out = args.out if args.out != RESULTS / "concurrent_runs.json" else RESULTS / "concurrent_runs_unequal.json"
        with tempfile.TemporaryDirectory(prefix="debatekit-unequal-") as tmp:
            measured = unequal(Path(tmp), args.head_start, only)
        save("concurrent_runs_unequal", {"targets": {"small_vs_alone": "<= 2.5"}, **measured}, out)
        return 0
    with tempfile.TemporaryDirectory(prefix="debatekit-concurrent-") as tmp:
        sides = {name: side(name, args.items, args.cap, Path(tmp)) for name in args.sides.split(",")}
    targets = {"aggregate_ratio": ">= 0.9", "min_share": ">= 0.333"}
    save("concurrent_runs", {"items": args.items, "workload": "single, gsm8k, free text, temperature 0.7, no cache",
                             "targets": targets, **sides}, args.out)
    return 0
