"""Personas: a catalogue name stands for its description, text with spaces is used as written, and
anything else is refused with the known names, before any call."""

from __future__ import annotations

import json

import pytest

from debatekit.cli.app import main
from debatekit.models import scripted
from debatekit.protocols.shared.personas import CATALOGUE, describe, personas_of
from debatekit.records.schemas import RunConfig
from debatekit.registry import ProtocolError
from debatekit.runner import run


def systems(folder) -> dict[str, str]:
    """Each agent's system message in round 1, from the run's call events."""
    events = [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines()]
    return {e["agent"]: e["messages"][0]["content"] for e in events if e["round"] == 1 and e["item_id"] == "q1"}


def test_catalogue_names_and_descriptions_reach_each_agents_system_prompt(tmp_path, arithmetic_file):
    model = scripted.register("personas", fn=lambda req: {"reasoning": "sum", "answer": 10})
    run(RunConfig(protocol="society_of_mind", dataset=str(arithmetic_file), model=model, cache=False,
                  params={"rounds": 1, "personas": ["Skeptic", "You are a careful accountant."]}),
        tmp_path / "run", progress=False)
    said = systems(tmp_path / "run")
    assert said["agent1"].endswith("\n" + CATALOGUE["skeptic"])  # the name, whatever its case, stands for its entry
    assert said["agent2"].endswith("\nYou are a careful accountant.")
    assert said["agent3"].endswith("\n" + CATALOGUE["skeptic"])  # fewer personas than agents: dealt out in turn


def test_a_single_agent_takes_a_persona_too(tmp_path, arithmetic_file):
    model = scripted.register("persona-one", fn=lambda req: {"reasoning": "sum", "answer": 10})
    run(RunConfig(protocol="single", dataset=str(arithmetic_file), model=model, cache=False,
                  params={"persona": "mathematician"}), tmp_path / "run", progress=False)
    assert systems(tmp_path / "run")["agent1"].endswith("\n" + CATALOGUE["mathematician"])


def test_unknown_words_and_too_many_personas_are_refused_naming_what_is_known():
    with pytest.raises(ProtocolError, match=r"unknown persona 'optimst'.*skeptic, optimist.*did you mean 'optimist'"):
        describe("optimst", "society_of_mind")
    with pytest.raises(ProtocolError, match="unknown persona '  '"):
        describe("  ", "single")
    with pytest.raises(ProtocolError, match="society_of_mind: 3 personas for 2 agents"):
        personas_of(["a", "b"], ["skeptic", "critic", "teacher"], "society_of_mind")
    assert personas_of(["a", "b"], [], "x") == {"a": None, "b": None}


def test_the_command_line_refuses_an_unknown_persona_in_one_line_before_any_call(tmp_path, capsys, arithmetic_file):
    assert main(["run", "single", "--dataset", str(arithmetic_file), "--model", "scripted/schema", "--quiet",
                 "--set", "persona=wizard", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "single: unknown persona 'wizard'" in err and "skeptic" in err
    assert not (tmp_path / "r").exists()
