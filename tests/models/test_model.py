"""A model is resolved once into a value, and who asks reaches the gateway as an argument."""

import asyncio
import dataclasses

import pytest

from debatekit.datasets import Item
from debatekit.engine import Debate
from debatekit.models import providers, scripted
from debatekit.models.completion import Completion
from debatekit.models.gateway import Gateway
from debatekit.models.kinds import LOCAL, PROVIDER, SCRIPTED
from debatekit.models.model import Caller, Model, resolve

MSG = [{"role": "user", "content": "q"}]


@pytest.mark.parametrize("name, kind", [("scripted/x", SCRIPTED), ("local/m", LOCAL), ("openai/gpt-4o-mini", PROVIDER),
                                        ("gpt-4o-mini", PROVIDER)])
def test_a_model_string_resolves_to_its_name_and_kind(name, kind):
    model = resolve(name)
    assert model == Model(name, kind) and str(model) == name and resolve(model) is model
    with pytest.raises(dataclasses.FrozenInstanceError):
        model.name = "other"


def test_no_model_named_is_the_default_one(monkeypatch):
    monkeypatch.setenv("DEBATEKIT_MODEL", "scripted/default-probe")
    assert resolve(None) == Model("scripted/default-probe", SCRIPTED)
    from debatekit.records.schemas import RunConfig

    assert RunConfig(protocol="p", dataset="d").run_model == "scripted/default-probe"


def test_the_gateway_reads_the_models_kind_not_its_string(monkeypatch):
    """A `Model` whose kind says otherwise than its prefix is called as its kind says."""
    seen = {}

    async def fetch(model, messages, params, fmt, timeout, done, caller):
        seen["timeout"] = timeout
        return {"text": "ok"}

    gateway = Gateway()
    monkeypatch.setattr(gateway, "_fetch", fetch)
    odd = Model("openai/m", dataclasses.replace(PROVIDER, call_timeout=7.0))
    asyncio.run(gateway.complete(odd, MSG))
    assert seen == {"timeout": 7.0}


def test_the_caller_reaches_a_scripted_model_as_an_argument_with_no_global():
    assert not hasattr(providers, "CALL_CONTEXT")
    model = scripted.register("caller-probe", replies=["hi"])
    caller = Caller(agent="agent2", phase="critique", round=3, item_id="q7", sample=1, seed=5)
    done = asyncio.run(Gateway(cache=None).complete(resolve(model), MSG, caller=caller))
    assert done.ok
    assert scripted.get("caller-probe").requests[-1].call == {"agent": "agent2", "phase": "critique", "round": 3,
                                                              "item_id": "q7", "sample": 1, "seed": 5}


def test_the_engine_hands_the_gateway_the_resolved_model_and_the_caller():
    asked = []

    class Seen(Gateway):
        async def complete(self, model, messages, output=None, *, caller=None, **kwargs):
            asked.append((model, caller))
            return Completion(model=model.name, text="x")

    debate = Debate(Item(id="i1", question="q", answer=1), gateway=Seen(), model=resolve("scripted/run"),
                    run_id="r", debate_id="d", seed=4)

    async def go():
        await debate.ask("agent1", MSG, phase="answer", round=2)
        await debate.ask("judge", MSG, phase="judge", model="openai/judge", sample=3)

    asyncio.run(go())
    assert asked == [(Model("scripted/run", SCRIPTED), Caller("agent1", "answer", 2, "i1", 0, 4)),
                     (Model("openai/judge", PROVIDER), Caller("judge", "judge", None, "i1", 3, 4))]


def test_the_gateway_takes_a_model_string_from_a_caller_outside_a_run():
    import asyncio

    from debatekit.models.gateway import Gateway

    from debatekit.models import scripted

    model = scripted.register("echo-string", fn=lambda req: req.messages[-1]["content"])
    done = asyncio.run(Gateway(cache=None).complete(model, [{"role": "user", "content": "hi"}]))
    assert isinstance(model, str) and done.ok and done.text == "hi" and done.model == model


@pytest.mark.parametrize("name", ["", "  "])
def test_an_empty_model_string_is_refused_not_read_as_the_default(name, tmp_path, capsys):
    """`--model "$MODEL"` with MODEL unset must not start hours of work on the embedded model."""
    with pytest.raises(ValueError, match="names no model"):
        resolve(name)
    from debatekit.cli.app import main

    assert main(["run", "single", "--dataset", "arithmetic", "--limit", "1", "--model", name,
                 "--out", str(tmp_path / "r"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "names no model" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r" / "debates.jsonl").exists()
