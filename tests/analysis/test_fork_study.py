"""The committed GSM8K forks: their summary (quoted by docs/guides/forks.md) is what their runs give."""

import importlib.util
import json
import re
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


def test_the_page_quotes_the_committed_summary():
    """docs/guides/forks.md reports the forks' sizes and accuracies: they must be summary.json's, not an older run's."""
    summary = json.loads((HERE / "summary.json").read_text(encoding="utf-8"))
    page = (ROOT / "docs" / "guides" / "forks.md").read_text(encoding="utf-8")
    section = " ".join(page.split("## Three forks of the GSM8K debate", 1)[1].split())
    runs, against = summary["runs"], summary["against_control"]

    sizes = re.search(r"identity fork has run the parent's first (\d+) items, the adversarial fork (\d+) and the "
                      r"correct-answer fork (\d+)", section)
    assert sizes, "the page no longer says how many items each fork has run"
    assert [int(n) for n in sizes.groups()] == [runs[name]["debates"] for name in
                                                ("identity", "adversarial-agent1", "correct-agent1")]

    parent = summary["identity_vs_parent"]
    assert f"(identity against its parent, {parent['pairs']} items): accuracy of the final majority " \
           f"{parent['accuracy']:.2f} against {parent['baseline_accuracy']:.2f}" in section

    quoted = [int(n) for n in re.findall(r"\*\*[^*]+\*\* \((\d+) items\)", section)]
    assert quoted == [against["adversarial-agent1"]["items"], against["correct-agent1"]["items"]]
    adversary = against["adversarial-agent1"]["accuracy"]
    assert f"Final accuracy {adversary['accuracy']:.2f} against {adversary['baseline_accuracy']:.2f}" in section
    correct = against["correct-agent1"]["accuracy"]
    pairs = correct["pairs"]
    assert (f"right on {round(correct['accuracy'] * pairs)} of {pairs} items against "
            f"{round(correct['baseline_accuracy'] * pairs)} of {pairs}") in section
