"""Versioned records of a run, shared by every protocol: config, calls, rounds, debates, runs.

A run folder holds `run.json` (a `RunRecord`), `events.jsonl` (one `CallEvent` per model
call) and `debates.jsonl` (one `DebateRecord` per finished debate). `analysis` turns them
into DataFrames.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_serializer, model_validator

SCHEMA_VERSION = 1
ANSWERED = ("ok", "degraded")  # debate statuses whose answers are scored; error and failed are not


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RunConfig(Strict):
    """Everything that defines a run; its hash identifies the configuration.

    The one configuration object of a run, end to end: `debatekit run` makes a flag of each field
    (`cli.flags`, its docstring the flag's help), a sweep point is one (`sweep.point_config`), the
    sweep notebook takes one as its `config`, and run.json records it. A field added here is all of
    these at once, and leaves the hash of runs recorded before it as it was (`resume.FIRST_FIELDS`).
    """

    model_config = ConfigDict(use_attribute_docstrings=True)  # the docstrings are the flags' help

    protocol: str
    """Registered protocol name (`debatekit protocols`)."""
    dataset: str
    """Shipped dataset name or path to a JSONL file."""
    limit: int | None = Field(None, ge=1)
    """Use only the first N items."""
    model: str | None = None
    """litellm model string (default: $DEBATEKIT_MODEL, else the embedded local model)."""
    params: dict[str, Any] = {}
    """Protocol parameters (agents, rounds, ...), validated against the protocol."""
    seed: int = 0
    """Base seed; every call gets a seed derived from it, the item, the agent and the round."""
    seeds: int = Field(1, ge=1)
    """Run each item under this many seeds (seed, seed+1, ...); intervals resample items, then seeds."""
    concurrency: int = Field(4, ge=1)
    """Debates (items) run at once."""
    max_calls_in_flight: int | None = Field(None, ge=1)
    """Model calls in flight per model (default: the provider's own)."""
    call_timeout: float | None = Field(None, gt=0, allow_inf_nan=False)
    """Seconds per model call attempt (default: the model kind's, `kinds.policy(model).call_timeout`: 120 for a
    provider, 900 for a `local/` model)."""
    round_timeout: float | None = Field(None, gt=0, allow_inf_nan=False)
    """Seconds per parallel phase; unfinished agents are cut off and logged."""
    debate_timeout: float | None = Field(None, gt=0, allow_inf_nan=False)
    """Seconds per debate; the debate stops with reason `timeout`."""
    token_budget: int | None = Field(None, ge=1)
    """Completion tokens per debate; the debate stops with reason `budget`."""
    max_tokens: int | None = Field(None, ge=1)
    """Completion tokens per call (default: the reply's own; a free-text answer's is chosen per answer
    kind from measured reply lengths, `answers.REPLY_TOKENS`, docs/answers.md; else 512)."""
    cache: bool = True
    """Reuse cached replies; a re-run of the same config makes zero model calls."""
    model_options: dict[str, dict[str, Any]] = {}
    """Extra litellm arguments per model string (api_base, ...); credentials never traced."""
    api_base: str | None = None
    """Base URL of an OpenAI-compatible server for `model` (vLLM, llama.cpp, Ollama, `debatekit serve`)."""
    api_key_env: str | None = None
    """Name of the environment variable holding the API key for `model` (the key itself is never stored)."""

    @property
    def run_model(self) -> str:
        """The model this run calls: `model`, or the default one ($DEBATEKIT_MODEL, else the embedded model)."""
        from debatekit.models.model import resolve

        return resolve(self.model).name




def cut_offs(event: dict) -> int | None:
    """How many replies of a recorded call event stopped at the token limit: its `cut_off`, or in an
    event recorded before that count, its replies' `finish_reason`s; None where neither says."""
    if "cut_off" in event:
        return event["cut_off"]
    replies = event.get("replies") or []
    if not replies or any("finish_reason" not in r for r in replies):
        return None
    return sum(r["finish_reason"] == "length" for r in replies)


class CallEvent(BaseModel):
    """One logical model call: one line of events.jsonl."""

    schema_version: int = SCHEMA_VERSION
    run_id: str
    debate_id: str
    item_id: str
    round: int | None
    phase: str
    agent: str
    model: str
    prompt_hash: str
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0
    """Prompt tokens the provider reused from its prompt cache (local engine, OpenAI)."""
    prompt_seconds: float = 0.0
    """Engine seconds spent on the prompt tokens not reused (local engine; 0 when unknown)."""
    generation_seconds: float = 0.0
    """Engine seconds spent generating the reply (local engine; 0 when unknown)."""
    latency_s: float
    cost: float | None
    calls: int
    cache_hit: bool
    faults: list[str]
    parse_failures: int
    retries: int
    output: Any = None
    text: str = ""
    error: str | None = None
    error_kind: str | None = None
    ts: float
    messages: list[dict] | None = None
    """The messages the agent was shown (None in runs recorded before they were kept)."""
    repairs: list[dict] = []
    """Replies that could not be read and were asked again, in order: each its `text`, the `error` and
    the `repair_prompt` that followed it (`text` above is the last reply). Empty in runs recorded before."""
    replies: list[dict] = []
    """Each reply the call received, in order (the repaired ones, then the last): its response-cache
    `key`, the length of its text (`chars`) and its usage, so that a resume restores the replies of
    debates a stop cut off to a cache that lost them. Empty in runs recorded before."""
    cut_off: int = 0
    """The call's replies that stopped at the token limit, read or not (0 in runs recorded before:
    their `replies` say how each ended)."""
    echo: bool = False
    """Its answer was read from a line of the prompt the reply repeats, its own words giving none
    (`extract.echoed`); the answer still counts as the agent's."""
    intervention: list[dict] = Field(default=[], exclude_if=lambda changes: not changes)
    """What a fork's intervention changed in this call (`Debate.note`): the replies the agent read,
    an added instruction, another model. Empty (and not written) for a call asked as the protocol wrote it."""


class RoundRecord(BaseModel):
    """What each agent answered in one round, plus protocol-specific round data."""

    round: int
    answers: dict[str, Any] = {}
    extra: dict[str, Any] = {}


class Usage(BaseModel):
    calls: int = 0
    provider_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    cache_hits: int = 0
    parse_failures: int = 0
    cut_off: int | None = 0
    """Replies that stopped at the token limit, read or not; None in a record written before they were
    counted (its count of those that could not be read is `cut_off_unread`)."""
    cut_off_unread: int = 0
    """Parse failures of replies cut off at the token limit (counted in `parse_failures` and `cut_off` too)."""
    echoes: int = 0
    """Answers read from a reply that repeats the prompt's text (`CallEvent.echo`)."""
    looped: int = 0
    """Parse failures of replies stopped while repeating themselves (counted in `parse_failures` too)."""
    retries: int = 0
    timeouts: int = 0
    errors: int = 0


class DebateVerdict(BaseModel):
    """What a protocol decides about one debate: the fields a protocol returns (`engine.Outcome`)
    and a debate record keeps, defined once."""

    final_answer: Any = None
    correct: bool | None = None
    score: float | None = None
    converged: bool | None = None
    needs_human_review: bool = False
    escalation_reason: str | None = None
    escalated_to: str | None = None
    """council, human, ... or None (not escalated); human whenever human review is needed and the
    protocol named no target (also for records written before the field existed)."""
    output: dict[str, Any] = {}


class DebateRecord(DebateVerdict):
    """One finished (or explicitly failed) debate over one item: one line of debates.jsonl."""

    schema_version: int = SCHEMA_VERSION
    run_id: str
    debate_id: str
    item_id: str
    protocol: str
    seed: int | None = None
    """The run seed this debate ran under (one of `seed .. seed+seeds-1`); None in older records."""
    status: Literal["ok", "degraded", "error", "failed"]
    """ok; degraded: an answer although some calls failed (scored); error: no answer because calls
    failed or timed out (not scored, `error` holds the first message); failed: the protocol raised."""
    error: str | None = None
    rounds: list[RoundRecord] = []
    truth: Any = None
    stop_reason: str | None = None
    usage: Usage = Usage()

    @model_validator(mode="before")
    @classmethod
    def _cut_off_counted_apart(cls, data: Any) -> Any:
        """A record written before every cut-off reply was counted: its usage's `cut_off` counted only
        those that could not be read, which is `cut_off_unread` now; how many were cut off is not known."""
        usage = data.get("usage") if isinstance(data, dict) else None
        if isinstance(usage, dict) and "cut_off" in usage and "cut_off_unread" not in usage:
            data = {**data, "usage": {**usage, "cut_off_unread": usage["cut_off"], "cut_off": None}}
        return data
    wall_s: float = 0.0
    log: list[str] = []

    def seed_under(self, run_seed: int) -> int:
        """The seed this debate ran under: its own, or the run's (`run_seed`) for a record written
        before seeds were recorded. With the item id, what finds the same debate in another run."""
        return run_seed if self.seed is None else self.seed

    @property
    def answered(self) -> bool:
        """Whether the debate counts as the model's answer (scored): ok or degraded."""
        return self.status in ANSWERED

    @property
    def stopped(self) -> str | None:
        """Why the debate ended, as its tables show it: the stop reason of an answered debate; for one
        without an answer, its status (`error`, `failed`), whatever round its loop had reached (a
        debate whose calls all failed still runs to `max_rounds`, which is not why it has no answer)."""
        return self.stop_reason if self.answered else self.status

    @model_validator(mode="after")
    def _human_review_is_an_escalation(self) -> DebateRecord:
        if self.escalated_to is None and self.needs_human_review:
            self.escalated_to = "human"
        return self


class DatasetInfo(BaseModel):
    name: str
    path: str
    sha256: str
    items: int


class Parent(BaseModel):
    """Where a forked run branched off its parent (`debatekit fork`): the calls of the rounds before
    `at_round` are the parent's recorded replies, the rest were asked of a model."""

    run: str
    """The parent run's folder, relative to this run's folder (absolute where no relative path exists);
    a resume records it as seen from where the two folders are then."""
    run_id: str
    """The parent run's `run_id`."""
    at_round: int
    """The first round asked of a model; every call before it was played back from the parent."""
    intervention: dict[str, Any] | None = None
    """What the fork changed from `at_round` on: `name`, `params` and `source` (where its code came
    from; a file's path as seen from this run's folder, absolute in older forks); None for a fork that
    changes nothing."""
    model: str | None = None
    """The model of every call from `at_round` on (an intervention may still swap one agent's); None:
    the parent's."""
    resample: int | None = None
    """Mixed into the sampling seed of every call from `at_round` on; None: the parent's seeds."""
    params: dict[str, Any] | None = None
    """The protocol parameters the fork set otherwise than its parent (`--set`); None: the parent's."""


Count = int | None
"""A count summed over debates; None where a debate recorded before it was counted did not count it."""


class RunSummary(BaseModel):
    """How a run went, in one object: run.json's `summary` as read (`RunResult.summary`).

    The fields are `analysis.summarize`'s over the run's debates, then the review queue's counts
    (`review.counts`), then this start's run time. A summary written before a field existed leaves
    it at its default here, and is written back with the keys it had and no others; a key this
    model does not know is kept as it is.
    """

    model_config = ConfigDict(extra="allow", use_attribute_docstrings=True)

    items: int = 0
    debates: int = 0
    ok: int = 0
    degraded: int = 0
    """Answered although some of their calls failed (scored)."""
    failed: int = 0
    """No answer: calls failed or the protocol raised (left out of accuracy)."""
    first_error: str | None = None
    seeds: int = 1
    accuracy: float | None = None
    accuracy_ci: list[float | None] = [None, None]
    """The bootstrap 95% interval of `accuracy` (over items, then seeds)."""
    accuracy_by_seed: dict[str, float] = {}
    score: float | None = None
    """The protocol's own mean score (judge score, F1, ...)."""
    score_ci: list[float | None] = [None, None]
    mean_rounds: float | None = None
    converged: int = 0
    needs_human_review: int = 0
    escalated_to: dict[str, int] = {}
    stop_reasons: dict[str, int] = {}
    calls: Count = 0
    provider_calls: Count = 0
    prompt_tokens: Count = 0
    completion_tokens: Count = 0
    cost: int | float | None = 0
    cache_hits: Count = 0
    parse_failures: Count = 0
    cut_off: Count = None
    """Replies that stopped at the token limit; None where a debate did not count them."""
    cut_off_unread: Count = 0
    echoes: Count = 0
    looped: Count = 0
    retries: Count = 0
    timeouts: Count = 0
    errors: Count = 0
    wall_s_sum: int | float = 0
    """The debates' own run times, summed."""
    escalated: int = 0
    reviewed: int = 0
    review_pending: int = 0
    verdicts: dict[str, int] = {}
    wall_s: int | float = 0
    """This start's run time (a resume counts its own)."""

    @model_serializer(mode="wrap")
    def _as_given(self, handler) -> dict[str, Any]:
        """Only the keys the summary was made with: a summary read and written back stays as it was."""
        return {k: v for k, v in handler(self).items() if k in self.model_fields_set}


class RunRecord(BaseModel):
    """run.json: what ran, on what, from which code, and how it went."""

    schema_version: int = SCHEMA_VERSION
    run_id: str
    created: str
    finished: str | None = None
    status: Literal["running", "complete", "interrupted", "failed"] = "running"
    debatekit_version: str
    git_commit: str | None = None
    config: RunConfig
    config_hash: str
    model: str
    dataset: DatasetInfo
    summary: dict[str, Any] = {}
    """How the run went: a `RunSummary` as written (`RunSummary.model_validate` reads it)."""
    reason: str | None = None
    """Why a run did not complete: why an interrupted run stopped (a signal, a failed write), or why a
    failed one failed (a model that never answered, no debate with an answer)."""
    parent: Parent | None = Field(None, exclude_if=lambda parent: parent is None)
    """The run this one was forked from (`debatekit fork`), where and with what change; None (and not
    written) for a run that began from the first round."""
    protocol_source: dict[str, Any] | None = None
    """Where the protocol's code came from (`registry.ProtocolSpec.source`): built in, an installed
    package and its version, or a file and its sha256; None in runs recorded before it was kept."""
    protocol_versions: list[dict[str, Any]] = []
    """Every version of the protocol's code the run was made with, when a resume continued it after
    the code changed (`--allow-protocol-change`): each a `protocol_source` and `from_resume`, the
    resume it began with (0: the run's start); empty when one version made the whole run."""
    resumes: list[dict[str, Any]] = []
    """One entry per `--resume` of the run: when (`at`), from which code (`git_commit`,
    `debatekit_version`), with how many items already answered (`answered`) and the limit it ran to
    (`limit`); `git_commit` above is the code that began the run. A run that spans sessions names
    every commit that wrote part of it."""
    rescores: list[dict[str, Any]] = []
    """One entry per `debatekit rescore --write`: when (`at`), from which code, how many debates were
    played back, and how many changed their answer (`changed`), read a reply differently
    (`readings`) or were kept as recorded (`kept`)."""
    rerecords: list[dict[str, Any]] = []
    """One entry per `debatekit rerecord` that recorded the run again: when (`at`), from which code,
    how many debates were run again (`debates`), and how many calls today's code asked that the run had
    not recorded (`asked`, answered by the model), no longer made (`unasked`) or could no longer read
    (`unreadable`), and how many debates changed their outcome (`changed`)."""
