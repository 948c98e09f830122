"""Samples shared between arms of a study: a debate's round-1 answers reused as a vote's first samples.

A society_of_mind debate's round-1 answers are independent samples of one prompt at one
temperature, the same draws a self-consistency vote makes, so a study can let its vote arm reuse
them (`self_consistency(reuse=...)`): the vote is the debate's round-1 answers plus fresh samples
with seeds of their own, and both arms share their first draws. That holds only where the prompts
are the same: each reused call's recorded prompt hash must equal the vote's own prompt, and the
temperatures must agree, else the vote refuses (a debate with personas, another answer format).

    round1 = samples.round_one("results/studies/x/society_of_mind-...", item, messages, temperature=0.7)
    round1.answers            # the debate's agents' round-1 answers, agent 1 first
    round1.completion_tokens  # what those calls cost, for the vote arm's accounts
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from debatekit.models.cache import prompt_hash
from debatekit.registry import ProtocolError


@dataclass
class RoundOne:
    answers: list
    completion_tokens: int
    folder: str


_loaded: dict[tuple, tuple] = {}  # (folder, file sizes and times) -> (record, debates by item, events by debate)


def round_one(folder: str | Path, item, messages: list[dict], temperature: float) -> RoundOne:
    """The round-1 answers the debate run in `folder` gave on `item`, checked to be draws of the very
    prompt (`messages`) and temperature the caller would sample.

    Raises:
        ProtocolError: not a debate run, another temperature, the item not run there yet, or round-1
            prompts that differ from `messages`.
    """
    record, debates, events = _load(Path(folder))
    given = record.config.params.get("temperature", 0.7)
    if record.config.protocol != "society_of_mind":
        raise ProtocolError(f"reuse: {folder} is a {record.config.protocol} run; only a society_of_mind run's "
                            "round-1 answers are samples to share")
    if float(given) != float(temperature):
        raise ProtocolError(f"reuse: {folder} sampled at temperature {given}, this vote at {temperature}: "
                            "they are not the same draws")
    debate = debates.get(str(item.id))
    if debate is None or not debate.rounds:
        raise ProtocolError(f"reuse: item {item.id!r} has no round 1 in {folder} yet (run the debate first)")
    calls = [e for e in events.get(debate.debate_id, []) if e.get("round") == 1 and e.get("phase") == "answer"]
    wanted = prompt_hash(messages)
    if not calls or any(e.get("prompt_hash") != wanted for e in calls):
        raise ProtocolError(f"reuse: the round-1 prompts of {folder} differ from this vote's (personas, another "
                            "answer format?): its answers are not samples of the same prompt")
    answers = debate.rounds[0].answers
    order = sorted(answers, key=lambda agent: (len(agent), agent))
    return RoundOne([answers[agent] for agent in order], sum(int(e.get("completion_tokens") or 0) for e in calls),
                    str(folder))


def _load(folder: Path) -> tuple:
    """The debate run in `folder`, read once while its files stay as they are."""
    from debatekit.records.trace import RunFolder, RunFolderError

    if not (folder / "run.json").is_file():
        raise ProtocolError(f"reuse: {folder} is not a run folder (no run.json)")
    stamp = tuple((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(folder.glob("*.json*")))
    key = (str(folder.resolve()), stamp)
    if key not in _loaded:
        try:
            run = RunFolder(folder)
            record = run.read_run()
            debates = {d.item_id: d for d in run.debates()}
            events: dict[str, list[dict]] = {}
            for event in run.events():
                events.setdefault(event.get("debate_id"), []).append(event)
        except (RunFolderError, OSError, ValueError) as exc:
            raise ProtocolError(f"reuse: cannot read {folder}: {exc}") from exc
        _loaded.clear()
        _loaded[key] = (record, debates, events)
    return _loaded[key]
