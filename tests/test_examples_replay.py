"""The committed example runs still reproduce: the same prompts are sent and the same answers and
scores come out when each recorded reply is played back for the prompt it answered.

A replayed call is looked up by where it happens (item, agent, phase, round) and by the hash of
its messages, so a changed prompt (a cache miss on a real run) fails the test by name.
"""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from pathlib import Path

import pytest

from debatekit import datasets, registry
from debatekit.engine import prompt_hash
from debatekit.models.gateway import Completion, Gateway
from debatekit.models.providers import CALL_CONTEXT
from debatekit.records.schemas import RunConfig
from debatekit.runner import arun

EXAMPLES = Path(__file__).resolve().parent.parent / "results" / "examples"
RUNS = sorted(str(p.parent.relative_to(EXAMPLES)) for pattern in ("*/run.json", "lit-*/*/run.json", "som-*/*/run.json")
              for p in EXAMPLES.glob(pattern))
"""Single runs, the runs of the literature comparisons (`lit-<dataset>/<protocol>`) and of single
against society_of_mind in free text (`som-<dataset>/<protocol>`)."""
STALE = {"dynamics-decisions-debate": {"synthesis", "council"}}
"""Phases whose prompts changed on purpose after the example was recorded (the synthesis now sees
the one-agent route's wording); the rounds before them must still match exactly."""
COMPARED = ("final_answer", "score", "correct", "stop_reason", "converged", "needs_human_review", "rounds")


class Replay(Gateway):
    """A gateway that answers each call with the reply recorded for the same place and prompt."""

    def __init__(self, events: list[dict]):
        super().__init__()
        self.replies: dict[tuple, list[dict]] = defaultdict(list)
        for e in events:
            self.replies[(e["item_id"], e["agent"], e["phase"], e["round"], e["prompt_hash"])].append(e)
        self.missing: list[tuple] = []

    async def complete(self, model, messages, output=None, **_) -> Completion:
        where = CALL_CONTEXT.get()
        key = (where["item_id"], where["agent"], where["phase"], where["round"], prompt_hash(messages))
        if not self.replies.get(key):
            self.missing.append(key)
            return Completion(model=model, error="not recorded", error_kind="replay")
        e = self.replies[key].pop(0)
        parsed = output.model_validate(e["output"]) if output is not None and e["output"] is not None else None
        return Completion(model=model, text=e["text"] or "", parsed=parsed, prompt_tokens=e["prompt_tokens"],
                          completion_tokens=e["completion_tokens"], calls=1, faults=list(e["faults"]),
                          error=e["error"], error_kind=e["error_kind"])


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _only(config: RunConfig, ids: set[str], tmp_path: Path) -> Path:
    """The run's dataset cut to the items an interrupted example finished (a JSONL file)."""
    items, _ = datasets.load(config.dataset, registry.get(config.protocol).item_model, config.limit)
    path = tmp_path / "finished.jsonl"
    path.write_text("".join(item.model_dump_json() + "\n" for item in items if item.id in ids), encoding="utf-8")
    return path


@pytest.mark.parametrize("name", RUNS)
def test_committed_example_reproduces_from_its_recorded_replies(name, tmp_path):
    folder = EXAMPLES / name
    config = RunConfig.model_validate(json.loads((folder / "run.json").read_text())["config"])
    model = json.loads((folder / "run.json").read_text())["model"]
    # the calls of each item's last recorded debate: a run cut off mid-debate keeps that debate's
    # calls until --resume prunes them, and a resumed run keeps an item's earlier failed attempt
    last = {(d["item_id"], d.get("seed")): d["debate_id"] for d in _lines(folder / "debates.jsonl")}
    replay = Replay([e for e in _lines(folder / "events.jsonl") if e["debate_id"] in set(last.values())])
    config = config.model_copy(update={"model": model})
    before = {d["item_id"]: d for d in _lines(folder / "debates.jsonl")}
    if json.loads((folder / "run.json").read_text())["status"] != "complete":  # a run to be continued
        config = config.model_copy(update={"dataset": str(_only(config, set(before), tmp_path)), "limit": None})
    result = asyncio.run(arun(config, tmp_path / "run", progress=False, gateway=replay))
    stale = STALE.get(name, set())
    missing = [k for k in replay.missing if k[2] not in stale]
    assert missing == [], f"prompts not sent in the recorded run (first: {missing[:1]})"
    assert [k for k, left in replay.replies.items() if left and k[2] not in stale] == [], "recorded calls not made"
    after = {d.item_id: d.model_dump(mode="json") for d in result.debates}
    assert sorted(after) == sorted(before)
    compared = ("rounds",) if stale else COMPARED
    for item_id, old in before.items():
        assert {k: after[item_id].get(k) for k in compared} == {k: old.get(k) for k in compared}, item_id
