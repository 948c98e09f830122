"""A symbolic link in a run or sweep folder is never written through, nor read out of by a review:
run folders are committed and shared, and git stores links."""

from __future__ import annotations

import json

import pytest

from debatekit.cli.app import main
from debatekit.records.schemas import RunConfig
from debatekit.records.trace import RunFolder, RunFolderError
from debatekit.runner import run
from debatekit.sweep import point
from tests.records.test_review import escalated_run, escalating_protocol  # noqa: F401  (fixtures)


@pytest.fixture
def finished(tmp_path, arithmetic_file):
    out = tmp_path / "run"
    run(RunConfig(protocol="single", dataset=str(arithmetic_file), model="scripted/schema"), out, progress=False)
    return out


@pytest.mark.parametrize("name", ["debates.jsonl", ".lock", "events.jsonl"])
def test_a_run_folder_file_linked_elsewhere_is_refused_and_the_target_untouched(finished, tmp_path, capsys, name):
    victim = tmp_path / "bashrc"
    victim.write_text("export PATH=/usr/bin\n")
    (finished / name).unlink(missing_ok=True)
    (finished / name).symlink_to(victim)
    for command in (["run", "single", "--dataset", "arithmetic", "--limit", "3", "--model", "scripted/schema",
                     "--out", str(finished), "--resume", "--quiet"],
                    ["pack", str(finished)], ["rescore", str(finished), "--write"]):
        code = main(command)
        err = capsys.readouterr().err.strip()
        assert code != 0 and f"{finished / name} is a symbolic link" in err and err.count("\n") == 0, (command, err)
    assert victim.read_text() == "export PATH=/usr/bin\n"


def test_a_linked_items_folder_is_refused_before_the_run_writes(finished, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (finished / "items").mkdir(exist_ok=True)
    (finished / "items" / "q9").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(RunFolderError, match="items/q9 is a symbolic link"):
        RunFolder(finished).lock()
    assert list(elsewhere.iterdir()) == []


def test_a_sweep_sidecar_linked_elsewhere_is_refused(tmp_path):
    victim = tmp_path / "victim.json"
    victim.write_text(json.dumps({"status": "complete"}))  # reads as a finished point's sidecar
    (tmp_path / "p1.json").symlink_to(victim)
    with pytest.raises(ValueError, match="p1.json is a symbolic link"):
        point.stamp(tmp_path / "p1.json", "digest")
    assert json.loads(victim.read_text()) == {"status": "complete"}


def test_review_show_does_not_read_a_summary_linked_out_of_the_run(escalated_run, tmp_path, capsys):  # noqa: F811
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({"conflicts": ["the secret"]}))
    summary = escalated_run / "items" / "q1" / "debate_summary.json"
    summary.unlink()
    summary.symlink_to(secret)
    assert main(["review", str(escalated_run), "--show", "q1"]) == 2
    out, err = capsys.readouterr()
    assert "the secret" not in out + err and "links out of the run folder" in err and err.strip().count("\n") == 0


def test_review_show_of_a_summary_nested_too_deeply_is_one_line(escalated_run, capsys):  # noqa: F811
    summary = escalated_run / "items" / "q1" / "debate_summary.json"
    summary.write_text("[" * 100_000 + "]" * 100_000)
    assert main(["review", str(escalated_run), "--show", "q1"]) == 2
    err = capsys.readouterr().err.strip()
    assert "nested too deeply" in err and err.count("\n") == 0
