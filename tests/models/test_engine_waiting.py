"""A shared engine under load: a call queued behind other processes' calls is not timed out while
the engine makes way, a generation that stalls still is, and the run says what it waits for and
which engine serves it.

The daemons are real processes serving the two-slot fake engine of tests/engine_fakes.py; the
"other process" is a real client process holding both slots.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time

import pytest

from debatekit.models import watch
from debatekit.models.gateway import Gateway
from debatekit.models.local import daemon
from debatekit.models.local import shared as shared_engine
from debatekit.models.model import resolve
from debatekit.models.providers import litellm_module
from tests.models.test_shared_engine import home  # noqa: F401 - the fixture

BUSY = """
import asyncio, sys
from debatekit.models.local import daemon
from debatekit.models.local import shared as shared_engine
async def main():
    ask = lambda: shared_engine.achat("m", {"messages": [{"role": "user", "content": sys.argv[1]}]})
    await asyncio.gather(ask(), ask())
asyncio.run(main())
"""


@pytest.fixture
def no_assembly(monkeypatch):
    monkeypatch.setattr("debatekit.models.local.weights.ready", lambda name: None)
    monkeypatch.setattr("debatekit.models.local.weights.footprint", lambda name, spare=0: 0)
    monkeypatch.setenv("DEBATEKIT_ENGINE_HEARTBEAT", "0.1")  # reports well inside the tests' 1-second timeouts
    # a queue that stays full: with fairness the call would take a slot back from the other process
    # (tests/models/test_fair.py)
    monkeypatch.setenv("DEBATEKIT_ENGINE_FAIR", "off")


def _fill_both_slots(what: str) -> subprocess.Popen:
    """Another process sends two calls `what` (both slots of the fake engine) and waits for them."""
    other = subprocess.Popen([sys.executable, "-c", BUSY, what])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        info = shared_engine.status()
        if info and info.get("in_flight") == 2:
            return other
        time.sleep(0.05)
    other.kill()
    raise AssertionError("the other process never filled the engine's slots")


def test_a_call_queued_behind_other_processes_outlives_its_timeout_and_answers(home, no_assembly):
    litellm_module()  # its import (seconds) would hold up the loop this test watches the call from
    other = _fill_both_slots("slow 3")
    gateway = Gateway(cache=None, timeout=1.0)
    notes = []

    async def main():
        call = asyncio.ensure_future(gateway.complete(resolve("local/m"), [{"role": "user", "content": "queued"}]))
        while not call.done():
            notes.append(gateway.waiting())
            await asyncio.sleep(0.2)
        return await call

    start = time.monotonic()
    done = asyncio.run(main())
    waited = time.monotonic() - start
    other.wait(timeout=30)
    assert done.ok and done.faults == [] and "heard: queued" in done.text
    assert waited > 2.0  # it waited far beyond its 1-second timeout, behind the other process's calls
    assert "waiting for the engine: 2 calls of other processes ahead" in notes
    assert gateway.waiting() is None


def test_a_generation_that_stalls_still_times_out(home, no_assembly):
    gateway = Gateway(cache=None, timeout=1.0)
    start = time.monotonic()
    done = asyncio.run(gateway.complete(resolve("local/m"), [{"role": "user", "content": "stall"}]))
    assert not done.ok and done.error_kind == "timeout" and done.faults == ["timeout"]
    assert time.monotonic() - start < 10
    deadline = time.monotonic() + 10  # the engine heard the client leave and stopped the generation
    while not (home.parent.parent / "cancelled").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (home.parent.parent / "cancelled").read_text() == "stall"


def test_a_call_queued_on_an_engine_that_makes_no_progress_times_out(home, no_assembly):
    other = _fill_both_slots("hold 8")  # both slots held, nothing generated: a wedged engine
    gateway = Gateway(cache=None, timeout=1.0)
    start = time.monotonic()
    done = asyncio.run(gateway.complete(resolve("local/m"), [{"role": "user", "content": "queued"}]))
    assert not done.ok and done.error_kind == "timeout"
    assert time.monotonic() - start < 6  # well before the held slots free up
    other.kill()


def test_a_watch_counts_the_timeout_from_the_start_and_only_moves_with_the_engine():
    now = [0.0]
    w = watch.Watch(10.0, clock=lambda: now[0])
    now[0] = 8.0
    w.waiting(3, engine_work=100)
    assert w.deadline == 18.0 and w.note == "waiting for the engine: 3 calls of other processes ahead"
    now[0] = 15.0
    w.waiting(1, engine_work=100)  # the engine did nothing since: the deadline stays
    assert w.deadline == 18.0 and w.note.endswith("1 call of other processes ahead")
    now[0] = 17.0
    w.started()
    assert w.deadline == 27.0 and w.note is None
    w.started()
    assert w.deadline == 27.0  # started once: a second word of it moves nothing
    now[0] = 20.0
    w.waiting(5, engine_work=500)  # its slot went to another process (`fair`): queued again, from now
    assert w.deadline == 30.0 and not w.is_started and w.note.endswith("5 calls of other processes ahead")
    now[0] = 22.0
    w.started()
    assert w.deadline == 32.0 and w.note is None
    now[0] = 20.0
    silent = watch.Watch(10.0, clock=lambda: now[0])
    now[0] = 29.0
    silent.waiting(2)  # a report with no work count excuses nothing
    assert silent.deadline == 30.0


def test_the_engine_names_itself_and_a_run_says_which_engine_serves_it(home, no_assembly):
    line = shared_engine.preflight(["m"])
    assert line.startswith("local engine: none running; the first call not in the cache starts one (debatekit ")
    asyncio.run(shared_engine.achat("m", {"messages": [{"role": "user", "content": "hi"}]}))
    info = shared_engine.status()
    assert info["wire"] == shared_engine.WIRE and info["install"] == shared_engine.identity()["install"]
    line = shared_engine.preflight(["m"])
    assert f"local engine: pid {info['pid']}, debatekit " in line and info["install"] in line
    assert "models: m (2 slots" in line and "1 client(s)" in line


def test_an_engine_of_another_wire_version_is_refused_with_one_line(home, no_assembly, monkeypatch):
    asyncio.run(shared_engine.achat("m", {"messages": [{"role": "user", "content": "hi"}]}))
    pid = shared_engine.status()["pid"]
    monkeypatch.setattr(shared_engine, "WIRE", shared_engine.WIRE + 1)  # this client is a newer debatekit
    with pytest.raises(shared_engine.EngineIncompatible) as refused:
        asyncio.run(shared_engine.achat("m", {"messages": [{"role": "user", "content": "hi"}]}))
    message = str(refused.value)
    assert "\n" not in message and f"(pid {pid})" in message and f"`kill {pid}`" in message
    with pytest.raises(shared_engine.EngineIncompatible, match=f"kill {pid}"):
        shared_engine.preflight(["m"])
    # through a gateway the refusal is a set-up failure, never retried as a fault of the engine
    done = asyncio.run(Gateway(cache=None, backoff=0.01).complete(resolve("local/m"), [{"role": "user", "content": "x"}]))
    assert not done.ok and done.error_kind == "setup" and f"kill {pid}" in done.error
    assert os.getpid() not in [pid]


def test_a_run_whose_calls_wait_says_so_on_its_progress_line():
    from debatekit.runner import _say_waits

    class Bar:
        def __init__(self):
            self.said = []

        def set_description(self, text):
            self.said.append(text)

    class Waiting:
        note = "waiting for the engine: 3 calls of other processes ahead"

        def waiting(self):
            return self.note

    async def main(bar, gateway):
        async def debate():
            await asyncio.sleep(0.3)
            gateway.note = None  # its call started
            await asyncio.sleep(0.3)

        await _say_waits(bar, gateway, "single", [asyncio.ensure_future(debate())], every=0.05)

    bar = Bar()
    asyncio.run(main(bar, Waiting()))
    assert bar.said == ["single (waiting for the engine: 3 calls of other processes ahead)", "single"]


def test_the_shared_engine_keeps_spare_slots_a_single_process_never_fills(monkeypatch):
    from debatekit.models.local import engine as local

    made = {}
    monkeypatch.setattr(local, "engine", lambda name, spare=0: made.setdefault(name, spare))
    monkeypatch.delenv("DEBATEKIT_LOCAL_SPARE_SLOTS", raising=False)
    daemon._real_engine("m")
    assert made["m"] == local.SPARE_SLOTS == 2  # a process's gateway sends at most slots() calls at once
    monkeypatch.setenv("DEBATEKIT_LOCAL_SPARE_SLOTS", "5")
    daemon._real_engine("n")
    assert made["n"] == 5
