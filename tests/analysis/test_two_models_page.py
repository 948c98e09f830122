"""The mixed-society section of docs/results/two-models.md quotes its committed runs as they read today."""

from pathlib import Path

from debatekit.datasets.voting import answers_equal
from debatekit.records.trace import RunFolder

ROOT = Path(__file__).resolve().parents[2]
MIXED = ROOT / "results" / "studies" / "mixed-society" / "aa6b6184"
ALL = ROOT / "results" / "studies" / "gsm8k" / "society_of_mind-agents3-rounds3-stop_on_agreementfalse-3ea484a1"
MODELS = {"all 1.5B": ("1.5B", "1.5B", "1.5B"), "mixed": ("1.5B", "1.5B", "0.5B")}


def test_the_per_agent_table_is_the_runs_accuracy_by_round():
    mixed = RunFolder(MIXED).debates()
    items = {d.item_id for d in mixed}
    runs = {"all 1.5B": [d for d in RunFolder(ALL).debates() if d.item_id in items], "mixed": mixed}
    page = (ROOT / "docs" / "results" / "two-models.md").read_text()
    for name, debates in runs.items():
        assert len(debates) == 50
        for k, agent in enumerate(("agent1", "agent2", "agent3")):
            right = [sum(_right(d, r, agent) for d in debates) / 50 for r in range(3)]
            row = f"| {name} | {k + 1} | {MODELS[name][k]} | " + " | ".join(f"{a:.2f}" for a in right) + " |"
            assert row in page, row


def _right(debate, round: int, agent: str) -> bool:
    answer = debate.rounds[round].answers.get(agent)  # an unreadable answer counts as wrong
    return answer is not None and answers_equal(answer, debate.truth)
