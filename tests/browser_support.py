"""Debian chromium for the tests that drive a real browser or export PNGs (CI starts on a fresh machine)."""

from __future__ import annotations

import os
import shutil
import subprocess

from debatekit.sweep.report import find_chromium

FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]


def ensure_chromium() -> str:
    """The path of a Chromium, installing Debian's `chromium` package with apt-get if there is none."""
    found = find_chromium()
    if found:
        return found
    if shutil.which("apt-get") is None or (hasattr(os, "geteuid") and os.geteuid() != 0):
        raise RuntimeError("no chromium and cannot install it: run `apt-get install -y chromium` as root")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-q"], check=False, env=env, capture_output=True, timeout=600)
    subprocess.run(["apt-get", "install", "-y", "-q", "chromium"], check=True, env=env, capture_output=True,
                   timeout=1200)
    found = find_chromium()
    if not found:
        raise RuntimeError("apt-get installed chromium but no binary was found")
    return found
