"""Bad configuration and data: each malformed input fails early with a message naming the field.

Complements tests/test_cli.py (unknown protocol/dataset/parameter, --set syntax, agents=0,
--rounds 0) and tests/test_datasets.py (bad JSON, missing/extra fields, duplicate ids,
non-UTF-8, empty dataset): the cases here are not repeated there.
"""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from debatekit import sweep
from debatekit.cli.app import main
from debatekit.datasets import DatasetError, load
from debatekit.models import scripted
from debatekit.records.schemas import RunConfig
from debatekit.registry import ProtocolError
from debatekit.runner import run
from tests.conftest import answer


def ds(tmp_path, rows=None) -> str:
    path = tmp_path / "items.jsonl"
    rows = rows or [{"id": "a", "question": "What is 1?", "answer": 1}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


# --- command line: exit status 2 and one line naming the field --------------------------------

CLI_CASES = {
    "rounds above its maximum": (["--set", "rounds=11"], "parameter 'rounds'"),
    "temperature of the wrong type": (["--set", "temperature=hot"], "parameter 'temperature'"),
    "boolean parameter given a word": (["--set", "stop_on_agreement=maybe"], "parameter 'stop_on_agreement'"),
    "list parameter given a number": (["--set", "personas=5"], "parameter 'personas'"),
    "one-word persona the catalogue does not know": (["--set", "personas=[skeptc]"],
                                                     "unknown persona 'skeptc'"),
    "more personas than agents": (["--set", "personas=[skeptic, optimist, critic, teacher]"],
                                  "4 personas for 3 agents"),
    "choice parameter out of its choices": (["--set", "answer=roman"], "parameter 'answer'"),
    "unreadable --set value": (["--set", "agents=[1,"], "'agents=[1,': the value is not readable"),
    "non-positive call timeout": (["--timeout", "0"], "field 'call_timeout'"),
    "unknown model provider": (["--model", "nosuch/model-x"], "model 'nosuch/model-x': litellm knows no provider"),
    "unknown local model": (["--model", "local/nope"], "model 'local/nope': unknown local model 'nope'"),
    "unregistered scripted model": (["--model", "scripted/never-registered"], "no scripted model named"),
}


@pytest.mark.parametrize("extra, message", CLI_CASES.values(), ids=CLI_CASES.keys())
def test_cli_rejects_with_one_line_naming_the_field(tmp_path, capsys, extra, message):
    assert main(["run", "society_of_mind", "--dataset", ds(tmp_path), "--out", str(tmp_path / "r"),
                 "--quiet", *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("debatekit: error:") and message in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "r").exists(), "a rejected configuration must not leave a run folder"


@pytest.mark.parametrize("flag, value, message", [
    ("--timeout", "soon", "argument --timeout: invalid float value: 'soon'"),
    ("--concurrency", "0", "argument --concurrency: must be at least 1"),
    ("--limit", "two", "argument --limit: 'two' is not a whole number"),
], ids=["timeout not a number", "zero concurrency", "limit not a number"])
def test_cli_flags_of_the_wrong_type_name_the_flag(tmp_path, capsys, flag, value, message):
    with pytest.raises(SystemExit) as exit_:
        main(["run", "single", "--dataset", ds(tmp_path), flag, value])
    assert exit_.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize("content, message", [
    (b'{"run_id": "abc", "trunc', "run.json cannot be read"),
    (b"\xff\xfe\x00garbage", "run.json cannot be read"),
    (b'{"run_id": "abc"}', "run.json cannot be read"),
], ids=["truncated run.json", "non-UTF-8 run.json", "run.json missing fields"])
def test_resume_of_an_unreadable_run_json_says_so(tmp_path, capsys, content, message):
    model = scripted.register("bad-config-resume", fn=lambda req: answer(1))
    out = tmp_path / "r"
    argv = ["run", "single", "--dataset", ds(tmp_path), "--model", model, "--out", str(out), "--quiet"]
    assert main(argv) == 0
    (out / "run.json").write_bytes(content)
    capsys.readouterr()
    assert main([*argv, "--resume"]) == 2
    err = capsys.readouterr().err
    assert message in err and str(out) in err


def test_a_dataset_path_that_is_a_folder_is_named(tmp_path, capsys):
    (tmp_path / "data.jsonl").mkdir()
    assert main(["run", "single", "--dataset", str(tmp_path / "data.jsonl")]) == 2
    assert "dataset file not found" in capsys.readouterr().err


# --- Python API: RunConfig and run() ----------------------------------------------------------

BASE = {"protocol": "society_of_mind", "dataset": "arithmetic"}


@pytest.mark.parametrize("fields, where", [
    ({"colour": "red"}, "colour"),
    ({"concurrency": "many"}, "concurrency"),
    ({"concurrency": 0}, "concurrency"),
    ({"limit": 0}, "limit"),
    ({"token_budget": 0}, "token_budget"),
    ({"max_tokens": -5}, "max_tokens"),
    ({"round_timeout": -1}, "round_timeout"),
    ({"debate_timeout": 0}, "debate_timeout"),
    ({"max_calls_in_flight": 0}, "max_calls_in_flight"),
    ({"seed": "lucky"}, "seed"),
    ({"params": ["agents", 3]}, "params"),
    ({"model_options": {"openai/x": "http://127.0.0.1"}}, "model_options.openai/x"),
], ids=lambda v: "-".join(v) if isinstance(v, dict) else v)
def test_run_config_names_the_bad_field(fields, where):
    with pytest.raises(ValidationError) as err:
        RunConfig(**BASE, **fields)
    assert [".".join(map(str, e["loc"])) for e in err.value.errors()][0] == where
    assert where.split(".")[0] in str(err.value)


@pytest.mark.parametrize("params, message", [
    ({"rounds": 0}, "parameter 'rounds'"),
    ({"agents": 17}, "parameter 'agents'"),
    ({"models": "openai/x"}, "parameter 'models'"),
    ({"judge": "yes"}, "has no parameter 'judge'"),
])
def test_protocol_params_are_checked_before_the_run_starts(tmp_path, params, message):
    with pytest.raises(ProtocolError, match=message):
        run(RunConfig(**BASE, model="scripted/schema", params=params), tmp_path / "r", progress=False)
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("row, message", [
    ({"id": 5, "question": "q"}, "field 'id'"),
    ({"id": "a", "question": None}, "field 'question'"),
    ({"id": "a", "question": "q", "metadata": "note"}, "field 'metadata'"),
], ids=["id not a string", "question null", "metadata not an object"])
def test_dataset_rows_of_the_wrong_type_name_line_and_field(tmp_path, row, message):
    with pytest.raises(DatasetError, match=f"line 1, {message}"):
        load(ds(tmp_path, [row]))


# --- sweep grids -----------------------------------------------------------------------------

@pytest.mark.parametrize("grid, message", [
    ({"parameters": {"protocol": "single"}, "grid": {"agents": []}}, "the grid has no points"),
    ({"parameters": {"protocol": "single"}}, "the grid has no points"),
    ({"grid": {"agents": [1, 3]}, "colour": "red"}, "unknown key(s) colour"),
    ({"grid": ["agents", 1]}, "`grid` must be mappings"),
    ({"grid": {"out_dir": ["a"]}}, "grid sets 'out_dir'"),
], ids=["empty axis", "no grid and no points", "unknown key", "grid not a mapping", "reserved key"])
def test_bad_grids_are_named(grid, message):
    with pytest.raises(sweep.SweepError) as err:
        sweep.expand_grid(grid)
    assert message in str(err.value)


@pytest.mark.parametrize("flags, message", [
    (["--timeout", "inf"], "field 'call_timeout': Input should be a finite number"),
    (["--timeout", "nan"], "field 'call_timeout'"),
    (["--set", "temperature=2.0000001"], "a temperature must be 0 to 2, got 2.0000001"),
])
def test_values_just_past_a_limit_are_refused_and_named_as_given(tmp_path, capsys, flags, message):
    from debatekit.cli.app import main

    code = main(["run", "single", "--dataset", "arithmetic", "--limit", "1", "--model", "scripted/schema",
                 "--out", str(tmp_path / "r"), "--quiet", *flags])
    err = capsys.readouterr().err.strip()
    assert code == 2 and message in err and err.count("\n") == 0, err
    assert not (tmp_path / "r").exists()


def test_a_line_break_in_an_item_id_stays_inside_its_cell_of_the_show_table(tmp_path, capsys):
    import json as _json

    from debatekit.cli.app import main

    data = tmp_path / "d.jsonl"
    data.write_text(_json.dumps({"id": "q1\nforged row", "question": "?", "answer": 1}) + "\n")
    assert main(["run", "single", "--dataset", str(data), "--model", "scripted/schema", "--out", str(tmp_path / "r"),
                 "--quiet"]) == 0
    capsys.readouterr()
    assert main(["show", str(tmp_path / "r")]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2 and lines[1].startswith("q1\\nforged row  ok")
