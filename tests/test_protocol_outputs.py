"""Typed protocol output: every output model fits the committed examples, a misfit fails the debate
by name, and `debatekit protocols --schema NAME` prints the schema."""

import json
from pathlib import Path

import pytest

from debatekit import registry
from debatekit.cli.app import main
from debatekit.engine import Outcome
from debatekit.registry import ProtocolError

EXAMPLES = Path(__file__).resolve().parent.parent / "results" / "examples"
RUNS = sorted(p.parent for pattern in ("*/run.json", "lit-*/*/run.json") for p in EXAMPLES.glob(pattern))
TYPED = ("arbitration", "cross_critique", "dynamics", "judge_refine", "patch_debate")


@pytest.mark.parametrize("folder", RUNS, ids=lambda p: str(p.relative_to(EXAMPLES)))
def test_the_committed_examples_outputs_fit_their_protocols_output_model(folder):
    protocol = json.loads((folder / "run.json").read_text())["config"]["protocol"]
    spec = registry.get(protocol)
    for line in (folder / "debates.jsonl").read_text().splitlines():
        debate = json.loads(line)
        if debate["status"] != "failed":  # a debate whose protocol raised keeps no output
            spec.check_output(debate["output"])


def test_a_protocol_without_an_output_model_accepts_any_output():
    assert registry.get("single").output is None
    registry.get("single").check_output({"reasoning": None, "anything": [1]})


def test_every_multi_file_protocol_declares_its_output():
    assert all(registry.get(name).output is not None for name in TYPED)


def test_an_output_that_does_not_fit_is_a_named_error():
    spec = registry.get("judge_refine")
    with pytest.raises(ProtocolError, match="judge_refine.*field 'total_rounds'"):
        spec.check_output({"rounds": [], "final_hypothesis": None, "convergence_achieved": False,
                           "total_rounds": "three", "improvement_trajectory": []})
    with pytest.raises(ProtocolError, match="field 'surprise'"):
        spec.check_output({"rounds": [], "final_hypothesis": None, "convergence_achieved": False,
                           "total_rounds": 0, "improvement_trajectory": [], "surprise": 1})


def test_the_solver_checks_the_output_before_the_runner_writes_it(monkeypatch):
    import asyncio

    spec = registry.get("judge_refine")

    async def wrong(item, debate):
        return Outcome(output={"rounds": "not a list"})

    monkeypatch.setattr(spec, "factory", lambda **params: wrong)
    with pytest.raises(ProtocolError, match="field 'rounds'"):
        asyncio.run(spec.build({})(None, None))


def test_protocols_schema_prints_the_output_schema(capsys):
    assert main(["protocols", "--schema", "dynamics"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema["title"] == "DynamicsOutput" and "escalation" in schema["required"]
    assert main(["protocols", "--schema", "nope"]) == 2
    assert "unknown protocol 'nope'" in capsys.readouterr().err
