"""`debatekit show`: the seed's report for judge_refine, a generic view for other protocols, an item list."""

from pathlib import Path

import pytest

from debatekit import registry
from debatekit.cli.app import main
from debatekit.cli.show import show
from debatekit.engine import Outcome
from debatekit.protocols.judge_refine.report import trajectory_line
from debatekit.records.schemas import RunConfig
from debatekit.runner import run
from tests.conftest import answer, dry_runs
from tests.protocols.judge_refine.test_protocol import REASONERS, hyp, scripted_debate, three_each


@pytest.fixture
def judge_run(tmp_path, model_from):
    """inc-001 over three rounds: 70 -> 80 -> 82, a plateau at round 3; the final names the true cause."""
    initial = three_each("guess")
    refined = {(r, n): hyp(f"{r} r{n}", category=c, components=(f"{r}-x",))
               for n in (2, 3) for r, c in zip(REASONERS, ("resource", "software", "network"))}
    refined[("hybrid", 3)] = hyp("DataNode disk space exhausted due to high replication rate",
                                 components=("dn-07",), evidence=["Log: DiskOutOfSpaceException", "KB-12"])
    refined[("hybrid", 3)]["suggested_resolution"] = ("1. Clear disk space on dn-07 2. Throttle re-replication "
                                                      "3. Alert at 85%")
    refined[("hybrid", 3)]["evidence"] = ["Log: DiskOutOfSpaceException", "Historical: KB-12"]
    scores = {h["hypothesis"]: 40 for r in REASONERS for h in initial[r]}
    scores["guess hybrid 1"] = 70
    scores.update({f"{r} r2": 80 - k for k, r in enumerate(REASONERS)})
    scores.update({"log_focused r3": 60, "kg_focused r3": 61,
                   "DataNode disk space exhausted due to high replication rate": 82})
    run(RunConfig(protocol="judge_refine", dataset="incidents", limit=1,
                  model=model_from(scripted_debate(initial, refined, scores)), params={"rounds": 3}),
        tmp_path / "jr", progress=False)
    return tmp_path / "jr"


def test_judge_refine_prints_the_seed_report(judge_run, capsys):
    assert main(["show", str(judge_run), "inc-001"]) == 0
    text = capsys.readouterr().out
    for line in ["DEBATE PROTOCOL - 3 ROUNDS", "ROUND 1: Initial Hypotheses", "  - Log-Focused: 3 hypotheses",
                 "  - KG-Focused: 3 hypotheses", "  - Hybrid: 3 hypotheses",
                 "  - Judge Evaluation: Top score = 70/100 (Hybrid)", "ROUND 2: Refinement",
                 "  - Reasoners refined based on feedback", "  - Judge Evaluation: Top score = 80/100 (Log-Focused)",
                 "  - Improvement: +10 points", "ROUND 3: Final Refinement", "  - Final improvements made",
                 "  - Improvement: +2 points", "  - Convergence: Score plateau detected", "FINAL RESULT",
                 "Best Hypothesis (Score: 82/100):", "  Source: hybrid",
                 "  Hypothesis: DataNode disk space exhausted due to high replication rate",
                 "  Confidence: 0.60", "  Rounds Refined: 3", "    - Log: DiskOutOfSpaceException",
                 "    - Historical: KB-12", "    1. Clear disk space on dn-07", "    3. Alert at 85%",
                 "Improvement Trajectory: 70 → 80 → 82 (+12 points over 3 rounds)",
                 "Convergence: Achieved (score plateau)", "Keyword match: yes"]:
        assert line in text.splitlines() or line in text, line
    assert "sources hidden: H1=" in text and "True root cause: Volume /data/3 on DataNode dn-07" in text


def test_item_list_and_unknown_item(judge_run, capsys):
    listing = show(judge_run)
    assert listing.splitlines()[0].split()[:3] == ["item", "status", "correct"]
    assert "inc-001  ok      True" in listing and "plateau" in listing
    assert main(["show", str(judge_run), "inc-999"]) == 2
    err = capsys.readouterr().err
    assert "no debate for item 'inc-999'" in err and "inc-001" in err
    assert main(["show", str(judge_run / "items"), "inc-001"]) == 2
    assert "is not a run folder" in capsys.readouterr().err


def test_other_protocols_get_the_generic_view(tmp_path, arithmetic_file, model_from):
    model = model_from(lambda req: answer({"agent1": 10, "agent2": 11}[req.agent]))
    run(RunConfig(protocol="society_of_mind", dataset=str(arithmetic_file), limit=1, model=model,
                  params={"agents": 2, "rounds": 2}), tmp_path / "som", progress=False)
    text = show(tmp_path / "som", "q1")
    assert text.startswith("society_of_mind · item q1")
    assert "round 1\n  agent1  10\n  agent2  11" in text and "round 2" in text
    assert "final answer: 10" in text and "truth: 10" in text and "correct: True" in text
    assert "stop reason: max_rounds  converged: False  rounds: 2" in text
    assert "usage: 4 calls" in text and "0 parse failures" in text


@pytest.fixture
def reporting_protocol():
    """A protocol registered for the test only, with a per-debate report; its module defines no `report`."""
    def debate_report(record, folder):
        return f"OWN REPORT {record.item_id}: answer {record.final_answer}, folder {folder.name if folder else None}"

    def factory():
        async def run_one(item, debate):
            debate.record_round(1, {"a": item.answer})
            return Outcome(final_answer=item.answer)
        return run_one

    registry.protocol("_own_report", views=registry.Views(debate=debate_report))(factory)
    yield "_own_report"
    registry._protocols.pop("_own_report", None)


def test_a_protocol_registered_with_a_debate_report_prints_it(tmp_path, arithmetic_file, reporting_protocol, capsys):
    run(RunConfig(protocol=reporting_protocol, dataset=str(arithmetic_file), limit=2, model="scripted/schema"),
        tmp_path / "own", progress=False)
    assert main(["show", str(tmp_path / "own"), "q2"]) == 0
    assert capsys.readouterr().out.strip() == "OWN REPORT q2: answer 20, folder None"
    assert registry.get("judge_refine").views.debate is not None
    assert registry.get("society_of_mind").views.debate is None


def test_a_debate_whose_calls_all_failed_still_prints(tmp_path, model_from):
    run(RunConfig(protocol="judge_refine", dataset="incidents", limit=1, model=model_from(lambda req: "x"),
                  params={"rounds": 1}), tmp_path / "jr", progress=False)
    text = show(tmp_path / "jr", "inc-001")
    assert "DEBATE PROTOCOL - 1 ROUND" in text and "No hypothesis" in text
    assert "Convergence: Not achieved (max_rounds)" in text and "Keyword match: no" in text


def test_a_failed_debate_gets_the_generic_view(judge_run):
    from debatekit.records.trace import DEBATES_FILE, RunFolder

    folder = RunFolder(judge_run)
    record = folder.debates()[0].model_copy(update={"status": "failed", "error": "RuntimeError: boom",
                                                    "output": {}, "rounds": []})
    folder.append(DEBATES_FILE, record)
    folder.close()
    text = show(judge_run, "inc-001")
    assert text.startswith("judge_refine · item inc-001") and "error: RuntimeError: boom" in text
    assert "judge_round1.json" in text and "score.json" in text


@pytest.mark.parametrize("scores, line", [
    ([85, 90, 92], "Improvement Trajectory: 85 → 90 → 92 (+7 points over 3 rounds)"),
    ([85], "Improvement Trajectory: 85"),
    ([None, 60], "Improvement Trajectory: - → 60"),
    ([], "Improvement Trajectory: -"),
])
def test_trajectory_line(scores, line):
    assert trajectory_line(scores) == line


def test_the_transcript_marks_a_reply_that_was_cut_off_or_looped():
    from debatekit.records import transcript

    base = {"debate_id": "d", "agent": "a", "phase": "answer", "round": 1, "messages": [], "ts": 1.0,
            "output": {"answer": 4}, "text": "Answer: 4", "error": None}
    events = [{**base, "faults": ["parse", "cut_off"]},
              {**base, "agent": "b", "faults": ["parse", "loop", "parse", "loop"], "output": None, "error": "parse: x"},
              {**base, "agent": "c", "faults": []}]
    text = transcript.as_text(transcript.entries(events, "d"))
    assert "[reply] [cut off at the token limit (1x); answer from the repair request]" in text
    assert "[reply] [looped (2x, stopped while repeating itself); not repaired]" in text
    assert text.count("[reply]\n") == 1  # the healthy reply carries no mark


def test_the_transcript_shows_each_unreadable_reply_and_the_repair_prompt_before_the_last_reply():
    from debatekit.records import transcript

    event = {"debate_id": "d", "agent": "judge", "phase": "verdict", "round": 1, "messages": [], "ts": 1.0,
             "output": {"answer": "A"}, "text": "Answer: A", "error": None, "faults": ["parse"],
             "repairs": [{"text": "Answer: Neither", "error": "no `Answer: A` line",
                          "repair_prompt": "Your reply could not be used: no `Answer: A` line"}]}
    items = transcript.entries([event], "d")
    text = transcript.as_text(items)
    assert text.index("Answer: Neither") < text.index("[user: repair]") < text.index("[reply]\nAnswer: A")
    assert "[reply, not read: no `Answer: A` line]" in text
    assert "Answer: Neither" in transcript.as_html(items)
    assert "not read" not in transcript.as_text(transcript.entries([{**event, "repairs": []}], "d"))


def test_the_item_list_of_a_debate_ends_with_its_conformity_and_a_single_agent_run_has_none():
    studies = Path(__file__).resolve().parents[2] / "results" / "studies" / "gsm8k"
    lines = show(studies / "society_of_mind-agents3-rounds3-stop_on_agreementfalse-3ea484a1").splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("conformity: "))
    assert lines[at + 4].split()[:5] == ["rounds", "answers", "kept", "to", "majority"]
    assert lines[at + 6].split() == ["1->2", "297", "0.66", "0.07", "0.28", "1.00", "of", "1", "0.08", "of", "164",
                                     "0.58", "of", "24", "0.04", "of", "24", "+0.000", "[-0.034,", "+0.034]"]
    assert lines[at + 7].split()[:5] == ["2->3", "299", "0.82", "0.08", "0.10"] and len(lines) == at + 8
    assert "conformity" not in show(studies / "single-f36e1394")


def test_show_into_a_reader_that_stops_early_ends_quietly(tmp_path):
    """`debatekit show RUN | head -1`: no error line once the reader has gone, the exit status of a
    tool ended by SIGPIPE."""
    import subprocess
    import sys

    out = tmp_path / "r"
    assert main(["run", "single", "--dataset", "arithmetic", "--limit", "3", "--model", "scripted/schema",
                 "--out", str(out), "--quiet"]) == 0
    proc = subprocess.Popen([sys.executable, "-m", "debatekit.cli", "show", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before anything is written
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141 and err == ""


def test_show_and_compare_say_when_a_run_is_not_complete(tmp_path, capsys):
    """A killed run (run.json still `running`) is read for what it holds, with a line saying it is a part."""
    import json

    runs = dry_runs(tmp_path, "single", "society_of_mind")
    capsys.readouterr()
    assert main(["show", str(runs["single"])]) == 0
    assert "debates recorded" not in capsys.readouterr().out
    path = runs["society_of_mind"] / "run.json"
    record = json.loads(path.read_text())
    path.write_text(json.dumps({**record, "status": "running"}))
    assert main(["show", str(runs["society_of_mind"])]) == 0
    assert ("it is still being written, or its process was killed; 3 of 3 debates recorded (--resume continues it)"
            in capsys.readouterr().out)
    assert main(["compare", str(runs["single"]), str(runs["society_of_mind"])]) == 0
    (note,) = [line for line in capsys.readouterr().err.splitlines() if line.startswith("note:")]
    assert str(runs["society_of_mind"]) in note and "3 of 3 debates recorded" in note
