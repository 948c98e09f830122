"""The committed GSM8K forks: their summary (quoted by docs/guides/forks.md) is what their runs give."""

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = ROOT / "results" / "forks" / "gsm8k"


def test_the_committed_fork_summary_is_recomputed_from_the_committed_runs():
    spec = importlib.util.spec_from_file_location("fork_summary", HERE / "summarise.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    committed = json.loads((HERE / "summary.json").read_text(encoding="utf-8"))
    assert module.summarise() == committed
    assert committed["items"] >= 10 and set(committed["against_control"]) == {"adversarial-agent1", "correct-agent1"}
