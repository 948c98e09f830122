"""One line from a pydantic validation error, for the one-line messages bad input gets."""

from __future__ import annotations

from pydantic import ValidationError


def first_error(exc: ValidationError, default: str = "") -> tuple[str, str]:
    """The dotted field path and message of a validation error's first problem."""
    errors = exc.errors()
    if not errors:
        return default, str(exc)
    return ".".join(str(p) for p in errors[0]["loc"]) or default, errors[0]["msg"]
