"""Convincing samples of reconcile: training items whose gold explanation changed a model's mind.

A training item convinces a model when the model answers it wrongly on its own and rightly once
it is given the item's gold explanation (the official code's `intervene` prompt). Each agent is
shown, as worked examples, the samples that convinced the *other* agents' models.

The training split is a JSONL dataset of the usual form (`id`, `question`, `answer`, optional
`choices`) whose items carry a gold explanation: `metadata.explanation` (ECQA's), else
`metadata.solution` (GSM8K's), else the `evidence` passages joined (StrategyQA's facts).
No shipped dataset is a training split (they are all test or dev splits), so a shipped name is
refused rather than letting a run learn from the items it is scored on.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from debatekit import datasets
from debatekit.datasets.voting import answers_equal
from debatekit.protocols.reconcile import prompts
from debatekit.protocols.shared.answers import AnswerSpec, spec_for
from debatekit.registry import ProtocolError


@dataclass(frozen=True)
class Sample:
    """One training item with its gold explanation."""

    id: str
    question: str
    answer: Any
    choices: tuple[str, ...]
    explanation: str


def load(name_or_path: str) -> list[Sample]:
    """The training split `name_or_path` (a JSONL file), every item with an answer and an explanation.

    Raises:
        ProtocolError: a shipped dataset (none is a training split), an unreadable file, or an
            item without an answer or an explanation (named).
    """
    shipped = datasets.datasets_dir().resolve()
    try:
        path = datasets.resolve(name_or_path)
    except datasets.DatasetError as exc:
        raise ProtocolError(f"reconcile: convincing samples need a training split: {exc}") from exc
    if path.resolve().parent == shipped:
        raise ProtocolError(f"reconcile: convincing samples need a training split, and {path.stem!r} is a shipped "
                            "test/dev split (no shipped dataset has a training split); give a JSONL file of "
                            "training items with answers and explanations")
    try:
        items, _ = datasets.load(str(path))
    except datasets.DatasetError as exc:
        raise ProtocolError(f"reconcile: convincing samples: {exc}") from exc
    samples = []
    for item in items:
        explanation = item.metadata.get("explanation") or item.metadata.get("solution") or " ".join(item.evidence)
        if item.answer is None or not str(explanation).strip():
            what = "answer" if item.answer is None else "explanation (metadata.explanation, metadata.solution or evidence)"
            raise ProtocolError(f"reconcile: convincing samples: {Path(path).name}, item {item.id!r} has no {what}")
        samples.append(Sample(item.id, item.question, item.answer, tuple(item.choices), str(explanation).strip()))
    return samples


async def select(debate, item, samples: list[Sample], agents: dict[str, str | None], *, answer: str,
                 answer_format: str, count: int, pool: int, temperature: float | None
                 ) -> dict[str, list[tuple[AnswerSpec, Sample]]]:
    """Each agent's convincing samples, chosen with this debate's own (traced) calls.

    For each distinct model, the first `pool` training items (other than the item debated) are put
    to it without help (phase `convince_before`, round 0); those it gets wrong are put again with
    their gold explanation (`convince_after`); the first `count` it then gets right convinced it.

    Args:
        agents: agent name -> model (None: the run's), in agent order.

    Returns:
        Agent name -> (spec, sample) pairs: the samples that convinced the other agents' models,
        in agent order, each once.
    """
    candidates = [s for s in samples if s.id != item.id and s.question != item.question][:pool]
    specs = [spec_for(s, answer, answer_format) for s in candidates]
    first_agent = {}
    for name, model in agents.items():
        first_agent.setdefault(model, name)

    async def convinced(model: str | None, agent: str) -> list[int]:
        def ask(k: int, phase: str, hint: str | None):
            return debate.ask(agent, prompts.messages(specs[k], candidates[k].question, [], hint=hint),
                              specs[k].confident_output, phase=phase, round=0, temperature=temperature,
                              model=model, sample=k)

        before = await debate.gather(ask(k, "convince_before", None) for k in range(len(candidates)))
        wrong = [k for k, turn in enumerate(before) if turn.ok and not answers_equal(turn.parsed.answer, candidates[k].answer)]
        after = await debate.gather(ask(k, "convince_after", candidates[k].explanation) for k in wrong)
        return [k for k, turn in zip(wrong, after) if turn.ok and answers_equal(turn.parsed.answer, candidates[k].answer)][:count]

    found = dict(zip(first_agent, await asyncio.gather(*(convinced(m, a) for m, a in first_agent.items()))))
    shown = {}
    for name in agents:
        picked: list[int] = []
        for other, model in agents.items():
            picked += [k for k in found[model] if other != name and k not in picked]
        shown[name] = [(specs[k], candidates[k]) for k in picked]
    return shown
