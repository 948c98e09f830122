"""Prompts of reconcile, in debatekit's words with the structure of the official code.

Every call is a fresh conversation (no memory of earlier rounds): optional convincing samples as
worked examples (a question, then its gold explanation and answer), then the question, the
request for step-by-step reasoning and a confidence, and the answer format. A discussion round
repeats all of that and adds the previous round's answers, grouped by answer (`summary`).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from debatekit.datasets.voting import normalize
from debatekit.protocols.shared.answers import AnswerSpec

ASK = ("Answer the question, reasoning step by step. Also judge how likely it is that your answer is "
       "right: that is your confidence, from 0.0 to 1.0.")
FOCUS = "Write nothing that does not bear on the question."
REVIEW = ("Below are the solutions the agents at this table gave in the previous round. Read them carefully "
          "as extra information, then give your own answer with step-by-step reasoning. Say plainly which of "
          "these views you agree or disagree with, and why.")
HINT = "Use this fact in your answer: {explanation}"
_STATED = re.compile(r"^\W*(answer|confidence)\b[^:\n]*:", re.IGNORECASE)


def messages(spec: AnswerSpec, question: str, shots: list[tuple[AnswerSpec, Any]],
             summary: str | None = None, hint: str | None = None) -> list[dict]:
    """One agent's whole prompt: worked examples (user/assistant pairs), then the question.

    Args:
        spec: the item's answer spec.
        question: the item's question.
        shots: convincing samples as (their spec, training item with `explanation`), shown in order.
        summary: the previous round's grouped answers (a discussion round), or None (the first round).
        hint: a gold explanation the agent must take into account (the convincing-sample test), or None.
    """
    turns: list[dict] = []
    for shot_spec, shot in shots:
        turns += [{"role": "user", "content": f"Q: {shot_spec.question(shot.question)}"},
                  {"role": "assistant", "content": worked(shot_spec, shot.explanation, shot.answer)}]
    parts = [f"Q: {spec.question(question)}"]
    if hint:
        parts.append(HINT.format(explanation=hint))
    parts += [ASK, spec.closing(confidence=True), FOCUS]
    if summary:
        parts += [REVIEW, summary, spec.closing(confidence=True)]
    return [*turns, {"role": "user", "content": "\n\n".join(parts)}]


def worked(spec: AnswerSpec, explanation: str, answer: Any) -> str:
    """A convincing sample's reply: its gold explanation and answer, in the run's answer format (no confidence,
    as in the official examples)."""
    if spec.format == "json":  # reasoning as the list of steps the schema asks for: a line a step
        steps = [line.strip() for line in explanation.splitlines() if line.strip()]
        return json.dumps({"reasoning": steps, "answer": answer}, ensure_ascii=False)
    return f"{explanation}\nAnswer: {answer}"


def summary(spec: AnswerSpec, replies: list[Any]) -> str:
    """The previous round for the discussion prompt: the two most common answers (ties: the one given
    first), each with how many agents gave it and each of their explanations with its stated confidence.

    Args:
        spec: the item's answer spec (how the reasoning is read).
        replies: the parsed replies of the agents that answered, in agent order.
    """
    counts = Counter(normalize(r.answer) for r in replies)
    blocks = []
    for key, count in counts.most_common(2):
        group = [r for r in replies if normalize(r.answer) == key]
        answer = group[0].answer
        lines = [f"{count} agent{'s' if count > 1 else ''} gave the answer {answer}."]
        lines += [f"Solution of one agent: my answer is {answer}, because {explanation(spec, r)} "
                  f"My confidence is {stated(r.confidence)}." for r in group]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def explanation(spec: AnswerSpec, reply: Any) -> str:
    """A reply's reasoning without the final `Answer:` / `Confidence:` lines a free-text reply ends with."""
    lines = reply.reasoning.strip().split("\n")
    if spec.format == "text":
        while lines and (_STATED.match(lines[-1]) or not lines[-1].strip()):
            lines.pop()
    return "\n".join(lines).strip()


def stated(confidence: float | None) -> float:
    """The confidence as the official code shows and weighs it: one not given (or unreadable) is 0.0."""
    return 0.0 if confidence is None else confidence
