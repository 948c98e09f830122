"""The documentation site builds with `mkdocs build --strict` (a broken link, a missing page or a
docstring that does not parse fails it), and every registered protocol gets its generated page."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from debatekit import registry

ROOT = Path(__file__).resolve().parent.parent
pytest.importorskip("mkdocs", reason="the docs extra: pip install -e '.[docs]'")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(out)], cwd=ROOT,
                          capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


def builtin() -> dict:
    """The protocols a fresh process registers (other tests register their own in this one)."""
    return {name: spec for name, spec in registry.available().items() if spec.source["kind"] == "builtin"}


def test_every_protocol_has_its_generated_page(site):
    for name, spec in builtin().items():
        page = (site / "protocols" / name / "index.html").read_text()
        assert spec.description.split()[0] in page
        for parameter in spec.params:
            assert f"<code>{parameter}</code>" in page, (name, parameter)
    index = (site / "protocols" / "index.html").read_text()
    assert all(f'href="{name}/"' in index for name in builtin())


def test_the_committed_notebooks_are_rendered_with_their_figures_offline(site):
    page = (site / "notebooks" / "example-point" / "index.html").read_text()
    assert "run_point" in page and "society_of_mind" in page
    assert page.count('class="plotly-graph-div"') == 3  # score per round, convergence, answer flips
    assert '<script src="../../assets/plotly.min.js"></script>' in page and "cdn.plot.ly" not in page
    assert (site / "assets" / "plotly.min.js").stat().st_size > 1_000_000


def test_the_api_reference_renders_the_public_names(site):
    page = (site / "api" / "index.html").read_text()
    for name in ("debatekit.runner.run", "debatekit.records.schemas.RunConfig", "debatekit.registry.protocol",
                 "debatekit.engine.Debate", "debatekit.analysis.tables.load_runs"):
        assert f'id="{name}"' in page, name
