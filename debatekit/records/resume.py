"""A run record opened or resumed: what identifies a run's configuration (`config_hash`), and the
checks a resume makes before it continues a run folder (the same configuration, or the same with a
higher limit; the same dataset; the same protocol code, unless told otherwise)."""

from __future__ import annotations

import hashlib
import json
import uuid

from debatekit import __version__
from debatekit.models.cache import ResponseCache, replies_in
from debatekit.models.credentials import model_options_public
from debatekit.records.schemas import Parent, RunConfig, RunRecord
from debatekit.records.trace import RunFolder, RunFolderError, git_commit, now
from debatekit.records.work import work_of

UNHASHED = {"concurrency", "max_calls_in_flight", "cache"}
"""Run settings that do not change results: left out of the config hash, so a resume may change them."""
FIRST_FIELDS = frozenset({"protocol", "dataset", "limit", "model", "params", "seed", "call_timeout", "round_timeout",
                          "debate_timeout", "token_budget", "max_tokens", "model_options"})
"""The settings the hash has always held, at any value. Every `RunConfig` field added since (`seeds`,
`api_base`, `api_key_env`, and any to come) is hashed only where it differs from its default, so that a
new setting leaves the hash of every run recorded before it as it was, and those runs still resume."""


def config_hash(config: RunConfig) -> str:
    """Hash of what determines the results (not where they are written)."""
    data = public_config(config).model_dump(mode="json", exclude=UNHASHED)
    data["model"] = config.run_model
    for key, field in type(config).model_fields.items():
        if key not in FIRST_FIELDS and key in data and getattr(config, key) == field.get_default(
                call_default_factory=True):
            del data[key]
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:12]


def public_config(config: RunConfig) -> RunConfig:
    """The config as traced: credentials in model options masked."""
    return config.model_copy(update={"model_options": model_options_public(config.model_options)})


BUILTIN_SOURCE = {"kind": "builtin"}


def code_of(source: dict | None) -> tuple:
    """What identifies a protocol's code in `protocol_source`: a file's sha256, a package's version;
    a built-in protocol's code is debatekit's own (its commit is recorded per resume)."""
    source = source or {}
    return source.get("kind"), source.get("sha256"), source.get("version")


def version(source: dict) -> str:
    """A protocol source in a few words, with the part that tells two versions apart."""
    code = source.get("sha256", "")[:12] or source.get("version")
    return describe_source(source) + (f" at {code}" if code else "")


def open_record(folder: RunFolder, config: RunConfig, info, resume: bool, source: dict | None = None,
                cache: ResponseCache | None = None, served_by=None, allow_protocol_change: bool = False,
                parent: Parent | None = None) -> RunRecord:
    """The run record of a new run in `folder`, or of the run there that `resume` continues (its
    configuration hash, dataset and protocol code checked; the debates a stop cut off pruned, their
    replies handed back to `cache` and their work counted in `resumes`); written before it returns.

    Raises:
        RunFolderError: a run is there and `resume` is not set, or what it resumes differs.
    """
    if not resume:
        refuse_used(folder)
    record, wanted = (folder.read_run() if resume and folder.exists else None), config_hash(config)
    if record is not None and record.config_hash != wanted and not any(d.answered for d in folder.debates()):
        # a run none of whose debates got an answer (a wrong model name or setting failed every call)
        # holds nothing to keep: fixing that setting and resuming starts it again under the new one
        folder.clear()
        record = None
    if record is not None:
        if extends(record, config):  # the first items are the same, so the finished ones still count
            record.config = record.config.model_copy(update={"limit": config.limit})
            record.config_hash = wanted
        if record.config_hash != wanted:
            raise RunFolderError(f"cannot resume {folder.path}: its configuration differs "
                                 f"({config_diff(record, config)})")
        if record.dataset.sha256 != info.sha256:
            raise RunFolderError(f"cannot resume {folder.path}: dataset {info.path} changed since the run began")
        if record.protocol_source is not None and code_of(record.protocol_source) != code_of(source):
            if not allow_protocol_change:
                was, now_ = version(record.protocol_source), version(source or BUILTIN_SOURCE)
                raise RunFolderError(f"cannot resume {folder.path}: the code of protocol {config.protocol!r} changed "
                                     f"since the run began ({was} -> {now_}); --allow-protocol-change continues it "
                                     "with both versions recorded in run.json")
            record.protocol_versions = record.protocol_versions or [{**(record.protocol_source or {}), "from_resume": 0}]
            record.protocol_versions.append({**(source or {}), "from_resume": len(record.resumes) + 1})
        cut_off = folder.prune_unfinished()
        # the replies those debates received go back to a cache that lost them (another machine):
        # their items run again from the start and ask the model only where it had not answered
        restored = (cache.restore(pair for event in cut_off for pair in replies_in(event, served_by))
                    if cache is not None else 0)
        record.status, record.reason = "running", None
        record.protocol_source = source
        if parent is not None:  # the same fork (checked by its caller); its parent's folder as seen from here now
            record.parent = parent
        record.resumes.append({"at": now(), "git_commit": git_commit(), "debatekit_version": __version__,
                               "answered": sum(d.answered for d in folder.debates()), "limit": config.limit,
                               "restored_replies": restored,
                               "cut_off_work": work_of(cut_off, folder.events() if cut_off else [])})
    else:
        record = RunRecord(run_id=uuid.uuid4().hex[:12], created=now(), debatekit_version=__version__,
                           git_commit=git_commit(), config=public_config(config), config_hash=wanted,
                           model=config.run_model, dataset=info, protocol_source=source, parent=parent)
    folder.write_run(record)
    return record


def refuse_used(folder: RunFolder) -> None:
    """Refuse a new run in a folder that already holds one.

    Raises:
        RunFolderError: a run is there (`--resume` continues it).
    """
    if folder.exists:
        raise RunFolderError(f"run folder {folder.path} already holds a run; use --resume or another --out")


def extends(record: RunRecord, config: RunConfig) -> bool:
    """Whether `config` is the run's configuration with a higher --limit (or none): a resume may grow a run."""
    before, after = record.config.limit, config.limit
    grows = before is not None and (after is None or after > before)
    return grows and config_hash(config.model_copy(update={"limit": before})) == record.config_hash


def config_diff(record: RunRecord, config: RunConfig) -> str:
    """The settings that differ between a run folder's configuration and `config`, e.g. `params.agents: 3 -> 5`."""
    before = {**flattened(record.config.model_dump(mode="json", exclude=UNHASHED)), "model": record.model}
    after = {**flattened(public_config(config).model_dump(mode="json", exclude=UNHASHED)),
             "model": config.run_model}
    changed = [f"{k}: {before.get(k)!r} -> {after.get(k)!r}" for k in sorted(set(before) | set(after))
               if before.get(k) != after.get(k)]
    return "; ".join(changed) or f"hash {record.config_hash}, now {config_hash(config)}"


def flattened(data: dict, prefix: str = "") -> dict:
    flat = {}
    for key, value in data.items():
        if isinstance(value, dict) and value:
            flat.update(flattened(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def describe_source(source: dict) -> str:
    """A protocol's source in a few words: `built in (debatekit.protocols.baselines)`, `package mypkg
    1.0`, `file P`."""
    if source["kind"] == "package":
        return f"package {source['package']} {source.get('version') or ''} ({source['entry_point']})".replace("  ", " ")
    if source["kind"] == "file":
        return f"file {source['path']}"
    if source["kind"] == "module":
        return f"module {source['module']} (imported by your code)"
    return f"built in ({source.get('module', 'debatekit')})"
