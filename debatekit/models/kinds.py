"""What differs between kinds of model string: the policy table the gateway reads.

A model string is `local/NAME` (the embedded xllamacpp engine), `scripted/NAME` (the test
double) or any litellm provider string. Each kind has one `ModelKind` row here; `model.resolve`
reads it once (`policy(model)`) into a `Model`'s `kind`, so no other module branches on a model prefix.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

from debatekit.models.local.weights import DEFAULT_MODEL


def _local_slots() -> int:
    from debatekit.models.local import settings

    return settings.slots()


@dataclass(frozen=True)
class ModelKind:
    """The policy of one kind of model.

    Attributes:
        name: "local", "scripted" or "provider".
        call_timeout: default seconds per call attempt.
        time_scale: factor protocols with wall-clock limits written for an API model apply.
        free: calls cost nothing (no price lookup; cost 0 rather than unknown).
        concurrency: default calls in flight per model (called when first needed).
        retry_timeouts: a timed-out call may be retried (a local generation keeps running in
            the engine after its timeout, so retrying would only pile work onto its slots).
        credentials: calls may need an API key (masked in traces and logs).
        probe_first: until the model has answered once, a gateway sends it one call at a time, so
            that a wrong key or model name fails once rather than once per call in flight. The
            embedded model is checked before a run starts (`weights.preflight`) and its first reply
            takes a whole generation (half a minute on 2 cores), during which the engine's other
            slots would sit idle, so it goes without.
        answers_by_caller: its provider answers as a function of who asks (the test double): the
            gateway hands it the call's `Caller`.
    """

    name: str
    call_timeout: float
    time_scale: float
    free: bool
    concurrency: Callable[[], int]
    retry_timeouts: bool
    credentials: bool
    probe_first: bool = True
    answers_by_caller: bool = False


# a provider that has not answered in 2 minutes has stalled, while the embedded model on a
# 2-core CPU with 4 slots busy generates ~4 tokens/s per call, so a 900-token structured answer
# there needs minutes and is slow, not stalled; the same holds for protocols' own time limits
LOCAL = ModelKind("local", call_timeout=900.0, time_scale=20.0, free=True, concurrency=_local_slots,
                  retry_timeouts=False, credentials=False, probe_first=False)
SCRIPTED = ModelKind("scripted", call_timeout=120.0, time_scale=1.0, free=True, concurrency=lambda: 64,
                     retry_timeouts=True, credentials=False, answers_by_caller=True)
PROVIDER = ModelKind("provider", call_timeout=120.0, time_scale=1.0, free=False, concurrency=lambda: 16,
                     retry_timeouts=True, credentials=True)
KINDS = {"local": LOCAL, "scripted": SCRIPTED}


def policy(model: str) -> ModelKind:
    """The `ModelKind` of a model string (a litellm provider unless it is local/ or scripted/)."""
    prefix, slash, _ = model.partition("/")
    return KINDS.get(prefix, PROVIDER) if slash else PROVIDER


def default_model() -> str:
    """The model used when none is named: $DEBATEKIT_MODEL or the embedded local model (read through
    `model.resolve(None)`)."""
    return os.environ.get("DEBATEKIT_MODEL") or DEFAULT_MODEL
