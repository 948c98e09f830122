"""The gateway: every model call of debatekit goes here (litellm is imported only through it).

`Gateway.complete()` sends one chat request to a `Model` (a litellm model string resolved once,
`debatekit.models.model`) for a `Caller` (who asks) and returns a `Completion`: text, parsed pydantic object, token usage, cost, latency, and what went wrong.
It never raises for provider or output problems; it records them:

- transient provider errors (timeout, 429, 5xx, empty reply) are retried with backoff (a 429's
  `Retry-After` is honoured);
- set-up errors (a rejected key, an unknown model, a refused connection, a missing GGUF file)
  are not retried; until a model has answered once its calls go one at a time, and when its
  first calls all fail with the same such error the model is marked dead (`Gateway.dead`), its
  later calls fail without reaching the provider, and the runner stops the run;
- structured output that does not validate gets one repair round, then a parse failure; when the
  reply was cut off at `max_tokens` (the provider's `finish_reason` is `length`, or it gives
  none and the reply used every allowed token), the repair
  request says so and asks for a short reply (fault `cut_off`), since asking a model to "reply
  again" after its reasoning ran out of room gets the same cut-off reply, or a refusal;
- replies are cached on disk (debatekit's own cache) so a re-run makes zero model calls;
- a semaphore per model bounds the calls in flight.

litellm's configuration and debatekit's two providers (`local/...`, `scripted/...`) live in
`debatekit.models.providers`, credential masking in `debatekit.models.credentials`, and what differs between
kinds of model (timeouts, cost, concurrency) in the `debatekit.models.kinds` table, read here
from each model's `kind`. What a call comes to (`Completion`) and how its usage adds up are in
`debatekit.models.completion`, the fault kinds and model errors in `debatekit.models.errors`, and
the model check before a run and what serves a model (`check_model`, `served_by`) in
`debatekit.models.serving`.
"""

from __future__ import annotations

import asyncio
import sys
import time
import weakref
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from debatekit.models import credentials, reading, serving
from debatekit.models.cache import ResponseCache, reply_record, request_key, served_key
from debatekit.models.completion import Completion, add_usage, token_count
from debatekit.models.credentials import redact
from debatekit.models.errors import TRANSIENT, ProviderFault, classify, retry_after
from debatekit.models.model import Caller, Model, resolve
from debatekit.models.providers import CALLER_KEY, litellm_module
from debatekit.models.watch import Watch, watched

_IN_FLIGHT: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
"""Per event loop: cache key -> the future reply of the call asking it now (`Gateway._fetch`)."""

DEFAULT_MAX_TOKENS = 512
"""Completion tokens per call when neither the ask, its reply schema nor the run sets them."""
FAIL_FAST_AFTER = 3  # identical non-transient failures, with no success, that mark a model dead


@dataclass
class _Health:
    """What a gateway has seen of one model: answers, set-up failures, and the probe gate."""

    answered: bool = False
    failures: Counter = field(default_factory=Counter)
    dead: str | None = None
    gate: asyncio.Lock = field(default_factory=asyncio.Lock)


class Gateway:
    """Sends chat requests through litellm with retries, repair, cache and concurrency limits.

    Args:
        cache: response cache, or None to disable caching.
        concurrency: calls in flight per model; None: the model kind's
            (`model.kind.concurrency`: local: engine slots, scripted: 64, others: 16).
        max_retries: retries of a transient provider error.
        backoff: first retry delay in seconds, doubled at each retry.
        timeout: per-call timeout in seconds; None: the model kind's (`model.kind.call_timeout`).
        model_options: extra litellm arguments per model string (api_base, api_key, ...).
        sleep: the coroutine that waits between retries (tests pass a recording one).
    """

    def __init__(
        self,
        cache: ResponseCache | None = None,
        concurrency: int | None = None,
        max_retries: int = 3,
        backoff: float = 0.5,
        timeout: float | None = None,
        model_options: dict[str, dict] | None = None,
        sleep: Any = None,
    ):
        self.cache = cache
        self.concurrency = concurrency
        self.max_retries = max_retries
        self.backoff = backoff
        self.timeout = timeout
        self.model_options = model_options or {}
        credentials.remember(self.model_options)
        self.stats: Counter = Counter()
        self._semaphores: dict[str, asyncio.Semaphore] = {}
        self._health: dict[str, _Health] = {}
        self._said_usage: set[str] = set()
        self._served_by: dict[str, dict] = {}
        self._watches: set[Watch] = set()
        self._sleep = sleep or asyncio.sleep

    def add_options(self, model: str, options: dict) -> None:
        """Extra litellm arguments for `model` (merged over those given); credentials are masked everywhere."""
        self.model_options[model] = {**self.model_options.get(model, {}), **options}
        credentials.remember(self.model_options)
        self._served_by.pop(model, None)  # another endpoint or option: the cache key is taken again

    def dead(self, model: str | None = None) -> str | None:
        """`model 'X': <message>` once the model's first calls all failed with the same set-up error;
        with no model named, the first model of this gateway that did (a judge's, an agent's)."""
        if model is None:
            return next((h.dead for h in self._health.values() if h.dead), None)
        health = self._health.get(model)
        return health.dead if health else None

    def waiting(self) -> str | None:
        """What this gateway's calls in flight wait for, in words (the longest queue behind other
        processes on a shared engine), or None when none waits: for a progress line."""
        longest = max((w for w in self._watches if w.note), key=lambda w: w.ahead, default=None)
        return longest.note if longest else None

    def unreached(self, model: str) -> str | None:
        """`model 'X': <message>` of the most frequent set-up error of a model that never answered."""
        health = self._health.get(model)
        if health is None or health.answered or not health.failures:
            return None
        return health.dead or f"model {model!r}: {health.failures.most_common(1)[0][0][1]}"

    async def complete(
        self,
        model: Model | str,
        messages: list[dict],
        output: type[BaseModel] | None = None,
        *,
        caller: Caller | None = None,
        temperature: float | None = None,
        seed: int | None = None,
        max_tokens: int | None = None,
        timeout: float | None = None,
    ) -> Completion:
        """One chat completion; structured when `output` is given. Never raises for model faults.

        An `output` model with a `from_text(text)` classmethod (a free-text answer) is asked without
        a response format and parsed by that method; a ValueError from it is a parse failure.
        `model`: a `Model`, or a model string (resolved here, as a caller outside a run names one).
        `caller`: who asks (a scripted model answers by it, a recorded gateway looks its reply up by it).
        """
        model, caller = resolve(model), caller or Caller()
        params = {"temperature": temperature, "seed": seed, "max_tokens": max_tokens or DEFAULT_MAX_TOKENS}
        params = {k: v for k, v in params.items() if v is not None}
        free_text = output is not None and hasattr(output, "from_text")  # parsed out of prose, unconstrained
        fmt = reading.response_format(output) if output and not free_text else None
        done = Completion(model=model.name)
        shown = messages  # what the model was asked, before any repair round
        started = time.perf_counter()
        for repair in range(2 if output else 1):
            reply = await self._fetch(model, messages, params, fmt, timeout or self.timeout or model.kind.call_timeout,
                                      done, caller)
            if reply is None:
                break
            done.text = reading.capped(reply["text"])
            ending = reading.unfinished(reply, params["max_tokens"])
            done.cut_off += reply.get("finish_reason") == "length" or ending == "cut_off"
            if output is None:
                break
            read_as = reply.get("read_as")  # played back as the run read it (a fork): its reading, its repair
            try:
                if read_as is not None:
                    if "unread" in read_as:
                        raise ValueError(read_as["unread"])
                    done.parsed, done.echo = output.model_validate(read_as["output"]), read_as.get("echo", False)
                    break
                done.parsed = reading.parse(output, reply["text"], free_text, ending)
                if echoed := getattr(output, "echoed", None):
                    done.echo = echoed(reply["text"], shown)
                break
            except ValueError as exc:  # pydantic's ValidationError included
                error = reading.short_validation_error(exc) if isinstance(exc, ValidationError) else str(exc)
                done.faults.append("parse")
                self.stats["parse_failures"] += 1
                note = ""
                if ending is not None:
                    done.faults.append(ending)
                    if read_as is None:  # a recorded error says how the reply ended already
                        error += reading.ENDINGS[ending].format(max_tokens=params["max_tokens"])
                    note = (reading.CUT_OFF_NOTE.format(max_tokens=params["max_tokens"]) if ending == "cut_off"
                            else reading.LOOP_NOTE)
                if repair == 1:  # the repaired reply failed too: no third try
                    done.error, done.error_kind = f"parse: {error}", "parse"
                    break
                request = (read_as or {}).get("repair_prompt") or \
                    getattr(output, "repair_prompt", reading.REPAIR_PROMPT).format(error=error) + note
                done.repairs.append({"text": done.text, "error": error, "repair_prompt": request})
                messages = [*messages, {"role": "assistant", "content": done.text}, {"role": "user", "content": request}]
        done.latency = time.perf_counter() - started
        return done

    async def _fetch(self, model: Model, messages, params, fmt, timeout, done: Completion,
                     caller: Caller) -> dict | None:
        """One reply from the cache or the provider, retrying transient faults; None on failure.

        With the cache on, a request identical to one in flight in this event loop (from any
        gateway: runs started together) waits for that one's reply and takes it as a cache hit, as
        it would have found it in the cache had it come later; if that call fails, it asks itself."""
        asked = request_key(model.name, messages, params, fmt)
        key = served_key(asked, self.served_by(model.name))
        if self.cache is None:
            return await self._provide(model, messages, params, fmt, timeout, done, key, asked, caller)
        if (hit := self.cache.get(key)) is not None:
            return self._hit(hit, key, asked, done)
        in_flight = _IN_FLIGHT.setdefault(asyncio.get_running_loop(), {})
        if (flying := in_flight.get(key)) is not None:
            reply = await asyncio.shield(flying)
            if reply is not None:
                return self._hit(reply, key, asked, done)
            return await self._provide(model, messages, params, fmt, timeout, done, key, asked, caller)
        future = in_flight[key] = asyncio.get_running_loop().create_future()
        reply = None
        try:
            reply = await self._provide(model, messages, params, fmt, timeout, done, key, asked, caller)
            return reply
        finally:
            in_flight.pop(key, None)
            future.set_result(reply)

    def _hit(self, hit: dict, key: str, asked: str, done: Completion) -> dict:
        done.cache_hits += 1
        self.stats["cache_hits"] += 1
        self.stats["tokens"] += hit.get("prompt_tokens", 0) + hit.get("completion_tokens", 0)
        add_usage(done, hit, timed=False)  # no engine time was spent on a cached reply
        done.replies.append(reply_record(key, hit, asked))
        return hit

    async def _provide(self, model: Model, messages, params, fmt, timeout, done: Completion, key: str,
                       asked: str, caller: Caller) -> dict | None:
        """The provider's reply, retrying transient faults; stored in the cache; None on failure."""
        litellm_module()  # imported (3.5 s or more) before any call's timeout starts, not inside the first ones
        health = self._health.setdefault(model.name, _Health())
        for attempt in range(self.max_retries + 1):
            # not yet heard from: one call at a time (`ModelKind.probe_first`)
            gate = None if health.answered or health.dead or not model.kind.probe_first else health.gate
            if gate is not None:
                await gate.acquire()
                if health.answered:
                    gate.release()
                    gate = None
            try:
                if health.dead:
                    done.faults.append("setup")
                    done.error, done.error_kind = f"setup: {health.dead}", "setup"
                    return None
                async with self._semaphore(model):
                    done.calls += 1
                    self.stats["calls"] += 1
                    attempt_watch = Watch(timeout)  # time queued behind other processes is not a stall
                    self._watches.add(attempt_watch)
                    try:
                        reply = await watched(lambda: self._call(model, messages, params, fmt, caller), attempt_watch)
                    finally:
                        self._watches.discard(attempt_watch)
                health.answered = True
                if reply.get("usage_unknown"):
                    self._usage_unknown(model.name, done)
                add_usage(done, reply)
                self.stats["tokens"] += reply["prompt_tokens"] + reply["completion_tokens"]
                if not reply["text"].strip():
                    raise ProviderFault("empty", "the model returned an empty reply")
                if self.cache is not None:
                    self.cache.put(key, reply)
                done.replies.append(reply_record(key, reply, asked))
                return reply
            except Exception as exc:  # noqa: BLE001 - every provider failure is classified and recorded
                kind, message = classify(exc)
                message = redact(message)  # a provider may repeat the credential it was sent
                done.faults.append(kind)
                self.stats[kind] += 1
                transient = kind in TRANSIENT or (kind == "connection" and health.answered)  # a restart
                if transient:
                    health.answered = True  # the provider is there; flaky, not misconfigured
                else:
                    _note_failure(health, model.name, kind, message)
                if not transient or attempt == self.max_retries or (
                        kind == "timeout" and not model.kind.retry_timeouts):
                    done.error, done.error_kind = f"{kind}: {message}", kind
                    return None
                wait = max(self.backoff * 2**attempt, retry_after(exc) or 0.0)
            finally:
                if gate is not None:
                    gate.release()
            await self._sleep(wait)
        return None

    async def _call(self, model: Model, messages, params, fmt, caller: Caller) -> dict:
        litellm = litellm_module()
        extra = self.model_options.get(model.name, {})
        kwargs = dict(params, **extra)
        if fmt is not None:
            kwargs["response_format"] = fmt
        if model.kind.answers_by_caller:  # litellm hands its metadata to debatekit's own providers
            kwargs["metadata"] = {CALLER_KEY: caller.as_dict()}
        reply = await litellm.acompletion(model=model.name, messages=messages, num_retries=0, **kwargs)
        usage = getattr(reply, "usage", None)
        cost: float | None = 0.0
        if not model.kind.free:
            try:
                cost = float(litellm.completion_cost(completion_response=reply))
            except Exception:  # noqa: BLE001 - unknown price: recorded as null, not as zero
                cost = None
        counts = {"prompt_tokens": token_count(getattr(usage, "prompt_tokens", 0)),
                  "completion_tokens": token_count(getattr(usage, "completion_tokens", 0)),
                  "cached_tokens": token_count(getattr(getattr(usage, "prompt_tokens_details", None), "cached_tokens", 0))}
        unknown = None in counts.values()  # a negative or garbled count: unknown, never summed
        return {
            # a proxy may echo the key it was sent; a lone surrogate (valid JSON, not text) cannot be stored
            "text": redact(reading.whole_text(reply.choices[0].message.content or "")),
            "finish_reason": getattr(reply.choices[0], "finish_reason", None),  # "length": cut off at max_tokens
            **{k: 0 if unknown else v for k, v in counts.items()},
            **({"usage_unknown": True} if unknown else {}),
            "prompt_seconds": getattr(usage, "prompt_seconds", 0.0) or 0.0,
            "generation_seconds": getattr(usage, "generation_seconds", 0.0) or 0.0,
            "cost": cost,
        }

    def served_by(self, model: Model | str | None) -> dict:
        """What answers `model`'s calls, beside what they ask (`cache.served_key`): its endpoint,
        options and local file (`serving.served_by`). Taken once per gateway and model: a run asks
        the same endpoint throughout. A model string (a recorded event's) is resolved here."""
        if model is None:
            return {}
        model = resolve(model)
        if model.name not in self._served_by:
            self._served_by[model.name] = serving.served_by(model, self.model_options.get(model.name, {}))
        return self._served_by[model.name]

    def _usage_unknown(self, model: str, done: Completion) -> None:
        """Record a reply whose token usage is no count (fault `usage_unknown`, its tokens 0), and say
        so once per model: summed, a negative count would corrupt every budget compared."""
        done.faults.append("usage_unknown")
        self.stats["usage_unknown"] += 1
        if model not in self._said_usage:
            self._said_usage.add(model)
            print(f"debatekit: warning: {model} reported token usage that is not a count (negative or not a "
                  "number); those calls' tokens are recorded as unknown (0, fault usage_unknown)", file=sys.stderr)

    def _semaphore(self, model: Model) -> asyncio.Semaphore:
        if model.name not in self._semaphores:
            self._semaphores[model.name] = asyncio.Semaphore(self.concurrency or model.kind.concurrency())
        return self._semaphores[model.name]


def _note_failure(health: _Health, model: str, kind: str, message: str) -> None:
    """Count a non-transient failure; the same one FAIL_FAST_AFTER times before any answer kills the model."""
    if health.answered or health.dead:
        return
    health.failures[(kind, message)] += 1
    if health.failures[(kind, message)] >= FAIL_FAST_AFTER:
        health.dead = f"model {model!r}: {message}"
