"""A run's JSONL files as readers meet them: a line that holds JSON but not an object is skipped
like a torn one, by every reader (show, compare, rescore, resume), not a traceback."""

from __future__ import annotations

import json

from debatekit.cli.app import main
from debatekit.records.storage import parsed
from tests.conftest import dry_runs


def test_parsed_takes_only_complete_json_objects():
    lines = ['{"a": 1}\n', "[1, 2]\n", "42\n", "null\n", '"text"\n', "{broken\n", '{"b": 2}']
    assert list(parsed(lines)) == [(1, {"a": 1})]


def test_every_reader_skips_lines_that_are_not_objects(tmp_path, capsys):
    runs = dry_runs(tmp_path, "single", "society_of_mind")
    som = runs["society_of_mind"]
    for file in ("events.jsonl", "debates.jsonl"):
        with open(som / file, "a", encoding="utf-8") as f:
            f.write("[1, 2]\n42\nnull\n")
    capsys.readouterr()
    assert main(["show", str(som)]) == 0
    assert main(["compare", str(runs["single"]), str(som)]) == 0
    assert main(["rescore", str(som)]) == 0
    assert main(["run", "society_of_mind", "--dataset", "arithmetic", "--limit", "4", "--model", "scripted/schema",
                 "--out", str(som), "--quiet", "--resume"]) == 0
    assert "Traceback" not in capsys.readouterr().err
    debates = [json.loads(line) for line in (som / "debates.jsonl").read_text().splitlines()]
    assert all(isinstance(row, dict) for row in debates) and len({row["item_id"] for row in debates}) == 4


def test_a_run_whose_call_events_are_gone_still_resumes_and_prints(tmp_path, capsys):
    """events.jsonl lost (deleted, not copied): the debates stand; the call columns read unknown."""
    out = tmp_path / "som"
    args = ["run", "society_of_mind", "--dataset", "arithmetic", "--limit", "2", "--model", "scripted/schema",
            "--out", str(out)]
    assert main(args + ["--quiet"]) == 0
    (out / "events.jsonl").unlink()
    capsys.readouterr()
    assert main(args + ["--resume"]) == 0
    printed = capsys.readouterr()
    assert "society_of_mind by round" in printed.out and "Traceback" not in printed.err


def test_an_unreadable_run_json_is_one_line_that_says_what_is_wrong(tmp_path, capsys):
    out = tmp_path / "r"
    assert main(["run", "single", "--dataset", "arithmetic", "--limit", "1", "--model", "scripted/schema",
                 "--out", str(out), "--quiet"]) == 0
    whole = json.loads((out / "run.json").read_text())
    for text, says in (("", "it is empty"), ('{"run_id": ', "it is not JSON"), ("[]", "field 'the record'"),
                       (json.dumps({**whole, "summary": None}), "field 'summary'")):
        (out / "run.json").write_text(text)
        capsys.readouterr()
        assert main(["show", str(out)]) == 2
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert line.startswith(f"debatekit: error: {out / 'run.json'} cannot be read: ") and says in line
