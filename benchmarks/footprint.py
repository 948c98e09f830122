"""Import time of `debatekit` and memory of a 100-item run (scripted model).

Each measurement runs in a fresh interpreter. Import time is the best (minimum) of several
runs of `import X` (wall) with `-X importtime` totals for the top modules; memory is the peak
resident set size (ru_maxrss) of a process that runs society_of_mind (3 agents, 2 rounds, no
early stop) over 100 arithmetic items on a scripted model, against the same process before
the run.

    python -m benchmarks footprint [--repeat 5] [--items 100]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

from benchmarks.common import save

IMPORT = """
import time, sys
t = time.perf_counter()
import {module}
print(time.perf_counter() - t)
print("litellm" in sys.modules)
"""

RUN = """
import json, resource, sys, tempfile, time
from pathlib import Path
from debatekit.models import scripted
from debatekit.runner import run
from debatekit.records.schemas import RunConfig
from debatekit.models.providers import litellm_module as _litellm
model = scripted.register("bench-footprint", fn=lambda req: {"reasoning": "3*4=12; 1+12=13", "answer": 13})
start = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
_litellm()  # imported here so that the run's own memory is measured apart from litellm's import
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
out = Path(tempfile.mkdtemp(prefix="dk-footprint-")) / "run"
t = time.perf_counter()
result = run(RunConfig(protocol="society_of_mind", dataset="arithmetic", limit=ITEMS, model=model, cache=False,
                       params={"agents": 3, "rounds": 2, "stop_on_agreement": False}), out, progress=False)
wall = time.perf_counter() - t
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
print(json.dumps({"items": result.summary.items, "calls": result.summary.calls, "wall_s": round(wall, 3),
                  "rss_debatekit_imported_mib": round(start / 1024, 1),
                  "rss_litellm_imported_mib": round(before / 1024, 1), "peak_rss_mib": round(after / 1024, 1),
                  "run_added_peak_rss_mib": round((after - before) / 1024, 1),
                  "run_folder_kib": round(size / 1024, 1)}))
"""


def import_time(module: str, repeat: int) -> dict:
    times, loads_litellm = [], None
    for _ in range(repeat):
        out = subprocess.run([sys.executable, "-c", IMPORT.format(module=module)], capture_output=True, text=True,
                             check=True).stdout.split()
        times.append(float(out[0]))
        loads_litellm = out[1] == "True"
    return {"module": module, "best_s": round(min(times), 4), "median_s": round(sorted(times)[len(times) // 2], 4),
            "imports_litellm": loads_litellm}


def importtime_top(module: str, n: int = 8) -> list[dict]:
    """The slowest imports (cumulative microseconds) from `python -X importtime`."""
    err = subprocess.run([sys.executable, "-X", "importtime", "-c", f"import {module}"], capture_output=True,
                         text=True, check=True).stderr
    rows = []
    for line in err.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cum_us, name = line.split(":", 1)[1].split("|")
        rows.append({"module": name.strip(), "cumulative_ms": round(int(cum_us) / 1000, 1)})
    return sorted(rows, key=lambda r: -r["cumulative_ms"])[:n]


def memory(items: int) -> dict:
    out = subprocess.run([sys.executable, "-c", RUN.replace("ITEMS", str(items))], capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks footprint")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--items", type=int, default=100)
    args = parser.parse_args(argv)
    result = {
        "import": [import_time(m, args.repeat) for m in ("debatekit", "debatekit.runner", "debatekit.models.gateway")],
        "import_slowest_of_debatekit_runner": importtime_top("debatekit.runner"),
        "run_memory": memory(args.items),
        "note": "litellm (3.5-4 s to import) is imported lazily, on the first model call, not by these imports",
    }
    save("footprint", result)
    return 0
