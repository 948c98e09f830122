"""The engine every protocol runs on: asks, parallel phases, rounds, stopping, limits, events.

A protocol receives a `Debate` for one item and uses it to talk to models:

    turn = await debate.ask("agent1", messages, Answer, phase="answer", round=1)
    turns = await debate.gather(debate.ask(a, ..., round=r) for a in agents)   # parallel
    reason = await debate.rounds(step, max_rounds=3, stop=[agreement])         # round loop
    shown = debate.shown("agent1", 2, [Shown("agent2", text, answer)])        # what agent1 reads

The engine derives a seed per call, applies the per-call, per-round and per-debate timeouts
and the token budget, records every call as a `CallEvent`, and never lets a model fault
escape: a failed call is a `Turn` whose `ok` is False. A debate may carry an intervention (a
fork's, `debatekit.sweep.forks`): the engine lets it change what an agent reads of the others'
earlier replies (`Debate.shown`) and how a call is asked (its model, an added instruction), and
records each change on the call's event and the round's record. The shared stop reasons and the
stop rules (`agreement`, `plateau`) are in `debatekit.engine.stopping`, exported here.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterable, Literal

from pydantic import BaseModel

from debatekit.engine.stopping import STOP_REASONS, StopRule, agreement, plateau
from debatekit.models.cache import prompt_hash
from debatekit.models.completion import Completion
from debatekit.models.gateway import DEFAULT_MAX_TOKENS, Gateway
from debatekit.models.model import Caller, Model, resolve
from debatekit.records.schemas import CallEvent, DebateVerdict, RoundRecord, Usage
from debatekit.records.storage import write_json_atomic

__all__ = ["STOP_REASONS", "Ask", "Debate", "Limits", "Outcome", "Phase", "Shown", "StopRule", "TieBreak", "Turn",
           "agreement", "call_tokens", "derive_seed", "plateau", "reply_budget", "tie_seed"]


@dataclass
class Limits:
    """Per-call, per-round and per-debate limits (seconds, tokens); None means no limit, except
    `call_timeout` None: the model kind's own (`Model.kind.call_timeout`)."""

    call_timeout: float | None = None
    round_timeout: float | None = None
    debate_timeout: float | None = None
    token_budget: int | None = None
    max_tokens: int | None = None


@dataclass
class Turn:
    """One agent's call in one phase: the completion and where it happened."""

    agent: str
    phase: str
    round: int | None
    completion: Completion
    structured: bool = False

    @property
    def ok(self) -> bool:
        return self.completion.ok and (self.completion.parsed is not None or not self.structured)

    @property
    def parsed(self) -> Any:
        return self.completion.parsed

    @property
    def text(self) -> str:
        return self.completion.text

    @property
    def error(self) -> str | None:
        return self.completion.error


TieBreak = Literal["first", "random"]
"""How a protocol's majority vote breaks a tie: to the answer given first (agent 1, sample 1), or to
one of the tied answers drawn at random, the draw seeded by the run's seed and the item."""


def tie_seed(tie_break: str, debate: "Debate", item: Any) -> str | None:
    """The seed `voting.majority` breaks a tie with: None for "first", else one per run seed and item,
    so a rerun of the same run draws the same answer."""
    return None if tie_break == "first" else f"{debate.seed}:{_item_id(item)}"


@dataclass
class Shown:
    """One earlier reply as a protocol puts it before an agent: who wrote it, its text as shown, its answer."""

    author: str
    text: str
    answer: Any = None


class Outcome(DebateVerdict):
    """What a protocol returns for one debate (the `DebateVerdict` fields a debate record keeps); the
    runner adds status, scoring against the truth, rounds, usage and the trace."""


class Ask:
    """A pending call; `await` it, or pass several to `Debate.gather` to run them in parallel."""

    def __init__(self, debate: Debate, agent: str, messages: list[dict], output: type[BaseModel] | None,
                 phase: str, round: int | None, options: dict):
        self.debate, self.agent, self.messages, self.output = debate, agent, messages, output
        self.phase, self.round, self.options = phase, round, options

    def __await__(self):
        return self.debate._run(self).__await__()


class Debate:
    """The engine's view of one debate: the item, the model, limits, history and usage.

    `model` is the run's model, resolved (`models.model.resolve`); a model an ask names (`model=`, a
    string from the protocol's parameters or an intervention) is resolved where it is named."""

    def __init__(self, item: Any, *, gateway: Gateway, model: Model, run_id: str, debate_id: str,
                 seed: int = 0, limits: Limits | None = None,
                 on_event: Callable[[CallEvent], None] | None = None, folder: Path | None = None,
                 intervention: Any = None):
        self.item, self.gateway, self.model = item, gateway, model
        self.intervention = intervention  # None, or an object with `shown(...)` and `asked(...)` (a fork's)
        self._notes: dict[tuple[str, int | None], list[dict]] = {}  # (agent, round) -> what an intervention changed
        self.folder = folder  # where this debate's own files go (seed-named traces); None: not kept
        self.run_id, self.debate_id, self.seed = run_id, debate_id, seed
        self.limits = limits or Limits()
        self.on_event = on_event or (lambda event: None)
        self.history: list[RoundRecord] = []
        self.log: list[str] = []
        self.usage = Usage()
        self.stop_reason: str | None = None
        self.started = time.monotonic()

    # --- limits -----------------------------------------------------------------------------
    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    @property
    def remaining(self) -> float | None:
        total = self.limits.debate_timeout
        return None if total is None else max(0.0, total - self.elapsed)

    @property
    def timed_out(self) -> bool:
        return self.remaining == 0.0

    @property
    def over_budget(self) -> bool:
        budget = self.limits.token_budget
        return budget is not None and self.usage.completion_tokens >= budget

    # --- calls ------------------------------------------------------------------------------
    def ask(self, agent: str, messages: list[dict], output: type[BaseModel] | None = None, *,
            phase: str, round: int | None = None, **options) -> Ask:
        """A call of `agent` in `phase`; options: model, temperature, max_tokens, sample, timeout, resample
        (a number mixed into the call's sampling seed: a fork's new draws).

        `timeout` caps this whole call (all attempts and repairs) in seconds; past it the
        call is a timed-out Turn, logged like a round timeout.
        """
        return Ask(self, agent, messages, output, phase, round, options)

    async def gather(self, asks: Iterable[Ask], timeout: float | None = None) -> list[Turn]:
        """Run asks in parallel; those unfinished at the round or debate timeout are cut off.

        `timeout` (seconds) caps this phase below the configured round timeout.
        """
        asks = list(asks)
        tasks = [asyncio.ensure_future(self._run(a)) for a in asks]
        for task in tasks:  # a cut-off call that fails late is not reported as never retrieved
            task.add_done_callback(_retrieve)
        limit = _min(self.limits.round_timeout, self.remaining, timeout)
        try:
            done, _ = await asyncio.wait(tasks, timeout=limit) if tasks else (set(), set())
        finally:  # cut off at the limit, or this debate was cancelled: no call outlives the phase
            for task in tasks:
                task.cancel()
        # a fault outside the model calls (the trace cannot be written) stops the debate
        faults = [task.exception() for task in tasks if task in done and not task.cancelled()]
        if fault := next((f for f in faults if f is not None), None):
            raise fault
        return [task.result() if task in done else self._timed_out(ask, "round") for ask, task in zip(asks, tasks)]

    async def _run(self, ask: Ask) -> Turn:
        if self.intervention is not None:
            ask = self.intervention.asked(self, ask)  # another model, an added instruction, or the ask as it was
        opts = ask.options
        seed = derive_seed(self.seed, _item_id(self.item), ask.agent, ask.round, ask.phase, opts.get("sample", 0),
                           *(() if opts.get("resample") is None else ("resample", opts["resample"])))
        timeout = _min(self.limits.call_timeout, self.remaining)
        cap = _min(opts.get("timeout"), self.remaining)  # the whole call, all attempts
        if timeout == 0.0 or (cap is not None and cap <= 0.0):
            return self._timed_out(ask, "debate" if timeout == 0.0 else "call")
        caller = Caller(ask.agent, ask.phase, ask.round, _item_id(self.item), opts.get("sample", 0), self.seed)
        try:
            completion = await asyncio.wait_for(self.gateway.complete(
                self.model_of(ask), ask.messages, ask.output, caller=caller,
                temperature=opts.get("temperature"), seed=seed,
                max_tokens=call_tokens(ask.output, opts.get("max_tokens"), self.limits.max_tokens),
                timeout=_min(self.limits.call_timeout, opts.get("timeout"))), cap)
        except asyncio.TimeoutError:
            return self._timed_out(ask, "debate" if self.timed_out else "call")
        return self._record(ask, completion)

    def model_of(self, ask: Ask) -> Model:
        """The model an ask goes to: the one it names (resolved here), else the debate's."""
        named = ask.options.get("model")
        return resolve(named) if named else self.model

    def _timed_out(self, ask: Ask, scope: str) -> Turn:
        self.log.append(f"TIMEOUT: {ask.agent} in {ask.phase}")
        completion = Completion(model=self.model_of(ask).name, faults=["timeout"],
                                error=f"timeout: {scope} time limit reached", error_kind="timeout")
        return self._record(ask, completion)

    def _record(self, ask: Ask, c: Completion) -> Turn:
        u = self.usage
        u.calls += 1
        u.provider_calls += c.calls
        u.prompt_tokens += c.prompt_tokens
        u.completion_tokens += c.completion_tokens
        u.cost += c.cost or 0.0
        u.cache_hits += int(c.cache_hit)
        u.parse_failures += c.parse_failures
        u.cut_off += c.cut_off
        u.cut_off_unread += c.cut_off_unread
        u.echoes += int(c.echo)
        u.looped += c.loops
        u.retries += c.retries
        u.timeouts += c.timeouts
        u.errors += int(not c.ok)
        output = c.parsed.model_dump(mode="json") if c.parsed is not None else None
        self.on_event(CallEvent(
            run_id=self.run_id, debate_id=self.debate_id, item_id=_item_id(self.item), round=ask.round,
            phase=ask.phase, agent=ask.agent, model=c.model, prompt_hash=prompt_hash(ask.messages),
            prompt_tokens=c.prompt_tokens, completion_tokens=c.completion_tokens, cached_tokens=c.cached_tokens,
            prompt_seconds=round(c.prompt_seconds, 4), generation_seconds=round(c.generation_seconds, 4),
            latency_s=round(c.latency, 4),
            cost=c.cost, calls=c.calls, cache_hit=c.cache_hit, faults=c.faults, parse_failures=c.parse_failures,
            retries=c.retries, output=output, text=c.text, error=c.error, error_kind=c.error_kind, ts=time.time(),
            messages=list(ask.messages), repairs=c.repairs, replies=c.replies, cut_off=c.cut_off, echo=c.echo,
            intervention=self._notes.get((ask.agent, ask.round), [])))
        return Turn(ask.agent, ask.phase, ask.round, c, structured=ask.output is not None)

    def write(self, name: str, data: BaseModel | dict) -> Path | None:
        """Write a per-debate JSON file (e.g. a seed's `debate_round1_nla.json`) atomically."""
        if self.folder is None:
            return None
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / name
        write_json_atomic(path, data)
        return path

    # --- interventions ----------------------------------------------------------------------
    def shown(self, viewer: str, round: int, replies: list[Shown], pool: dict[str, Shown] | None = None) -> list[Shown]:
        """What `viewer` reads in `round` of the earlier replies the protocol would show it (`replies`,
        in order): the same, unless this debate's intervention changes them (replaces, hides, reorders).
        `pool`: every agent's latest reply, by author, which an intervention may show in place of another."""
        if self.intervention is None:
            return replies
        return self.intervention.shown(self, viewer, round, replies, pool or {r.author: r for r in replies})

    def note(self, agent: str, round: int | None, change: dict) -> None:
        """Record what an intervention changed for `agent` in `round`: the agent's call event in that
        round and the round's record (`extra["intervention"]`) keep it."""
        self._notes.setdefault((agent, round), []).append(change)

    # --- rounds -----------------------------------------------------------------------------
    def record_round(self, round: int, answers: dict[str, Any], **extra) -> RoundRecord:
        """Record what each agent answered in a round (None for an agent without an answer)."""
        changed = [c for (_, r), notes in self._notes.items() if r == round for c in notes]
        if changed:
            extra["intervention"] = changed
        record = RoundRecord(round=round, answers=answers, extra=extra)
        self.history.append(record)
        return record

    async def rounds(self, step: Callable[[int], Awaitable[Any]] | Iterable[Phase], max_rounds: int,
                     stop: Iterable[StopRule] = (), *, min_rounds: int = 1) -> str:
        """Run rounds 1..max_rounds until a stop rule fires or a limit is reached.

        Args:
            step: the round, `step(number)`; or its phases in order (see `Phase`).
            max_rounds: the ceiling.
            stop: rules checked after every phase; one that fires ends the debate at the end
                of the round (the round's optional phases after it are skipped). Rules see the
                round history and, through the protocol's own objects, any protocol state.
            min_rounds: stop rules are not asked before this round.

        Returns:
            The stop reason (see `STOP_REASONS`): the first rule's reason, `timeout` or
            `budget` (checked before every round), or `max_rounds`; also kept in
            `self.stop_reason`.
        """
        phases = [Phase(step)] if callable(step) else list(step)
        stop = list(stop)
        reason = "max_rounds"
        for number in range(1, max_rounds + 1):
            if limit := self.limit_reached():
                reason = limit
                break
            fired = None
            for phase in phases:
                if phase.when is not None and (fired or not phase.when(number)):
                    continue
                await phase.run(number)
                if not fired and number >= min_rounds:
                    fired = next((why for rule in stop if (why := rule(self.history))), None)
            if fired:
                reason = fired
                break
        self.stop_reason = reason
        return reason

    def limit_reached(self) -> str | None:
        """`timeout` or `budget` when this debate's time or token budget is spent, else None."""
        return "timeout" if self.timed_out else "budget" if self.over_budget else None


@dataclass
class Phase:
    """One step inside a round: `run(number)`; `when(number)` makes it optional.

    An optional phase runs only in the rounds where `when` holds and no stop rule has fired yet
    in that round; a required one (`when` None) always runs, so a round can end by recording
    itself whatever stopped it.
    """

    run: Callable[[int], Awaitable[Any]]
    when: Callable[[int], bool] | None = None


# --- helpers ------------------------------------------------------------------------------

def reply_budget(output: type[BaseModel] | None) -> int | None:
    """The completion tokens a reply schema declares for itself (`max_reply_tokens: ClassVar[int]`)."""
    return getattr(output, "max_reply_tokens", None) if output is not None else None


def call_tokens(output: type[BaseModel] | None, asked: int | None, configured: int | None) -> int:
    """A call's `max_tokens`, in order: the ask's own, its reply schema's budget, the run's
    `Limits.max_tokens`, the reply's default (`default_reply_tokens`, a free-text answer's measured
    limit), DEFAULT_MAX_TOKENS."""
    default = getattr(output, "default_reply_tokens", None) if output is not None else None
    return asked or reply_budget(output) or configured or default or DEFAULT_MAX_TOKENS


def derive_seed(*parts: Any) -> int:
    """A per-call seed from the run seed and where the call happens (stable across runs)."""
    digest = hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()
    return int(digest[:8], 16) % 2**31


def _item_id(item: Any) -> str:
    return str(getattr(item, "id", ""))


def _retrieve(task: asyncio.Future) -> None:
    if not task.cancelled():
        task.exception()


def _min(*values: float | None) -> float | None:
    present = [v for v in values if v is not None]
    return min(present) if present else None
