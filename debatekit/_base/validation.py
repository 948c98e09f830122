"""Pieces of the one-line messages bad input gets: a pydantic error's first problem, a likely meant name."""

from __future__ import annotations

import difflib
from typing import Iterable

from pydantic import ValidationError


def first_error(exc: ValidationError, default: str = "") -> tuple[str, str]:
    """The dotted field path and message of a validation error's first problem."""
    errors = exc.errors()
    if not errors:
        return default, str(exc)
    return ".".join(str(p) for p in errors[0]["loc"]) or default, errors[0]["msg"]


def did_you_mean(given: str, known: Iterable[str]) -> str:
    """`; did you mean 'NAME'?` for the known name closest to a mistyped one, or "" when none is close."""
    close = difflib.get_close_matches(given, list(known), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""
