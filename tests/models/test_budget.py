"""Token budgets from reply schemas: the longest valid reply must fit."""

import json
from typing import Literal

from pydantic import BaseModel, Field

from debatekit.models.budget import CHARS_PER_TOKEN, reply_tokens
from debatekit.protocols.judge_refine import RefinedHypothesis, hypotheses_model, judge_schema


def longest(schema: dict, defs: dict) -> object:
    """The longest instance a JSON schema allows (strings of 'x' at maxLength, full lists)."""
    if "$ref" in schema:
        schema = defs[schema["$ref"].rsplit("/", 1)[-1]]
    if "enum" in schema:
        return max(schema["enum"], key=lambda v: len(json.dumps(v)))
    kind = schema["type"]
    if kind == "object":
        return {k: longest(v, defs) for k, v in schema["properties"].items()}
    if kind == "array":
        return [longest(schema["items"], defs)] * schema["maxItems"]
    if kind == "string":
        return "x" * schema["maxLength"]
    return {"integer": schema.get("maximum"), "number": 0.123456, "boolean": False}[kind]


def test_the_longest_valid_reply_fits_the_budget():
    for model in (hypotheses_model(5), RefinedHypothesis, judge_schema([f"H{i}" for i in range(1, 16)])):
        schema = model.model_json_schema()
        text = json.dumps(longest(schema, schema.get("$defs", {})), indent=2)
        model.model_validate_json(text)  # the instance really is valid
        assert len(text) / CHARS_PER_TOKEN <= reply_tokens(model) <= 1.2 * len(text) / CHARS_PER_TOKEN + 20


def test_three_hypotheses_quoting_log_lines_fit():
    """The local model's reply that a 640-token budget cut off in CI (measured ~3 chars/token)."""
    assert reply_tokens(hypotheses_model(3)) >= 2 * 640


def test_budget_grows_with_bounds_and_counts_unbounded_strings():
    class Small(BaseModel):
        answer: str = Field(json_schema_extra={"maxLength": 10})
        kind: Literal["a", "bbbbbbbbbbbbbbbbbbbb"]

    class Large(BaseModel):
        answer: str = Field(json_schema_extra={"maxLength": 1000})
        kind: Literal["a", "bbbbbbbbbbbbbbbbbbbb"]

    class Free(BaseModel):
        answer: str
        items: list[int]

    assert reply_tokens(Small) < reply_tokens(Large)
    assert reply_tokens(Large) - reply_tokens(Small) >= 990 / CHARS_PER_TOKEN - 1
    assert reply_tokens(Free) > 400 / CHARS_PER_TOKEN
