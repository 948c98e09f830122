"""A gateway that answers every call from a finished run's call events, never from a model.

    gateway = Recorded(folder.events(), seeds={d.debate_id: d.seed for d in folder.debates()})

Each call is answered with the reply recorded where it happened (item, run seed, agent, phase,
round) for the same messages: the first attempt by the event's `messages`, a repair by those
messages with the reply that could not be read and the repair request after them. The reply then
goes through the gateway's own reading (parse, repair), so a run played back reads its recorded
replies with today's code; that is what `debatekit.sweep.rescore` does. A call whose prompt was not
recorded there (a protocol that showed an agent a reading that has since changed) fails with
`error_kind` "not_recorded", and so does one whose reply was repaired in a run recorded before
call events kept the replies they repaired (its first reply is lost); a call recorded as failed (a timeout, a provider error) fails again
with its recorded error. No provider is ever called, so a played-back call costs nothing: its
reply keeps its recorded usage, and counts as a cache hit.

Three options serve `debatekit.sweep.rerecord`, which keeps a recording current: `fallback`, a
gateway that answers the calls with no recorded reply (the model is asked only what is new);
`unread_fails`, which ends a call whose recorded reply reads today as it did not in the run (no
repair was recorded for it) as a parse failure, never as a repair request: a change of reading
then costs no model call; and `lost_as_last`, which answers a call repaired before repairs were
recorded with the reply it ended with (its first reply is lost), so that such a run stays a
recording of what its model said rather than needing the model again. The gateway keeps count
of what it did: `missing` (asked, not recorded), `live` (asked of the fallback), `unreadable` and
`unasked()` (recorded, not asked). `as_read_before` plays the rounds before a fork's fork round back
as the run read them, never asking the fallback for them: they are its parent's.

`Forked` serves a fork of a run (`debatekit.sweep.forks`): the rounds before the fork round are
played back as above, whatever the response cache holds, but each reply as the run read it (`as_read`:
its recorded reading, its recorded repair), so that they are the run's to the letter; a call it cannot
play back stops the fork (`NotRecordedError`); every later call is asked of a model.
"""

from __future__ import annotations

import contextvars
import hashlib
import json
from collections import Counter, defaultdict
from typing import Iterable

from debatekit.models.cache import asked as asked_of, prompt_hash, reply_record, request_key, served_key
from debatekit.models.completion import Completion, add_usage
from debatekit.models.errors import StopsRun
from debatekit.models.gateway import Gateway
from debatekit.models.model import Caller, Model

NOT_RECORDED = "not_recorded"
PROMPT_ONLY = "prompt:"
"""Marks a place keyed by `prompt_hash` (an event recorded without its messages), not by the messages."""
FINISH = {"cut_off": "length", "loop": "loop"}
"""A reply's `finish_reason`, from the ending its reading recorded (`reading.unfinished`)."""
READ_FAULTS = ("parse", "cut_off", "loop")
"""The faults the gateway records while reading a reply; played back, reading records them again."""
USAGE = ("finish_reason", "prompt_tokens", "completion_tokens", "cached_tokens", "prompt_seconds",
         "generation_seconds", "cost")


def place(item_id, seed, agent, phase, round, messages: list[dict]) -> tuple:
    """Where a call happened and what it was asked: the key a recorded reply is found by."""
    asked = hashlib.sha256(json.dumps(messages, sort_keys=True, ensure_ascii=False).encode()).hexdigest()
    return (str(item_id), seed, agent, phase, round, asked)


READ_AS = "read_as"
"""A played-back reply's key for how the run read it (`as_read`): `{"output": ...}` (with `echo`), or
`{"unread": error}`; the gateway then takes that reading instead of reading the text again."""


def attempts(event: dict, as_read: bool = False) -> list[tuple[list[dict], dict]]:
    """The (messages, reply) of each attempt a call event records: its repaired replies, then the
    last. A reply is its text and usage; an event with per-reply records (`replies`) gives each
    reply its own, an older one puts the call's usage on its last reply and, when the call was
    repaired, gives each reply the ending its recorded faults say (so that the repair is asked in
    the same words). A call that got no reply
    (a timeout, a provider error) ends with an attempt whose reply is its error."""
    messages = list(event.get("messages") or [])
    if "repairs" not in event and event.get("parse_failures"):  # repaired before repairs were recorded:
        return []                                              # the first reply is lost
    records = event.get("replies") or []
    repairs = event.get("repairs") or []
    texts = [repair.get("text") for repair in repairs] + [event.get("text")]
    per_reply = len(records) == len(texts)
    endings = _endings(event.get("faults") or []) if repairs and not per_reply else None
    out = []
    for k, text in enumerate(texts):
        if per_reply:  # with what it asked: a call asked with other sampling parameters is no replay
            usage = {key: records[k][key] for key in (*USAGE, "key", "request") if key in records[k]}
        else:
            usage = {key: event[key] for key in USAGE if key in event} if k == len(texts) - 1 else {}
            if endings is not None:  # how each reply ended, from the faults its reading recorded
                usage["finish_reason"] = FINISH.get(endings[k] if k < len(endings) else None, "stop")
        last = k == len(texts) - 1
        if last and event.get("error") and not (event.get("error_kind") == "parse" and text):
            out.append((messages, {"error": event["error"], "error_kind": event.get("error_kind"),
                                   "faults": [f for f in event.get("faults") or [] if f not in READ_FAULTS]}))
        elif isinstance(text, str) and (not per_reply or records[k].get("chars", len(text)) == len(text)):
            reply = {**usage, "text": text}  # a text the event holds cut short is left out
            if as_read:
                reply[READ_AS] = _read_as(event, repairs[k] if k < len(repairs) else None)
            out.append((messages, reply))
        if k < len(repairs):
            messages = [*messages, {"role": "assistant", "content": text},
                        {"role": "user", "content": repairs[k].get("repair_prompt", "")}]
    return out


def last_reply(event: dict, as_read: bool = False) -> dict:
    """The reply a call event ended with (its text and usage, or its error), for a call whose earlier
    replies were not recorded."""
    if event.get("error") and not (event.get("error_kind") == "parse" and event.get("text")):
        return {"error": event["error"], "error_kind": event.get("error_kind"),
                "faults": [f for f in event.get("faults") or [] if f not in READ_FAULTS]}
    reply = {**{key: event[key] for key in USAGE if key in event}, "text": event.get("text") or ""}
    return {**reply, READ_AS: _read_as(event, None)} if as_read else reply


def _read_as(event: dict, repair: dict | None) -> dict:
    """How the run read a reply of `event`: a repaired one (`repair` given) as unread, with the error
    the repair request named; the last as the event's output, or unread where the call ended unread."""
    if repair is not None:
        return {"unread": repair.get("error") or "no final answer found in the reply",
                "repair_prompt": repair.get("repair_prompt")}
    if event.get("error_kind") == "parse" or event.get("output") is None:
        return {"unread": str(event.get("error") or "parse: no final answer").removeprefix("parse: ")}
    return {"output": event["output"], "echo": bool(event.get("echo"))}


def _endings(faults: list[str]) -> list[str | None]:
    """For each reply whose reading failed, in order, how it ended ("cut_off", "loop" or None): the
    gateway records "parse" for each such reply, followed by its ending if it did not end by itself."""
    endings: list[str | None] = []
    for fault in faults:
        if fault == "parse":
            endings.append(None)
        elif fault in FINISH and endings and endings[-1] is None:
            endings[-1] = fault
    return endings


class Recorded(Gateway):
    """A gateway over recorded call events (see the module); `seeds` maps each recorded debate id
    to its run seed (`DebateRecord.seed`), so that runs of one item under several seeds stay apart."""

    def __init__(self, events: Iterable[dict], seeds: dict[str, int | None] | None = None, default_seed: int = 0,
                 *, fallback: Gateway | None = None, unread_fails: bool = False, lost_as_last: bool = False,
                 as_read: bool = False, stops_run: bool = False, as_read_before: int | None = None):
        super().__init__(cache=None, max_retries=0)
        seeds = seeds or {}
        self.as_read = as_read
        """Whether each reply is played back as the run read it (`READ_AS`), not read again by today's code."""
        self.as_read_before = as_read_before
        """The rounds before this one are played back as the run read them, and never asked of `fallback`:
        a fork's rounds before its fork round, which are its parent's to the letter."""
        self.fallback, self.unread_fails, self.lost_as_last = fallback, unread_fails, lost_as_last
        self.stops_run = stops_run
        """Whether a call with no recorded reply stops the run (`NotRecordedError`) instead of failing."""
        self.lost: dict[tuple, dict] = {}
        """The last reply of each call repaired before repairs were recorded (its first reply is lost);
        played back in its place only with `lost_as_last`."""
        self.replies: dict[tuple, list[dict]] = defaultdict(list)
        self.left_unread: set[tuple] = set()
        self.asked: Counter = Counter()
        self.missing: list[tuple] = []
        """Where a call found no recorded reply: (item, seed, agent, phase, round)."""
        self.live: list[tuple] = []
        """Where a call was answered by the fallback, repairs of its replies included."""
        self.unreadable: list[tuple] = []
        """Where a recorded reply could not be read today and, with `unread_fails`, became a parse failure."""
        self._call: contextvars.ContextVar[dict] = contextvars.ContextVar("recorded_call")
        for event in events:
            seed = seeds.get(event.get("debate_id"))
            where = (event.get("item_id"), default_seed if seed is None else seed, event.get("agent"),
                     event.get("phase"), event.get("round"))
            as_read = self._as_read(event.get("round"))
            tries = attempts(event, as_read)
            if "messages" not in event:  # recorded before events kept their messages: found by the prompt's hash
                first = (*where, f"{PROMPT_ONLY}{event.get('prompt_hash')}")
                if tries and len(tries) == 1:
                    self.replies[first].append(tries[0][1])
                else:  # its repairs' prompts cannot be told: only the model can answer it again
                    self._lose(first, event, as_read)
                continue
            if not tries:
                self._lose(place(*where, event.get("messages") or []), event, as_read)
            elif event.get("error_kind") == "parse" and "repairs" in event and not event["repairs"]:
                self.left_unread.add(place(*where, tries[0][0]))  # recorded as unreadable, and not sent back
            for messages, reply in tries:
                self.replies[place(*where, messages)].append(reply)
        self.recorded = Counter({key: len(found) for key, found in self.replies.items()})

    def _as_read(self, round: int | None) -> bool:
        """Whether a reply of `round` is played back as the run read it."""
        return self.as_read or (self.as_read_before is not None and round is not None and round < self.as_read_before)

    def _lose(self, asked: tuple, event: dict, as_read: bool) -> None:
        """A call repaired before repairs were recorded: only the reply it ended with is known."""
        self.lost[asked] = last_reply(event, as_read)
        if event.get("error_kind") == "parse":  # it ended unread in the run too
            self.left_unread.add(asked)

    def unasked(self) -> list[tuple]:
        """Where recorded replies were never asked for (a call today's run no longer makes)."""
        return [key[:5] for key, n in self.recorded.items() if self.asked[key] < n]

    async def complete(self, *args, **kwargs) -> Completion:
        token = self._call.set({"live": False})  # whether this call's first reply came from the fallback
        try:
            return await super().complete(*args, **kwargs)
        finally:
            self._call.reset(token)

    async def _fetch(self, model: Model, messages, params, fmt, timeout, done: Completion,
                     caller: Caller) -> dict | None:
        asked = place(caller.item_id, caller.seed, caller.agent, caller.phase, caller.round, messages)
        call = self._call.get({"live": False})
        if asked not in self.replies and asked not in self.lost and not done.repairs:
            asked = (*asked[:5], f"{PROMPT_ONLY}{prompt_hash(messages)}")  # an event without its messages?
        found = None if call["live"] else self.replies.get(asked)
        if not found and self.lost_as_last and asked in self.lost and not done.repairs:
            found = [self.lost[asked]]  # its first reply was lost: the reply it ended with stands in
        request = request_key(model.name, messages, params, fmt)
        key = served_key(request, self.served_by(model.name))
        if found and (asked_of(found[0]) or request) != request:  # compared by what was asked, not by endpoint
            why = ("the reply recorded for this prompt was asked with other sampling parameters (temperature, seed or "
                   "reply limit)")
            found = None
        else:
            why = ("its reply was repaired in a run that did not record the replies it repaired"
                   if asked in self.lost else "no reply was recorded for this prompt")
        if not found:
            if done.repairs and self.unread_fails and not call["live"]:  # not read today: no repair
                repair = done.repairs.pop()
                done.error, done.error_kind = f"parse: {repair['error']}", "parse"
                if call.get("first") not in self.left_unread:  # the run read it
                    self.unreadable.append(asked[:5])
                    if self.stops_run:  # a fork would go on from another history than its parent's
                        raise NotRecordedError(asked[:5], "the run read its reply after a repair that is not "
                                                          "recorded as asked here")
                return None
            if self.fallback is not None and not self._as_read(caller.round):
                call["live"] = True
                self.live.append(asked[:5])
                return await self.fallback._fetch(model, messages, params, fmt, timeout, done, caller)
            self.missing.append(asked[:5])
            if self.stops_run:
                raise NotRecordedError(asked[:5], why)
            return _not_recorded(done, caller, why)
        self.asked[asked] += 1
        call.setdefault("first", asked)
        reply = found.pop(0) if len(found) > 1 else found[0]
        if "error" in reply:
            done.faults.extend(reply["faults"] or [reply["error_kind"] or "error"])
            done.error, done.error_kind = reply["error"], reply["error_kind"]
            return None
        done.cache_hits += 1
        self.stats["cache_hits"] += 1
        reply = {k: v for k, v in reply.items() if k not in ("key", "request")}
        kept = {k: v for k, v in reply.items() if k != READ_AS}
        add_usage(done, kept)
        done.replies.append(reply_record(key, kept, request))
        return reply


class NotRecordedError(StopsRun):
    """A call a `Forked` gateway was asked to play back and has no reply for: the fork is no longer its
    parent's debate. `where` is (item, seed, agent, phase, round)."""

    def __init__(self, where: tuple, why: str):
        item, _, agent, phase, round = where
        super().__init__(f"{NOT_RECORDED}: {why} ({agent}, {phase}, round {round}, item {item})")
        self.where, self.why = where, why


def _not_recorded(done: Completion, where: Caller, what: str) -> None:
    """Fail a call that has no recorded reply to play back, saying why and where."""
    done.faults.append(NOT_RECORDED)
    done.error = (f"{NOT_RECORDED}: {what} ({where.agent}, {where.phase}, round {where.round}, "
                  f"item {where.item_id})")
    done.error_kind = NOT_RECORDED


class Forked(Recorded):
    """A fork's gateway (`debatekit.sweep.forks`): a call of a round before `at_round` is answered from
    the parent's call events, as `Recorded` answers it, with the reply it ended with where the parent
    did not record the replies it repaired (`lost_as_last`: what the parent's later rounds were built
    on), and every reply read as the parent read it (`as_read`), whatever today's reader makes of it.
    A call the parent did not record stops the fork (`NotRecordedError`): the fork would go on from
    another history than its parent's. Every other call (round `at_round` or later, or outside the
    numbered rounds) goes to `live`, whose cache, health and counts are this gateway's too."""

    def __init__(self, events: Iterable[dict], seeds: dict[str, int | None], default_seed: int = 0, *,
                 at_round: int, live: Gateway):
        super().__init__(events, seeds, default_seed, unread_fails=True, lost_as_last=True, as_read=True,
                         stops_run=True)
        self.at_round, self.live_gateway = at_round, live
        self.stats = live.stats

    def add_options(self, model: str, options: dict) -> None:
        super().add_options(model, options)
        self.live_gateway.add_options(model, options)

    def dead(self, model: str | None = None) -> str | None:
        return self.live_gateway.dead(model)

    def unreached(self, model: str) -> str | None:
        return self.live_gateway.unreached(model)

    def waiting(self) -> str | None:
        return self.live_gateway.waiting()

    async def _fetch(self, model: Model, messages, params, fmt, timeout, done: Completion,
                     caller: Caller) -> dict | None:
        if caller.round is None or caller.round >= self.at_round:
            return await self.live_gateway._fetch(model, messages, params, fmt, timeout, done, caller)
        return await super()._fetch(model, messages, params, fmt, timeout, done, caller)
