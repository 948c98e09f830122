"""The committed example runs still reproduce with today's code: each debate is run again by its
protocol, every call answered with the reply recorded for the same place and prompt and read by
today's reader, and the same answers, scores and stops come out.

This is where the protocols meet real model text in CI, at replay speed: every built-in protocol
has a committed recording on the embedded model (`test_every_built_in_protocol_has_a_recording`).
A recording goes stale when a prompt changes (a call it holds no reply for), a call is no longer
made, or a reading changes an outcome; the failure names the run and the one command that
records it again, asking the model only for what is new (`debatekit rerecord`).

Beyond the outcomes, each replayed debate's record must say exactly what its trace says: the
embedded model does not always keep to the answer format, so a reply that could not be read is
counted, never dropped or invented (`accounted`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from debatekit import registry
from debatekit.records.schemas import ANSWERED
from debatekit.sweep.rerecord import rerecord

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "results" / "examples"
RUNS = sorted(str(p.parent.relative_to(EXAMPLES)) for pattern in ("*/run.json", "lit-*/*/run.json", "som-*/*/run.json")
              for p in EXAMPLES.glob(pattern))
"""Single runs, the runs of the literature comparisons (`lit-<dataset>/<protocol>`) and of single
against society_of_mind in free text (`som-<dataset>/<protocol>`)."""


def accounted(debate, events: list[dict]) -> None:
    """A debate's counts and status agree with its call events: every call counted, every error and
    parse failure counted, no output read from a failed call; a debate left unanswered is so only
    through replies that could not be read, or failed with a ProtocolError and is not scored."""
    texts = [e["text"] for e in events]
    u = debate.usage
    assert u.calls == len(events) and u.errors == sum(e["error"] is not None for e in events), texts
    assert u.parse_failures == sum(e["parse_failures"] for e in events), texts
    assert all(e["output"] is None for e in events if e["error"] is not None)
    if debate.status not in ANSWERED:
        assert debate.status == "failed" and debate.error.startswith("ProtocolError"), (debate.error, texts)
        assert debate.correct is None and debate.score is None
    elif debate.final_answer is None:
        assert u.parse_failures + u.errors > 0 and not debate.correct, texts


@pytest.mark.parametrize("name", RUNS)
def test_committed_example_reproduces_from_its_recorded_replies(name):
    folder = EXAMPLES / name
    result = rerecord(folder, ask_model=False)
    assert not result.stale, (f"{result.describe()}\nrecord it again (the model answers only the calls it lacks): "
                              f"debatekit rerecord {folder.relative_to(ROOT)}")
    assert result.debates == len(result.debates_now) > 0 and result.calls == len(result.events_now)
    for debate in result.debates_now:
        accounted(debate, [e for e in result.events_now if e["debate_id"] == debate.debate_id])
    recorded = sorted(str(f.relative_to(folder)) for f in (folder / "items").rglob("*") if f.is_file())
    assert result.files_now == recorded  # the protocol's own files, as the recording wrote them


def test_every_built_in_protocol_has_a_recording():
    recorded = {json.loads((EXAMPLES / name / "run.json").read_text())["config"]["protocol"] for name in RUNS}
    models = {json.loads((EXAMPLES / name / "run.json").read_text())["model"] for name in RUNS}
    built_in = {name for name, spec in registry.available().items() if spec.source["kind"] == "builtin"}
    assert len(built_in) >= 14 and built_in - recorded == set()
    assert all(model.startswith("local/") for model in models)
