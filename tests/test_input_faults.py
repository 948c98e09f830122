"""Faults in what comes in: a key echoed inside a good reply, a lone surrogate in a question, a
huge reply, and a command whose optional dependency is missing."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from benchmarks.fakeserver import FakeServer
from debatekit import datasets
from debatekit._base.extras import MissingExtra
from debatekit.cli.app import main
from debatekit.models.cache import ResponseCache
from debatekit.models.reading import MAX_REPLY_CHARS
from debatekit.records.schemas import RunConfig
from debatekit.runner import run
from tests.sweep_helpers import NOTEBOOK, make_sweep

KEY = "sk-echoed-PLANTED-5d2e71"


# --- 7. a key echoed inside a successful reply ---------------------------------------------------

def test_a_key_echoed_in_a_good_reply_is_masked_before_anything_is_written(tmp_path):
    model = "openai/echo-key"
    with FakeServer(latency=0.0, lifetime=120, idle=60) as server:
        config = RunConfig(protocol="society_of_mind", dataset="arithmetic", limit=2, model=model,
                           params={"agents": 2, "rounds": 2},
                           model_options={model: {"api_base": server.base_url, "api_key": KEY}})
        result = run(config, tmp_path / "run", progress=False)
        sent = json.dumps(server.requests())
    assert result.summary.errors == 0 and result.summary.calls == 8
    events = (result.path / "events.jsonl").read_text()
    assert "Bearer ***" in events  # the provider did echo the header: it was masked
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes() and KEY[-10:].encode() not in path.read_bytes(), path
    assert KEY not in sent  # round 2 shows each agent the others' replies: masked there too


# --- 8. a lone surrogate ---------------------------------------------------------------------------

def test_a_lone_surrogate_is_rejected_at_load_with_its_line(tmp_path, capfd):
    path = tmp_path / "items.jsonl"
    path.write_text('{"id": "a", "question": "fine", "answer": 1}\n'
                    '{"id": "b", "question": "broken \\ud800 text", "answer": 2}\n')
    with pytest.raises(datasets.DatasetError, match=r"line 2, field 'question': contains a lone surrogate"):
        datasets.load(str(path))
    assert main(["run", "single", "--dataset", str(path), "--model", "scripted/schema", "--out",
                 str(tmp_path / "run"), "--quiet"]) == 2
    lines = capfd.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "line 2" in lines[0] and "surrogate" in lines[0]
    assert not (tmp_path / "run").exists()


# --- 10. a reply's size --------------------------------------------------------------------------

def test_a_huge_reply_is_capped_where_stored_and_sent_back_and_kept_whole_once(tmp_path, model_from):
    size = 5_000_000
    seen = []

    def huge(req):
        seen.append(req.messages)
        return "x" * size  # not JSON: a parse failure, so the repair round sends the reply back

    config = RunConfig(protocol="single", dataset="arithmetic", limit=2, model=model_from(huge),
                       params={"answer_format": "json"})
    result = run(config, tmp_path / "run", progress=False)
    assert result.summary.items == 2
    repair = [m for m in seen if len(m) > 2]
    assert repair, "no repair round was sent"
    for messages in repair:
        sent_back = messages[-2]["content"]
        assert len(sent_back) < MAX_REPLY_CHARS + 200 and "reply truncated" in sent_back
    events = [json.loads(line) for line in (result.path / "events.jsonl").read_text().splitlines()]
    assert events and all(len(e["text"]) < MAX_REPLY_CHARS + 200 and "truncated" in e["text"] for e in events)
    assert (result.path / "events.jsonl").stat().st_size < 4 * (MAX_REPLY_CHARS + 10_000)
    cache = ResponseCache(tmp_path / "cache" / "responses.sqlite")
    texts = [json.loads(v)["text"] for (v,) in cache._db.execute("SELECT value FROM replies")]
    assert texts and all(len(t) == size for t in texts)  # the full reply, once per request


# --- 11. a missing extra -------------------------------------------------------------------------

def _missing(monkeypatch, *modules):
    for name in modules:
        monkeypatch.setitem(sys.modules, name, None)  # `import name` then raises ImportError


def _one_error_line(capfd, extra: str) -> str:
    captured = capfd.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("debatekit: error:"), captured.err
    assert f"pip install 'debatekit[{extra}]'" in lines[0] and "Traceback" not in captured.err
    return lines[0]


def test_sweep_without_papermill_names_the_extra(tmp_path, monkeypatch, capfd):
    _missing(monkeypatch, "papermill")
    grid = tmp_path / "g.yaml"
    grid.write_text("grid: {agents: [1, 2]}\n")
    assert main(["sweep", str(NOTEBOOK), "--grid", str(grid), "--out", str(tmp_path / "x")]) == 2
    assert "papermill" in _one_error_line(capfd, "notebooks")


def test_report_without_pyarrow_or_kaleido_names_the_extra(tmp_path, monkeypatch, capfd):
    folder = make_sweep(tmp_path)
    _missing(monkeypatch, "kaleido")
    assert main(["report", str(folder), "--png", str(tmp_path / "png")]) == 2
    assert "kaleido" in _one_error_line(capfd, "notebooks")
    _missing(monkeypatch, "pyarrow")
    assert main(["report", str(folder)]) == 2
    assert "pyarrow" in _one_error_line(capfd, "notebooks")


def test_explorer_and_dask_without_their_extras_say_which_to_install(monkeypatch):
    _missing(monkeypatch, "ipywidgets")
    monkeypatch.delitem(sys.modules, "debatekit.analysis.widgets", raising=False)
    with pytest.raises(MissingExtra, match=r"pip install 'debatekit\[notebooks\]'"):
        import debatekit.analysis.widgets  # noqa: F401
    monkeypatch.delitem(sys.modules, "debatekit.analysis.widgets", raising=False)

    from debatekit.sweep.executors_dask import DaskExecutor

    _missing(monkeypatch, "distributed")
    with pytest.raises(MissingExtra, match=r"pip install 'debatekit\[dask\]'"):
        list(DaskExecutor(1).map_unordered(len, [{"point_id": "p"}]))


def test_notebook_report_without_nbconvert_names_the_extra(tmp_path, monkeypatch, capfd):
    notebook = tmp_path / "n.ipynb"
    notebook.write_text(Path(NOTEBOOK).read_text())
    _missing(monkeypatch, "nbconvert")
    assert main(["report", str(notebook)]) == 2
    assert "nbconvert" in _one_error_line(capfd, "notebooks")
