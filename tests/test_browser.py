"""A real browser: JupyterLab on loopback, explore.ipynb over the committed example sweep, run in chromium.

Also the static PNG export (kaleido drives the same chromium). Marked `browser`; runs in CI.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.browser_support import FLAGS, ensure_chromium

ROOT = Path(__file__).resolve().parent.parent
# the committed example sweep (the notebook's default `runs`); the variable points elsewhere while it is rebuilt
EXAMPLE = Path(os.environ.get("DEBATEKIT_EXAMPLE_SWEEP", ROOT / "results" / "examples" / "arithmetic"))

pytestmark = pytest.mark.browser


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def lab(tmp_path):
    """JupyterLab serving a copy of notebooks/explore.ipynb and the example sweep, empty token."""
    shutil.copytree(ROOT / "notebooks", tmp_path / "notebooks")
    shutil.copytree(EXAMPLE, tmp_path / "results" / "examples" / "arithmetic")
    port = _free_port()
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(tmp_path / ".jupyter"), "JUPYTER_RUNTIME_DIR": str(tmp_path / "rt")}
    log = open(tmp_path / "lab.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
         "--IdentityProvider.token=", "--ServerApp.password=", f"--ServerApp.root_dir={tmp_path}",
         "--LabApp.news_url=", "--allow-root", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
        cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(240):
            if proc.poll() is not None:
                break
            try:
                with urllib.request.urlopen(f"{url}/api/status", timeout=2) as reply:
                    if reply.status == 200:
                        break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail("JupyterLab did not start: " + (tmp_path / "lab.log").read_text()[-2000:])
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def test_explorer_renders_in_jupyterlab(lab, tmp_path):
    from playwright.sync_api import sync_playwright

    chromium = ensure_chromium()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=FLAGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1100})
            page.goto(f"{lab}/lab/tree/notebooks/explore.ipynb", timeout=120_000)
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=120_000)
            select = page.locator(".jp-Dialog button:has-text('Select')")  # JupyterLab asks for a kernel
            try:
                select.wait_for(timeout=30_000)
                select.click()
            except Exception:  # no dialog: the kernel starts by itself
                pass
            page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=120_000)
            page.click("li.lm-MenuBar-item:has-text('Run')")
            page.click("li.lm-Menu-item[data-command='runmenu:run-all']")
            try:
                page.wait_for_selector(".widget-dropdown select", timeout=300_000)
            except Exception:
                page.screenshot(path=str(tmp_path / "failed.png"), full_page=True)
                raise
            page.wait_for_selector(".jp-OutputArea .js-plotly-plot .main-svg .scatterlayer .trace", timeout=120_000)
            assert page.locator(".widget-slider").count() == 1
            assert "round 1 of" in page.locator(".widget-html-content").first.inner_text()
            assert page.locator(".js-plotly-plot").count() == 2

            # the pickers drive the content through the kernel: pick the second item
            items = page.locator(".widget-dropdown select").nth(1)
            second = items.locator("option").nth(1).get_attribute("value")
            label = items.locator("option").nth(1).inner_text()
            items.select_option(second)
            page.wait_for_function(
                "(label) => [...document.querySelectorAll('.widget-html-content')]"
                ".some(e => e.innerText.startsWith(label + ','))", arg=label, timeout=60_000)
            page.wait_for_function(
                "(label) => [...document.querySelectorAll('.js-plotly-plot .gtitle')]"
                ".some(e => e.textContent.startsWith(label + ':'))", arg=label, timeout=60_000)
            page.wait_for_timeout(1500)
            shot = tmp_path / "explore.png"
            page.screenshot(path=str(shot), full_page=True)
            assert shot.stat().st_size > 10_000
        finally:
            browser.close()


def test_a_report_drawn_with_the_basic_bundle_draws_its_figures_offline(tmp_path):
    import json

    import nbformat
    import plotly.graph_objects as go
    from nbformat.v4 import new_code_cell, new_notebook, new_output
    from playwright.sync_api import sync_playwright

    from debatekit.sweep import report

    fig = go.Figure(go.Scatter(x=[1, 2, 3], y=[0.2, 0.5, 0.4], error_y={"array": [0.1, 0.1, 0.1]}))
    output = new_output("display_data", data={report.PLOTLY_MIME: json.loads(fig.to_json()), "text/plain": "Figure"})
    nbformat.write(new_notebook(cells=[new_code_cell("fig", outputs=[output])]), tmp_path / "n.ipynb")
    page_file = report.write_notebook_html(tmp_path / "n.ipynb")
    assert "plotly.js (basic" in page_file.read_text()[:100_000]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=ensure_chromium(), args=FLAGS, headless=True)
        try:
            page = browser.new_page()
            page.route("http*://**", lambda route: route.abort())  # offline: nothing but the file itself
            page.goto(page_file.as_uri())
            page.wait_for_selector(".js-plotly-plot .main-svg .scatterlayer .trace", timeout=60_000)
            assert page.locator(".js-plotly-plot .errorbar").count() == 3
        finally:
            browser.close()


def test_png_export_offline(tmp_path):
    import plotly.graph_objects as go

    from debatekit.sweep.report import save_png

    os.environ.setdefault("BROWSER_PATH", ensure_chromium())
    path = save_png(go.Figure(go.Scatter(x=[1, 2, 3], y=[0.2, 0.5, 0.4])), tmp_path / "f.png", width=400, height=300)
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 2000
