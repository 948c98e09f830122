"""Scripted models: deterministic, offline replies for tests and dry runs.

A scripted model is reached through the same gateway as any other, by the model string
`scripted/NAME`. Register one with a queue of replies or a function of the request:

    model = scripted.register("calc", replies=['{"answer": 3}', '{"answer": 4}'])
    model = scripted.register("echo", fn=lambda req: req.messages[-1]["content"])

A reply may be a string, a dict or pydantic model (sent as JSON), a `Fault` that the
gateway raises as the matching provider error (timeout, rate limit, server error, ...), or
any of these `Delayed` or `CutOff` (ended at the token limit).
The built-in `scripted/schema` answers any structured request with a deterministic,
schema-valid object, and a free-text request that asks for a last line `Answer: X` with a
reply ending in an answer of that kind (and a `Confidence:` line if asked), so every protocol can be dry-run with
`--model scripted/schema`.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

from pydantic import BaseModel

from debatekit._base.answer_kinds import ANSWER_TEXT, LETTERS


@dataclass
class Request:
    """What a scripted model sees of a call."""

    model: str
    messages: list[dict]
    schema: dict | None = None
    params: dict = field(default_factory=dict)
    call: dict = field(default_factory=dict)

    @property
    def agent(self) -> str | None:
        return self.call.get("agent")

    @property
    def phase(self) -> str | None:
        return self.call.get("phase")

    @property
    def round(self) -> int | None:
        return self.call.get("round")

    @property
    def item_id(self) -> str | None:
        return self.call.get("item_id")

    @property
    def prompt(self) -> str:
        """All message contents joined, for functions that match on the prompt text."""
        return "\n".join(str(m.get("content", "")) for m in self.messages)


@dataclass
class Fault:
    """A provider failure to inject: kind is timeout | rate_limit | server | bad_request | hang."""

    kind: str
    message: str = "injected fault"


@dataclass
class Delayed:
    """A reply that arrives after `seconds` (simulates provider latency without blocking)."""

    seconds: float
    reply: "Reply"


@dataclass
class CutOff:
    """A reply that stopped at the token limit: the provider says `finish_reason` "length"."""

    reply: "Reply"


Reply = str | dict | BaseModel | Fault | Delayed | CutOff
ReplyFn = Callable[[Request], Reply]


class ScriptedModel:
    """Replies from a queue (in call order) or from a function of the request."""

    def __init__(self, replies: list[Reply] | None = None, fn: ReplyFn | None = None):
        if (replies is None) == (fn is None):
            raise ValueError("give exactly one of replies or fn")
        self._queue = deque(replies or [])
        self._fn = fn
        self._lock = threading.Lock()
        self.requests: list[Request] = []

    def __call__(self, request: Request) -> Reply:
        with self._lock:
            self.requests.append(request)
            if self._fn is not None:
                return self._fn(request)
            if not self._queue:
                return Fault("bad_request", "scripted model has no replies left")
            return self._queue.popleft()


_models: dict[str, ScriptedModel] = {}


def register(name: str, replies: list[Reply] | None = None, fn: ReplyFn | None = None) -> str:
    """Register (or replace) a scripted model; returns its model string `scripted/NAME`."""
    _models[name] = ScriptedModel(replies, fn)
    return f"scripted/{name}"


def is_registered(name: str) -> bool:
    """Whether `scripted/NAME` can answer (registered, or built in like `schema`)."""
    return name in _models


def get(name: str) -> ScriptedModel:
    if name not in _models:
        raise KeyError(f"no scripted model named {name!r}; registered: {sorted(_models)}")
    return _models[name]


def respond(name: str, request: Request) -> Reply:
    """The reply of scripted model `name` to a request."""
    return get(name)(request)


def render(reply: Reply) -> str:
    """A non-fault reply as the text a provider would return."""
    if isinstance(reply, BaseModel):
        return reply.model_dump_json()
    if isinstance(reply, dict):
        return json.dumps(reply)
    return str(reply)


def count_tokens(text: str) -> int:
    """Deterministic token count for scripted usage: whitespace-separated words."""
    return len(text.split())


def schema_instance(schema: dict, rng: random.Random, defs: dict | None = None) -> Any:
    """A small deterministic instance of a JSON schema (enough for pydantic's schemas)."""
    defs = defs if defs is not None else schema.get("$defs", {})
    if "$ref" in schema:
        return schema_instance(defs[schema["$ref"].split("/")[-1]], rng, defs)
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            options = [s for s in schema[key] if s.get("type") != "null"] or schema[key]
            return schema_instance(options[0], rng, defs)
    if "enum" in schema:
        return rng.choice(schema["enum"])
    if "const" in schema:
        return schema["const"]
    kind = schema.get("type", "object")
    if kind == "object":
        props = schema.get("properties", {})
        return {k: schema_instance(v, rng, defs) for k, v in props.items()}
    if kind == "array":
        n = max(schema.get("minItems", 1), 1)
        return [schema_instance(schema.get("items", {}), rng, defs) for _ in range(n)]
    if kind in ("integer", "number"):
        lo = schema.get("minimum", 0)
        hi = schema.get("maximum", lo + 100)
        value = rng.randint(int(lo), int(hi))
        return value if kind == "integer" else float(value)
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "null":
        return None
    text = f"scripted {rng.randint(0, 999)}"
    return text[: schema.get("maxLength", len(text))]


def schema_reply(request: Request) -> Reply:
    """The reply of `scripted/schema`: a schema-valid object, or free text (see `_free_text`)."""
    key = f"{request.prompt}|{request.params.get('seed')}"
    seed = int(hashlib.sha256(key.encode()).hexdigest()[:8], 16)
    if request.schema is None:
        return _free_text(request.prompt, random.Random(seed))
    return schema_instance(request.schema, random.Random(seed))


_TAGS = re.compile(r"<(\w+)></\1>")
_PROBABILITY = "`Probability: P`"


def _free_text(prompt: str, rng: random.Random) -> str:
    """A free-text reply: inside the last `<name></name>` section the prompt names (quote tags
    aside), if any; with a `Probability: P` line when the prompt asks for one; and when it asks
    for a last line `Answer: X` (the text answer format, worded as `answers.AnswerSpec.closing`
    words it), ending with one that fits what X must be (a letter among the prompt's options,
    `A) ...` or `A: ...` lines; yes/no; a number; a few words), then a line `Confidence: C`
    (0.0-1.0) when the prompt asks for one."""
    kinds = {said: kind for kind, (_, said) in ANSWER_TEXT.items()}
    asked = re.findall(r"`Answer: X`, where X is (" + "|".join(map(re.escape, kinds)) + ")", prompt)
    reply = f"scripted reply {rng.randint(0, 999)}"
    tags = [t for t in _TAGS.findall(prompt) if not t.endswith("quote")]
    if tags:
        reply = f"<{tags[-1]}>{reply}</{tags[-1]}>"
    if _PROBABILITY in prompt:
        reply += f"\nProbability: {rng.choice(['0.6', '0.75', '0.9'])}"
    if not asked:
        return reply
    kind = kinds[asked[-1]]
    if kind == "choice":
        value = rng.choice(re.findall(rf"^([{LETTERS}])[):] ", prompt, re.MULTILINE) or ["A"])
    elif kind == "yesno":
        value = rng.choice(["yes", "no"])
    elif kind in ("integer", "number"):
        value = str(rng.randint(0, 99))
    else:
        value = "scripted"
    stated = f"\nConfidence: {rng.randint(0, 10) / 10}" if "`Confidence: C`" in prompt else ""
    return f"{reply}\nAnswer: {value}{stated}"


register("schema", fn=schema_reply)
