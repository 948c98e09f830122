"""Field types shared by the protocols' reply models."""

from __future__ import annotations

import functools
import math
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, Field


def _from_percent(value: Any) -> Any:
    """A weak model often writes 85 for 0.85 (llama.cpp's grammar does not bound numbers): read it as a percent."""
    return value / 100 if isinstance(value, (int, float)) and not isinstance(value, bool) and 1 < value <= 100 else value


Probability = Annotated[float, Field(ge=0, le=1), BeforeValidator(_from_percent)]
"""A 0-1 confidence; 1 < x <= 100 is read as a percent, anything else out of range is an error."""


def as_probability(value: Any) -> float | None:
    """A 0-1 confidence read leniently, or None when there is none to read.

    Numbers and numeric strings are taken as they are when in [0, 1] and as percents when in
    (1, 100]; a string ending in `%` is a percent. Anything else (text, a bool, a value out of
    range) is None, for the caller to treat as "no confidence given".
    """
    if isinstance(value, str):
        text = value.strip()
        percent = text.endswith("%")
        try:
            value = float(text.rstrip("%").strip())
        except ValueError:
            return None
        if percent:
            value /= 100
            return value if 0 <= value <= 1 else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        return None
    value = _from_percent(float(value))
    return value if 0 <= value <= 1 else None


@functools.cache
def uncapped(model: type[BaseModel]) -> type[BaseModel]:
    """`model` with every `maxLength` taken out of the JSON schema it sends; fields and parsing unchanged.

    The seed protocols cap their reply models' text fields in the schema (a `json_schema_extra`
    `maxLength`, which a local engine turns into a grammar and pydantic never checks), so their
    `text_caps=false` sends this instead and leaves the call's token budget as the only bound. The
    name stays the model's, so the response format reads the same apart from the caps.
    """
    class Uncapped(model):  # type: ignore[misc, valid-type]
        @classmethod
        def model_json_schema(cls, *args, **kwargs) -> dict[str, Any]:
            return _without_max_length(super().model_json_schema(*args, **kwargs))

    Uncapped.__name__ = Uncapped.__qualname__ = model.__name__
    return Uncapped


def _without_max_length(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _without_max_length(v) for k, v in node.items() if not (k == "maxLength" and node.get("type") == "string")}
    if isinstance(node, list):
        return [_without_max_length(v) for v in node]
    return node


def caps(keep: bool):
    """The reply-model transform of a protocol's `text_caps` parameter: the model itself, or `uncapped`."""
    return (lambda model: model) if keep else uncapped
