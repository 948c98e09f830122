"""Human review: queue filled by the runner for escalated debates (any protocol), verdicts by CLI and form."""

import json

import pytest

from debatekit import registry
from debatekit.analysis import widgets
from debatekit.cli.app import main
from debatekit.engine import Outcome
from debatekit.protocols.cross_critique.review import review_lines
from debatekit.records import review
from debatekit.records.schemas import RunConfig
from debatekit.runner import run


@pytest.fixture
def escalating_protocol():
    """A test protocol (registered for the test only): escalates items whose answer is odd."""
    def factory():
        async def run_one(item, debate):
            debate.write("debate_summary.json", {"conflicts": [{"critic": "A", "target": "B", "severity": "CRITICAL",
                                                                "description": "norms clash"}],
                                                 "agreed_claims": [], "disputed_claims": []})
            odd = item.answer % 20 != 0
            return Outcome(final_answer=item.answer, needs_human_review=odd,
                           escalation_reason="odd answer" if odd else None)
        return run_one

    registry.protocol("_escalate_odd", views=registry.Views(review=review_lines))(factory)
    yield "_escalate_odd"
    registry._protocols.pop("_escalate_odd", None)


@pytest.fixture
def escalated_run(tmp_path, arithmetic_file, escalating_protocol):
    """A run of three items; q1 and q3 (answers 10, 30) are escalated, q2 is not."""
    out = tmp_path / "run"
    run(RunConfig(protocol=escalating_protocol, dataset=str(arithmetic_file), model="scripted/schema", concurrency=1), out,
        progress=False)
    return out


def test_runner_queues_escalated_debates_and_counts_them(escalated_run):
    assert sorted(q.item_id for q in review.queue(escalated_run)) == ["q1", "q3"]
    entry = next(q for q in review.queue(escalated_run) if q.item_id == "q1")
    assert entry.escalation_reason == "odd answer" and entry.protocol == "_escalate_odd" and entry.item_dir == "items/q1"
    summary = json.loads((escalated_run / "run.json").read_text())["summary"]
    assert (summary["escalated"], summary["reviewed"], summary["review_pending"]) == (2, 0, 2)
    assert summary["needs_human_review"] == 2


def test_verdicts_are_kept_and_counted(escalated_run):
    review.record_verdict(escalated_run, "q1", "revise", "cite the KHI", reviewer="ana")
    assert [p.item_id for p in review.pending(escalated_run)] == ["q3"]
    rows = [json.loads(line) for line in (escalated_run / "reviews.jsonl").read_text().splitlines()]
    assert rows[0]["item_id"] == "q1" and rows[0]["verdict"] == "revise" and rows[0]["note"] == "cite the KHI"
    assert rows[0]["reviewer"] == "ana"
    summary = json.loads((escalated_run / "run.json").read_text())["summary"]
    assert (summary["escalated"], summary["reviewed"], summary["review_pending"]) == (2, 1, 1)
    assert summary["verdicts"] == {"revise": 1}
    review.record_verdict(escalated_run, "q1", "approve", reviewer="ana")  # a later verdict supersedes
    assert review.counts(escalated_run)["verdicts"] == {"approve": 1}


def test_bad_verdicts_are_refused(escalated_run):
    with pytest.raises(review.ReviewError, match="not in the review queue"):
        review.record_verdict(escalated_run, "q2", "approve")
    with pytest.raises(review.ReviewError, match="verdict must be one of"):
        review.record_verdict(escalated_run, "q1", "maybe")


def test_cli_lists_shows_and_records(escalated_run, capsys):
    assert main(["review", str(escalated_run)]) == 0
    out = capsys.readouterr().out
    assert "q1" in out and "odd answer" in out and "q2" not in out and "escalated 2, reviewed 0, pending 2" in out
    assert main(["review", str(escalated_run), "--show", "q3"]) == 0
    out = capsys.readouterr().out
    assert "escalation: odd answer" in out and "conflicts (1):" in out and "[CRITICAL] norms clash" in out
    assert main(["review", str(escalated_run), "--item", "q3", "--verdict", "reject", "--note", "wrong",
                 "--reviewer", "bo"]) == 0
    assert "recorded reject for q3" in capsys.readouterr().out
    assert review.reviews(escalated_run)["q3"].note == "wrong"
    assert main(["review", str(escalated_run), "--item", "q2", "--verdict", "approve"]) == 2
    assert "debatekit: error: item 'q2' is not in the review queue" in capsys.readouterr().err


def test_cli_interactive(escalated_run, monkeypatch, capsys):
    answers = iter(["x", "a", "fine", "s"])
    monkeypatch.setattr("builtins.input", lambda prompt="": next(answers))
    assert main(["review", str(escalated_run), "--interactive", "--reviewer", "cy"]) == 0
    assert {k: v.verdict for k, v in review.reviews(escalated_run).items()} == {"q1": "approve"}
    assert "escalated 2, reviewed 1, pending 1" in capsys.readouterr().out


def test_form_records_a_verdict_through_its_traits(escalated_run):
    form = widgets.review_form(escalated_run)
    assert list(form.item.options) == [("q1 - _escalate_odd", "q1"), ("q3 - _escalate_odd", "q3")]
    form.item.value = "q3"
    assert "odd answer" in form.details.value and "norms clash" in form.details.value
    form.submit.click()  # no verdict chosen yet: nothing recorded
    assert "choose" in form.status.value and not (escalated_run / "reviews.jsonl").exists()
    form.verdict.value = "revise"
    form.note.value = "needs the adat view"
    form.reviewer.value = "dee"
    form.submit.click()
    saved = review.reviews(escalated_run)["q3"]
    assert (saved.verdict, saved.note, saved.reviewer) == ("revise", "needs the adat view", "dee")
    assert list(form.item.options) == [("q1 - _escalate_odd", "q1")] and form.verdict.value is None
    assert "recorded revise for q3" in form.status.value and "reviewed 1, pending 1" in form.status.value


def test_a_run_without_escalations_has_an_empty_queue(tmp_path, arithmetic_file):
    result = run(RunConfig(protocol="single", dataset=str(arithmetic_file), model="scripted/schema", limit=1),
                 tmp_path / "run", progress=False)
    assert not (tmp_path / "run" / review.QUEUE_FILE).exists()
    assert result.summary.escalated == 0 and result.summary.reviewed == 0


def test_review_of_a_folder_that_holds_no_run_is_one_line(tmp_path, capsys):
    assert main(["review", str(tmp_path)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == f"debatekit: error: {tmp_path} is not a run folder (no run.json)"
