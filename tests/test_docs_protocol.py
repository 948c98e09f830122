"""The two-agent protocol example of the tutorial "Writing your own protocol" runs as written, end to end,
on a scripted model."""

from __future__ import annotations

import json
import re
from pathlib import Path

from debatekit import registry
from debatekit.records.schemas import RunConfig
from debatekit.runner import run

ROOT = Path(__file__).resolve().parent.parent


def example_code() -> str:
    text = (ROOT / "docs" / "tutorials" / "own-protocol.md").read_text()
    section = text[text.index("## A protocol file"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_example_is_short_and_complete():
    code = example_code()
    assert len(code.strip().splitlines()) < 40
    assert "@protocol(\"pair\")" in code and "debate.rounds(" in code


def test_the_tutorial_protocol_debates_until_the_two_agents_agree(tmp_path, arithmetic_file, model_from):
    exec(compile(example_code(), "own-protocol.md", "exec"), {"__name__": "readme_pair"})
    seen = {}

    def fn(req):
        prompt = req.messages[-1]["content"]
        seen[(req.item_id, req.agent, req.round)] = prompt
        value = int(re.search(r"What is (\d+)", prompt).group(1))
        if req.agent == "critic" and req.round == 1:
            value += 1  # disagrees once
        return {"reasoning": "worked it out", "answer": str(value)}

    try:
        result = run(RunConfig(protocol="pair", dataset=str(arithmetic_file), model=model_from(fn)),
                     tmp_path / "run", progress=False)
    finally:
        registry._protocols.pop("pair", None)
    assert result.summary.accuracy == 1.0
    assert [d.stop_reason for d in result.debates] == ["agreement"] * 3
    assert all(len(d.rounds) == 2 and d.converged for d in result.debates)
    assert seen[("q1", "proposer", 1)] == "What is 10?" and seen[("q1", "proposer", 2)] == "What is 10?\ncritic said 11"
    assert seen[("q2", "critic", 2)] == "What is 20?\nproposer said 20"
    events = [json.loads(x) for x in (tmp_path / "run" / "events.jsonl").read_text().splitlines()]
    assert sorted({(e["agent"], e["round"]) for e in events}) == [
        ("critic", 1), ("critic", 2), ("proposer", 1), ("proposer", 2)]
