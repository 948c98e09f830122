"""`debatekit serve`: one shared loopback OpenAI-compatible server for several sweep workers."""

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
import types
import urllib.request
from pathlib import Path

import pytest

from debatekit import sweep
from debatekit.cli import app as cli
from debatekit.cli import serve
from debatekit.models.local import cores
from debatekit.models.local import engine as local
from debatekit.models.local import shared as shared_engine

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
    point = {"protocol": "single", "dataset": str(dataset), "api_base": "http://127.0.0.1:1/v1"}
    result = sweep.run_point({**point, "model": "scripted/schema", "max_tokens": 32}, str(tmp_path / "run"),
                             progress=False)
    config = result.record.config
    assert config.max_tokens == 32
    assert config.api_base == "http://127.0.0.1:1/v1" and config.model_options == {}
    from debatekit.records.schemas import RunConfig
    # a provider model with an api_base gets a placeholder key, never the provider's own key
    from debatekit.runner import connection_options

    monkeypatch.setattr("debatekit.runner.run", lambda config, *a, **k: config)
    for model in ("openai/m", "anthropic/claude-x"):
        config = sweep.run_point({**point, "model": model}, str(tmp_path / "run2"))
        assert isinstance(config, RunConfig)
        assert connection_options(config) == {"api_base": "http://127.0.0.1:1/v1", "api_key": "none"}
    local_config = RunConfig(protocol="single", dataset="arithmetic", model="local/x", api_base="http://127.0.0.1:1/v1")
    assert connection_options(local_config) == {"api_base": "http://127.0.0.1:1/v1"}


class _Params:
    """Stands in for xllamacpp.CommonParams: the fields debatekit sets, with llama.cpp's defaults."""

    def __init__(self):
        self.model = types.SimpleNamespace(path="")
        self.cpuparams, self.cpuparams_batch = types.SimpleNamespace(), types.SimpleNamespace()
        self.cache_ram_mib, self.slot_prompt_similarity, self.public_path = 8192, 0.1, ""


@pytest.fixture
def fake_xllamacpp(monkeypatch, tmp_path):
    """xllamacpp that loads nothing (its servers' params are returned), on a machine where another
    live process's engine holds both cores (the machine's shared engine, say)."""
    built = []

    class Server:
        listening_address = "http://127.0.0.1:8765"

        def __init__(self, params):
            built.append(params)

    monkeypatch.setitem(sys.modules, "xllamacpp", types.SimpleNamespace(CommonParams=_Params, Server=Server))
    monkeypatch.setenv("DEBATEKIT_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("DEBATEKIT_LOCAL_THREADS", raising=False)
    monkeypatch.delenv("DEBATEKIT_LOCAL_ENGINE", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(cores, "_claimed", {})
    monkeypatch.setattr(local, "_engines", {})
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    claims = tmp_path / "home" / "engine" / "threads"
    claims.mkdir(parents=True)
    (claims / str(other.pid)).write_text("2")
    try:
        yield built
    finally:
        other.kill()
        other.wait()
        cores.release(claims)


def test_serve_does_not_advise_an_engine_setting_that_is_already_the_default(fake_xllamacpp, tmp_path, capsys):
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"")
    engine, _, _ = serve.start(str(gguf))
    err = capsys.readouterr().err
    assert "hold all 2 cores" in err and engine.threads == 1
    assert "DEBATEKIT_LOCAL_ENGINE" not in err  # serve loads its own engine whatever the setting


def test_an_engine_loaded_because_of_process_mode_says_so_when_it_gets_one_core(fake_xllamacpp, tmp_path, monkeypatch,
                                                                                capsys):
    asked = []

    class Loaded:
        async def achat(self, request):
            return {"choices": []}

    monkeypatch.setenv("DEBATEKIT_LOCAL_ENGINE", "process")
    with monkeypatch.context() as m:
        m.setattr(local, "engine", lambda name, advice="": asked.append(advice) or Loaded())
        asyncio.run(shared_engine.complete("m", {"messages": []}))
    assert asked == [shared_engine.SHARE_ADVICE]
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"")
    local.engine(str(gguf), shared_engine.SHARE_ADVICE)
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "hold all 2 cores" in line and "DEBATEKIT_LOCAL_ENGINE=process" in line


def test_get_root_answers_what_the_server_is_and_its_routes(fake_xllamacpp, tmp_path):
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"")
    engine, model, api_base = serve.start(str(gguf))
    front = Path(fake_xllamacpp[-1].public_path)
    page = (front / "index.html").read_text()
    assert f"model     {model}" in page and f"api_base  {api_base}" in page
    assert "POST /v1/chat/completions" in page and "GET /v1/models" in page and "m.gguf" in page
    assert list(front.iterdir()) == [front / "index.html"]  # llama.cpp serves this folder: nothing else in it
    del engine


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
    """Two Dask workers run a point each against one `debatekit serve`, whose front page answers first.
    Costs about 35 s here (a server start, two kernels, 2 calls of at most 96 tokens)."""
    model, api_base = server
    assert model == "openai/qwen2.5-coder-1.5b-instruct" and api_base.startswith("http://127.0.0.1:")
    with urllib.request.urlopen(api_base.removesuffix("/v1") + "/", timeout=30) as page:  # what curl gets
        assert page.status == 200 and f"api_base  {api_base}" in page.read().decode()
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
