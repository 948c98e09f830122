"""Sweep figures, self-contained HTML reports (plotly.js embedded), notebook HTML export, PNG export.

    from debatekit.sweep import report
    from debatekit import sweep
    figures = report.sweep_figures(sweep.load("results/NAME"))
    report.write_report("results/NAME")            # results/NAME/report.html, opens with no Python
    report.notebook_html("results/NAME/p.ipynb")   # an executed notebook as HTML, figures live
    report.save_png(figures["trajectory"], "trajectory.png")   # kaleido + chromium, offline

Executed notebooks keep figures as plotly's JSON mime output, which JupyterLab draws (also
when a saved notebook is opened later) but nbconvert's HTML leaves blank; the HTML written
here turns each of them into a div drawn by one inlined copy of plotly.js (its basic bundle where
the figures are all scatter, bar or pie traces).
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go

from debatekit._base import files
from debatekit import analysis, registry
from debatekit._base.extras import need
from debatekit.analysis import plots

PLOTLY_MIME = "application/vnd.plotly.v1+json"
CHROMIUM = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome")


def notebook_setup() -> None:
    """Figures in notebooks as plotly JSON mime output: drawn by JupyterLab, kept small in saved notebooks."""
    import plotly.io as pio

    pio.renderers.default = "plotly_mimetype"


# --- figures of a sweep ---------------------------------------------------------------------

def varying_keys(points: list[dict]) -> list[str]:
    """Parameters that differ between the points of a sweep (besides protocol and seed)."""
    keys = dict.fromkeys(k for p in points for k in p["parameters"])
    return [k for k in keys if k not in ("protocol", "seed") and
            len({json.dumps(p["parameters"].get(k), sort_keys=True, default=str) for p in points}) > 1]


def config_frame(data) -> pd.DataFrame:
    """One row per configuration of a sweep (accuracy, 95% interval, cost per item) with a label."""
    keys = ["protocol", *[k for k in varying_keys(data.points) if k in data.summary]]
    configs = analysis.config_table(data.summary, keys)
    configs["label"] = [_config_label(row, keys) for _, row in configs.iterrows()]
    return configs


def paired_frame(data) -> pd.DataFrame:
    """Each configuration of a sweep against `single` (or the first configuration), paired on items and seeds."""
    keys = ["protocol", *[k for k in varying_keys(data.points) if k in data.summary]]
    labels = [_config_label(row, keys) for _, row in data.summary[keys].iterrows()]
    frame = data.summary.assign(config=labels)
    if frame["config"].nunique() < 2:
        return pd.DataFrame()
    references = {spec.label for spec in registry.available().values() if spec.role.baseline == "single"}
    baseline = next((label for label in labels if label in references), labels[0])
    return analysis.compare(frame, baseline=baseline, by="config")


def _config_label(row, keys) -> str:
    spec = registry.find(row["protocol"])
    parts = [spec.label if spec else row["protocol"]]
    for k in keys[1:]:
        value = row[k]
        if value is not None and not (isinstance(value, float) and pd.isna(value)):
            parts.append(f"{k[0]}{int(value) if isinstance(value, float) and value.is_integer() else value}")
    return " ".join(parts)


def _role(protocols: pd.Series) -> pd.Series:
    """Each protocol's baseline role ("single", "equal_budget"), "" for a debate or an unregistered protocol."""
    specs = {name: registry.find(name) for name in protocols.unique()}
    return protocols.map(lambda name: (specs[name].role.baseline if specs[name] else None) or "")


def _is_debate(protocols: pd.Series) -> pd.Series:
    return _role(protocols) == ""


def _longest_runs(data, group_keys: list[str]) -> pd.DataFrame:
    """Rounds rows of the debate points, per group the points with the most rounds, filled to those rounds."""
    rounds = data.rounds[_is_debate(data.rounds["protocol"])]
    if rounds.empty:
        return rounds
    if "rounds" in rounds:
        top = rounds.groupby(group_keys or (lambda _: 0), dropna=False)["rounds"].transform("max")
        rounds = rounds[rounds["rounds"] == top]
    until = rounds.groupby("run_id")["rounds"].max().to_dict() if "rounds" in rounds else None
    return analysis.fill_rounds(rounds, until=until)


def sweep_figures(data) -> dict[str, go.Figure]:
    """The comparison figures of a sweep: trajectory, convergence, accuracy grid, paired differences against
    the baseline, cost-accuracy, flips."""
    keys = [k for k in varying_keys(data.points) if k in data.rounds and k not in ("rounds",)]
    debate_keys = [k for k in keys if data.rounds[_is_debate(data.rounds["protocol"])][k].notna().any()]
    rounds = _longest_runs(data, debate_keys)
    figures = {}
    if not rounds.empty:
        figures["trajectory"] = plots.score_trajectory(
            analysis.score_trajectory(rounds, by=debate_keys), by=debate_keys,
            title="Accuracy per round (majority vote bold, agents dotted; 95% bootstrap bands over items and seeds)")
        figures["convergence"] = plots.convergence_curve(
            analysis.convergence_curve(rounds, by=debate_keys), by=debate_keys,
            title="Convergence: share of debates where all agents agree (95% bands)")
    configs = config_frame(data)
    role = _role(configs["protocol"])
    debates = configs[role == ""]
    if {"rounds", "agents"} <= set(configs) and not debates.empty:
        single, others = configs[role == "single"], configs[role != "single"]
        matched = analysis.equal_budget(others, role[role != "single"] == "equal_budget")
        figures["accuracy"] = plots.accuracy_grid(
            debates, x="rounds", line="agents", single=single.iloc[0] if len(single) else None, matched=matched,
            title="Final accuracy against rounds and agents (baselines at equal completion-token budget)")
    paired = paired_frame(data)
    if not paired.empty:
        figures["paired"] = plots.paired_difference(paired)
    figures["cost"] = plots.cost_accuracy(configs, cost="completion_tokens",
                                          title="Completion tokens per item against accuracy (Pareto front starred)")
    if not rounds.empty:
        flips = rounds
        if "agents" in rounds and rounds["agents"].notna().any():
            flips = rounds[rounds["agents"] == rounds["agents"].max()]
        flow = analysis.flip_flow(flips)
        if not flow.empty:
            figures["flips"] = plots.flip_flow(flow, title=f"Answer flips between rounds ({_describe(flips)})")
    return figures


def _describe(rounds: pd.DataFrame) -> str:
    parts = [f"{k}={rounds[k].max():g}" for k in ("agents", "rounds") if k in rounds and rounds[k].notna().any()]
    return ", ".join(parts) or "all debates"


# --- HTML -----------------------------------------------------------------------------------

BASIC_JS = Path(__file__).parent / "assets" / "plotly-basic.min.js"
"""plotly.js's basic bundle (its scatter, bar and pie traces; MIT, `assets/plotly-basic.LICENSE`), a
quarter of the full bundle's size: a page whose figures draw no other trace embeds it, where it is
the version of the plotly.js the installed plotly ships (else the full bundle)."""
BASIC_TRACES = frozenset({"scatter", "bar", "pie"})
VERSION = re.compile(r"plotly\.js[^\n]*?v(\d+\.\d+\.\d+)")


def _plotlyjs(figures: list[go.Figure]) -> str:
    """The script that draws `figures`: plotly.js, the basic bundle where it serves them all."""
    from plotly.offline import get_plotlyjs

    script = get_plotlyjs()
    if all(trace.type in BASIC_TRACES for fig in figures for trace in fig.data):
        script = _basic(script) or script
    return f'<script type="text/javascript">window.PlotlyConfig = {{MathJaxConfig: "local"}};</script>\n' \
           f'<script type="text/javascript">{script}</script>'


def _basic(full: str) -> str | None:
    """The basic bundle, if it is the version of `full` (None when it is missing or another version)."""
    try:
        basic = BASIC_JS.read_text(encoding="utf-8")
    except OSError:
        return None
    ours, theirs = VERSION.search(basic[:300]), VERSION.search(full[:300])
    return basic if ours and theirs and ours[1] == theirs[1] else None


def _figure_div(fig: go.Figure) -> str:
    return fig.to_html(full_html=False, include_plotlyjs=False, config={"displaylogo": False})


def report_html(data, title: str | None = None) -> str:
    """A self-contained HTML page of a sweep: provenance, the configuration table, every figure."""
    title = title or f"debatekit sweep: {data.path.name}"
    s = data.summary
    configs = config_frame(data)
    shown = configs.drop(columns=["label"]).round(3)
    prov = {"model": ", ".join(sorted(s["model"].dropna().unique())) if "model" in s else "",
            "dataset": ", ".join(sorted(s["dataset"].dropna().unique())) if "dataset" in s else "",
            "items per point": int(s.groupby("point_id").size().max()) if not s.empty else 0,
            "points": len(data.points), "seeds": ", ".join(map(str, sorted(s["seed"].unique()))) if "seed" in s else "",
            "debatekit": ", ".join(sorted(s["debatekit_version"].dropna().unique())) if "debatekit_version" in s else "",
            "git commit": ", ".join(sorted(s["git_commit"].dropna().unique())) if "git_commit" in s else ""}
    figures = sweep_figures(data)
    figs = "\n".join(f'<section id="{name}">{_figure_div(fig)}</section>' for name, fig in figures.items())
    rows = "".join(f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(str(v))}</td></tr>" for k, v in prov.items())
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{html.escape(title)}</title>
{_plotlyjs(list(figures.values()))}
<style>body{{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}}
table{{border-collapse:collapse;font-size:0.9em}}td,th{{border:1px solid #ddd;padding:3px 8px;text-align:right}}
section{{margin:2em 0}}</style></head>
<body><h1>{html.escape(title)}</h1>
<table>{rows}</table>
<h2>Configurations</h2>
<p>Accuracy with a 95% bootstrap interval over items (and seeds); cost columns are means per item.</p>
{shown.to_html(index=False, na_rep="")}
{_paired_html(data)}
<h2>Figures</h2>
{figs}
</body></html>
"""


def _paired_html(data) -> str:
    paired = paired_frame(data)
    if paired.empty:
        return ""
    return (f"<h2>Paired against {html.escape(str(paired['baseline'].iloc[0]))}</h2>\n<p>Accuracy difference on the "
            "items (and seeds) both answered, with a 95% bootstrap interval resampling items, then seeds; exact "
            "McNemar p-value on the pairs only one side got right; completion tokens per item actually used by "
            "each side. Pairs where either side failed are left out (<code>left_out</code>).</p>\n"
            + paired.round(3).to_html(index=False, na_rep=""))


def write_report(sweep_dir: Path | str, out: Path | str | None = None) -> Path:
    """Write `report.html` for a sweep folder (or to `out`)."""
    from debatekit.sweep import load
    from debatekit.sweep.grid import SweepError

    data = load(sweep_dir)
    if data.summary.empty:
        raise SweepError(f"{sweep_dir}: no point of the sweep recorded a debate ({_failures(sweep_dir)}); "
                         "nothing to report")
    path = Path(out) if out else Path(sweep_dir) / "report.html"
    files.write_text(path, report_html(data))
    return path


def _failures(sweep_dir: Path | str) -> str:
    """How many points failed and the first one's error, from the sweep's failures.json."""
    path = Path(sweep_dir) / "failures.json"
    try:
        failed = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "no failures.json: has it run?"
    if not failed:
        return "none failed: has it run?"
    return f"{len(failed)} failed, the first with {failed[0].get('error', 'no error recorded')}"


def notebook_html(notebook: Path | str) -> str:
    """An executed notebook as self-contained HTML, its plotly figures drawn (nbconvert alone leaves them blank)."""
    nbformat = need("nbformat", "notebooks", "a notebook report")
    HTMLExporter = need("nbconvert", "notebooks", "a notebook report").HTMLExporter

    try:
        nb = nbformat.read(str(notebook), as_version=4)
        nbformat.validate(nb)
        if not isinstance(nb.get("cells"), list) or not all(isinstance(c, dict) for c in nb.cells):
            raise ValueError("its cells are not a list of cells")
    except (ValueError, nbformat.ValidationError, AttributeError, KeyError, TypeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValueError(f"{notebook} is not a readable notebook: {first}") from exc
    figures = []
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            spec = output.get("data", {}).get(PLOTLY_MIME)
            if spec is not None:
                figures.append(go.Figure(spec))
                output["data"]["text/html"] = _figure_div(figures[-1])
    body, _ = HTMLExporter(template_name="lab").from_notebook_node(nb)
    if figures:
        body = body.replace("<head>", f"<head>\n{_plotlyjs(figures)}", 1)
    return body


RUN_METADATA = ("papermill", "execution")
"""Notebook and cell metadata that says when and how long it ran, not what it shows."""


def same_notebook(a: Path | str, b: Path | str) -> bool:
    """Whether two executed notebooks show the same: sources and outputs equal, run times and cell
    ids aside (papermill gives its injected parameters cell a new id each run). False when either
    cannot be read."""
    def shown(path) -> dict | None:
        try:
            nb = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        for part in (nb, *nb.get("cells", [])):
            part["metadata"] = {k: v for k, v in (part.get("metadata") or {}).items() if k not in RUN_METADATA}
        for cell in nb.get("cells", []):
            cell.pop("id", None)
        return nb

    first = shown(a)
    return first is not None and first == shown(b)


def write_notebook_html(notebook: Path | str, out: Path | str | None = None) -> Path:
    path = Path(out) if out else Path(notebook).with_suffix(".html")
    files.write_text(path, notebook_html(notebook))
    return path


# --- PNG ------------------------------------------------------------------------------------

def find_chromium() -> str | None:
    """A Chromium for kaleido: $BROWSER_PATH, then the Debian package's path, then PATH."""
    for candidate in (os.environ.get("BROWSER_PATH"), *CHROMIUM):
        if candidate and Path(candidate).exists():
            return candidate
    return shutil.which("chromium") or shutil.which("chromium-browser")


def save_png(fig: go.Figure, path: Path | str, width: int = 900, height: int | None = None, scale: float = 1.5) -> Path:
    """Write a figure as PNG with kaleido (offline), using the system Chromium.

    Raises:
        RuntimeError: no Chromium found (install it: `apt-get install -y chromium`).
    """
    need("kaleido", "notebooks", "PNG export")
    browser = find_chromium()
    if browser is None:
        raise RuntimeError("PNG export needs Chromium: apt-get install -y chromium (or set BROWSER_PATH)")
    os.environ.setdefault("BROWSER_PATH", browser)
    path = Path(path)
    fig.write_image(str(files.refuse_link(path)), format="png", width=width,
                    height=height or fig.layout.height or 450, scale=scale)
    return path
