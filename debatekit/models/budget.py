"""Completion-token budgets derived from the bounds a reply schema already declares.

A `max_tokens` that is too small cuts the JSON off and the whole reply is lost as a parse
failure (the repair round is cut off at the same place); a budget only costs time when the
model actually writes that much. `reply_tokens` takes the longest valid pretty-printed reply
the schema allows (maxLength, maxItems, enums, integer maxima) and turns it into tokens.
"""

from __future__ import annotations

import json
import math
from typing import Any

from pydantic import BaseModel

CHARS_PER_TOKEN = 2.5
"""Below the ~3 characters per token measured on the local model's pretty-printed replies
quoting log lines (digits are one token each in Qwen's tokenizer), so the bound holds."""

UNBOUNDED_STRING = 400
"""Characters assumed for a string without maxLength (or items of an array without maxItems: 8)."""


def reply_tokens(model: type[BaseModel], chars_per_token: float = CHARS_PER_TOKEN) -> int:
    """Tokens for the longest reply `model`'s JSON schema allows, pretty-printed."""
    schema = model.model_json_schema()
    return math.ceil(_chars(schema, schema.get("$defs", {}), 0) / chars_per_token) + 8


def _chars(s: dict[str, Any], defs: dict[str, Any], depth: int) -> int:
    if "$ref" in s:
        s = defs[s["$ref"].rsplit("/", 1)[-1]]
    if "anyOf" in s:
        return max(_chars(x, defs, depth) for x in s["anyOf"])
    if "enum" in s or "const" in s:
        return max(len(json.dumps(v)) for v in s.get("enum", [s.get("const")]))
    indent = 2 * (depth + 1)
    kind = s.get("type")
    if kind == "object":
        fields = s.get("properties", {})
        return 4 + indent + sum(indent + len(k) + 5 + _chars(v, defs, depth + 1) for k, v in fields.items())
    if kind == "array":
        return 4 + indent + s.get("maxItems", 8) * (indent + 2 + _chars(s.get("items", {}), defs, depth + 1))
    if kind == "string":
        return s.get("maxLength", UNBOUNDED_STRING) + 2
    if kind == "integer":
        return len(str(s.get("maximum", 10**9))) + 1
    if kind == "number":
        return 12
    if kind == "boolean":
        return 5
    return UNBOUNDED_STRING
