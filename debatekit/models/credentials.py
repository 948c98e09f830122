"""Credential masking: API keys given in model options or the environment never reach a trace or a log."""

from __future__ import annotations

import logging
import os
from typing import Any

HIDDEN = ("key", "token", "secret", "password", "auth", "credential", "cookie")
_SECRETS: set[str] = set()  # credential values given in any gateway's model options


def remember(options: dict[str, dict]) -> None:
    """Note the credential values in `options` (per-model litellm arguments) so `redact` masks them."""
    _SECRETS.update(_secret_values(options))


def _secret_values(value: Any, hidden: bool = False) -> set[str]:
    if isinstance(value, dict):
        return set().union(*(_secret_values(v, hidden or any(h in str(k).lower() for h in HIDDEN))
                             for k, v in value.items()))
    if isinstance(value, list):
        return set().union(*(_secret_values(v, hidden) for v in value))
    return {value} if hidden and isinstance(value, str) and len(value) >= 6 else set()


def redact(text: str) -> str:
    """`text` with every known credential replaced by ***: values of credential-named keys in
    model options and of credential-named environment variables (OPENAI_API_KEY, ...)."""
    env = {v for k, v in os.environ.items() if len(v) >= 6 and any(h in k.lower() for h in HIDDEN)}
    for secret in sorted(_SECRETS | env, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, "***")
    return text


def redact_record(record: logging.LogRecord) -> bool:
    """Logging filter: a record's message with credentials masked (it is always kept)."""
    message = record.getMessage()
    masked = redact(message)
    if masked != message:
        record.msg, record.args = masked, None
    return True


def model_options_public(options: dict[str, dict]) -> dict[str, dict]:
    """Model options with credentials removed, for traces (nested ones too, e.g. extra_headers)."""
    return {m: _mask(o) for m, o in options.items()}


def _mask(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: "***" if any(h in str(k).lower() for h in HIDDEN) else _mask(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask(v) for v in value]
    return value
