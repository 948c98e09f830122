"""Run a protocol over a dataset: many debates at once, a progress bar, a run folder.

    from debatekit.runner import run
    result = run(RunConfig(protocol="society_of_mind", dataset="arithmetic", limit=5))
    result.summary["accuracy"]
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from debatekit import __version__, datasets, registry, review
from debatekit.analysis import summarize
from debatekit.cache import ResponseCache
from debatekit.engine import Debate, Limits, Outcome
from debatekit.gateway import Gateway, check_model, default_model, model_options_public
from debatekit.local import cache_dir
from debatekit.metrics import answers_equal
from debatekit.schemas import DebateRecord, RunConfig, RunRecord, call_timeout_for
from debatekit.trace import DEBATES_FILE, EVENTS_FILE, RunFolder, RunFolderError, git_commit, now


@dataclass
class RunResult:
    path: Path
    record: RunRecord
    debates: list[DebateRecord]

    @property
    def summary(self) -> dict[str, Any]:
        return self.record.summary


def config_hash(config: RunConfig) -> str:
    """Hash of what determines the results (not where they are written)."""
    data = public_config(config).model_dump(mode="json", exclude={"concurrency", "max_calls_in_flight", "cache"})
    data["model"] = config.model or default_model()
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:12]


def public_config(config: RunConfig) -> RunConfig:
    """The config as traced: credentials in model options masked."""
    return config.model_copy(update={"model_options": model_options_public(config.model_options)})


def default_out(config: RunConfig) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    name = Path(config.dataset).stem
    return Path("runs") / f"{stamp}-{config.protocol}-{name}-{uuid.uuid4().hex[:4]}"


async def arun(config: RunConfig, out: Path | str | None = None, *, resume: bool = False,
               progress: bool = True, gateway: Gateway | None = None,
               on_debate: Callable[[DebateRecord], None] | None = None) -> RunResult:
    """Run `config` and write its run folder; see `run` for the arguments."""
    spec = registry.get(config.protocol)
    solver = spec.build(config.params)
    if config.call_timeout is None:  # resolved and recorded in run.json
        config = config.model_copy(update={"call_timeout": call_timeout_for(config.model or default_model())})
    items, info = datasets.load(config.dataset, spec.item_model, config.limit)
    check_model(config.model or default_model())
    folder = RunFolder(out or default_out(config))
    record = _open_record(folder, config, info, resume)
    done_ids = {d.item_id for d in folder.debates() if d.status == "ok"} if resume else set()
    todo = [item for item in items if item.id not in done_ids]

    cache = ResponseCache(cache_dir() / "responses.sqlite") if config.cache else None
    gateway = gateway or Gateway(cache=cache, concurrency=config.max_calls_in_flight,
                                 timeout=config.call_timeout, model_options=config.model_options)
    limits = Limits(config.call_timeout, config.round_timeout, config.debate_timeout,
                    config.token_budget, config.max_tokens)
    bar = _progress(len(items), len(items) - len(todo), config.protocol, progress)
    slots = asyncio.Semaphore(config.concurrency)
    started = time.monotonic()

    async def one(item) -> None:
        async with slots:
            debate = Debate(item, gateway=gateway, model=record.model, run_id=record.run_id,
                            debate_id=uuid.uuid4().hex[:12], seed=config.seed, limits=limits,
                            on_event=lambda event: folder.append(EVENTS_FILE, event),
                            folder=folder.path / "items" / _safe_name(item.id))
            result = await _debate(solver, item, debate, config.protocol)
            folder.append(DEBATES_FILE, result)
            review.enqueue(folder, result, f"items/{_safe_name(item.id)}")  # escalated: human review queue
            if on_debate:
                on_debate(result)
            bar.update(1)
            stats = gateway.stats
            bar.set_postfix(calls=stats["calls"], cached=stats["cache_hits"], tokens=stats["tokens"], refresh=False)

    try:
        await asyncio.gather(*(one(item) for item in todo))
        record.status = "complete"
    except BaseException:
        record.status = "interrupted"
        raise
    finally:
        bar.close()
        debates = [d for d in folder.debates() if d.item_id in {i.id for i in items}]
        record.summary = {**summarize(debates), **review.counts(folder.path)}
        record.summary["wall_s"] = round(time.monotonic() - started, 2)  # this session's run time
        record.finished = now()
        folder.write_run(record)
        folder.close()
        if cache is not None:
            cache.close()
    return RunResult(folder.path, record, debates)


def run(config: RunConfig, out: Path | str | None = None, **kwargs) -> RunResult:
    """Run a protocol over a dataset (blocking; also works inside Jupyter's running loop).

    Args:
        config: what to run.
        out: run folder; default `runs/<time>-<protocol>-<dataset>-<id>`.
        resume: continue the run in `out`, skipping items that finished.
        progress: show a progress bar (tqdm.auto: a widget in notebooks).
        gateway: a gateway to share across runs (default: a new one with the disk cache).

    Raises:
        registry.ProtocolError, datasets.DatasetError, RunFolderError: bad input, named.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(arun(config, out, **kwargs))
    box: dict[str, Any] = {}  # a loop is running (Jupyter): run in a thread with its own loop

    def target():
        try:
            box["result"] = asyncio.run(arun(config, out, **kwargs))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["result"]


async def _debate(solver, item, debate: Debate, protocol: str) -> DebateRecord:
    """Run one debate; any exception becomes a failed record, never a crashed run."""
    status, error, outcome = "ok", None, Outcome()
    try:
        outcome = await solver(item, debate)
    except Exception as exc:  # noqa: BLE001 - recorded on the debate, the run goes on
        status, error = "failed", f"{type(exc).__name__}: {exc}"
    truth = getattr(item, "answer", None)
    correct = outcome.correct
    if correct is None and truth is not None and status == "ok":
        correct = outcome.final_answer is not None and answers_equal(outcome.final_answer, truth)
    return DebateRecord(
        run_id=debate.run_id, debate_id=debate.debate_id, item_id=item.id, protocol=protocol,
        status=status, error=error, rounds=debate.history, final_answer=outcome.final_answer,
        truth=truth, correct=correct, score=outcome.score if outcome.score is not None else (
            None if correct is None else float(correct)),
        stop_reason=debate.stop_reason, converged=outcome.converged,
        needs_human_review=outcome.needs_human_review, escalation_reason=outcome.escalation_reason,
        escalated_to=outcome.escalated_to, output=outcome.output, usage=debate.usage,
        wall_s=round(debate.elapsed, 3), log=debate.log)


def _safe_name(item_id: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in item_id)


def _open_record(folder: RunFolder, config: RunConfig, info, resume: bool) -> RunRecord:
    if folder.exists and not resume:
        raise RunFolderError(f"run folder {folder.path} already holds a run; use --resume or another --out")
    if resume and folder.exists:
        record = folder.read_run()
        if record.config_hash != config_hash(config):
            raise RunFolderError(f"cannot resume {folder.path}: its configuration differs "
                                 f"(hash {record.config_hash}, now {config_hash(config)})")
        if record.dataset.sha256 != info.sha256:
            raise RunFolderError(f"cannot resume {folder.path}: dataset {info.path} changed since the run began")
        record.status = "running"
    else:
        record = RunRecord(run_id=uuid.uuid4().hex[:12], created=now(), debatekit_version=__version__,
                           git_commit=git_commit(), config=public_config(config), config_hash=config_hash(config),
                           model=config.model or default_model(), dataset=info)
    folder.write_run(record)
    return record


def _progress(total: int, initial: int, desc: str, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, desc=desc, unit="item", disable=not enabled,
                file=sys.stderr, dynamic_ncols=True)
