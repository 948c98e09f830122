"""What a debater or a consultant is sent and how its reply is read: the transcript (`render`), the
call's messages (`advocate_*`), and the reply models of an argument and of a judge's question,
which parse free text (tags) or JSON."""

from __future__ import annotations

import functools
from typing import Literal

from pydantic import BaseModel, Field, create_model

from debatekit.protocols.judged_debate import prompts as P


def render(rounds: list[dict[str, str | None]], speakers: list[tuple[str, str]]) -> str:
    """The transcript: `Round i:` blocks listing, in `speakers` order (key, shown name), what each said."""
    blocks = []
    for number, said in enumerate(rounds, start=1):
        lines = [f"Round {number}:"] + [f'{name}: """{said[key]}"""' for key, name in speakers if said.get(key)]
        blocks.append("\n\n".join(lines))
    return "\n\n---\n\n".join(blocks)


def advocate_messages(system: str, question: str, mine: str, theirs: str, body: str,
                      other_tag: str = "opponent_answer") -> list[dict]:
    """A debater's or consultant's call: the role, its position (confirmed), then evidence and request."""
    return [{"role": "system", "content": system},
            {"role": "user", "content": P.POSITIONS.format(question=question, mine=mine, theirs=theirs,
                                                           other_tag=other_tag)},
            {"role": "assistant", "content": P.CONFIRM.format(question=question, mine=mine, theirs=theirs)},
            {"role": "user", "content": body}]


def advocate_system(template: str, word_limit: int, answer_format: str, **fields: str) -> str:
    """A debater's or consultant's role, with the reply shape of the answer format and the quote rules."""
    output = P.TEXT_OUTPUT if answer_format == "text" else P.JSON_OUTPUT
    return template.format(word_limit=word_limit, output=output, quote_rules=P.QUOTE_RULES, **fields)


def advocate_turn(evidence: str, kind: str, transcript: str, request: str, steps: str, word_limit: int,
                  answer_format: str) -> str:
    """The last message of an argument call: the evidence, the record so far, the request and the steps."""
    where, what = ((" in <thinking></thinking> tags", "your argument in <argument></argument> tags")
                   if answer_format == "text" else (" in the `thinking` field", "your argument in the `argument` field"))
    block = P.TRANSCRIPT.format(kind=kind, transcript=transcript) if transcript else ""
    return P.TURN.format(evidence=evidence, transcript=block, request=request, where=where, steps=steps,
                         what=what, word_limit=word_limit)


# --- replies --------------------------------------------------------------------------------

def _tagged(text: str, tag: str) -> str:
    """The text of the first `<tag>` section (to its end tag or the reply's end); failing that, what
    follows `</thinking>`."""
    if f"<{tag}>" in text:
        return text.split(f"<{tag}>", 1)[1].split(f"</{tag}>", 1)[0].strip()
    if "</thinking>" in text and (rest := text.split("</thinking>", 1)[1].strip()):
        return rest
    raise ValueError(f"no <{tag}></{tag}> section in the reply")


@functools.lru_cache(maxsize=64)
def argument_model(defends: str, answer_format: str) -> type[BaseModel]:
    """An argument reply: private `thinking`, the `argument` the judge reads, and the answer it defends."""
    model = create_model("Argument", thinking=(str, ...), argument=(str, Field(min_length=1)),
                         answer=(Literal[defends], defends))  # type: ignore[valid-type]
    if answer_format == "text":
        model.from_text = classmethod(lambda cls, text: cls(thinking=text, argument=_tagged(text, "argument")))
        model.repair_prompt = P.ARGUMENT_REPAIR
    return model


@functools.lru_cache(maxsize=4)
def question_model(answer_format: str) -> type[BaseModel]:
    """A questioning judge's reply: private `thinking` and the `question` the consultant reads."""
    model = create_model("JudgeQuestion", thinking=(str, ...), question=(str, Field(min_length=1)))
    if answer_format == "text":
        model.from_text = classmethod(lambda cls, text: cls(thinking=text, question=_tagged(text, "question")))
        model.repair_prompt = P.QUESTION_REPAIR
    return model
