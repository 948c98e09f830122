"""The run summary as a typed model: what every committed run.json says reads into it and writes back."""

import json
from pathlib import Path

import pytest

from debatekit.records.schemas import RunSummary

ROOT = Path(__file__).resolve().parent.parent.parent
RUNS = sorted(ROOT.glob("results/**/run.json"))


@pytest.mark.parametrize("path", RUNS, ids=[str(p.parent.relative_to(ROOT)) for p in RUNS])
def test_a_recorded_summary_reads_and_writes_back_with_the_same_keys_and_values(path):
    written = json.loads(path.read_text(encoding="utf-8"))["summary"]
    back = RunSummary.model_validate(written).model_dump(mode="json")
    assert sorted(back) == sorted(written)
    assert json.dumps(back, sort_keys=True) == json.dumps(written, sort_keys=True)


def test_a_summary_from_before_a_count_reads_it_as_its_default_and_keeps_unknown_keys():
    old = RunSummary.model_validate({"items": 2, "failed": 0, "parse_failures": 1, "older_key": 5})
    assert (old.items, old.seeds, old.degraded, old.cut_off, old.echoes) == (2, 1, 0, None, 0)
    assert old.model_dump() == {"items": 2, "failed": 0, "parse_failures": 1, "older_key": 5}
