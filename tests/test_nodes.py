"""`debatekit.node`: any protocol with a node form runs over a workflow state, one helper for all."""

import asyncio
import json
import warnings

import pytest

import debatekit
from debatekit.registry import ProtocolError


def test_a_protocol_without_a_node_form_or_unknown_is_a_clear_error():
    with pytest.raises(ProtocolError, match="society_of_mind.*no workflow-node form"):
        asyncio.run(debatekit.node("society_of_mind", {"question": "1+1?"}))
    with pytest.raises(ProtocolError, match="unknown protocol 'nope'"):
        asyncio.run(debatekit.node("nope", {}))


def test_bad_parameters_are_named_before_any_call():
    with pytest.raises(ProtocolError, match="no parameter 'roundz'"):
        asyncio.run(debatekit.node("patch_debate", {"text": "Good food."}, model="scripted/schema", roundz=2))


def test_parameters_given_explicitly_win_over_those_the_state_carries(model_from):
    seen_seed, seen_explicit = [], []
    reports = [{"agent": "a", "findings": []}, {"agent": "b", "findings": []}]
    state = {"agent_reports": reports, "event_callback": lambda *args: seen_seed.append(args)}
    out = asyncio.run(debatekit.node("arbitration", state, model="scripted/schema"))
    assert out["debate_results"]["status"] == "skipped" and seen_seed[0] == ("debate", "running")
    out = asyncio.run(debatekit.node("arbitration", state, model="scripted/schema", progress_hook=seen_explicit.append))
    assert [e["status"] for e in seen_explicit] == ["running", "complete"] and len(seen_seed) == 2
    assert out["agent_reports"] == [{"agent": "a", "findings": []}, {"agent": "b", "findings": []}]


@pytest.mark.parametrize("protocol,old", [("cross_critique", "personas"), ("dynamics", "roles"),
                                          ("judge_refine", "reasoners"), ("arbitration", "arbitrator_model")])
def test_old_parameter_names_are_refused_with_the_names_there_are(protocol, old):
    from debatekit import registry

    with pytest.raises(ProtocolError, match=f"has no parameter {old!r}"):
        registry.get(protocol).validate({old: "x"})


@pytest.mark.parametrize("params", [{"judge_model": "scripted/the-judge"}, {"models": {"judge": "scripted/the-judge"}}])
def test_judge_refine_sends_the_judges_calls_to_judge_model_not_a_reasoner_slot(tmp_path, params):
    from debatekit.models import scripted
    from debatekit.records.schemas import RunConfig
    from debatekit.runner import run

    scripted.register("the-judge", fn=scripted.schema_reply)
    scripted.register("the-reasoners", fn=scripted.schema_reply)
    config = RunConfig(protocol="judge_refine", dataset="incidents", limit=1, model="scripted/the-reasoners",
                       params={**params, "rounds": 1}, cache=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = run(config, tmp_path / "run", progress=False)
    assert [w.category for w in caught if "judge_model" in str(w.message)] == (
        [DeprecationWarning] if "models" in params else [])
    events = [json.loads(line) for line in (result.path / "events.jsonl").read_text().splitlines()]
    models = {(e["phase"], e["model"]) for e in events}
    assert ("judge", "scripted/the-judge") in models and ("hypothesize", "scripted/the-reasoners") in models
    assert not {m for phase, m in models if phase != "judge"} & {"scripted/the-judge"}


def test_generic_flags_map_to_each_protocols_own_parameter():
    from debatekit import registry

    assert registry.get("dynamics").flag("rounds") == "max_rounds"
    assert registry.get("cross_critique").flag("agents") is None
    assert registry.get("society_of_mind").flag("agents") == "agents"
