"""Structured answers shared by the question-answering protocols (society_of_mind, baselines)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

AnswerKind = Literal["auto", "integer", "number", "text"]
REASONING = Field(description="The working: every intermediate result, briefly.",
                  json_schema_extra={"maxLength": 600})


class IntegerAnswer(BaseModel):
    """An answer that is a whole number."""

    reasoning: str = REASONING
    answer: int = Field(description="The final answer, a whole number.")


class NumberAnswer(BaseModel):
    """An answer that is a number."""

    reasoning: str = REASONING
    answer: float = Field(description="The final answer, a number.")


class TextAnswer(BaseModel):
    """An answer in a few words."""

    reasoning: str = REASONING
    answer: str = Field(description="The final answer, in a few words.")


def answer_model(kind: AnswerKind, truth: Any) -> type[BaseModel]:
    """The output model for `kind`; `auto` follows the type of the item's ground truth."""
    if kind == "auto":
        kind = "integer" if isinstance(truth, int) and not isinstance(truth, bool) else (
            "number" if isinstance(truth, float) else "text")
    return {"integer": IntegerAnswer, "number": NumberAnswer, "text": TextAnswer}[kind]


SYSTEM = ("You are a careful problem solver. Reply with a JSON object with the fields `reasoning` and "
          "`answer`. In `reasoning`, work step by step and write every intermediate result (for an "
          "arithmetic expression: first compute each product, then add and subtract the terms one at a "
          "time from left to right, e.g. '3*4=12, 5*6=30; 1+12=13, 13+2=15, 15-30=-15').")


def question_prompt(question: str) -> str:
    """First-round prompt (Du et al. 2023): the question and the request to state the answer."""
    return f"{question} Make sure to state your final answer in the `answer` field."


def persona_system(persona: str | None) -> str:
    return SYSTEM if not persona else f"{SYSTEM}\n{persona}"
