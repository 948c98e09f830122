"""Pages the documentation builds from the code and the committed runs (mkdocs `hooks:`).

- one reference page per registered protocol, and the protocols' index, from the registry through
  the functions `debatekit protocols` prints with (`debatekit.cli.protocols`): a new protocol gets
  its page without anyone writing one;
- the committed executed notebooks, rendered by mkdocs-jupyter, their plotly figures (saved as
  plotly JSON) turned into HTML that draws them with the plotly.js of the installed plotly package
  (the site works offline);
- the figures of committed runs (`results/examples/*.png`), studies (`results/studies/*/*.png`) and
  forks (`results/forks/*/*.png`, as `figures/fork-NAME-FILE`) under `figures/`.
"""

from __future__ import annotations

import inspect
import json
import sys
import tempfile
from pathlib import Path

from mkdocs.plugins import event_priority
from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = {
    "notebooks/example-point.ipynb": "results/examples/arithmetic/society_of_mind-agents3-rounds3-f3e70f9f.ipynb",
    "notebooks/study-first10.ipynb": "results/studies/gsm8k-first10/study.ipynb",
}
PLOTLY_JS = "assets/plotly.min.js"
STUDIES = ("gsm8k", "commonsenseqa", "replication")
"""Committed studies whose figures (`paired.png`, `cost.png`) the study page shows, as `figures/study-NAME-FILE`."""


def _protocols():
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from debatekit import registry
    from debatekit.cli import protocols

    return registry, protocols


def on_config(config):
    """Put one nav entry per protocol under "Protocols", after its index."""
    registry, _ = _protocols()
    pages = [{"Overview": "protocols/index.md"}] + [{name: f"protocols/{name}.md"} for name in registry.available()]
    for i, entry in enumerate(config.nav):
        if isinstance(entry, dict) and "Protocols" in entry:
            config.nav[i] = {"Protocols": pages}
    return config


@event_priority(50)  # before mkdocs-jupyter picks the notebooks out of the files
def on_files(files, config):
    registry, protocols = _protocols()
    files.append(File.generated(config, "protocols/index.md", content=index_page(protocols.overview())))
    for name, spec in registry.available().items():
        files.append(File.generated(config, f"protocols/{name}.md", content=protocol_page(spec, protocols)))
    import plotly

    files.append(File.generated(config, PLOTLY_JS,
                                abs_src_path=str(Path(plotly.__file__).parent / "package_data" / "plotly.min.js")))
    rendered = Path(tempfile.mkdtemp(prefix="debatekit-docs-"))
    for dest, src in NOTEBOOKS.items():
        (rendered / dest).parent.mkdir(parents=True, exist_ok=True)
        plotly_js = "../" * dest.count("/") + "../" + PLOTLY_JS  # from the page's folder (directory URLs)
        (rendered / dest).write_text(json.dumps(with_html_figures(json.loads((ROOT / src).read_text()), plotly_js)))
        files.append(File(dest, str(rendered), config.site_dir, config.use_directory_urls))
    for png in sorted((ROOT / "results" / "examples").glob("*.png")):
        files.append(File.generated(config, f"figures/{png.name}", abs_src_path=str(png)))
    for study in STUDIES:
        for png in sorted((ROOT / "results" / "studies" / study).glob("*.png")):
            files.append(File.generated(config, f"figures/study-{study}-{png.name}", abs_src_path=str(png)))
    for png in sorted((ROOT / "results" / "forks").glob("*/*.png")):
        files.append(File.generated(config, f"figures/fork-{png.parent.name}-{png.name}", abs_src_path=str(png)))
    return files


def with_html_figures(notebook: dict, plotly_js: str) -> dict:
    """The notebook with each plotly JSON output as HTML (a div and the call that draws it), which
    nbconvert, unlike JupyterLab, can show; the first loads plotly.js from `plotly_js`."""
    import plotly.io as pio

    loader = f'<script src="{plotly_js}"></script>'
    for cell in notebook["cells"]:
        for output in cell.get("outputs", []):
            figure = output.get("data", {}).get("application/vnd.plotly.v1+json")
            if figure is not None:
                html = pio.to_html(pio.from_json(json.dumps(figure)), include_plotlyjs=False, full_html=False)
                output["data"] = {"text/html": loader + html}
                loader = ""
    return notebook


def index_page(rows: list[dict]) -> str:
    lines = ["# Protocols", "",
             "Every registered protocol, as `debatekit protocols` lists them; each page is generated from the "
             "protocol's own code (its parameters, its docstring, its output schema).", "",
             "| protocol | paper or seed | what it does |", "|---|---|---|"]
    lines += [f"| [{r['name']}]({r['name']}.md) | {r['paper']} | {_cell(r['description'])} |" for r in rows]
    return "\n".join(lines) + "\n"


def protocol_page(spec, protocols) -> str:
    module = sys.modules[spec.factory.__module__]
    lines = [f"# {spec.name}", "", spec.description, "",
             f"**Paper or seed:** {protocols.paper(spec)} · **module:** `{spec.factory.__module__}`"
             + (f" · **label in sweep figures:** {spec.role.label}" if spec.role.label else ""), "",
             "```bash", f"debatekit protocols {spec.name}   # the same parameters in the terminal", "```", "",
             "## Parameters", "", "| parameter | default | type | set by |", "|---|---|---|---|"]
    lines += [f"| `{r['name']}` | `{r['default']}` | {_cell(r['type'])} | {r['flag'] and '`' + r['flag'] + '`'} |"
              for r in protocols.parameters(spec)]
    rounds = spec.flag("rounds")
    lines += ["", f"`--rounds N` (and a sweep grid's `rounds`) sets `{rounds}`." if rounds
              else "`--rounds` does not apply to this protocol.", ""]
    lines += ["## What it implements", "", inspect.cleandoc(module.__doc__ or spec.description), ""]
    if spec.output is not None:
        lines += ["## Output", "", f"Each debate's `output` fits `{spec.output.__name__}` "
                  f"(`debatekit protocols --schema {spec.name}` prints its JSON schema):", "",
                  "| field | type | meaning |", "|---|---|---|"]
        properties = spec.output.model_json_schema().get("properties", {})
        for field, info in spec.output.model_fields.items():
            lines.append(f"| `{field}` | {_cell(protocols.type_text(properties.get(field, {}), info.annotation))} | "
                         f"{_cell(info.description or '')} |")
        lines.append("")
    if spec.item_model.__name__ != "Item":
        lines += ["## Dataset rows", "", f"Its dataset rows fit `{spec.item_model.__name__}`: "
                  + ", ".join(f"`{f}`" for f in spec.item_model.model_fields) + ".", ""]
    if spec.stop_reasons:
        lines += ["## Its own stop reasons", ""] + [f"- `{k}`: {v}" for k, v in spec.stop_reasons.items()] + [""]
    return "\n".join(lines)


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")
