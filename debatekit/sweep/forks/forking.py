"""Fork a recorded run at a round: the same debates, replayed up to that round, then asked again.

    from debatekit.sweep.forks import fork, replace
    fork("runs/som", at_round=2, out="runs/som-wrong", intervention=replace("agent1", by="wrong"))

Every call of a round before `at_round` is answered from the parent's call events, never from a
model (whether or not the response cache is on); from `at_round` on, each call is asked of the
parent's model (or `model`), with the intervention applied. The fork runs the parent's debates
only, under their run seeds, so its items pair one to one with the parent's; its run.json names the
parent, the fork round and the intervention (`parent`), and each change the intervention made is
kept on the call's event and the round's record (`intervention`).

A debate the parent ended before `at_round` (its agents agreed) ends the same way in the fork,
with no call asked, unless the stop rule is switched off (`params={"stop_on_agreement": False}`);
parameters that change a prompt before `at_round` make the fork fail with the first call the parent
did not record.
"""

from __future__ import annotations

import hashlib
import importlib
import os
from pathlib import Path
from typing import Any

from debatekit import datasets, registry
from debatekit._base.answer_kinds import LETTERS, first_of_same
from debatekit.datasets.voting import answers_equal, normalize, tied_answers
from debatekit.models.gateway import Gateway
from debatekit.models.recorded import Forked, NotRecordedError
from debatekit.records.schemas import DebateRecord, Parent, RunRecord
from debatekit.records.trace import RunFolder, RunFolderError
from debatekit.runner import RunResult, run
from debatekit.sweep.forks.interventions import Applied, Intervention, make


class ForkError(RunFolderError):
    """A fork that cannot be made as asked: not a run, a round out of range, an agent it does not have."""


def fork(parent: Path | str, *, at_round: int, out: Path | str, intervention: Intervention | None = None,
         model: str | None = None, params: dict[str, Any] | None = None, cache: bool | None = None,
         resume: bool = False, progress: bool = True, limit: int | None = None,
         resample: int | None = None, dataset: str | None = None, concurrency: int | None = None) -> RunResult:
    """Fork the run in `parent` at round `at_round` into the folder `out` (see the module).

    Args:
        parent: a run folder.
        at_round: the first round asked of a model, 2 up to the protocol's rounds.
        out: the fork's run folder.
        intervention: what changes from `at_round` on (`replace`, `adversarial`, ... or your own
            registered one); None changes nothing.
        model: the model of every call from `at_round` on; None: the parent's.
        params: protocol parameters changed from the parent's (`stop_on_agreement`, `rounds`).
        cache: reuse cached replies from `at_round` on; None: as the parent did.
        resume: continue the fork in `out`, which must fork the same run, round and intervention.
        progress: a progress bar.
        resample: draw the calls from `at_round` on under sampling seeds mixed with this number, where
            None keeps the parent's seeds (a fork that changes nothing then asks what the parent
            asked, as the parent asked it); an identity fork with a `resample` is the control for
            resampling alone.
        dataset: the parent's dataset file, where the path its run.json records does not reach it from
            here (a relative path recorded elsewhere); it must be the same file (its sha256 is checked).
            The fork records it as an absolute path: a resume names the file again, by any path.
        limit: fork only the parent's first `limit` items (in its dataset's order); None: every item.
            A later `resume` with a larger limit (or none) goes on to the rest.
        concurrency: how many debates run at once; None: as the parent ran. It changes no result
            (a resume may change it): forks that run side by side on one local engine share its
            slots, and fewer debates each keep fewer half-done when they are drained.

    Raises:
        ForkError: the parent is no run, the round is out of range, an agent named is not the
            parent's, an item has no wrong (or correct) answer the intervention needs, the dataset
            changed, or the fork asked for a call before `at_round` that the parent did not record.
        ModelSetupError: a local model asked from `at_round` on is not ready (not pulled, no memory).
    """
    folder = RunFolder(parent)
    record, debates = _parent_run(folder)
    spec = registry.get(record.config.protocol)
    wanted = {**record.config.params, **(params or {})}
    before, after = spec.validate(record.config.params), spec.validate(wanted)
    _check_round(spec, before, after, at_round, record.config.protocol)
    if "agents" in before and before["agents"] != after["agents"]:
        raise ForkError(f"a fork keeps its parent's agents ({before['agents']}); the parent recorded no round "
                        f"before {at_round} for agents={after['agents']}")
    target, home = Path(out).resolve(), folder.path.resolve()
    if target.is_relative_to(home):
        where = "is the parent run's folder" if target == home else f"is inside the parent run's folder {folder.path}"
        raise ForkError(f"--out {out} {where}: a fork is a run folder of its own, beside its parent")
    if intervention is not None and intervention.show is not None and not spec.shows_replies:
        raise ForkError(f"intervention {intervention.name!r} changes the replies an agent reads, and protocol "
                        f"{record.config.protocol!r} does not show them through Debate.shown (society_of_mind "
                        "does; a protocol that does declares it with @protocol(..., shows_replies=True)); the "
                        "adversarial, persona and model interventions apply to it")
    agents = list(dict.fromkeys(a for d in debates for r in d.rounds for a in r.answers))
    for name in intervention.agents if intervention else ():
        if name not in agents:
            raise ForkError(f"agent {name!r} is not an agent of {folder.path} (its agents: {', '.join(agents)})")
    if limit is not None and limit < 1:
        raise ForkError(f"--limit must be at least 1, got {limit}")
    if concurrency is not None and concurrency < 1:
        raise ForkError(f"--concurrency must be at least 1, got {concurrency}")
    config = record.config.model_copy(update={"model": record.model, "params": wanted,
                                              "cache": record.config.cache if cache is None else cache,
                                              "limit": _limit(record.config.limit, limit),
                                              "concurrency": concurrency or record.config.concurrency})
    if dataset is not None:  # recorded whole, so that a resume naming the file another way is the same fork
        config = config.model_copy(update={"dataset": str(Path(dataset).resolve())})
    try:
        items, info = datasets.load(config.dataset, spec.item_model, config.limit)
    except datasets.DatasetError as exc:
        lost = dataset is None and "file not found" in str(exc)
        raise ForkError(f"cannot fork {folder.path}: {exc}"
                        + (" (give the parent's dataset file with --dataset PATH)" if lost else "")) from exc
    if info.sha256 != record.dataset.sha256:
        raise ForkError(f"cannot fork {folder.path}: its dataset {info.path} changed since the run")
    seed_of = {d.debate_id: d.seed_under(config.seed) for d in debates}
    chosen = {item.id for item in items}
    plans = _plans(items, [d for d in debates if d.item_id in chosen], seed_of, intervention)
    link = Parent(run=parent_path(folder.path, Path(out)), run_id=record.run_id, at_round=at_round,
                  intervention=_described(intervention, Path(out)), model=model, resample=resample,
                  params={k: v for k, v in after.items() if before.get(k) != v} or None)
    if resume:
        _check_resume(Path(out), link)
    events = [e for e in folder.events() if e.get("debate_id") in seed_of]

    def around(live: Gateway) -> Forked:  # the run's own gateway (cache, checks, preflight) asks from at_round on
        return Forked(events, seed_of, default_seed=config.seed, at_round=at_round, live=live)

    try:
        return run(config, out, around=around, progress=progress, resume=resume, parent=link,
                   only={(d.item_id, seed_of[d.debate_id]) for d in debates if d.item_id in chosen},
                   intervention=Applied(intervention, at_round, model, plans, resample))
    except NotRecordedError as exc:  # the run stopped there, that debate unrecorded
        raise ForkError(_unrecorded(exc, debates, seed_of, at_round, folder.path, out)) from exc


def as_forked(folder: RunFolder, record: RunRecord) -> Applied | None:
    """What the fork recorded in `folder` changed, made again so that its own calls play back
    (`debatekit rescore`, `rerecord`): its intervention, fork round, model and resample; each debate's
    wrong answer from the fork's own round 1 (its parent's as the fork played it back, so a parent read
    again since changes none), and the parent's record as the intervention's `Context.parent`. None
    for a run that forks nothing.

    Raises:
        ForkError: the parent run is not where the fork's run.json says (or is another run), or its
            intervention cannot be made as it was (a plugin not installed, a file moved or changed).
    """
    link = record.parent
    if link is None:
        return None
    home = (folder.path / link.run).resolve()
    if not (home / "run.json").is_file():
        raise ForkError(f"{folder.path} forks the run in {link.run}, which is not there from {folder.path} (a fork "
                        "is played back beside its parent, whose records its intervention reads)")
    parent, debates = _parent_run(RunFolder(home))
    if parent.run_id != link.run_id:
        raise ForkError(f"{home} holds run {parent.run_id}, not the parent {link.run_id} that {folder.path} forks")
    intervention = None if link.intervention is None else _made_again(link.intervention, folder.path)
    config = record.config
    items, _ = datasets.load(config.dataset, registry.get(config.protocol).item_model, config.limit)
    by_id = {str(item.id): item for item in items}
    parents = {(d.item_id, d.seed_under(config.seed)): d for d in debates}
    plans = {}
    for d in folder.debates():
        key = (d.item_id, d.seed_under(config.seed))
        plans[key] = (parents.get(key), wrong_answer(by_id[d.item_id], d) if d.item_id in by_id else None)
    return Applied(intervention, link.at_round, link.model, plans, link.resample)


def _made_again(described: dict[str, Any], fork: Path) -> Intervention:
    """The intervention run.json describes (`Intervention.describe`), made again: from its file, checked
    to be the same file; from the module that registered it, imported; built in; from a plugin, checked
    to be the version the fork was made with."""
    name, params, source = described["name"], described.get("params"), described.get("source") or {}
    where = f"cannot make the intervention {name!r} of {fork} again"
    if source.get("kind") == "file":
        path = (fork / source["path"]).resolve()  # seen from the fork (older forks recorded it absolute)
        if path.is_file() and source.get("sha256") not in (None, hashlib.sha256(path.read_bytes()).hexdigest()):
            raise ForkError(f"{where}: its file {path} changed since the fork")
        name = f"{path}:{name}"
    try:
        if source.get("kind") == "module":
            importlib.import_module(source["module"])
        made = make(name, params)
    except Exception as exc:  # whatever the factory raises: one line, naming the fork
        raise ForkError(f"{where}: {type(exc).__name__}: {(str(exc) or '-').splitlines()[0]}") from exc
    if source.get("kind") == "package" and _plugin(made.source) != _plugin(source):
        now = made.source
        now = (f"{_plugin(now)} is installed" if now.get("kind") == "package" else
               f"the name now comes from {now.get('kind')} {now.get('module') or now.get('path') or ''}".rstrip())
        raise ForkError(f"{where}: the fork was made with {_plugin(source)}, and {now} (install "
                        f"{_plugin(source)} to play it back)")
    return made


def _plugin(source: dict[str, Any]) -> str:
    """A plugin as a fork names it: its package and version."""
    return f"{source.get('package')} {source.get('version') or '(version unknown)'}"


def _described(intervention: Intervention | None, out: Path) -> dict[str, Any] | None:
    """What run.json records of the intervention: a file's path as seen from the fork's folder, so that a
    fork committed beside the file it was made with plays back wherever the repository is cloned."""
    if intervention is None:
        return None
    described = intervention.describe()
    if described["source"].get("kind") == "file":
        described["source"] = {**described["source"], "path": parent_path(Path(described["source"]["path"]), out)}
    return described


def parent_path(parent: Path, out: Path) -> str:
    """Where `parent` is, seen from the fork's folder `out`: a relative path, so that a committed fork
    still names its parent after the repository moves (absolute where none exists, e.g. another drive)."""
    try:
        return Path(os.path.relpath(parent.resolve(), out.resolve())).as_posix()
    except ValueError:
        return str(parent.resolve())


def _limit(parents: int | None, asked: int | None) -> int | None:
    """The fork's item limit, recorded in its configuration: the parent's, or fewer items if asked."""
    return parents if asked is None else asked if parents is None else min(parents, asked)


def wrong_answer(item: Any, parent: DebateRecord | None) -> Any:
    """The wrong answer a fork uses on `item`: the most common wrong answer of the parent's round 1
    in that debate (a tie: the one given first, in the order of the agents), else `fallback_wrong`."""
    truth = getattr(item, "answer", None)
    if truth is None:
        return None
    choices = getattr(item, "choices", None) or []
    first = parent.rounds[0].answers.values() if parent is not None and parent.rounds else []
    wrong = [a for a in first if a is not None and not _same(a, truth, choices)]
    return tied_answers(wrong)[0] if wrong else fallback_wrong(truth, choices)


def fallback_wrong(truth: Any, choices: list[str] | None = None) -> Any:
    """A wrong answer derived from the truth, for an item whose parent gave none in round 1: the next
    option letter of a multiple-choice item (after the last, the first; options that read as the
    truth's are skipped), the other of yes/no, the truth plus 1 for a number; None for free text."""
    if choices:
        truth_letter = first_of_same(truth, choices)
        letters = LETTERS[: len(choices)]
        if truth_letter not in letters:
            return None
        start = letters.index(truth_letter)
        later = [letters[(start + k) % len(letters)] for k in range(1, len(letters))]
        return next((c for c in later if first_of_same(c, choices) != truth_letter), None)
    value = normalize(truth)
    if value in ("yes", "no"):
        return "no" if value == "yes" else "yes"
    if isinstance(truth, (int, float)) and not isinstance(truth, bool):
        return truth + 1
    if hasattr(value, "denominator"):  # a number written as text
        return int(value) + 1 if value.denominator == 1 else float(value) + 1
    return None


def _same(answer: Any, truth: Any, choices: list[str]) -> bool:
    return answers_equal(first_of_same(answer, choices), first_of_same(truth, choices))


def _parent_run(folder: RunFolder) -> tuple[RunRecord, list[DebateRecord]]:
    if not (folder.path / "run.json").is_file():
        raise ForkError(f"{folder.path} is not a run folder (no run.json)")
    try:
        record, debates = folder.read_run(), folder.debates()
    except (ValueError, OSError) as exc:
        raise ForkError(f"{folder.path} is not a readable run folder: {str(exc).splitlines()[0]}") from exc
    if not debates:
        raise ForkError(f"{folder.path} holds no finished debate to fork")
    return record, debates


def _check_round(spec: registry.ProtocolSpec, parents: dict, params: dict, at_round: int, protocol: str) -> None:
    """`at_round` within both the parent's rounds (the rounds it can play back) and the fork's."""
    name = spec.flag("rounds")
    if name is None:
        raise ForkError(f"protocol {protocol!r} has no rounds to fork at")
    ceiling = min(parents[name] + 1, params[name])  # one past the parent's last round extends its debates
    if ceiling < 2:
        raise ForkError(f"this {protocol} fork has no round to begin at: a fork begins at round 2, and its {name!r} "
                        f"parameter is {params[name]}")
    if not isinstance(at_round, int) or not 2 <= at_round <= ceiling:
        why = (f"the run's {name!r} parameter" if ceiling == params[name] == parents[name]
               else f"the fork runs to round {params[name]} and plays back at most the parent's {parents[name]}")
        raise ForkError(f"round {at_round} is out of range: a fork of this {protocol} run begins at round 2 to "
                        f"{ceiling} ({why})")


def _plans(items, debates: list[DebateRecord], seed_of: dict[str, int], intervention: Intervention | None) -> dict:
    """(item id, seed) -> (the parent's record, the wrong answer), checked against what the intervention needs."""
    by_id = {str(item.id): item for item in items}
    plans = {}
    for d in debates:
        item = by_id.get(d.item_id)
        wrong = wrong_answer(item, d) if item is not None else None
        for need in intervention.needs if intervention else ():
            found = wrong if need == "wrong" else getattr(item, "answer", None)
            if found is None:
                what = "wrong" if need == "wrong" else "correct"
                raise ForkError(f"item {d.item_id} has no {what} answer for intervention {intervention.name!r} "
                                "(a wrong one comes from the parent's round 1, or from a number, yes/no or options)")
        plans[(d.item_id, seed_of[d.debate_id])] = (d, wrong)
    return plans


def _unrecorded(exc: NotRecordedError, debates: list[DebateRecord], seed_of: dict[str, int], at_round: int,
                parent: Path, out: Path | str) -> str:
    """Why the fork stopped at a call before `at_round` that the parent did not record."""
    item, seed, agent, phase, round = exc.where
    ended = {(d.item_id, seed_of[d.debate_id]): len(d.rounds) for d in debates}.get((item, seed))
    if ended is not None and round > ended:
        return (f"the parent's debate of item {item} ended after round {ended}, so it has no round {round} to play "
                f"back; fork at round {ended + 1} at most, or keep the parent's stop rule ({out} stopped there)")
    return (f"item {item}, {agent} {phase} round {round}: {exc.why}, in the record of {parent}; either that record "
            f"lacks the call or the protocol or its parameters now ask otherwise. {out} stopped there; the debates it "
            f"finished are kept")


def _compared(link: Parent, skip: set[str]) -> dict:
    """`link` as a resume compares it: an intervention file by its content (sha256), wherever it is and
    however its path was recorded (a fork made in another checkout resumes with this one's copy)."""
    data = link.model_dump(exclude=skip)
    source = (data.get("intervention") or {}).get("source") or {}
    if source.get("kind") == "file":
        source.pop("path", None)
    return data


def _check_resume(out: Path, link: Parent) -> None:
    """`out` forks the same run at the same round with the same change; its parameters the run's
    configuration check compares (a fork recorded before `Parent.params` existed has none to compare)."""
    folder = RunFolder(out)
    if folder.exists:
        before = folder.read_run().parent
        skip = {"run"} | ({"params"} if before is not None and before.params is None else set())
        if before is None or _compared(before, skip) != _compared(link, skip):
            raise ForkError(f"cannot resume {out}: it is not a fork of the same run, round and intervention "
                            "(with the same --model and --resample)")
