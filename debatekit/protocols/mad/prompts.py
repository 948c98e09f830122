"""Prompts of `mad` and the moderator's reply, in debatekit's own words.

Each prompt keeps the structure of its counterpart in the official code
(`code/utils/config4all.json`): what the role is told, what it is shown, what it must give.
"""

from __future__ import annotations

import functools
from typing import Any, Literal

from pydantic import BaseModel, Field, create_model

from debatekit._base.answer_kinds import ANSWER_TEXT, LETTERS
from debatekit.protocols.shared import extract
from debatekit.protocols.shared.answers import AnswerSpec, answer_type

DEBATER_SYSTEM = ("You are one of two debaters in a debate. The two of you need not end up agreeing: the point "
                  "is to find the correct answer.\nThe question under debate:\n{topic}")
MODERATOR_SYSTEM = ("You moderate a debate. Two debaters will give their answers to the question below and "
                    "argue over them:\n{topic}\nWhen each round ends you weigh their answers and decide which "
                    "one is correct.")
OPPOSE = "{argument}\n\nYou do not agree with my answer. Give your own answer and the reasons for it."
REBUT = "{argument}\n\nDo you agree with how I see it? Give your reasons and your answer."
MODERATE = ("Round {round} of the debate is over for both sides.\n\nThe affirmative side argues:\n{affirmative}"
            "\n\nThe negative side argues:\n{negative}\n\nAs the moderator, weigh both sides' answers and decide "
            "whether one answer is clearly the better. If one is, explain why you back the affirmative or the "
            "negative side and give the answer you hold to be correct: the debate then ends. If neither is, the "
            "debate goes on to another round.\n\n{decide}")
DECIDE_TEXT = ("End your reply with three lines:\nPreference: yes or no\nSide: affirmative, negative or none\n"
               "`Answer: X`, where X is {what}; write `Answer: none` when there is no preference.")
DECIDE_JSON = ("Reply with a JSON object: `preference` (true when one answer is clearly the better), "
               "`supported_side` (affirmative or negative; null without a preference), `reason` (why), and "
               "`answer` ({what}; null without a preference).")
CANDIDATES = ("The affirmative side argues:\n{affirmative}\n\nThe negative side argues:\n{negative}\n\n"
              "Which candidate answers are there? List them, without any reasons.")
VERDICT = "So, to the question: {question}\nSum up your reasons and give the answer you hold to be correct."
JSON_REPLY = "Reply with a JSON object: `reasoning` (your argument) and `answer`."
MISSING = "(no argument: this side's call failed)"
NONE_WORDS = ("none", "n/a", "-", "null", "")  # "no" is an answer to a yes/no item


def debater_system(spec: AnswerSpec, question: str) -> str:
    """A debater's system prompt: its role and the question (with its options); in json format, the reply's shape."""
    role = DEBATER_SYSTEM.format(topic=spec.question(question))
    return role if spec.format == "text" else f"{role}\n\n{JSON_REPLY}"


def moderator_system(spec: AnswerSpec, question: str) -> str:
    """The moderator's system prompt, which the judge reuses (as the official code does)."""
    return MODERATOR_SYSTEM.format(topic=spec.question(question))


def asked(prompt: str, spec: AnswerSpec) -> dict:
    """A user message: the prompt, then how to give the answer."""
    return {"role": "user", "content": f"{prompt}\n\n{spec.closing()}"}


def moderate(spec: AnswerSpec, round: int, affirmative: str, negative: str) -> dict:
    """The moderator's prompt after a round: both sides' latest arguments, and the decision asked for."""
    decide = (DECIDE_TEXT if spec.format == "text" else DECIDE_JSON).format(what=ANSWER_TEXT[spec.kind][1])
    return {"role": "user", "content": MODERATE.format(round=round, affirmative=affirmative, negative=negative,
                                                       decide=decide)}


def decision_model(spec: AnswerSpec) -> type[BaseModel]:
    """The moderator's reply: a preference, the side it backs, why, and the answer (None without one)."""
    return _decision(spec.kind, spec.format, spec.choices)


@functools.lru_cache(maxsize=64)
def _decision(kind: str, format: str, choices: tuple[str, ...]) -> type[BaseModel]:
    letters = tuple(LETTERS[: len(choices)])
    value = answer_type(kind, letters, format)
    model = create_model(
        "ModeratorDecision",
        preference=(bool, Field(description="Whether one answer is clearly the better.")),
        supported_side=(Literal["affirmative", "negative"] | None, Field(
            description="The side backed; null without a preference.")),
        reason=(str, Field(description="Why.")),
        answer=(value | None, Field(description=f"The answer: {ANSWER_TEXT[kind][0]}; null without a preference.")))
    if format == "text":
        model.from_text = classmethod(functools.partial(_from_text, kind=kind, choices=choices))
        model.repair_prompt = ("Your previous reply did not end with a decision that could be read: {error}\n"
                               + DECIDE_TEXT.format(what=ANSWER_TEXT[kind][1]))
    return model


def _from_text(cls, text: str, *, kind: str, choices: tuple[str, ...]) -> BaseModel:
    """Read the decision from the reply's last `Preference:`, `Side:` and `Answer:` lines.

    Only the `Answer:` line counts as an answer (the reasoning names both sides' answers). A
    missing `Preference:` line is read from the answer; a reply with neither line, or an answer
    line that is not an answer of the item's kind, is a parse failure.
    """
    preference, side, said = (extract.labelled(text, label) for label in ("Preference", "Side", "Answer"))
    answer = None
    if said is not None and (said.split() or [""])[0].lower().strip("().,;") not in NONE_WORDS:
        answer = extract.extract(kind, f"Answer: {said}", list(choices))
        if answer is None:
            raise ValueError(f"the `Answer:` line ({said!r}) is not {ANSWER_TEXT[kind][0]} nor `none`")
    if preference is None and said is None:
        raise ValueError("no `Preference:` or `Answer:` line found")
    backed = next((s for s in ("affirmative", "negative") if side and side.lower().startswith(s[:3])), None)
    prefers = preference.lower().startswith(("yes", "true")) if preference is not None else answer is not None
    return cls(preference=prefers, supported_side=backed, reason=text, answer=answer)


def decision_record(turn: Any) -> dict:
    """What a round keeps of the moderator's call: its decision, or the error of a failed call."""
    if not turn.ok:
        return {"preference": None, "supported_side": None, "answer": None, "error": turn.error}
    return turn.parsed.model_dump(mode="json", exclude={"reason"})
