"""Test fixtures: real network blocked, response cache in a temporary folder, scripted models."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from debatekit.models import scripted

# the local-model tests share the machine's engine (debatekit.models.local.shared); one the suite started
# stops soon after it, rather than holding 1.5 GB for the default five idle minutes
os.environ.setdefault("DEBATEKIT_ENGINE_IDLE", "30")


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    """Each test gets its own response cache; connections beyond loopback fail."""
    monkeypatch.setenv("DEBATEKIT_CACHE_DIR", str(tmp_path / "cache"))
    real_connect = socket.socket.connect

    def guarded(self, address):
        host = address[0] if isinstance(address, tuple) else address
        if isinstance(host, str) and not (host.startswith("127.") or host in ("localhost", "::1")) \
                and self.family in (socket.AF_INET, socket.AF_INET6):
            raise RuntimeError(f"tests must not reach the network ({host})")
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)


@pytest.fixture
def arithmetic_file(tmp_path) -> Path:
    """Three arithmetic items with truths 10, 20, 30."""
    path = tmp_path / "arith.jsonl"
    rows = [{"id": f"q{i}", "question": f"What is {i}0?", "answer": i * 10} for i in (1, 2, 3)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def answer(value, reasoning="worked it out") -> dict:
    return {"reasoning": reasoning, "answer": value}


@pytest.fixture
def model_from():
    """Register a scripted model from a function of the request; returns its model string."""
    counter = {"n": 0}

    def make(fn):
        counter["n"] += 1
        return scripted.register(f"test-{id(fn)}-{counter['n']}", fn=fn)

    return make


def dry_runs(folder: Path, *protocols: str, limit: int = 3) -> dict[str, Path]:
    """Run each protocol on the first `limit` arithmetic items with `scripted/schema` (no real model),
    each into `folder/NAME`; returns NAME -> run folder."""
    from debatekit.cli.app import main

    runs = {}
    for name in protocols:
        runs[name] = folder / name
        assert main(["run", name, "--dataset", "arithmetic", "--limit", str(limit), "--model", "scripted/schema",
                     "--out", str(runs[name]), "--quiet"]) == 0
    return runs
