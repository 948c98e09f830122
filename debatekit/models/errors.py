"""What went wrong with a model: a string no provider serves, a model that cannot be reached as
configured, and in a provider call its fault's kind (transient or a set-up problem) and a 429's wait."""

from __future__ import annotations

import asyncio
import time

MAX_RETRY_AFTER = 60.0  # seconds: the longest `Retry-After` honoured
TRANSIENT = {"timeout", "rate_limit", "server", "empty"}
"""Fault kinds of a provider attempt that the gateway retries with backoff."""


class ModelError(ValueError):
    """A model string that no provider can serve; the message names it."""


class ModelSetupError(RuntimeError):
    """A model that cannot be reached as configured (key, name, server, file); the message names it."""


class StopsRun(RuntimeError):
    """A fault of a call that no debate of the run may go on from (a fork asked its parent for a
    reply the parent never recorded): the debate is not recorded, and the run stops, naming it."""


class LocalModelError(RuntimeError):
    """The local model cannot be assembled, loaded or configured; the message says what to do
    (`debatekit.models.local.engine.LocalModelError`)."""


class ProviderFault(Exception):
    """A failed provider attempt, classified by kind."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


SETUP_MARKERS = {  # phrases of wrapped exceptions (litellm wraps a custom provider's error) -> kind
    "connection refused": "connection", "connect call failed": "connection", "cannot connect": "connection",
    "all connection attempts failed": "connection", "name or service not known": "connection",
    "connection error": "connection",  # the OpenAI client's APIConnectionError, its cause often dropped
    "expecting value": "bad_response", "jsondecodeerror": "bad_response",  # a reply that is not JSON at all
    "local model file not found": "setup", "localmodelerror": "setup", "model not found": "not_found",
    "enginelost": "server",  # the shared local engine died mid-call: retried, by a new engine if need be
    "engineincompatible": "setup", "engine wire": "setup",  # an engine another debatekit install started
}

INVALID_REPLY = "empty or invalid response from llm endpoint"
"""How litellm words a 200 whose body is no chat completion (an HTML page from a proxy, say)."""


def classify(exc: BaseException) -> tuple[str, str]:
    """Kind of a failed attempt: timeout, rate_limit, server, empty (transient); auth, not_found,
    connection, bad_response (not an API reply), setup (a set-up problem: not retried) or error
    (any other rejection).

    `connection` (nothing answers at the address) is a set-up problem until the model has
    answered once, and transient after (`Gateway` decides).
    """
    if isinstance(exc, ProviderFault):
        return exc.kind, str(exc)
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return "timeout", "no reply within the call timeout"
    name = type(exc).__name__
    status = getattr(exc, "status_code", None)
    message = str(exc).splitlines()[0][:300] if str(exc) else name
    if "Timeout" in name or status == 408:
        return "timeout", message
    if "RateLimit" in name or status == 429:
        return "rate_limit", message
    if "Authentication" in name or "PermissionDenied" in name or status in (401, 403):
        return "auth", message
    if "NotFound" in name or status == 404:
        return "not_found", message
    text = " ".join(f"{type(e).__name__} {e}" for e in _chain(exc)).lower()
    marker = next((kind for phrase, kind in SETUP_MARKERS.items() if phrase in text), None)
    received = text.partition(INVALID_REPLY)[2].partition("received:")[2].strip()
    if received and not received.startswith(("''", '""')):  # a body came back, whatever its content type,
        return "bad_response", message                       # and it was not an API reply
    # litellm reports a connection that failed as a 500; a 502-504 came from a server that is there
    gateway_error = isinstance(status, int) and status > 500
    if marker and not (marker == "connection" and gateway_error):
        return marker, message
    if isinstance(status, int) and status >= 500 or name in {"APIConnectionError", "ServiceUnavailableError"}:
        return "server", message
    return "error", f"{name}: {message}"


def _chain(exc: BaseException | None):
    """The exception and those it was raised from (a wrapped connection error names its cause there)."""
    seen = 0
    while exc is not None and seen < 8:
        yield exc
        exc, seen = exc.__cause__ or exc.__context__, seen + 1


def retry_after(exc: BaseException | None) -> float | None:
    """Seconds a 429 asks to wait (its `Retry-After` header), capped at MAX_RETRY_AFTER; None if absent."""
    headers = getattr(getattr(exc, "response", None), "headers", None) or getattr(
        exc, "litellm_response_headers", None) or {}
    value = headers.get("retry-after") or headers.get("Retry-After") if hasattr(headers, "get") else None
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        from email.utils import parsedate_to_datetime

        try:
            seconds = parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError):
            return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER)
