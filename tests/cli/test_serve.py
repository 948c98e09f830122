"""`debatekit serve`: one shared loopback OpenAI-compatible server for several sweep workers."""

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from debatekit import sweep
from debatekit.cli import app as cli

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "run_debate.ipynb"


def test_serve_rejects_a_bad_port(capsys):
    assert cli.main(["serve", "--port", "70000"]) == 2
    assert "--port" in capsys.readouterr().err


def test_an_api_base_reaches_the_run_config(tmp_path, monkeypatch):
    monkeypatch.setenv("DEBATEKIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-real-secret-key")
    dataset = tmp_path / "a.jsonl"
    dataset.write_text(json.dumps({"id": "q1", "question": "What is 1?", "answer": 1}) + "\n")
    result = sweep.run_point("single", str(dataset), str(tmp_path / "run"), model="scripted/schema",
                             api_base="http://127.0.0.1:1/v1", max_tokens=32, progress=False)
    config = result.record.config
    assert config.max_tokens == 32
    assert config.api_base == "http://127.0.0.1:1/v1" and config.model_options == {}
    from debatekit.records.schemas import RunConfig
    # a provider model with an api_base gets a placeholder key, never the provider's own key
    from debatekit.runner import connection_options

    monkeypatch.setattr("debatekit.runner.run", lambda config, *a, **k: config)
    for model in ("openai/m", "anthropic/claude-x"):
        config = sweep.run_point("single", str(dataset), str(tmp_path / "run2"), model=model,
                                 api_base="http://127.0.0.1:1/v1")
        assert isinstance(config, RunConfig)
        assert connection_options(config) == {"api_base": "http://127.0.0.1:1/v1", "api_key": "none"}
    local_config = RunConfig(protocol="single", dataset="arithmetic", model="local/x", api_base="http://127.0.0.1:1/v1")
    assert connection_options(local_config) == {"api_base": "http://127.0.0.1:1/v1"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def server(tmp_path):
    """`debatekit serve` on a free loopback port, 2 slots; stopped at the end."""
    port = _free_port()
    log = open(tmp_path / "serve.log", "w+")
    proc = subprocess.Popen([sys.executable, "-m", "debatekit.cli", "serve", "--port", str(port), "--slots", "2",
                             "--ctx-per-slot", "2048"], stdout=log, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 300
        while "api_base" not in (tmp_path / "serve.log").read_text():
            assert proc.poll() is None, (tmp_path / "serve.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "the server did not start in 300 s"
            time.sleep(0.5)
        text = (tmp_path / "serve.log").read_text()
        model = text.split("model ", 1)[1].split()[0]
        api_base = text.split("api_base ", 1)[1].split()[0]
        yield model, api_base
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()


@pytest.mark.local_model
def test_a_sweep_with_two_workers_shares_one_server(server, tmp_path, monkeypatch):
    """Two Dask workers run a point each against one `debatekit serve`. Costs about 35 s here (a
    server start, two kernels, 2 calls of at most 96 tokens)."""
    model, api_base = server
    assert model == "openai/qwen2.5-coder-1.5b-instruct" and api_base.startswith("http://127.0.0.1:")
    dataset = tmp_path / "a.jsonl"
    dataset.write_text(json.dumps({"id": "q1", "question": "What is 2+3?", "answer": 5}) + "\n")
    grid = {"parameters": {"protocol": "society_of_mind", "dataset": str(dataset), "agents": 1, "rounds": 1,
                           "model": model, "api_base": api_base, "max_tokens": 96, "timeout": 400.0},
            "grid": {"seed": [0, 1]}}
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DEBATEKIT_CACHE_DIR", str(tmp_path / "cache"))  # real calls, not cached replies
    result = sweep.run_sweep(NOTEBOOK, grid, tmp_path / "out", workers=2, executor="dask", progress=False,
                             cell_timeout=540)
    assert [r.status for r in result.results] == ["complete", "complete"], [r.error for r in result.results]
    summary = result.summary
    assert len(summary) == 2 and set(summary["model"]) == {model}
    assert (summary["calls"] >= 1).all() and (summary["completion_tokens"] > 0).all()
    assert not any(os.environ.get("OPENAI_API_KEY", "\0") in p.read_text() for p in (tmp_path / "out").rglob("*.json"))
