"""One debate run and scored: a protocol's `Outcome` becomes the `DebateRecord` a run keeps.

    calls = CallFaults()                     # fed each call event of the debate
    record = await run_debate(solver, item, debate, "society_of_mind", calls)

The protocol's answer is checked against the item's truth when the protocol left correctness open,
the debate gets its status from the calls that failed (`CallFaults`), and a protocol that raises,
or returns what cannot be stored, fails its own debate rather than the run.
"""

from __future__ import annotations

from typing import Any

from debatekit._base.answer_kinds import first_of_same
from debatekit.datasets.voting import answers_equal
from debatekit.engine import Debate, Outcome
from debatekit.models.errors import StopsRun
from debatekit.records.schemas import CallEvent, DebateRecord
from debatekit.records.storage import as_write_error


class CallFaults:
    """The calls of one debate that failed without a reply (errors, timeouts; not parse failures)."""

    def __init__(self):
        self.count, self.first = 0, None

    def add(self, event: CallEvent) -> None:
        if event.error and event.error_kind != "parse":
            self.count += 1
            self.first = self.first or event.error


async def run_debate(solver, item, debate: Debate, protocol: str, calls: CallFaults | None = None) -> DebateRecord:
    """Run one debate and score it; any exception becomes a failed record, never a crashed run,
    except `StopsRun` (a call that no debate may go on from), which stops it.

    Status: `failed` (the protocol raised), `error` (no final answer, and some calls failed
    without a reply: not scored, whatever correctness or score the protocol gave the missing
    answer), `degraded` (an answer despite failed calls: scored) or `ok`.
    """
    calls = calls or CallFaults()
    status, error, outcome = "ok", None, Outcome()
    try:
        outcome = await solver(item, debate)
    except StopsRun:
        raise  # not this debate's fault alone: the run stops, this debate unrecorded
    except Exception as exc:  # noqa: BLE001 - recorded on the debate, the run goes on
        if (stop := as_write_error(exc)) is not None:
            raise stop from exc  # the run folder cannot be written: the run stops (not this item's fault)
        status, error = "failed", f"{type(exc).__name__}: {exc}"
    outcome = outcome.model_copy(update={"final_answer": _plain(outcome.final_answer), "output": _plain(outcome.output)})
    if status == "ok" and calls.count:
        status, error = ("error", calls.first) if outcome.final_answer is None else ("degraded", None)
    truth = getattr(item, "answer", None)
    scored = status in ("ok", "degraded")
    correct = outcome.correct if scored else None
    if correct is None and truth is not None and scored:
        choices = getattr(item, "choices", None)  # options that read the same are one answer
        correct = outcome.final_answer is not None and answers_equal(first_of_same(outcome.final_answer, choices),
                                                                     first_of_same(truth, choices))
    score = outcome.score if scored and outcome.score is not None else None if correct is None else float(correct)
    record = DebateRecord(
        **{**dict(outcome), "correct": correct, "score": score},
        run_id=debate.run_id, debate_id=debate.debate_id, item_id=item.id, protocol=protocol,
        seed=debate.seed, status=status, error=error, rounds=debate.history, truth=truth,
        stop_reason=debate.stop_reason, usage=debate.usage, wall_s=round(debate.elapsed, 3), log=debate.log)
    try:
        record.model_dump_json()
    except (ValueError, TypeError) as exc:  # pydantic's serialization error included: this debate fails, not the run
        return record.model_copy(update={
            "final_answer": None, "output": {}, "correct": None, "score": None, "status": "failed",
            "error": f"{protocol} returned an answer or output that cannot be stored (item {item.id}): "
                     f"{str(exc).splitlines()[0]}"})
    return record


def _plain(value: Any) -> Any:
    """A protocol's answer or output with numpy scalars (`np.int64`, `np.bool_`) as the Python numbers
    they are, in lists and dicts too, so that they are stored and compared as such."""
    if type(value).__module__ == "numpy" and hasattr(value, "item") and getattr(value, "ndim", None) == 0:
        return value.item()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
