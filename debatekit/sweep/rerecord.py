"""Keep a recorded run current: check it against today's code, and record again only what changed.

    check = rerecord("results/examples/judge_refine-incidents", ask_model=False)  # no model
    check.stale, check.describe()
    rerecord("results/examples/judge_refine-incidents")  # asks the model for the stale calls only

The run's debates are run again by today's protocol (`debatekit.models.recorded`): a call whose
prompt the run recorded is answered with the recorded reply and read by today's reader. The
recording is stale when today's run asks a prompt the run did not record (a protocol's prompt
changed), no longer makes a call the run recorded, reads a recorded reply differently enough to
change a debate's outcome, or cannot read a reply it once read (counted as a parse failure, not
sent back for repair: a new reading costs no model call).

Recording again (`ask_model=True`, `debatekit rerecord FOLDER`) asks the run's model only the
prompts with no recorded reply, and the repairs of their replies; every other call is played back.
The folder is then replaced whole by the new run (its config unchanged), so the next check passes.
A fresh recording is left untouched. A fork (`debatekit.sweep.forks`) is run again with its
intervention (`as_forked`); its rounds before the fork round are its parent's, played back as the
parent read them and never asked of the model: where today's protocol asks them otherwise, recording
the fork again fails, naming the first such call (record the parent again, then fork it again).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from debatekit import __version__
from debatekit.analysis import summarize
from debatekit.datasets import DatasetError
from debatekit.models.gateway import Gateway
from debatekit.models.recorded import READ_FAULTS, Recorded
from debatekit.records import review
from debatekit.records.schemas import DebateRecord, RunRecord, cut_offs
from debatekit.records.storage import write_json_atomic
from debatekit.records.trace import (DEBATES_FILE, EVENTS_FILE, LOCK_FILE, RUN_FILE, RunFolder, RunFolderError,
                                     git_commit, now)
from debatekit.runner import connection_options, run
from debatekit.sweep.forks.forking import as_forked
from debatekit.sweep.forks.interventions import Applied
from debatekit.sweep.rescore import READING

COMPARED = ("final_answer", "score", "correct", "stop_reason", "converged", "needs_human_review", "rounds")
"""What a debate record decides, compared between the recording and today's run of it."""


@dataclass
class Rerecord:
    """What running a recording again with today's code found (`rerecord`)."""

    folder: Path
    debates: int = 0
    calls: int = 0
    """Calls the recording holds for its last debate per item and seed."""
    asked: list[tuple] = field(default_factory=list)
    """Where today's run asked a prompt the recording has no reply for: (item, seed, agent, phase, round)."""
    unasked: list[tuple] = field(default_factory=list)
    """Where the recording holds a reply that today's run did not ask for."""
    unreadable: list[tuple] = field(default_factory=list)
    """Where a recorded reply that read in the run no longer reads (a parse failure now)."""
    changed: list[str] = field(default_factory=list)
    """Debates whose outcome differs from the recording's, one line each."""
    written: bool = False
    debates_now: list[DebateRecord] = field(default_factory=list, repr=False)
    """Today's run of the recording: its debate records, call events and the files its protocol wrote
    under `items/` (paths relative to the run folder), for checks beyond the outcomes."""
    events_now: list[dict] = field(default_factory=list, repr=False)
    files_now: list[str] = field(default_factory=list, repr=False)

    @property
    def stale(self) -> bool:
        return bool(self.asked or self.unasked or self.unreadable or self.changed)

    def describe(self) -> str:
        def where(places):
            first = places[0]
            return f"{len(places)} (first: item {first[0]}, {first[2]} {first[3]} round {first[4]})"

        if not self.stale:
            return f"{self.folder}: current; {self.debates} debates played back from {self.calls} recorded calls"
        parts = []
        if self.asked:
            parts.append(f"prompts not recorded {where(self.asked)}")
        if self.unasked:
            parts.append(f"recorded calls not made {where(self.unasked)}")
        if self.unreadable:
            parts.append(f"recorded replies no longer read {where(self.unreadable)}")
        if self.changed:
            parts.append(f"outcomes changed {len(self.changed)} (first: {self.changed[0]})")
        state = "recorded again" if self.written else "stale"
        return f"{self.folder}: {state}; " + "; ".join(parts)


def rerecord(path: Path | str, *, ask_model: bool = True) -> Rerecord:
    """Run the recording in `path` again with today's code (see the module); with `ask_model`, a
    stale recording is recorded again, asking the model only for what it does not hold.

    Raises:
        RunFolderError: not a finished run's folder, a run writing there, or its dataset is gone.

    The dataset may have changed since the recording where the run's items did not: an item whose
    text changed shows as prompts not recorded.
    """
    folder = RunFolder(path)
    if not (folder.path / "run.json").is_file():
        raise RunFolderError(f"{folder.path} is not a run folder (no run.json)")
    if ask_model:
        folder.lock()  # no run may write here while it is run again and replaced
    try:
        record = folder.read_run()
        if record.status != "complete":
            raise RunFolderError(f"{folder.path}: the run is {record.status}; finish it with --resume before "
                                 "recording it again")
        forked = as_forked(folder, record)  # a fork: its rounds before the fork round are its parent's, as read
        if forked is not None and ask_model:  # checked first, with no model: they are never asked of it
            check = _rerecord(folder, record, forked, ask_model=False)
            _before_fork(folder, check.asked, forked.at_round)
            if not check.stale:
                return check  # nothing to record: the check was the whole run
            forked = as_forked(folder, record)  # made afresh: an intervention may keep state between debates
        return _rerecord(folder, record, forked, ask_model)
    finally:
        folder.close()


def _rerecord(folder: RunFolder, record: RunRecord, forked: Applied | None, ask_model: bool) -> Rerecord:
    config = record.config.model_copy(update={"model": record.model})
    old = folder.debates()
    seed_of = {d.debate_id: d.seed_under(config.seed) for d in old}
    rows = [(line, e) for line, e in folder.event_lines() if e.get("debate_id") in seed_of]
    events = [e for _, e in rows]
    fallback = None
    if ask_model:
        fallback = Gateway(cache=None, concurrency=config.max_calls_in_flight, timeout=config.call_timeout,
                           model_options=config.model_options)
        if options := connection_options(config):
            fallback.add_options(record.model, options)
    gateway = Recorded(events, seed_of, default_seed=config.seed, fallback=fallback, unread_fails=True,
                       lost_as_last=True, as_read_before=forked.at_round if forked else None)
    result = Rerecord(folder.path, debates=len(old), calls=len(events))
    scratch = Path(tempfile.mkdtemp(prefix=".rerecord-", dir=folder.path.parent))
    try:
        try:
            again = run(config, scratch / "run", gateway=gateway, progress=False,
                        only={(d.item_id, seed_of[d.debate_id]) for d in old},
                        intervention=forked)
        except DatasetError as exc:
            raise RunFolderError(f"cannot run {folder.path} again: {exc}") from exc
        result.asked = gateway.live or gateway.missing
        result.unasked = gateway.unasked()
        result.unreadable = gateway.unreadable
        result.changed = _changed(old, again.debates, seed_of)
        result.debates_now, result.events_now = again.debates, RunFolder(again.path).events()
        result.files_now = sorted(str(f.relative_to(again.path)) for f in (again.path / "items").rglob("*")
                                  if f.is_file())
        if ask_model and result.stale:
            _write(folder, record, again.path, rows, old, seed_of, result)
            result.written = True
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return result


def _before_fork(folder: RunFolder, asked: list[tuple], at_round: int) -> None:
    """Refuse to record a fork again where today's protocol asks a round before its fork round otherwise
    than its parent recorded it (`asked`: where a call found no recorded reply)."""
    early = [where for where in asked if where[4] is not None and where[4] < at_round]
    if early:
        item, _, agent, phase, round = early[0]
        raise RunFolderError(f"{folder.path} is a fork, and today's protocol asks {len(early)} call(s) before its "
                             f"fork round {at_round} that its parent did not record (first: {agent} {phase} round "
                             f"{round}, item {item}); record the parent again, then fork it again")


def _changed(old: list[DebateRecord], new: list[DebateRecord], seed_of: dict) -> list[str]:
    """A line for each debate whose outcome differs, or that today's run did not finish."""
    after = {(d.item_id, d.seed): d.model_dump(mode="json") for d in new}
    lines = []
    for d in old:
        before, now = d.model_dump(mode="json"), after.get((d.item_id, seed_of[d.debate_id]))
        if now is None:
            lines.append(f"item {d.item_id}: not run again")
            continue
        differ = _differ(before, now)
        if differ:
            shown = [f"{k} {before.get(k)!r} -> {now.get(k)!r}" for k in differ if k != "rounds"]
            lines.append(f"item {d.item_id}: " + (", ".join(shown) or "its rounds differ"))
    return lines


def _differ(before: dict, after: dict) -> list[str]:
    """The fields of `COMPARED` in which two records of one debate (as JSON) differ."""
    return [k for k in COMPARED if before.get(k) != after.get(k)]


def _write(folder: RunFolder, record: RunRecord, new: Path, rows: list[tuple[str, dict]], old: list[DebateRecord],
           seed_of: dict, result: Rerecord) -> None:
    """Make the new run the recording, keeping the work the recording did where it was played back:
    a played-back call keeps its recorded event (times, tokens, ids) with today's reading, and a
    debate whose calls were all played back keeps its wall time and work counts. run.json keeps the
    run's identity and says what was recorded again (`RunRecord.rerecords`)."""
    recorded: dict[tuple, list[tuple[int, dict]]] = {}
    for k, (_, e) in enumerate(rows):
        recorded.setdefault(_call(e), []).append((k, e))
    merged: list[tuple[int, dict]] = []
    asked: set[str] = set()  # debates with a call the model answered
    reread: set[str] = set()  # debates with a recorded reply read otherwise today
    for k, e in enumerate(result.events_now):  # today's run, as its folder holds it
        matched = recorded.get(_call(e)) if e.get("cache_hit") else None  # played back, not asked of the model
        if matched:
            at, was = matched.pop(0)
            if any(was.get(key) != e.get(key) for key in READING):
                reread.add(e["debate_id"])
                was = _reread(was, e)
            merged.append((at, {**was, "debate_id": e["debate_id"]}))
        else:
            asked.add(e["debate_id"])
            merged.append((len(rows) + k, e))
    before = {(d.item_id, seed_of[d.debate_id]): (k, d) for k, d in enumerate(old)}
    lines = {json.loads(line)["debate_id"]: line for line in _lines(folder.path / DEBATES_FILE)}  # the last per id
    debates, ids = [], {}
    for d in result.debates_now:
        at, was = before.get((d.item_id, d.seed), (len(old), None))
        update = {"run_id": record.run_id}
        if was is not None and d.debate_id not in asked | reread and not _differ(was.model_dump(mode="json"), d.model_dump(mode="json")):  # as recorded, line for line
            ids[d.debate_id] = was.debate_id
            debates.append((at, lines[was.debate_id]))
            continue
        if was is not None and d.debate_id not in asked:  # all played back: the recorded debate, read today
            calls = [e for _, e in merged if e["debate_id"] == d.debate_id]
            update |= {"debate_id": was.debate_id, "wall_s": was.wall_s,
                       "usage": was.usage.model_copy(update=_read_usage(calls))}
        ids[d.debate_id] = update.get("debate_id", d.debate_id)
        debates.append((at, d.model_copy(update=update).model_dump_json() + "\n"))
    def line(at: int, e: dict) -> str:
        e = {**e, "run_id": record.run_id, "debate_id": ids.get(e["debate_id"], e["debate_id"])}
        if at < len(rows) and rows[at][1] == e:  # as recorded: its line as it was
            return rows[at][0]
        return json.dumps(e, ensure_ascii=False, separators=(",", ":")) + "\n"

    (new / EVENTS_FILE).write_text("".join(line(at, e) for at, e in sorted(merged, key=lambda pair: pair[0])),
                                   encoding="utf-8")
    (new / DEBATES_FILE).write_text("".join(line for _, line in sorted(debates, key=lambda pair: pair[0])),
                                    encoding="utf-8")
    record.rerecords.append({"at": now(), "git_commit": git_commit(), "debatekit_version": __version__,
                             "debates": result.debates, "asked": len(result.asked), "unasked": len(result.unasked),
                             "unreadable": len(result.unreadable), "changed": len(result.changed)})
    record.summary |= summarize(RunFolder(new).debates()) | review.counts(new)
    write_json_atomic(new / RUN_FILE, record)
    (new / LOCK_FILE).unlink(missing_ok=True)
    aside = folder.path.with_name(f".{folder.path.name}.old-{os.getpid()}")
    folder.path.rename(aside)
    new.rename(folder.path)
    shutil.rmtree(aside)


def _reread(was: dict, now: dict) -> dict:
    """A recorded call event with today's reading of its replies (`now`: the same call played back).

    A call recorded attempt by attempt takes today's reading whole. One repaired before repairs were
    recorded was played back from its last reply alone: the readings that failed before it are the
    work it did and stay, and only the last reply's reading is today's."""
    if "repairs" in was or not was.get("parse_failures"):
        return {**was, **{key: now.get(key) for key in (*READING, "repairs")}}
    faults = list(was.get("faults") or [])
    if was.get("error_kind") == "parse" and "parse" in faults:  # its last reply did not read then
        last = len(faults) - 1 - faults[::-1].index("parse")
        faults = faults[:last] + [f for f in faults[last + 1:] if f not in READ_FAULTS]
    faults += [f for f in now.get("faults") or [] if f in READ_FAULTS]
    return {**was, "output": now.get("output"), "error": now.get("error"), "error_kind": now.get("error_kind"),
            "faults": faults, "parse_failures": faults.count("parse")}


def _read_usage(events: list[dict]) -> dict:
    """A debate's counts that depend on how its replies were read, from its call events."""
    faults = [f for e in events for f in e.get("faults") or []]
    cut = [cut_offs(e) for e in events]
    return {"parse_failures": faults.count("parse"), "cut_off": None if None in cut else sum(cut),
            "cut_off_unread": faults.count("cut_off"), "echoes": sum(bool(e.get("echo")) for e in events),
            "looped": faults.count("loop"), "errors": sum(e.get("error") is not None for e in events)}


def _lines(path: Path) -> list[str]:
    """The lines of a JSONL file that hold an object, each ending in a newline."""
    return [line if line.endswith("\n") else line + "\n" for line in path.read_text(encoding="utf-8").split("\n")
            if line.strip().startswith("{")]


def _call(event: dict) -> tuple:
    """Where a call happened and what it asked (its prompt's hash), across two runs of one debate."""
    return (event.get("item_id"), event.get("agent"), event.get("phase"), event.get("round"), event.get("prompt_hash"))
