"""The model policy table: one row per kind of model string, read through the gateway."""

import asyncio
import subprocess
import sys

import pytest

from debatekit.models import scripted
from debatekit.models.errors import ModelError
from debatekit.models.gateway import Gateway
from debatekit.models.kinds import policy
from debatekit.models.model import resolve
from debatekit.models.serving import check_model


@pytest.mark.parametrize("model, kind, timeout, scale, free, retry", [
    ("local/qwen2.5-coder-1.5b-instruct", "local", 900.0, 20.0, True, False),
    ("scripted/schema", "scripted", 120.0, 1.0, True, True),
    ("openai/gpt-4o-mini", "provider", 120.0, 1.0, False, True),
    ("gpt-4o-mini", "provider", 120.0, 1.0, False, True),
    ("localhost/m", "provider", 120.0, 1.0, False, True),
])
def test_each_kind_of_model_has_one_policy(model, kind, timeout, scale, free, retry):
    p = policy(model)
    assert (p.name, p.call_timeout, p.time_scale, p.free, p.retry_timeouts) == (kind, timeout, scale, free, retry)
    assert p.credentials == (kind == "provider")


def test_gateway_defaults_come_from_the_policy(monkeypatch):
    seen = {}

    async def fetch(model, messages, params, fmt, timeout, done, caller):
        seen[model.name] = timeout
        return {"text": "ok"}

    gateway = Gateway()
    monkeypatch.setattr(gateway, "_fetch", fetch)
    for model in ("scripted/schema", "local/qwen2.5-coder-1.5b-instruct", "openai/m"):
        asyncio.run(gateway.complete(resolve(model), [{"role": "user", "content": "q"}]))
    assert seen == {"scripted/schema": 120.0, "local/qwen2.5-coder-1.5b-instruct": 900.0, "openai/m": 120.0}
    assert Gateway(timeout=7)._semaphore(resolve("openai/m"))._value == 16
    assert Gateway()._semaphore(resolve("scripted/x"))._value == 64
    assert Gateway(concurrency=3)._semaphore(resolve("scripted/x"))._value == 3


def test_scripted_models_are_checked_through_the_public_registry():
    scripted.register("kinds_probe", replies=["x"])
    assert scripted.is_registered("kinds_probe") and not scripted.is_registered("kinds_absent")
    check_model(resolve("scripted/kinds_probe"))
    with pytest.raises(ModelError, match="no scripted model named 'kinds_absent'"):
        check_model(resolve("scripted/kinds_absent"))


def test_the_engine_and_gateway_do_not_load_the_test_double():
    code = "import sys, debatekit.engine, debatekit.models.gateway; print('debatekit.models.scripted' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
