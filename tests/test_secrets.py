"""Secrets: credentials in the environment or in model_options never reach traces, sidecars or logs."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from benchmarks.fakeserver import FakeServer
from debatekit import sweep
from debatekit.cli.app import main
from debatekit.cli.tables import summary_table
from debatekit.models.errors import ModelSetupError
from debatekit.records.schemas import RunConfig
from debatekit.runner import run

ENV_KEY = "sk-env-PLANTED-4f1c9a"          # what litellm reads from OPENAI_API_KEY
OPTION_KEY = "sk-option-PLANTED-77be02"    # given in RunConfig.model_options
OTHER = "tok-PLANTED-93d1"                 # another credential-looking variable
NAMED_KEY = "sk-named-PLANTED-5a2b7e"      # behind --api-key-env, in a variable with a plain name
SECRETS = (ENV_KEY, OPTION_KEY, OTHER, NAMED_KEY)


@pytest.fixture(scope="module")
def server():
    with FakeServer(latency=0.0, lifetime=300, idle=60) as s:
        yield s


def grep(folder: Path) -> list[str]:
    """Every file under `folder` (text or binary) that contains a planted secret, or a part of one."""
    hits = []
    for path in folder.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            hits += [f"{path}: {s}" for s in SECRETS for part in (s, s[-10:]) if part.encode() in data]
    return hits


@pytest.mark.parametrize("model, key_in", [
    ("openai/fake", "model_options"),
    ("openai/fake", "env"),
    ("openai/echo-auth", "model_options"),   # a provider that repeats the key in its error message
    ("openai/echo-auth", "env"),
])
def test_planted_keys_appear_in_no_output(tmp_path, monkeypatch, caplog, capfd, server, model, key_in):
    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    monkeypatch.setenv("DEBATEKIT_TEST_TOKEN", OTHER)
    options = {"api_base": server.base_url}
    if key_in == "model_options":
        options.update(api_key=OPTION_KEY, extra_headers={"X-Api-Key": OPTION_KEY})
    caplog.set_level(logging.DEBUG)
    config = RunConfig(protocol="society_of_mind", dataset="arithmetic", limit=2, model=model,
                       params={"agents": 2, "rounds": 2}, model_options={model: options})
    if "echo-auth" in model:  # the provider's error stops the run and reached the trace, the key masked out of it
        with pytest.raises(ModelSetupError, match=r"Bearer \*\*\*") as stopped:
            run(config, tmp_path / "run", progress=True)
        print(stopped.value)
        errors = [e for e in (tmp_path / "run" / "events.jsonl").read_text().splitlines() if "Incorrect API key" in e]
        assert errors and all("Bearer ***" in e for e in errors)
    else:
        result = run(config, tmp_path / "run", progress=True)
        sweep.record_point(str(tmp_path / "point.json"), result)
        print(summary_table([result]))
        assert result.summary.errors == 0 and result.summary.calls > 0
    assert grep(tmp_path) == []
    out, err = capfd.readouterr()
    logs = "\n".join(r.getMessage() for r in caplog.records)
    for secret in SECRETS:
        assert secret not in out and secret not in err and secret not in logs


@pytest.mark.parametrize("model", ["openai/fake", "openai/echo-auth"])
def test_the_key_behind_api_key_env_appears_in_no_output(tmp_path, monkeypatch, caplog, capfd, server, model):
    monkeypatch.setenv("LAB_SERVER", NAMED_KEY)  # a name litellm and the masking of env names do not know
    caplog.set_level(logging.DEBUG)
    code = main(["run", "society_of_mind", "--dataset", "arithmetic", "--limit", "2", "--agents", "2",
                 "--model", model, "--api-base", server.base_url, "--api-key-env", "LAB_SERVER",
                 "--out", str(tmp_path / "run")])
    out, err = capfd.readouterr()
    if "echo-auth" in model:  # the server repeats the key it was sent: masked in the one-line error
        assert code == 1 and "debatekit: error: model 'openai/echo-auth': " in err and "Bearer ***" in err
    else:
        assert code == 0 and json.loads((tmp_path / "run" / "run.json").read_text())["summary"]["errors"] == 0
    config = json.loads((tmp_path / "run" / "run.json").read_text())["config"]
    assert config["api_key_env"] == "LAB_SERVER" and config["api_base"] == server.base_url
    assert grep(tmp_path) == []
    logs = "\n".join(r.getMessage() for r in caplog.records)
    for text in (out, err, logs):
        assert NAMED_KEY not in text and NAMED_KEY[-10:] not in text


def test_planted_keys_appear_in_no_sweep_notebook_or_report(tmp_path, monkeypatch, server):
    """A papermill sweep point (executed notebook, sidecar, run folder) and the HTML reports of it."""
    from debatekit.sweep.report import write_notebook_html, write_report
    from tests.sweep_helpers import NOTEBOOK

    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    monkeypatch.setenv("DEBATEKIT_TEST_TOKEN", OTHER)
    monkeypatch.setenv("LAB_SERVER", NAMED_KEY)
    grid = {"parameters": {"protocol": "society_of_mind", "dataset": "arithmetic", "limit": 1,
                           "model": "openai/fake", "api_base": server.base_url, "api_key_env": "LAB_SERVER"},
            "grid": {"agents": [2]}}
    result = sweep.run_sweep(NOTEBOOK, grid, tmp_path / "sweep", workers=1, progress=False)
    assert not result.failed and len(result.summary) == 1
    (events,) = (tmp_path / "sweep").glob("*/events.jsonl")
    assert len(events.read_text().splitlines()) >= 2  # both agents really called the server
    write_report(tmp_path / "sweep", tmp_path / "sweep" / "report.html")
    (notebook,) = (tmp_path / "sweep").glob("*.ipynb")
    write_notebook_html(notebook, tmp_path / "notebook.html")
    assert grep(tmp_path) == []
