"""Secrets: credentials in the environment or in model_options never reach traces, sidecars or logs."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from benchmarks.fakeserver import FakeServer
from debatekit import sweep
from debatekit.cli import summary_table
from debatekit.runner import run
from debatekit.schemas import RunConfig

ENV_KEY = "sk-env-PLANTED-4f1c9a"          # what litellm reads from OPENAI_API_KEY
OPTION_KEY = "sk-option-PLANTED-77be02"    # given in RunConfig.model_options
OTHER = "tok-PLANTED-93d1"                 # another credential-looking variable
SECRETS = (ENV_KEY, OPTION_KEY, OTHER)


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
    result = run(config, tmp_path / "run", progress=True)
    sweep.record_point(str(tmp_path / "point.json"), result, {"protocol": "society_of_mind", "limit": 2})
    print(summary_table([result]))

    if "echo-auth" in model:  # the provider's error reached the trace, with the key masked out of it
        assert result.summary["errors"] > 0
        errors = [e for e in result.path.joinpath("events.jsonl").read_text().splitlines() if "Incorrect API key" in e]
        assert errors and all("Bearer ***" in e for e in errors)
    else:
        assert result.summary["errors"] == 0 and result.summary["calls"] > 0
    assert grep(tmp_path) == []
    out, err = capfd.readouterr()
    logs = "\n".join(r.getMessage() for r in caplog.records)
    for secret in SECRETS:
        assert secret not in out and secret not in err and secret not in logs


def test_planted_keys_appear_in_no_sweep_notebook_or_report(tmp_path, monkeypatch, server):
    """A papermill sweep point (executed notebook, sidecar, run folder) and the HTML reports of it."""
    from debatekit.report import write_notebook_html, write_report
    from tests.sweep_helpers import NOTEBOOK

    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    monkeypatch.setenv("DEBATEKIT_TEST_TOKEN", OTHER)
    grid = {"parameters": {"protocol": "society_of_mind", "dataset": "arithmetic", "limit": 1,
                           "model": "openai/fake", "api_base": server.base_url},
            "grid": {"agents": [2]}}
    result = sweep.run_sweep(NOTEBOOK, grid, tmp_path / "sweep", workers=1, progress=False)
    assert not result.failed and len(result.summary) == 1
    (events,) = (tmp_path / "sweep").glob("*/events.jsonl")
    assert len(events.read_text().splitlines()) >= 2  # both agents really called the server
    write_report(tmp_path / "sweep", tmp_path / "sweep" / "report.html")
    (notebook,) = (tmp_path / "sweep").glob("*.ipynb")
    write_notebook_html(notebook, tmp_path / "notebook.html")
    assert grep(tmp_path) == []
