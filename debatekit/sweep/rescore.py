"""Read a finished run again with today's code, from its recorded replies, without a model.

    result = rescore("results/studies/gsm8k/mad-80e891df")            # what would change
    result = rescore("results/studies/gsm8k/mad-80e891df", write=True)  # and change it

Each debate the run recorded is run again by its protocol, with every call answered by the reply
recorded for the same place and prompt (`debatekit.models.recorded`); no model is asked. The
replies are read by today's answer readers and the protocol decides again, so a run recorded
before a reader was mended gets the answers that reader gives now; a run whose readings did not
change comes out the same, answer for answer (the replay check of a study).

A fork (`debatekit.sweep.forks`) is run again with its intervention, fork round and resampled seeds
(`as_forked`), so that its own recorded calls play back; its parent run must be where its run.json says.
Its rounds before the fork round are its parent's and keep the parent's readings: only the rounds it
asked of a model are read again.

A debate is played back whole or not at all. If its protocol asks for a reply that was never
recorded (it showed an agent a reading that has since changed, or took another path), leaves a
recorded call unasked, or reads a reply in fewer or more attempts than the run did (a reply that
needed a repair reads now, or one that read needs one), the debate is `kept`: it keeps its
record, and only the model can score it again (drop its records and `--resume`).

With `write`, each debate played back whole replaces its record, and each of its call events
takes the new reading (`output`, the reading's faults and errors), keeping the work as it was
done (ids, times, tokens, calls, replies, retries), so that a study's compute tables do not
change; every other line stays byte for byte, and `run.json` gains a `rescores` entry (a sweep
point's sidecar, `<point>.json` beside it, takes the run's new summary). A run whose summary gives
other scores or intervals than today's summary of its debates (`SCORED`; older interval code) is
written too, so that its `run.json` states today's figures. A debate
whose protocol keeps files of its own under `items/` or that is escalated to human review (in
the run or played back) is kept as it is: neither is rewritten.
"""

from __future__ import annotations

import json
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from debatekit._base import files
from debatekit import __version__
from debatekit.analysis import summarize
from debatekit.datasets import DatasetError
from debatekit.models.recorded import NOT_RECORDED, READ_FAULTS, Recorded, place
from debatekit.records.schemas import DebateRecord, RunRecord, cut_offs
from debatekit.records.trace import RunFolder, RunFolderError, git_commit, item_folder_name, now
from debatekit.runner import run
from debatekit.sweep.forks.forking import as_forked

READING = ("output", "parse_failures", "faults", "error", "error_kind", "cut_off", "echo")
"""What a call event says about how its reply was read; the rest is the work of the call (its
faults other than `READ_FAULTS` too: retries, timeouts)."""
READ_USAGE = ("parse_failures", "cut_off", "cut_off_unread", "echoes", "looped", "errors")
"""The counts of a debate's usage that depend on how its replies were read."""
DECIDED = ("final_answer", "correct", "status", "converged", "stop_reason")
"""What a debate record decides that a change of reading may change, reported per debate."""


@dataclass
class Rescore:
    """What playing back a run's recorded replies gave (`rescore`)."""

    folder: Path
    debates: int = 0
    calls: int = 0
    changed: list[dict] = field(default_factory=list)
    """Debates whose answer, correctness or status changed: item, seed, and each (before, after)."""
    readings: list[dict] = field(default_factory=list)
    """Calls whose reply reads differently: where (item, agent, phase, round), output before and after."""
    kept: list[dict] = field(default_factory=list)
    """Debates not played back whole, or not to be rewritten: item, seed and why; they keep their readings."""
    events_updated: int = 0
    """Call events whose reading record changes (its output, faults, cut-off count or echo flag), or
    gains such a field recorded since its run."""
    events_changed: int = 0
    """Of them, those where a field the event has reads otherwise today."""
    written: bool = False

    def describe(self) -> str:
        fixes = Counter((c["correct"][0], c["correct"][1]) for c in self.changed)
        seeds = len({k["seed"] for k in [*self.changed, *self.readings, *self.kept]}) > 1
        where = (lambda r: f"{r['item_id']} seed {r['seed']}") if seeds else (lambda r: r["item_id"])
        lines = [f"{self.folder}: {self.debates - len(self.kept)} of {self.debates} debates played back whole from "
                 f"{self.calls} recorded calls (no model); {len(self.changed)} changed ({fixes[False, True]} wrong -> "
                 f"right, {fixes[True, False]} right -> wrong), {len(self.readings)} replies read differently, "
                 f"{len(self.kept)} kept as recorded"
                 + (f", {self.events_changed} call records change (faults, cut-off counts, echo flags)"
                    if self.events_changed else "")
                 + (f", {self.events_updated - self.events_changed} gain fields recorded since their run"
                    if self.events_updated > self.events_changed else "") + ("; written" if self.written else "")]
        lines += [f"  debate {where(c)}: " + ", ".join(f"{k} {c[k][0]!r} -> {c[k][1]!r}" for k in DECIDED
                                                      if c[k][0] != c[k][1]) for c in self.changed]
        lines += [f"  reply {where(r)} {r['agent']} {r['phase']} round {r['round']}: "
                  f"{_difference(r['before'], r['after'])}" for r in self.readings]
        lines += [f"  kept {where(k)}: {k['why']}" for k in self.kept]
        return "\n".join(lines)


def rescore(path: Path | str, write: bool = False) -> Rescore:
    """Play back the run in `path` from its recorded replies (see the module).

    Raises:
        RunFolderError: not a finished run's folder, a run writing there, or a dataset changed since.
    """
    folder = RunFolder(path)
    if not (folder.path / "run.json").is_file():
        raise RunFolderError(f"{folder.path} is not a run folder (no run.json)")
    if write:
        folder.lock()  # no run may write here while it is read, played back and rewritten
    try:
        return _rescore(folder, folder.read_run(), write)
    finally:
        folder.close()


def _rescore(folder: RunFolder, record: RunRecord, write: bool) -> Rescore:
    # no model is asked: no cache, no server, no key (a run made with an API key replays without it)
    config = record.config.model_copy(update={"model": record.model, "cache": False, "api_base": None,
                                              "api_key_env": None, "model_options": {}})
    old = folder.debates()
    old_by_id = {d.debate_id: d for d in old}
    seed_of = {d.debate_id: d.seed_under(config.seed) for d in old}
    events = [e for e in folder.events() if e.get("debate_id") in seed_of]
    result = Rescore(folder.path, debates=len(old), calls=len(events))
    if not old:
        return result
    # a reply that reads today as it did not in the run fails as unreadable: a rescore asks for no repair
    forked = as_forked(folder, record)  # a fork: its rounds before the fork round are its parent's, as read
    gateway = Recorded(events, seed_of, default_seed=config.seed, unread_fails=True,
                       as_read_before=forked.at_round if forked else None)
    with tempfile.TemporaryDirectory(prefix="debatekit-rescore-") as tmp:
        try:
            again = run(config, Path(tmp) / "run", gateway=gateway, progress=False,
                        only={(d.item_id, seed_of[d.debate_id]) for d in old},
                        intervention=forked)
        except DatasetError as exc:
            raise RunFolderError(f"cannot rescore {folder.path}: {exc}") from exc
        if again.record.dataset.sha256 != record.dataset.sha256:
            raise RunFolderError(f"cannot rescore {folder.path}: dataset {again.record.dataset.path} "
                                 "changed since the run")
        new_events = RunFolder(again.path).events()
    new_by_place = {(d.item_id, d.seed): d for d in again.debates}
    by_debate: dict[str, list[dict]] = {}
    for e in [*events, *new_events]:  # debate ids are random: the recorded and the new never meet
        by_debate.setdefault(e["debate_id"], []).append(e)

    replaced: dict[str, tuple[DebateRecord, dict[tuple, dict]]] = {}
    for d in old:
        seed = seed_of[d.debate_id]
        new = new_by_place.get((d.item_id, seed))
        after = by_debate.get(new.debate_id, []) if new else []
        why, pairs = _pair(by_debate.get(d.debate_id, []), after, seed)
        if new is None or why:
            result.kept.append({"item_id": d.item_id, "seed": d.seed, "why": why or "not played back"})
            if (counted := _counted_cut_offs(d, by_debate.get(d.debate_id, []))) is not None:
                replaced[d.debate_id] = (counted, {})
            continue
        if write and (why := _own_files(folder, d, new)):
            result.kept.append({"item_id": d.item_id, "seed": d.seed, "why": why})
            continue
        for b, a in pairs:
            if b.get("output") != a.get("output"):
                result.readings.append({"item_id": d.item_id, "seed": d.seed, "agent": b["agent"], "phase": b["phase"],
                                        "round": b["round"], "before": b.get("output"), "after": a.get("output")})
        if any(_plain(getattr(d, k)) != _plain(getattr(new, k)) for k in DECIDED):
            result.changed.append({"item_id": d.item_id, "seed": d.seed,
                                   **{k: (_plain(getattr(d, k)), _plain(getattr(new, k))) for k in DECIDED}})
        usage = d.usage.model_copy(update={k: getattr(new.usage, k) for k in READ_USAGE})
        rescored = new.model_copy(update={"run_id": d.run_id, "debate_id": d.debate_id, "seed": d.seed,
                                          "wall_s": d.wall_s, "usage": usage})
        readings = {_identity(b): _reading(b, a) for b, a in pairs}
        for b, _ in pairs:
            differ = [k for k in READING if b.get(k) != readings[_identity(b)][k]]
            result.events_updated += bool(differ)
            result.events_changed += any(k in b for k in differ)  # not only a field recorded since the run
        replaced[d.debate_id] = (rescored, readings)
    if write and (result.changed or result.readings or result.events_updated or _stale(record.summary, old) or
                  any(old_by_id[i].usage != new.usage for i, (new, _) in replaced.items())):
        _write(folder, replaced, result, record)
        result.written = True
    return result


SCORED = ("accuracy", "accuracy_ci", "score", "score_ci")
"""What a run's summary says of its scores: `rescore --write` brings it to today's intervals."""


def _stale(summary: dict, debates: list[DebateRecord]) -> bool:
    """Whether `summary` gives scores or intervals other than today's `summarize` of `debates` (a run
    summarised by older interval code)."""
    today = summarize(debates)
    return any(summary.get(key) != today[key] for key in SCORED)


def _counted_cut_offs(debate: DebateRecord, events: list[dict]) -> DebateRecord | None:
    """A kept debate recorded before every cut-off reply was counted, with its count taken from its call
    events (how each reply ended is work done, not a reading); None if it has its count or they cannot say."""
    counts = [cut_offs(e) for e in events]
    if debate.usage.cut_off is not None or None in counts:
        return None
    return debate.model_copy(update={"usage": debate.usage.model_copy(update={"cut_off": sum(counts)})})


def _pair(before, after: list[dict], seed) -> tuple[str | None, list[tuple[dict, dict]]]:
    """Each recorded call of a debate with its played-back call (same place, same prompt, as many
    attempts), or why not."""
    if failed := [a for a in after if a.get("error_kind") == NOT_RECORDED]:
        return f"{len(failed)} call(s) not played back; first: {failed[0]['error'].partition(': ')[2]}", []
    waiting: dict[tuple, list[dict]] = {}
    for a in after:
        waiting.setdefault(_place(a, seed), []).append(a)
    pairs = []
    for b in before:
        match = waiting.get(_place(b, seed))
        if not match:
            return f"the recorded call of {b['agent']} ({b['phase']}, round {b['round']}) was not asked again", []
        a = match.pop(0)
        if len(a.get("repairs") or []) != len(b.get("repairs") or []):
            return (f"the reply of {b['agent']} ({b['phase']}, round {b['round']}) reads in "
                    f"{len(a.get('repairs') or []) + 1} attempt(s) where the run took {len(b.get('repairs') or []) + 1}"), []
        pairs.append((b, a))
    if extra := sum(len(v) for v in waiting.values()):
        return f"{extra} call(s) more than recorded", []
    return None, pairs


def _reading(before: dict, after: dict) -> dict:
    """The new reading of a recorded call: its output, errors and reading faults from the play-back,
    its other faults (retries, timeouts) as recorded."""
    faults = [f for f in before.get("faults") or [] if f not in READ_FAULTS]
    reading = {**{k: after.get(k) for k in READING},
               "faults": faults + [f for f in after.get("faults") or [] if f in READ_FAULTS]}
    if "repairs" not in before:  # recorded before repairs were: it had none (a pair reads in as many attempts),
        reading["repairs"] = []  # and a reply unread now was not sent back, which a later play-back must know
    return reading


def _own_files(folder: RunFolder, old: DebateRecord, new: DebateRecord) -> str | None:
    """Why `--write` leaves a debate alone: files of its own that a rescore does not rewrite."""
    if (folder.path / "items" / item_folder_name(old.item_id)).exists():
        return "its protocol keeps files of its own under items/, which a rescore does not rewrite"
    if old.needs_human_review or new.needs_human_review:
        return "escalated to human review, whose queue a rescore does not rewrite"
    return None


def _place(event: dict, seed) -> tuple:
    return place(event["item_id"], seed, event["agent"], event["phase"], event["round"], event.get("messages") or [])


def _write(folder: RunFolder, replaced: dict, result: Rescore, record: RunRecord) -> None:
    """Put the played-back debates and readings in the run's files, and say so in run.json."""
    readings = {key: reading for _, changes in replaced.values() for key, reading in changes.items()}

    def event(row: dict) -> dict | None:
        reading = readings.get(_identity(row))
        return None if reading is None or all(row.get(k) == v for k, v in reading.items()) else row | reading

    def debate(row: dict) -> DebateRecord | None:
        new = replaced.get(row.get("debate_id"))
        return None if new is None or row.get("run_id") != new[0].run_id else new[0]

    folder.rewrite(debate, event)
    record.rescores.append({"at": now(), "git_commit": git_commit(), "debatekit_version": __version__,
                            "debates": result.debates, "changed": len(result.changed),
                            "readings": len(result.readings), "kept": len(result.kept),
                            "kept_debates": result.kept})
    record.summary |= summarize(folder.debates())
    folder.write_run(record)
    sidecar = folder.path.parent / f"{folder.path.name}.json"  # a sweep's point: its sidecar says the same
    try:
        point = json.loads(sidecar.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if isinstance(point, dict) and point.get("run_id") == record.run_id:
        point["summary"] = record.summary
        files.write_text(sidecar, json.dumps(point, indent=2, default=str))


def _identity(event: dict) -> tuple:
    """One recorded call event among its run's: its debate, place and time stamp."""
    return (event.get("debate_id"), event.get("agent"), event.get("phase"), event.get("round"), event.get("ts"))


def _plain(value):
    return value.model_dump(mode="json") if hasattr(value, "model_dump") else value


def _difference(before, after) -> str:
    """How a reply's reading changed: each field that differs, before -> after."""
    if isinstance(before, dict) and isinstance(after, dict):
        return "; ".join(f"{k} {_short(before.get(k))} -> {_short(after.get(k))}"
                         for k in dict.fromkeys([*before, *after]) if before.get(k) != after.get(k))
    return f"{_short(before)} -> {_short(after)}"


def _short(output) -> str:
    text = json.dumps(output, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."
