"""litellm, configured once, and the two providers debatekit registers with it.

`local/NAME` is the embedded xllamacpp engine; `scripted/NAME` answers from
`debatekit.models.scripted` (tests and dry runs). The gateway sends a scripted model's calls with
who asks (`model.Caller`: agent, phase, round, item) in litellm's `metadata` under `CALLER_KEY`;
the scripted provider passes it to the scripted model, so a test double can answer as a function
of who asks.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import warnings
from typing import Any

from debatekit.models.credentials import redact_record

CALLER_KEY = "debatekit_caller"
"""Where a call's caller travels in litellm's `metadata` (to the providers that answer by it)."""
_CHATTY_LOGGERS = ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "openai", "openai._base_client",
                   "httpx", "httpcore.http11", "httpcore.connection", "aiohttp.client")

_LIB: Any = None


def litellm_module():
    """Import and configure litellm once: offline cost map, no telemetry, our providers."""
    global _LIB
    if _LIB is None:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        os.environ.setdefault("LITELLM_TELEMETRY", "False")
        import litellm

        litellm.suppress_debug_info = True
        # a call cancelled by a stop or a cut-off leaves litellm's provider coroutine un-awaited;
        # the warning it prints at exit says nothing a user can act on
        warnings.filterwarnings("ignore", message=r"coroutine .*acompletion' was never awaited",
                                category=RuntimeWarning)
        litellm.telemetry = False
        litellm.drop_params = True
        logging.getLogger("LiteLLM").setLevel(logging.ERROR)
        for name in _CHATTY_LOGGERS:  # their debug logs print request headers and options
            logging.getLogger(name).addFilter(redact_record)
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
          cached_tokens: int | None = None, timings: dict | None = None, finish_reason: str | None = None):
    model_response.choices[0].message.content = text
    if finish_reason:
        model_response.choices[0].finish_reason = finish_reason
    model_response.model = model
    # llama.cpp's per-request timings travel as extra usage fields (litellm's Usage keeps them)
    seconds = {} if timings is None else {"prompt_seconds": (timings.get("prompt_ms") or 0.0) / 1000,
                                          "generation_seconds": (timings.get("predicted_ms") or 0.0) / 1000}
    model_response.usage = litellm.Usage(
        prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
        total_tokens=prompt_tokens + completion_tokens,
        prompt_tokens_details=None if cached_tokens is None else {"cached_tokens": cached_tokens},
        **seconds,
    )
    return model_response


def _schema_of(optional_params: dict) -> dict | None:
    fmt = optional_params.get("response_format") or {}
    return (fmt.get("json_schema") or {}).get("schema") if isinstance(fmt, dict) else None


def _local_provider(litellm):
    from debatekit.models.local import shared as shared_engine

    class LocalProvider(litellm.CustomLLM):
        """litellm provider `local/NAME`: the machine's shared xllamacpp engine (`debatekit.models.local.shared`)."""

        async def acompletion(self, model, messages, *args, optional_params=None, **kwargs):
            params = optional_params or kwargs.get("optional_params") or {}
            request = {"messages": messages}
            for key in ("temperature", "seed", "max_tokens", "response_format", "top_p", "stop"):
                if params.get(key) is not None:
                    request[key] = params[key]
            reply = await shared_engine.complete(model, request)
            usage = reply.get("usage", {})
            return _fill(litellm, kwargs["model_response"], model, reply["choices"][0]["message"]["content"] or "",
                         usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0),
                         (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0), reply.get("timings") or {},
                         reply["choices"][0].get("finish_reason"))

    return LocalProvider()


def _scripted_provider(litellm):
    from debatekit.models import scripted

    errors = {
        "timeout": lambda m, model: litellm.Timeout(message=m, model=model, llm_provider="scripted"),
        "rate_limit": lambda m, model: litellm.RateLimitError(message=m, llm_provider="scripted", model=model),
        "server": lambda m, model: litellm.InternalServerError(message=m, llm_provider="scripted", model=model),
        "bad_request": lambda m, model: litellm.BadRequestError(message=m, model=model, llm_provider="scripted"),
    }

    class ScriptedProvider(litellm.CustomLLM):
        """litellm provider `scripted/NAME`: replies from `debatekit.models.scripted`."""

        async def acompletion(self, model, messages, *args, optional_params=None, **kwargs):
            params = dict(optional_params or {})
            schema = _schema_of(params)
            params.pop("response_format", None)
            metadata = (kwargs.get("litellm_params") or {}).get("metadata") or {}
            request = scripted.Request(model=model, messages=messages, schema=schema, params=params,
                                       call=dict(metadata.get(CALLER_KEY) or {}))
            reply = scripted.respond(model, request)
            while isinstance(reply, scripted.Delayed):
                await asyncio.sleep(reply.seconds)
                reply = reply.reply
            if isinstance(reply, scripted.Fault):
                if reply.kind == "hang":
                    await asyncio.sleep(3600)
                raise errors[reply.kind](reply.message, model)
            finish = None
            if isinstance(reply, scripted.CutOff):
                reply, finish = reply.reply, "length"
            text = scripted.render(reply)
            prompt = scripted.count_tokens(request.prompt)
            return _fill(litellm, kwargs["model_response"], model, text, prompt, scripted.count_tokens(text),
                         finish_reason=finish)

    return ScriptedProvider()
