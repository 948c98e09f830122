"""Reading a reply: the response format asked for, the JSON inside a reply, whether it finished, its
parse into the asked model, and the text kept of it (capped, surrogates mended); the prompts that
ask for a repair. The gateway reads every reply through here, live or played back."""

from __future__ import annotations

import functools
import json
import re

from pydantic import BaseModel, ValidationError

from debatekit._base.validation import first_error
from debatekit.models import repetition

MAX_REPLY_CHARS = 100_000
"""Longest reply text stored in a trace or sent back in a repair round; the full reply is kept
once, in the response cache. A longer reply is cut here and ends with TRUNCATED."""
TRUNCATED = "\n[debatekit: reply truncated: {more} more characters beyond the {limit}-character limit]"
REPAIR_PROMPT = (
    "Your previous reply could not be used: {error}\n"
    "Reply again with only a JSON object that matches the required schema."
)
ENDINGS = {"cut_off": " (the reply was cut off at the {max_tokens}-token limit)",
           "loop": " (the reply repeated itself and was stopped)"}
LOOP_NOTE = ("\nYour previous reply kept repeating the same text and was stopped. Do not repeat yourself: "
             "give a few sentences of reasoning, then the final line(s) asked for.")
CUT_OFF_NOTE = ("\nYour previous reply reached the limit of {max_tokens} tokens and was cut off before its end. "
                "Keep this reply short: at most a few sentences of reasoning, then the final line(s) asked for.")


def response_format(output: type[BaseModel]) -> dict:
    """The OpenAI `json_schema` response format of a pydantic model (a fresh dict each call)."""
    return json.loads(_response_format_text(output))


@functools.lru_cache(maxsize=256)
def _response_format_text(output: type[BaseModel]) -> str:
    # model_json_schema costs ~0.3 ms per call; a model's schema does not change, so build it once.
    # Its title (the class name unless the model sets one) names it, so renaming a class in code
    # changes neither the request nor its cache key.
    schema = output.model_json_schema()
    return json.dumps({
        "type": "json_schema",
        "json_schema": {"name": schema.get("title", output.__name__), "schema": schema, "strict": False},
    })


def extract_json(text: str) -> str:
    """The JSON object inside a reply (providers without constrained output add fences or prose)."""
    start, end = text.find("{"), text.rfind("}")
    return text[start : end + 1] if 0 <= start < end else text


def unfinished(reply: dict, max_tokens: int) -> str | None:
    """How a reply failed to finish by itself: "loop" (the local engine stopped it repeating itself,
    `finish_reason` "loop", or it was cut off while repeating one span: `repetition.loop_start`),
    "cut_off" (it stopped at the token limit), or None (it ended by itself).

    A reply is cut off when the provider says so (`finish_reason` "length"), or, where it says
    nothing (a reply cached before debatekit kept the reason, a provider that omits it), when it
    used every token it was allowed."""
    reason = reply.get("finish_reason")
    if reason == "loop":
        return "loop"
    if reason == "length" or (reason is None and reply.get("completion_tokens", 0) >= max_tokens):
        return "loop" if repetition.loop_start(reply.get("text") or "") is not None else "cut_off"
    return None


def parse(output: type[BaseModel], text: str, free_text: bool, ending: str | None) -> BaseModel:
    """The reply parsed into `output`; a free-text reply that did not finish is read only where it
    states its answer (`from_text(text, finished=False)`), never from its last number or word."""
    if not free_text:
        return output.model_validate_json(extract_json(text))
    if ending is not None and getattr(output, "reads_unfinished", False):
        return output.from_text(text, finished=False)
    return output.from_text(text)


LONE_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
                                   r"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}")
"""A JSON escape of half a surrogate pair with no other half beside it (`\\ud800`)."""


def whole_text(text: str) -> str:
    """`text` with each unpaired surrogate replaced by U+FFFD, whether the reply holds the character
    (a server's JSON `"\\ud800"`, decoded) or its escape inside the model's own JSON: the reply is kept,
    stored and read, where the raw character fails every write of it and the escape every strict
    JSON reader."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return LONE_SURROGATE_ESCAPE.sub(r"\\ufffd", text) if "\\u" in text else text


def capped(text: str, limit: int | None = None) -> str:
    """`text` cut to `limit` characters (default MAX_REPLY_CHARS) with a marker saying how much was cut."""
    limit = limit or MAX_REPLY_CHARS
    return text if len(text) <= limit else text[:limit] + TRUNCATED.format(more=len(text) - limit, limit=limit)


def short_validation_error(exc: ValidationError) -> str:
    where, message = first_error(exc, default="reply")
    return f"{where}: {message} ({len(exc.errors())} error(s))"
