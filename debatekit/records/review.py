"""Human review of escalated debates (any protocol): a queue and verdicts kept in the run folder.

A debate whose `DebateRecord.needs_human_review` is set lands in `review_queue.jsonl` (the
runner appends it when the debate finishes). A human records a verdict with
`debatekit review RUN_DIR --item ID --verdict approve|reject|revise --note TEXT`, or in
Jupyter with `debatekit.analysis.widgets.review_form(RUN_DIR)`; verdicts are appended to `reviews.jsonl` (the latest
verdict per item counts) and the run summary in `run.json` gets the review counts.

    counts("runs/x")   # {"escalated": 2, "reviewed": 1, "review_pending": 1, "verdicts": {"approve": 1}}
"""

from __future__ import annotations

import getpass
import time
from pathlib import Path
from typing import Any, Callable, Literal

from pydantic import BaseModel

from debatekit.records.schemas import DebateRecord
from debatekit.records.storage import read_jsonl
from debatekit.records.trace import RunFolder, RunFolderError, inside

QUEUE_FILE, REVIEWS_FILE = "review_queue.jsonl", "reviews.jsonl"
VERDICTS = ("approve", "reject", "revise")
ReviewVerdict = Literal["approve", "reject", "revise"]


class ReviewItem(BaseModel):
    """An escalated debate waiting for a human: one line of review_queue.jsonl."""

    run_id: str
    debate_id: str
    item_id: str
    protocol: str
    escalation_reason: str | None = None
    final_answer: Any = None
    item_dir: str
    """Folder of the debate's own files, relative to the run folder (e.g. items/lc-001)."""
    queued: float


class Review(BaseModel):
    """A human verdict on one escalated debate: one line of reviews.jsonl."""

    item_id: str
    debate_id: str
    verdict: ReviewVerdict
    note: str = ""
    reviewer: str = ""
    ts: float


class ReviewError(ValueError):
    """A verdict cannot be recorded (unknown item, bad verdict, not a run folder)."""


def enqueue(folder: RunFolder, record: DebateRecord, item_dir: str) -> ReviewItem | None:
    """Put an escalated debate in the run's review queue (no-op for debates not escalated)."""
    if not record.needs_human_review:
        return None
    entry = ReviewItem(run_id=record.run_id, debate_id=record.debate_id, item_id=record.item_id,
                       protocol=record.protocol, escalation_reason=record.escalation_reason,
                       final_answer=record.final_answer, item_dir=item_dir, queued=time.time())
    folder.append(QUEUE_FILE, entry)
    return entry


def queue(run_dir: Path | str) -> list[ReviewItem]:
    """Escalated debates of a run, the latest entry per item (a resumed item supersedes)."""
    latest = {row["item_id"]: ReviewItem.model_validate(row) for row in read_jsonl(Path(run_dir) / QUEUE_FILE)}
    return list(latest.values())


def reviews(run_dir: Path | str) -> dict[str, Review]:
    """The latest verdict per item id."""
    return {row["item_id"]: Review.model_validate(row) for row in read_jsonl(Path(run_dir) / REVIEWS_FILE)}


def pending(run_dir: Path | str) -> list[ReviewItem]:
    """Queued debates without a verdict on that debate."""
    done = reviews(run_dir)
    return [q for q in queue(run_dir) if q.item_id not in done or done[q.item_id].debate_id != q.debate_id]


def counts(run_dir: Path | str) -> dict:
    """Escalated, reviewed and pending debates of a run, and the verdicts given."""
    queued, done = queue(run_dir), reviews(run_dir)
    reviewed = [done[q.item_id] for q in queued if q.item_id in done and done[q.item_id].debate_id == q.debate_id]
    verdicts = {v: sum(r.verdict == v for r in reviewed) for v in VERDICTS if any(r.verdict == v for r in reviewed)}
    return {"escalated": len(queued), "reviewed": len(reviewed), "review_pending": len(queued) - len(reviewed),
            "verdicts": verdicts}


def record_verdict(run_dir: Path | str, item_id: str, verdict: str, note: str = "",
                   reviewer: str | None = None) -> Review:
    """Record a human verdict on a queued item and refresh the review counts in run.json.

    Raises:
        ReviewError: the item is not in the review queue, or the verdict is not one of
            approve, reject, revise.
    """
    folder = RunFolder(run_dir)
    if verdict not in VERDICTS:
        raise ReviewError(f"verdict must be one of {', '.join(VERDICTS)}, got {verdict!r}")
    entry = next((q for q in queue(run_dir) if q.item_id == item_id), None)
    if entry is None:
        ids = ", ".join(q.item_id for q in queue(run_dir)) or "none"
        raise ReviewError(f"item {item_id!r} is not in the review queue of {folder.path} (queued: {ids})")
    review = Review(item_id=item_id, debate_id=entry.debate_id, verdict=verdict, note=note,
                    reviewer=user() if reviewer is None else reviewer, ts=time.time())
    try:
        try:
            folder.lock()
            running = False
        except RunFolderError:  # a run is writing the folder: it counts the verdicts itself when it ends
            running = True
        folder.append(REVIEWS_FILE, review)
        if folder.exists and not running:  # keep the run summary's review counts current
            run = folder.read_run()
            run.summary = {**run.summary, **counts(run_dir)}
            folder.write_run(run)
    finally:
        folder.close()
    return review


def describe(run_dir: Path | str, entry: ReviewItem, shows: Callable[[Path], list[str]] | None = None) -> str:
    """What a reviewer reads: the escalation, the final answer and what the protocol shows of the
    debate (`shows`: the protocol's `Views.review`, which reads the debate's folder).

    Raises:
        RunFolderError: the queue entry's `item_dir` leads out of the run folder.
    """
    lines = [f"item {entry.item_id} ({entry.protocol}, debate {entry.debate_id})",
             f"escalation: {entry.escalation_reason or '-'}",
             f"final answer: {entry.final_answer if entry.final_answer is not None else '-'}"]
    folder = inside(run_dir, entry.item_dir, f"{Path(run_dir) / QUEUE_FILE}, item {entry.item_id!r}")
    root = Path(run_dir).resolve()
    for path in sorted(folder.rglob("*")) if folder.is_dir() else []:
        if path.is_symlink() and not path.resolve().is_relative_to(root):
            raise RunFolderError(f"{path} links out of the run folder {run_dir}; a review reads only the run's own files")
    if shows is not None:
        try:
            lines.extend(shows(folder))
        except RecursionError:  # a summary nested thousands deep: one line, not a traceback
            raise RunFolderError(f"{folder}: a file of the debate is nested too deeply to read") from None
    other = sorted(p.name for p in folder.glob("*.json")) if folder.is_dir() else []
    if other:
        lines.append(f"files: {', '.join(other)}")
    return "\n".join(lines)



def user() -> str:
    """The login name, or empty where a container has none."""
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no login name in some containers
        return ""
