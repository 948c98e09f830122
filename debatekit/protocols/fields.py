"""Field types shared by the protocols' reply models."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field


def _from_percent(value: Any) -> Any:
    """A weak model often writes 85 for 0.85 (llama.cpp's grammar does not bound numbers): read it as a percent."""
    return value / 100 if isinstance(value, (int, float)) and not isinstance(value, bool) and 1 < value <= 100 else value


Probability = Annotated[float, Field(ge=0, le=1), BeforeValidator(_from_percent)]
"""A 0-1 confidence; 1 < x <= 100 is read as a percent, anything else out of range is an error."""
