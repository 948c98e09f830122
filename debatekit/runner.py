"""Run a protocol over a dataset: many debates at once, a progress bar, a run folder.

    from debatekit.runner import run
    result = run(RunConfig(protocol="society_of_mind", dataset="arithmetic", limit=5))
    result.summary.accuracy
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
from debatekit._base.signals import (DRAIN_FILE, Drained, SigtermCancels, Terminated, draining, stop_reason,
                                     wait_stopping)
from debatekit.analysis import summarize
from debatekit.engine import Debate, Limits
from debatekit.engine.scoring import CallFaults, run_debate
from debatekit.models.local import shared as shared_engine
from debatekit.models.cache import ResponseCache, replies_in
from debatekit.models.errors import LocalModelError, ModelSetupError, StopsRun
from debatekit.models.gateway import Gateway
from debatekit.models.local.settings import cache_dir
from debatekit.models.model import Model, resolve
from debatekit.models.serving import check_model
from debatekit.records import review
from debatekit.records.resume import open_record
from debatekit.records.schemas import DatasetInfo, DebateRecord, Parent, RunConfig, RunRecord, RunSummary
from debatekit.records.trace import DEBATES_FILE, EVENTS_FILE, RunFolder, item_folder_name, now


@dataclass
class RunResult:
    path: Path
    record: RunRecord
    debates: list[DebateRecord]

    @property
    def summary(self) -> RunSummary:
        """How the run went (run.json's `summary`, typed)."""
        return RunSummary.model_validate(self.record.summary)


_SAID: set[str] = set()
"""The engines (their line up to the first comma) this process has named at a run's start."""


def local_models(models: list[Model]) -> list[str]:
    """The embedded models among `models`, by name, each once."""
    return [m.short for m in dict.fromkeys(models) if m.local]


def default_out(config: RunConfig) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    name = Path(config.dataset).stem
    return Path("runs") / f"{stamp}-{config.protocol}-{name}-{uuid.uuid4().hex[:4]}"


@dataclass
class Setup:
    """A run's configuration resolved at its edge: the protocol, the models it names (resolved and
    checked), its items, and the gateway and response cache its calls go through."""

    config: RunConfig
    spec: registry.ProtocolSpec
    solver: Any
    model: Model
    named: list[Model]
    items: list
    info: DatasetInfo
    gateway: Gateway
    cache: ResponseCache | None
    own_gateway: bool
    """Whether the run's calls reach models through its own gateway (preflight first), not one passed in."""

    def close(self) -> None:
        if self.cache is not None:
            self.cache.close()


def prepare(config: RunConfig, gateway: Gateway | None = None, around: Callable[[Gateway], Gateway] | None = None,
            intervention: Any = None) -> Setup:
    """Resolve `config`: its protocol, its models (each checked), its items, and its gateway: `gateway`
    if one is given, else a new one with the response cache (when `config.cache`), optionally wrapped
    by `around` (a fork's: the parent's replies before the fork round, this one after)."""
    spec = registry.get(config.protocol)
    solver = spec.build(config.params)
    model = resolve(config.model)
    if config.call_timeout is None:  # resolved and recorded in run.json
        config = config.model_copy(update={"call_timeout": model.kind.call_timeout})
    items, info = datasets.load(config.dataset, spec.item_model, config.limit)
    named = [model, *map(resolve, spec.models_in(config.params)), *map(resolve, getattr(intervention, "models", ()))]
    for one_model in named:
        check_model(one_model)
    options = connection_options(config)
    cache = None
    own = gateway is None  # a gateway passed in may answer from elsewhere (a replay, a test double)
    if own:
        cache = ResponseCache(cache_dir() / "responses.sqlite") if config.cache else None
        gateway = Gateway(cache=cache, concurrency=config.max_calls_in_flight, timeout=config.call_timeout,
                          model_options=config.model_options)
        gateway = around(gateway) if around else gateway
    if options:
        gateway.add_options(model.name, options)
    return Setup(config, spec, solver, model, named, items, info, gateway, cache, own)


async def arun(config: RunConfig, out: Path | str | None = None, *, resume: bool = False,
               retry_degraded: bool = False, progress: bool = True, gateway: Gateway | None = None,
               around: Callable[[Gateway], Gateway] | None = None,
               on_debate: Callable[[DebateRecord], None] | None = None,
               only: set[tuple[str, int]] | None = None, allow_protocol_change: bool = False,
               intervention: Any = None, parent: Parent | None = None) -> RunResult:
    """Run `config` and write its run folder; see `run` for the arguments. `only`: run just these
    (item id, seed) debates (`debatekit.sweep.rescore` plays back the debates a run recorded);
    `intervention`: what every debate's engine lets change (`Debate.intervention`; its `models` are
    checked and prepared with the run's), `around`: what wraps the run's own gateway, and `parent`: the
    run this one forks (`RunRecord.parent`), all three set by `debatekit.sweep.forks`."""
    setup = prepare(config, gateway, around, intervention)
    folder = RunFolder(out or default_out(setup.config))
    try:
        folder.create()
        folder.lock()  # one writer per folder, held until folder.close() below
        held = resume and folder.exists
        was = folder.read_run().config.limit if held else None
        record = open_record(folder, setup.config, setup.info, resume, setup.spec.source, setup.cache,
                             setup.gateway.served_by, allow_protocol_change, parent)
        if held and not record.resumes:
            print(f"debatekit: no debate of the run in {folder.path} got an answer; it starts again there "
                  "with the changed setting", file=sys.stderr)
        _say_growth(folder.path, was, record)
        _say_short(setup.config.limit, setup.info)
    except BaseException:
        folder.close()
        setup.close()
        raise
    (folder.path / DRAIN_FILE).unlink(missing_ok=True)  # a new start runs; an old request is spent
    loop = RunLoop(setup, folder, record, intervention, on_debate)
    try:
        await loop.run(loop.plan(resume, retry_degraded, only), progress)
    finally:
        debates = loop.close()
    return RunResult(folder.path, record, debates)


class RunLoop:
    """One start of a run over its folder: the debates left to run, run a few at a time, then the
    record of how it went (status, reason, summary) written to run.json."""

    def __init__(self, setup: Setup, folder: RunFolder, record: RunRecord, intervention: Any = None,
                 on_debate: Callable[[DebateRecord], None] | None = None):
        self.setup, self.folder, self.record = setup, folder, record
        self.intervention, self.on_debate = intervention, on_debate
        config = setup.config
        self.seeds = [config.seed + k for k in range(config.seeds)]
        self.limits = Limits(config.call_timeout, config.round_timeout, config.debate_timeout,
                             config.token_budget, config.max_tokens)
        self.again: dict[tuple[str, int], DebateRecord] = {}  # degraded debates run again (`retry_degraded`)
        self.answered: list[bool] = []
        self.left: list[str] = []  # items a drain request left for --resume
        self.stopped: StopsRun | None = None  # a call no debate may go on from: the run ends once those started end
        self.errors: list[str] = []
        self.bar = None
        self.started = time.monotonic()

    def plan(self, resume: bool, retry_degraded: bool, only: set[tuple[str, int]] | None) -> list[tuple[Any, int]]:
        """The (item, seed) debates this start runs: those not answered yet (with `retry_degraded`, the
        degraded ones too, their answered calls restored to the cache from their events), within `only`."""
        config, cache, folder = self.setup.config, self.setup.cache, self.folder
        finished = {(d.item_id, d.seed_under(config.seed)): d for d in folder.debates()} if resume else {}
        # degraded: answered although some of its calls failed; retried, it keeps its record unless the retry answers
        self.again = {key: d for key, d in finished.items() if d.status == "degraded"} if retry_degraded else {}
        done = {key for key, d in finished.items() if d.answered and key not in self.again}
        if self.again and cache is not None:  # their answered calls, from their events: a cache that lost them asks no model
            retried = {d.debate_id for d in self.again.values()}
            self.record.resumes[-1]["restored_replies"] += cache.restore(
                pair for event in folder.events() if event.get("debate_id") in retried
                for pair in replies_in(event, self.setup.gateway.served_by))
        return [(item, seed) for item in self.setup.items for seed in self.seeds
                if (item.id, seed) not in done and (only is None or (item.id, seed) in only)]

    async def run(self, todo: list[tuple[Any, int]], progress: bool) -> None:
        """Run the debates `todo`, `config.concurrency` at a time; the record says how the run ended."""
        setup, record = self.setup, self.record
        self.started = time.monotonic()
        total = len(setup.items) * len(self.seeds)
        self.bar = _progress(total, total - len(todo), setup.config.protocol, progress)
        slots = asyncio.Semaphore(setup.config.concurrency)
        tasks: list[asyncio.Future] = []
        sigterm = SigtermCancels()  # a batch scheduler's stop is handled like Ctrl-C
        try:
            if todo and setup.own_gateway:
                await self.preflight(progress)
            tasks = [asyncio.ensure_future(self.one(item, seed, slots)) for item, seed in todo]
            if progress and todo:
                tasks.append(asyncio.ensure_future(_say_waits(self.bar, setup.gateway, setup.config.protocol,
                                                              list(tasks))))
            await asyncio.gather(*tasks)
            self.conclude()
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

    async def preflight(self, progress: bool) -> None:
        """Before the first item: each local model named assembled, verified and fitting; the engine
        that serves them named once per process."""
        try:
            serving = await asyncio.to_thread(shared_engine.preflight, local_models(self.setup.named))
        except LocalModelError as exc:
            raise ModelSetupError(str(exc)) from exc
        engine = serving.split(",")[0] if serving else None  # "local engine: pid N" or "...: none running; ..."
        if engine and progress and engine not in _SAID:  # protocols run together: said once per engine
            _SAID.add(engine)
            print(serving, file=sys.stderr, flush=True)

    async def one(self, item, seed: int, slots: asyncio.Semaphore) -> None:
        """One debate of `item` under `seed`, its record appended to the folder."""
        setup, folder, gateway = self.setup, self.folder, self.setup.gateway
        async with slots:
            if gateway.dead() or self.stopped:
                return  # the run is stopping: the item is left for --resume
            if draining(folder.path):
                self.left.append(item.id)  # asked to drain: the debates started finish, this one waits for --resume
                return
            where = f"items/{item_folder_name(item.id)}" + (f"/seed{seed}" if len(self.seeds) > 1 else "")
            calls = CallFaults()
            debate = Debate(item, gateway=gateway, model=setup.model, run_id=self.record.run_id,
                            debate_id=uuid.uuid4().hex[:12], seed=seed, limits=self.limits,
                            on_event=lambda event: (folder.append(EVENTS_FILE, event), calls.add(event)),
                            folder=folder.path / where, intervention=self.intervention)
            try:
                result = await run_debate(setup.solver, item, debate, setup.config.protocol, calls)
            except StopsRun as exc:  # not recorded; the debates started finish, no other starts (`conclude`)
                self.stopped = self.stopped or exc
                return
            folder.append(DEBATES_FILE, result)
            if not result.answered and (item.id, seed) in self.again:  # the retry did worse: the last record
                result = self.again[item.id, seed]                     # per item and seed is the old one again
                folder.append(DEBATES_FILE, result)
            self.answered.append(result.answered)
            if not result.answered and result.error:
                self.errors.append(f"item {item.id}: {result.error}")
            review.enqueue(folder, result, where)  # escalated: human review queue
            if self.on_debate:
                self.on_debate(result)
            self.bar.update(1)
            stats = gateway.stats
            self.bar.set_postfix(calls=stats["calls"], cached=stats["cache_hits"], tokens=stats["tokens"], refresh=False)

    def conclude(self) -> None:
        """How a run whose debates all ended went: complete, failed (its model never answered, or no
        debate got an answer) or drained; raises for the two that stop it."""
        gateway, record = self.setup.gateway, self.record
        if self.stopped:
            raise self.stopped
        # dead after its first calls, or (a run too short to tell) never answered at all
        fatal = gateway.dead() or (None if any(self.answered) else gateway.unreached(self.setup.model.name))
        if fatal:
            raise ModelSetupError(fatal)
        if self.left:
            raise Drained(f"drained: the debates already started finished, {len(self.left)} item(s) left for --resume")
        record.status = "complete"
        if self.answered and not any(self.answered):  # it ran, and not one debate got an answer: not a finished run
            record.status = "failed"
            record.reason = (f"none of the {len(self.answered)} debates run got an answer"
                             + (f"; first error: {self.errors[0].splitlines()[0]}" if self.errors else ""))

    def close(self) -> list[DebateRecord]:
        """Write run.json with the summary of the run's debates, release the folder and the cache; the debates."""
        if self.bar is not None:
            self.bar.close()
        folder, record = self.folder, self.record
        ids = {item.id for item in self.setup.items}
        debates = [d for d in folder.debates() if d.item_id in ids]
        summary = RunSummary(**summarize(debates), **review.counts(folder.path),
                             wall_s=round(time.monotonic() - self.started, 2))  # this start's run time
        record.summary = summary.model_dump(mode="json")
        record.finished = now()
        try:
            folder.write_run(record)
        except OSError:  # a full disk: say how the run ended in run.json's own bytes; the error that stopped it is raised
            if record.status == "complete":
                raise
            with contextlib.suppress(OSError):
                folder.mark_run(record.status, record.reason, record.finished)
        finally:
            folder.close()
            self.setup.close()
        return debates


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


def _say_growth(path: Path, was: int | None, record: RunRecord) -> None:
    """One line when a resume grows a run past the items it was limited to: without `--limit`, a
    resume of a 6-item run goes on to the whole dataset (1,319 GSM8K items), which must not pass unsaid."""
    limit = record.config.limit
    if record.resumes and was is not None and (limit is None or limit > was):
        to = "every item of the dataset" if limit is None else f"the first {limit} items"
        print(f"debatekit: {path} was limited to the first {was} items; this resume goes on to {to}", file=sys.stderr)


def _say_short(limit: int | None, info: DatasetInfo) -> None:
    """One line when the limit asks for more items than the dataset has: the run is the whole dataset,
    which is not what the number on the command line says."""
    if limit is not None and limit > info.items:
        print(f"debatekit: the limit of {limit} items is more than {info.name}'s {info.items}; all {info.items} run",
              file=sys.stderr)


def _progress(total: int, initial: int, desc: str, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, desc=desc, unit="item", disable=not enabled,
                file=sys.stderr, dynamic_ncols=True)
