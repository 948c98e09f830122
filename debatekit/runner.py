"""Run a protocol over a dataset: many debates at once, a progress bar, a run folder.

    from debatekit.runner import run
    result = run(RunConfig(protocol="society_of_mind", dataset="arithmetic", limit=5))
    result.summary["accuracy"]
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from debatekit import datasets, registry
from debatekit._base.answer_kinds import first_of_same
from debatekit._base.signals import (DRAIN_FILE, Drained, SigtermCancels, Terminated, draining, stop_reason,
                                     wait_stopping)
from debatekit.analysis import summarize
from debatekit.datasets.voting import answers_equal
from debatekit.engine import Debate, Limits, Outcome
from debatekit.models.local import shared as shared_engine
from debatekit.models.cache import ResponseCache, replies_in
from debatekit.models.errors import LocalModelError
from debatekit.models.gateway import Gateway, ModelSetupError, check_model
from debatekit.models.local.engine import cache_dir
from debatekit.models.model import Model, resolve
from debatekit.records import review
from debatekit.records.resume import open_record
from debatekit.records.schemas import CallEvent, DebateRecord, Parent, RunConfig, RunRecord
from debatekit.records.trace import DEBATES_FILE, EVENTS_FILE, RunFolder, as_write_error, item_folder_name, now


@dataclass
class RunResult:
    path: Path
    record: RunRecord
    debates: list[DebateRecord]

    @property
    def summary(self) -> dict[str, Any]:
        return self.record.summary


_SAID: set[str] = set()
"""The engines (their line up to the first comma) this process has named at a run's start."""


def local_models(models: list[Model]) -> list[str]:
    """The embedded models among `models`, by name, each once."""
    return [m.short for m in dict.fromkeys(models) if m.local]


def default_out(config: RunConfig) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    name = Path(config.dataset).stem
    return Path("runs") / f"{stamp}-{config.protocol}-{name}-{uuid.uuid4().hex[:4]}"


async def arun(config: RunConfig, out: Path | str | None = None, *, resume: bool = False,
               retry_degraded: bool = False, progress: bool = True, gateway: Gateway | None = None,
               on_debate: Callable[[DebateRecord], None] | None = None,
               only: set[tuple[str, int]] | None = None, allow_protocol_change: bool = False,
               intervention: Any = None, parent: Parent | None = None) -> RunResult:
    """Run `config` and write its run folder; see `run` for the arguments. `only`: run just these
    (item id, seed) debates (`debatekit.sweep.rescore` plays back the debates a run recorded);
    `intervention`: what every debate's engine lets change (`Debate.intervention`) and `parent`: the
    run this one forks (`RunRecord.parent`), both set by `debatekit.sweep.forks`."""
    spec = registry.get(config.protocol)
    solver = spec.build(config.params)
    model = resolve(config.model)
    if config.call_timeout is None:  # resolved and recorded in run.json
        config = config.model_copy(update={"call_timeout": model.kind.call_timeout})
    items, info = datasets.load(config.dataset, spec.item_model, config.limit)
    named = [model, *map(resolve, spec.models_in(config.params))]
    for one_model in named:
        check_model(one_model)
    options = connection_options(config)
    folder = RunFolder(out or default_out(config))
    cache = ResponseCache(cache_dir() / "responses.sqlite") if config.cache else None
    own_gateway = gateway is None  # a gateway passed in may answer from elsewhere (a replay, a test double)
    gateway = gateway or Gateway(cache=cache, concurrency=config.max_calls_in_flight,
                                 timeout=config.call_timeout, model_options=config.model_options)
    if options:
        gateway.add_options(model.name, options)
    try:
        folder.create()
        folder.lock()  # one writer per folder, held until folder.close() below
        record = open_record(folder, config, info, resume, spec.source, cache, gateway.served_by,
                              allow_protocol_change, parent)
    except BaseException:
        folder.close()
        if cache is not None:
            cache.close()
        raise
    (folder.path / DRAIN_FILE).unlink(missing_ok=True)  # a new start runs; an old request is spent
    seeds = [config.seed + k for k in range(config.seeds)]
    finished = {(d.item_id, _seed_of(d, config)): d for d in folder.debates()} if resume else {}
    # degraded: answered although some of its calls failed; retried, it keeps its record unless the retry answers
    again = {key: d for key, d in finished.items() if d.status == "degraded"} if retry_degraded else {}
    done = {key for key, d in finished.items() if d.answered and key not in again}
    if again and cache is not None:  # their answered calls, from their events: a cache that lost them asks no model
        retried = {d.debate_id for d in again.values()}
        record.resumes[-1]["restored_replies"] += cache.restore(
            pair for event in folder.events() if event.get("debate_id") in retried
            for pair in replies_in(event, gateway.served_by))
    todo = [(item, seed) for item in items for seed in seeds
            if (item.id, seed) not in done and (only is None or (item.id, seed) in only)]

    limits = Limits(config.call_timeout, config.round_timeout, config.debate_timeout,
                    config.token_budget, config.max_tokens)
    bar = _progress(len(items) * len(seeds), len(items) * len(seeds) - len(todo), config.protocol, progress)
    slots = asyncio.Semaphore(config.concurrency)
    started = time.monotonic()
    answered, left, errors = [], [], []

    async def one(item, seed: int) -> None:
        async with slots:
            if gateway.dead():
                return  # the run is stopping: the item is left for --resume
            if draining(folder.path):
                left.append(item.id)  # asked to drain: the debates started finish, this one waits for --resume
                return
            where = f"items/{item_folder_name(item.id)}" + (f"/seed{seed}" if len(seeds) > 1 else "")
            calls = CallFaults()
            debate = Debate(item, gateway=gateway, model=model, run_id=record.run_id,
                            debate_id=uuid.uuid4().hex[:12], seed=seed, limits=limits,
                            on_event=lambda event: (folder.append(EVENTS_FILE, event), calls.add(event)),
                            folder=folder.path / where, intervention=intervention)
            result = await _debate(solver, item, debate, config.protocol, calls)
            folder.append(DEBATES_FILE, result)
            if not result.answered and (item.id, seed) in again:  # the retry did worse: the last record
                result = again[item.id, seed]                      # per item and seed is the old one again
                folder.append(DEBATES_FILE, result)
            answered.append(result.answered)
            if not result.answered and result.error:
                errors.append(f"item {item.id}: {result.error}")
            review.enqueue(folder, result, where)  # escalated: human review queue
            if on_debate:
                on_debate(result)
            bar.update(1)
            stats = gateway.stats
            bar.set_postfix(calls=stats["calls"], cached=stats["cache_hits"], tokens=stats["tokens"], refresh=False)

    tasks: list[asyncio.Future] = []
    sigterm = SigtermCancels()  # a batch scheduler's stop is handled like Ctrl-C
    try:
        if todo and own_gateway:  # before the first item: each local model named assembled, verified, fitting
            try:
                serving = await asyncio.to_thread(shared_engine.preflight, local_models(named))
            except LocalModelError as exc:
                raise ModelSetupError(str(exc)) from exc
            engine = serving.split(",")[0] if serving else None  # "local engine: pid N" or "...: none running; ..."
            if engine and progress and engine not in _SAID:  # protocols run together: said once per engine
                _SAID.add(engine)
                print(serving, file=sys.stderr, flush=True)
        tasks = [asyncio.ensure_future(one(item, seed)) for item, seed in todo]
        if progress and todo:
            tasks.append(asyncio.ensure_future(_say_waits(bar, gateway, config.protocol, list(tasks))))
        await asyncio.gather(*tasks)
        # dead after its first calls, or (a run too short to tell) never answered at all
        fatal = gateway.dead() or (None if any(answered) else gateway.unreached(model.name))
        if fatal:
            raise ModelSetupError(fatal)
        if left:
            raise Drained(f"drained: the debates already started finished, {len(left)} item(s) left for --resume")
        record.status = "complete"
        if answered and not any(answered):  # it ran, and not one debate got an answer: not a finished run
            record.status = "failed"
            record.reason = (f"none of the {len(answered)} debates run got an answer"
                             + (f"; first error: {errors[0].splitlines()[0]}" if errors else ""))
    except ModelSetupError:
        record.status = "failed"
        raise
    except BaseException as exc:
        record.status, record.reason = "interrupted", stop_reason(exc, sigterm.fired)
        await _cancel(tasks)  # the first failed write stops every debate, not only its own
        if sigterm.fired:
            raise Terminated() from exc
        raise
    finally:
        sigterm.close()
        bar.close()
        debates = [d for d in folder.debates() if d.item_id in {i.id for i in items}]
        record.summary = {**summarize(debates), **review.counts(folder.path)}
        record.summary["wall_s"] = round(time.monotonic() - started, 2)  # this start's run time (a resume counts its own)
        record.finished = now()
        try:
            folder.write_run(record)
        except OSError:  # a full disk: say how the run ended in run.json's own bytes; the error that stopped it is raised
            if record.status == "complete":
                raise
            with contextlib.suppress(OSError):
                folder.mark_run(record.status, record.reason, record.finished)
        folder.close()
        if cache is not None:
            cache.close()
    return RunResult(folder.path, record, debates)


def run(config: RunConfig, out: Path | str | None = None, **kwargs: Any) -> RunResult:
    """Run a protocol over a dataset (blocking; also works inside Jupyter's running loop, where
    the kernel's interrupt stops the run as Ctrl-C stops a command).

    Args:
        config: what to run.
        out: run folder; default `runs/<time>-<protocol>-<dataset>-<id>`.
        **kwargs: passed to `arun`: `resume` (continue the run in `out`, skipping items that
            finished), `retry_degraded` (with `resume`: also run again the debates that answered
            although some of their calls failed; with the response cache on, every call whose
            prompt is unchanged is served from it; a retry that answers supersedes the old record,
            one that does not leaves it the item's), `progress` (a progress bar; tqdm.auto, a widget in notebooks), `gateway`
            (one to share across runs; default a new one with the disk cache), `allow_protocol_change`
            (with `resume`: continue although the protocol's file or package changed since the run began;
            run.json's `protocol_versions` then names each version and the resume it began with).

    Raises:
        registry.ProtocolError, datasets.DatasetError, RunFolderError: bad input, named.
        ModelSetupError: the model's first calls all failed with the same set-up error (a key,
            a model name, a server); the run folder keeps what finished, for `resume`.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(arun(config, out, **kwargs))
    box: dict[str, Any] = {}  # a loop is running (Jupyter): run in a thread with its own loop
    done = threading.Event()

    def target():
        try:
            box["result"] = asyncio.run(arun(config, out, **kwargs))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = exc
        finally:
            done.set()

    thread = threading.Thread(target=target, name="debatekit-run")
    thread.start()
    wait_stopping(thread, done)  # Ctrl-C or SIGTERM stops the run in the thread too, not only the wait
    if "error" in box:
        raise box["error"]
    return box["result"]


def connection_options(config: RunConfig) -> dict:
    """litellm arguments from `api_base` and `api_key_env` (the key read from that variable, never stored).

    A provider model sent to another server with no key gets a placeholder key, so that the
    provider's own key (litellm reads $OPENAI_API_KEY, $ANTHROPIC_API_KEY, ...) is never sent there.

    Raises:
        ValueError: `api_key_env` names a variable that is not set.
    """
    options: dict[str, Any] = {}
    if config.api_key_env:
        key = os.environ.get(config.api_key_env)
        if not key:
            raise ValueError(f"--api-key-env {config.api_key_env}: the environment variable is not set")
        options["api_key"] = key
    if config.api_base:
        options["api_base"] = config.api_base
        given = config.model_options.get(config.run_model, {})
        if resolve(config.model).kind.credentials and "api_key" not in options and "api_key" not in given:
            options["api_key"] = "none"
    return options


class CallFaults:
    """The calls of one debate that failed without a reply (errors, timeouts; not parse failures)."""

    def __init__(self):
        self.count, self.first = 0, None

    def add(self, event: CallEvent) -> None:
        if event.error and event.error_kind != "parse":
            self.count += 1
            self.first = self.first or event.error


async def _debate(solver, item, debate: Debate, protocol: str, calls: CallFaults | None = None) -> DebateRecord:
    """Run one debate; any exception becomes a failed record, never a crashed run.

    Status: `failed` (the protocol raised), `error` (no final answer, and some calls failed
    without a reply: not scored, whatever correctness or score the protocol gave the missing
    answer), `degraded` (an answer despite failed calls: scored) or `ok`.
    """
    calls = calls or CallFaults()
    status, error, outcome = "ok", None, Outcome()
    try:
        outcome = await solver(item, debate)
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


def _seed_of(record: DebateRecord, config: RunConfig) -> int:
    return config.seed if record.seed is None else record.seed  # records from before seeds were recorded


async def _cancel(tasks: list[asyncio.Future]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def _say_waits(bar, gateway: Gateway, desc: str, debates: list[asyncio.Future], every: float = 2.0) -> None:
    """Until `debates` end, keep the progress line saying what the calls wait for (a shared engine
    busy with other processes' calls), so a bar that does not move says why."""
    said = None
    while True:
        _, pending = await asyncio.wait(debates, timeout=every)
        if not pending:
            return
        note = gateway.waiting()
        if note != said:
            bar.set_description(f"{desc} ({note})" if note else desc)
            said = note


def _progress(total: int, initial: int, desc: str, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, desc=desc, unit="item", disable=not enabled,
                file=sys.stderr, dynamic_ncols=True)
