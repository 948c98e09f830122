"""HTML reports embed plotly.js and the figure data; notebook export draws plotly outputs."""

import json
from pathlib import Path

import nbformat
import plotly.graph_objects as go
from nbformat.v4 import new_code_cell, new_notebook, new_output
from plotly.offline import get_plotlyjs

from debatekit import sweep
from debatekit.cli.app import main
from debatekit.sweep import report
from tests.sweep_helpers import make_sweep


def test_sweep_figures(tmp_path):
    data = sweep.load(make_sweep(tmp_path))
    figures = report.sweep_figures(data)
    assert list(figures) == ["trajectory", "convergence", "accuracy", "paired", "cost", "flips"]
    (paired,) = [t for t in figures["paired"].data if t.type == "scatter"]
    assert "single" not in list(paired.y) and {"SoM a3 r2", "SC s3"} <= set(paired.y)  # each against single
    names = [t.name for t in figures["trajectory"].data]
    assert "agents=3 majority" in names and "agents=1 agent1" in names
    majority = next(t for t in figures["trajectory"].data if t.name == "agents=3 majority")
    assert list(majority.y) == [0.5, 1.0]  # two items outvoted in round 1, fixed in round 2
    accuracy = {t.name: t for t in figures["accuracy"].data}
    assert "single agent" in accuracy and "self-consistency at equal budget (agents=3)" in accuracy
    labels = [t for d in figures["cost"].data if d.hovertext is not None for t in d.hovertext]
    assert {"SoM a3 r2", "single", "SC s3"} <= set(labels)


def test_report_html_is_self_contained_with_the_figure_data(tmp_path, capsys):
    out = make_sweep(tmp_path)
    assert main(["report", str(out)]) == 0
    page = (out / "report.html").read_text()
    assert get_plotlyjs()[:200] in page  # plotly.js inlined, no CDN
    rest = page.replace(get_plotlyjs(), "")
    assert "cdn.plot.ly" not in rest and "<script src=" not in rest and "https://" not in rest
    assert page.count("Plotly.newPlot") == 6 and "Paired against single" in page
    assert '"name":"agents=3 majority"' in page and "Pareto front" in page
    assert "git commit" in page and "scripted/sweep-fixture" in page
    assert "plotly.js embedded" in capsys.readouterr().out


def test_notebook_html_draws_plotly_outputs(tmp_path):
    fig = go.Figure(go.Bar(x=["a", "b"], y=[3, 5], name="bars-in-notebook"))
    output = new_output("display_data", data={report.PLOTLY_MIME: json.loads(fig.to_json()), "text/plain": "Figure"})
    nb = new_notebook(cells=[new_code_cell("fig.show()", outputs=[output])])
    path = tmp_path / "n.ipynb"
    nbformat.write(nb, path)
    page = report.notebook_html(path)
    assert "bars-in-notebook" in page and "Plotly.newPlot" in page
    assert report.BASIC_JS.read_text()[:300] in page and get_plotlyjs()[:200] not in page  # a bar: the basic bundle


def _notebook(tmp_path, fig) -> Path:
    output = new_output("display_data", data={report.PLOTLY_MIME: json.loads(fig.to_json()), "text/plain": "Figure"})
    path = tmp_path / "n.ipynb"
    nbformat.write(new_notebook(cells=[new_code_cell("fig.show()", outputs=[output])]), path)
    return path


def test_a_trace_the_basic_bundle_lacks_or_another_version_of_it_embeds_the_full_plotlyjs(tmp_path, monkeypatch):
    flows = go.Figure(go.Sankey(node={"label": ["a", "b"]}, link={"source": [0], "target": [1], "value": [1]}))
    assert get_plotlyjs()[:200] in report.notebook_html(_notebook(tmp_path, flows))
    older = tmp_path / "plotly-basic.min.js"
    older.write_text("/**\n* plotly.js (basic - minified) v0.0.1\n*/\n")
    monkeypatch.setattr(report, "BASIC_JS", older)
    assert get_plotlyjs()[:200] in report.notebook_html(_notebook(tmp_path, go.Figure(go.Bar(x=["a"], y=[1]))))


def test_report_of_a_folder_that_is_not_a_sweep(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    assert "not a sweep folder" in capsys.readouterr().err


def test_report_of_a_sweep_none_of_whose_points_ran_names_the_first_failure(tmp_path, capsys):
    """Every point failed (an unknown dataset): one line with the first point's error, no KeyError."""
    import pandas as pd

    (tmp_path / "sweep.json").write_text(json.dumps({"points": [{"id": "p1", "parameters": {"protocol": "single"}}]}))
    for table in ("summary", "rounds"):
        pd.DataFrame().to_parquet(tmp_path / f"{table}.parquet")
    (tmp_path / "failures.json").write_text(json.dumps([{"point_id": "p1", "status": "failed",
                                                          "error": "cell 3: DatasetError: unknown dataset 'nosuch'"}]))
    assert main(["report", str(tmp_path)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "no point of the sweep recorded a debate (1 failed, the first with cell 3: DatasetError" in line


def test_report_of_a_file_that_is_not_a_notebook_is_one_line(tmp_path, capsys):
    for text in ("", "{}", "not json", '{"cells": 3}'):
        (tmp_path / "bad.ipynb").write_text(text)
        assert main(["report", str(tmp_path / "bad.ipynb")]) == 2
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert "bad.ipynb is not a readable notebook" in line
    assert not (tmp_path / "bad.html").exists()


def test_baseline_roles_and_short_labels_come_from_the_protocol_spec():
    import pandas as pd

    from debatekit import registry

    registry.protocol("_matched", role=registry.Role(baseline="equal_budget", label="M"))(lambda: None)
    try:
        names = pd.Series(["single", "self_consistency", "society_of_mind", "_matched", "no_longer_registered"])
        assert list(report._role(names)) == ["single", "equal_budget", "", "equal_budget", ""]
        assert [report._config_label({"protocol": n}, ["protocol"]) for n in names] == [
            "single", "SC", "SoM", "M", "no_longer_registered"]
    finally:
        registry._protocols.pop("_matched", None)
