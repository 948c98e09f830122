"""The gateway: the only module that imports litellm. Every model call of debatekit goes here.

`Gateway.complete()` sends one chat request to any litellm model string and returns a
`Completion`: text, parsed pydantic object, token usage, cost, latency, and what went wrong.
It never raises for provider or output problems; it records them:

- transient provider errors (timeout, 429, 5xx, empty reply) are retried with backoff;
- structured output that does not validate gets one repair round, then a parse failure;
- replies are cached on disk (debatekit's own cache) so a re-run makes zero model calls;
- a semaphore per model bounds the calls in flight.

Two providers are registered with litellm here: `local/...` (the embedded xllamacpp engine)
and `scripted/...` (deterministic replies for tests and dry runs).
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import json
import logging
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from debatekit import scripted
from debatekit.cache import ResponseCache, cache_key
from debatekit.local import DEFAULT_MODEL
from debatekit.schemas import first_error

DEFAULT_MAX_TOKENS = 512
TRANSIENT = {"timeout", "rate_limit", "server", "empty"}
FREE_PROVIDERS = ("local/", "scripted/")
REPAIR_PROMPT = (
    "Your previous reply could not be used: {error}\n"
    "Reply again with only a JSON object that matches the required schema."
)


class ModelError(ValueError):
    """A model string that no provider can serve; the message names it."""


def check_model(model: str) -> None:
    """Fail early, with the model named, on a model string no provider can serve.

    `scripted/NAME` must be registered, `local/NAME` a known model or a .gguf path; any other
    string must name a litellm provider (this imports litellm, which the first call needs anyway).
    """
    provider, _, name = model.partition("/")
    if provider == "scripted":
        if name not in scripted._models:
            raise ModelError(f"model {model!r}: no scripted model named {name!r} is registered")
    elif provider == "local":
        from debatekit import local

        try:
            local.model_path(name)
        except local.LocalModelError as exc:
            raise ModelError(f"model {model!r}: {exc}") from exc
    else:
        try:
            _litellm().get_llm_provider(model)
        except Exception as exc:  # noqa: BLE001 - litellm raises BadRequestError for an unknown provider
            raise ModelError(f"model {model!r}: litellm knows no provider for it; use a litellm model string "
                             f"such as openai/gpt-4o-mini, ollama/llama3, hosted_vllm/NAME, local/NAME") from exc


def default_model() -> str:
    """The model used when none is named: $DEBATEKIT_MODEL or the embedded local model."""
    return os.environ.get("DEBATEKIT_MODEL") or DEFAULT_MODEL


@dataclass
class Completion:
    """The outcome of one logical call (all its attempts, repairs and cache look-ups)."""

    model: str
    text: str = ""
    parsed: BaseModel | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0  # prompt tokens the provider reused from its prompt cache
    cost: float | None = 0.0
    latency: float = 0.0
    calls: int = 0
    cache_hits: int = 0
    faults: list[str] = field(default_factory=list)
    error: str | None = None
    error_kind: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def cache_hit(self) -> bool:
        """True when every reply came from the cache (no provider call made)."""
        return self.calls == 0 and self.cache_hits > 0

    @property
    def parse_failures(self) -> int:
        return self.faults.count("parse")

    @property
    def retries(self) -> int:
        return sum(1 for f in self.faults if f in TRANSIENT)

    @property
    def timeouts(self) -> int:
        return self.faults.count("timeout")


class ProviderFault(Exception):
    """A failed provider attempt, classified by kind."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def response_format(output: type[BaseModel]) -> dict:
    """The OpenAI `json_schema` response format of a pydantic model (a fresh dict each call)."""
    return json.loads(_response_format_text(output))


@functools.lru_cache(maxsize=256)
def _response_format_text(output: type[BaseModel]) -> str:
    # model_json_schema costs ~0.3 ms per call; a model's schema does not change, so build it once
    return json.dumps({
        "type": "json_schema",
        "json_schema": {"name": output.__name__, "schema": output.model_json_schema(), "strict": False},
    })


def extract_json(text: str) -> str:
    """The JSON object inside a reply (providers without constrained output add fences or prose)."""
    start, end = text.find("{"), text.rfind("}")
    return text[start : end + 1] if 0 <= start < end else text


class Gateway:
    """Sends chat requests through litellm with retries, repair, cache and concurrency limits.

    Args:
        cache: response cache, or None to disable caching.
        concurrency: calls in flight per model; None picks per provider (local: engine
            slots, scripted: 64, others: 16).
        max_retries: retries of a transient provider error.
        backoff: first retry delay in seconds, doubled at each retry.
        timeout: default per-call timeout in seconds.
        model_options: extra litellm arguments per model string (api_base, api_key, ...).
    """

    def __init__(
        self,
        cache: ResponseCache | None = None,
        concurrency: int | None = None,
        max_retries: int = 3,
        backoff: float = 0.5,
        timeout: float = 120.0,
        model_options: dict[str, dict] | None = None,
    ):
        self.cache = cache
        self.concurrency = concurrency
        self.max_retries = max_retries
        self.backoff = backoff
        self.timeout = timeout
        self.model_options = model_options or {}
        _SECRETS.update(_secret_values(self.model_options))
        self.stats: Counter = Counter()
        self._semaphores: dict[str, asyncio.Semaphore] = {}

    async def complete(
        self,
        model: str | None,
        messages: list[dict],
        output: type[BaseModel] | None = None,
        *,
        temperature: float | None = None,
        seed: int | None = None,
        max_tokens: int | None = None,
        timeout: float | None = None,
    ) -> Completion:
        """One chat completion; structured when `output` is given. Never raises for model faults."""
        model = model or default_model()
        params = {"temperature": temperature, "seed": seed, "max_tokens": max_tokens or DEFAULT_MAX_TOKENS}
        params = {k: v for k, v in params.items() if v is not None}
        fmt = response_format(output) if output else None
        done = Completion(model=model)
        started = time.perf_counter()
        for repair in range(2 if output else 1):
            reply = await self._fetch(model, messages, params, fmt, timeout or self.timeout, done)
            if reply is None:
                break
            done.text = reply["text"]
            if output is None:
                break
            try:
                done.parsed = output.model_validate_json(extract_json(done.text))
                break
            except ValidationError as exc:
                error = _short_validation_error(exc)
                done.faults.append("parse")
                self.stats["parse_failures"] += 1
                if repair == 1:
                    done.error, done.error_kind = f"parse: {error}", "parse"
                messages = [*messages, {"role": "assistant", "content": done.text},
                            {"role": "user", "content": REPAIR_PROMPT.format(error=error)}]
        done.latency = time.perf_counter() - started
        return done

    async def _fetch(self, model, messages, params, fmt, timeout, done: Completion) -> dict | None:
        """One reply from the cache or the provider, retrying transient faults; None on failure."""
        key = cache_key(model, messages, params, fmt)
        if self.cache is not None and (hit := self.cache.get(key)) is not None:
            done.cache_hits += 1
            self.stats["cache_hits"] += 1
            self.stats["tokens"] += hit.get("prompt_tokens", 0) + hit.get("completion_tokens", 0)
            _add_usage(done, hit)
            return hit
        _litellm()  # imported (3.5 s or more) before any call's timeout starts, not inside the first ones
        for attempt in range(self.max_retries + 1):
            try:
                async with self._semaphore(model):
                    done.calls += 1
                    self.stats["calls"] += 1
                    reply = await asyncio.wait_for(self._call(model, messages, params, fmt), timeout)
                _add_usage(done, reply)
                self.stats["tokens"] += reply["prompt_tokens"] + reply["completion_tokens"]
                if not reply["text"].strip():
                    raise ProviderFault("empty", "the model returned an empty reply")
                if self.cache is not None:
                    self.cache.put(key, reply)
                return reply
            except Exception as exc:  # noqa: BLE001 - every provider failure is classified and recorded
                kind, message = _classify(exc)
                message = redact(message)  # a provider may repeat the credential it was sent
                done.faults.append(kind)
                self.stats[kind] += 1
                # a timed-out local generation keeps running in the engine: retrying would only pile
                # more work onto the same slots, so a local timeout is final
                if kind not in TRANSIENT or attempt == self.max_retries or (
                        kind == "timeout" and model.startswith("local/")):
                    done.error, done.error_kind = f"{kind}: {message}", kind
                    return None
                await asyncio.sleep(self.backoff * 2**attempt)
        return None

    async def _call(self, model, messages, params, fmt) -> dict:
        litellm = _litellm()
        extra = self.model_options.get(model, {})
        kwargs = dict(params, **extra)
        if fmt is not None:
            kwargs["response_format"] = fmt
        reply = await litellm.acompletion(model=model, messages=messages, num_retries=0, **kwargs)
        usage = getattr(reply, "usage", None)
        cost: float | None = 0.0
        if not model.startswith(FREE_PROVIDERS):
            try:
                cost = float(litellm.completion_cost(completion_response=reply))
            except Exception:  # noqa: BLE001 - unknown price: recorded as null, not as zero
                cost = None
        return {
            "text": reply.choices[0].message.content or "",
            "prompt_tokens": getattr(usage, "prompt_tokens", 0) or 0,
            "completion_tokens": getattr(usage, "completion_tokens", 0) or 0,
            "cached_tokens": getattr(getattr(usage, "prompt_tokens_details", None), "cached_tokens", 0) or 0,
            "cost": cost,
        }

    def _semaphore(self, model: str) -> asyncio.Semaphore:
        if model not in self._semaphores:
            self._semaphores[model] = asyncio.Semaphore(self.concurrency or _default_concurrency(model))
        return self._semaphores[model]


def _add_usage(done: Completion, reply: dict) -> None:
    done.prompt_tokens += reply.get("prompt_tokens", 0)
    done.completion_tokens += reply.get("completion_tokens", 0)
    done.cached_tokens += reply.get("cached_tokens", 0)
    if done.cost is not None:
        done.cost = None if reply.get("cost") is None else done.cost + reply["cost"]


def _default_concurrency(model: str) -> int:
    if model.startswith("local/"):
        from debatekit import local

        return local.slots()
    return 64 if model.startswith("scripted/") else 16


def _short_validation_error(exc: ValidationError) -> str:
    where, message = first_error(exc, default="reply")
    return f"{where}: {message} ({len(exc.errors())} error(s))"


def _classify(exc: BaseException) -> tuple[str, str]:
    """Kind of a failed attempt: timeout, rate_limit, server, empty (transient) or error."""
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
    if isinstance(status, int) and status >= 500 or name in {"APIConnectionError", "ServiceUnavailableError"}:
        return "server", message
    return "error", f"{name}: {message}"


# --- litellm, configured once -------------------------------------------------------------

_LIB: Any = None


def _litellm():
    """Import and configure litellm once: offline cost map, no telemetry, our providers."""
    global _LIB
    if _LIB is None:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        os.environ.setdefault("LITELLM_TELEMETRY", "False")
        import litellm

        litellm.suppress_debug_info = True
        litellm.telemetry = False
        litellm.drop_params = True
        logging.getLogger("LiteLLM").setLevel(logging.ERROR)
        for name in _CHATTY_LOGGERS:  # their debug logs print request headers and options
            logging.getLogger(name).addFilter(_redact_record)
        litellm.custom_provider_map = [
            {"provider": "local", "custom_handler": _local_provider(litellm)},
            {"provider": "scripted", "custom_handler": _scripted_provider(litellm)},
        ]
        # litellm's first call imports these lazily (tiktoken's encoding: 1-3 s); done here, so
        # that this time does not count against the timeout of the first calls in flight
        for module in _FIRST_CALL_IMPORTS:
            try:
                importlib.import_module(module)
            except ImportError:
                pass
        _LIB = litellm
    return _LIB


_FIRST_CALL_IMPORTS = ("litellm.litellm_core_utils.default_encoding", "litellm.proxy._types",
                       "litellm.types.object_permission")


def _fill(litellm, model_response, model: str, text: str, prompt_tokens: int, completion_tokens: int,
          cached_tokens: int | None = None):
    model_response.choices[0].message.content = text
    model_response.model = model
    model_response.usage = litellm.Usage(
        prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
        total_tokens=prompt_tokens + completion_tokens,
        prompt_tokens_details=None if cached_tokens is None else {"cached_tokens": cached_tokens},
    )
    return model_response


def _schema_of(optional_params: dict) -> dict | None:
    fmt = optional_params.get("response_format") or {}
    return (fmt.get("json_schema") or {}).get("schema") if isinstance(fmt, dict) else None


def _local_provider(litellm):
    from debatekit import local

    class LocalProvider(litellm.CustomLLM):
        """litellm provider `local/NAME`: the in-process xllamacpp engine."""

        async def acompletion(self, model, messages, *args, optional_params=None, **kwargs):
            params = optional_params or kwargs.get("optional_params") or {}
            request = {"messages": messages}
            for key in ("temperature", "seed", "max_tokens", "response_format", "top_p", "stop"):
                if params.get(key) is not None:
                    request[key] = params[key]
            engine = await asyncio.to_thread(local.engine, model)
            reply = await engine.achat(request)
            usage = reply.get("usage", {})
            return _fill(litellm, kwargs["model_response"], model, reply["choices"][0]["message"]["content"] or "",
                         usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0),
                         (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0))

    return LocalProvider()


def _scripted_provider(litellm):
    errors = {
        "timeout": lambda m, model: litellm.Timeout(message=m, model=model, llm_provider="scripted"),
        "rate_limit": lambda m, model: litellm.RateLimitError(message=m, llm_provider="scripted", model=model),
        "server": lambda m, model: litellm.InternalServerError(message=m, llm_provider="scripted", model=model),
        "bad_request": lambda m, model: litellm.BadRequestError(message=m, model=model, llm_provider="scripted"),
    }

    class ScriptedProvider(litellm.CustomLLM):
        """litellm provider `scripted/NAME`: replies from `debatekit.scripted`."""

        async def acompletion(self, model, messages, *args, optional_params=None, **kwargs):
            params = dict(optional_params or {})
            schema = _schema_of(params)
            params.pop("response_format", None)
            request = scripted.Request(model=model, messages=messages, schema=schema, params=params,
                                       call=scripted.CALL.get())
            reply = scripted.respond(model, request)
            while isinstance(reply, scripted.Delayed):
                await asyncio.sleep(reply.seconds)
                reply = reply.reply
            if isinstance(reply, scripted.Fault):
                if reply.kind == "hang":
                    await asyncio.sleep(3600)
                raise errors[reply.kind](reply.message, model)
            text = scripted.render(reply)
            prompt = scripted.count_tokens(request.prompt)
            return _fill(litellm, kwargs["model_response"], model, text, prompt, scripted.count_tokens(text))

    return ScriptedProvider()


HIDDEN = ("key", "token", "secret", "password", "auth", "credential", "cookie")
_SECRETS: set[str] = set()  # credential values given in any gateway's model options
_CHATTY_LOGGERS = ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "openai", "openai._base_client",
                   "httpx", "httpcore.http11", "httpcore.connection", "aiohttp.client")


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


def _redact_record(record: logging.LogRecord) -> bool:
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
