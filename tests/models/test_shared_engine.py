"""One engine per machine: discovery, several clients, clients and engines killed mid-call, stale files.

The daemons here are real processes (`python -m debatekit.models.local.daemon`) in a temporary
DEBATEKIT_HOME, serving a fake engine (tests/engine_fakes.py) so that each test takes seconds.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from debatekit.models.local import shared as shared_engine
from debatekit.models.local.daemon import Daemon
from debatekit.models.local.shared import EngineLost
from debatekit.models.model import resolve

ROOT = Path(__file__).resolve().parents[2]
MSG = [{"role": "user", "content": "hello"}]


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("DEBATEKIT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DEBATEKIT_ENGINE_BACKEND", "tests.engine_fakes:make")
    monkeypatch.setenv("DEBATEKIT_ENGINE_IDLE", "30")
    monkeypatch.setenv("FAKE_ENGINE_CANCELLED", str(tmp_path / "cancelled"))
    monkeypatch.setenv("PYTHONPATH", f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    yield tmp_path / "home" / "engine"
    info = shared_engine.status()
    if info:
        os.kill(info["pid"], signal.SIGTERM)


def chat(content: str, model: str = "m") -> dict:
    return asyncio.run(shared_engine.achat(model, {"messages": [{"role": "user", "content": content}]}))


def text(reply: dict) -> str:
    return reply["choices"][0]["message"]["content"]


def test_the_first_call_starts_the_engine_and_later_calls_find_it(home):
    assert shared_engine.status() is None
    first = text(chat("one"))
    second = text(chat("two"))
    pid = shared_engine.status()["pid"]
    assert f"pid {pid} heard: one" in first and f"pid {pid} heard: two" in second and pid != os.getpid()
    assert (home / "engine.sock").exists() and "listening" in (home / "engine.log").read_text()
    status = shared_engine.status()
    assert status["models"] == ["m"] and status["served"] == 2 and status["clients"] == [os.getpid()]


CLIENT = """
import asyncio, sys
from debatekit.models.local import shared as shared_engine
reply = asyncio.run(shared_engine.achat("m", {"messages": [{"role": "user", "content": sys.argv[1]}]}))
print(reply["choices"][0]["message"]["content"].split(" heard")[0])
"""


def test_processes_that_start_at_the_same_moment_share_one_engine(home):
    clients = [subprocess.Popen([sys.executable, "-c", CLIENT, f"slow 0.3 #{n}"], stdout=subprocess.PIPE, text=True)
               for n in range(4)]
    outs = [c.communicate(timeout=60)[0].strip() for c in clients]
    assert all(c.returncode == 0 for c in clients)
    assert len(set(outs)) == 1, outs  # every client was answered by the same daemon
    status = shared_engine.status()
    assert len(status["clients"]) == 4 and status["served"] == 4


def test_the_engine_outlives_the_client_that_started_it(home):
    starter = subprocess.run([sys.executable, "-c", CLIENT, "first"], capture_output=True, text=True, timeout=60)
    assert starter.returncode == 0
    pid = shared_engine.status()["pid"]
    assert f"pid {pid}" in starter.stdout and f"pid {pid}" in text(chat("second"))


def test_a_client_killed_mid_call_stops_its_generation_and_leaves_the_engine_serving(home):
    chat("warm up")
    client = subprocess.Popen([sys.executable, "-c", CLIENT, "slow 30"], stdout=subprocess.PIPE)
    deadline = time.monotonic() + 20
    while shared_engine.status()["in_flight"] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    client.kill()
    client.wait()
    while not Path(os.environ["FAKE_ENGINE_CANCELLED"]).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert Path(os.environ["FAKE_ENGINE_CANCELLED"]).read_text() == "slow 30"  # stopped, not run for 30 s
    assert "heard: after" in text(chat("after")) and shared_engine.status()["in_flight"] == 0


def test_an_engine_killed_mid_call_raises_engine_lost_and_the_next_call_starts_a_new_one(home):
    old = shared_engine.status() or (chat("warm up") and shared_engine.status())
    with pytest.raises(EngineLost, match="stopped mid-call"):
        chat("die")
    until(lambda: _exited(old["pid"]), what=f"engine {old['pid']} gone")  # a caller retries after a pause (the gateway's backoff); a dying engine may still accept
    until(lambda: _refuses(home / "engine.sock"), what="a socket that refuses")  # and the socket it listened on no longer takes a connection
    new = text(chat("again"))
    assert f"pid {old['pid']}" not in new and "heard: again" in new


def test_an_engine_lost_mid_call_is_retried_by_the_gateway_never_scored(home, monkeypatch):
    """Through litellm and the gateway: the call that lost its engine is retried and answered."""
    from debatekit.models.gateway import Gateway

    calls = {"n": 0}
    real = shared_engine.achat

    async def first_dies(model, request):
        calls["n"] += 1
        if calls["n"] == 1:
            request = {**request, "messages": [{"role": "user", "content": "die"}]}
        return await real(model, request)

    monkeypatch.setattr(shared_engine, "achat", first_dies)
    monkeypatch.setattr("debatekit.models.local.weights.ready", lambda name: None)
    gateway = Gateway(cache=None, backoff=0.01)
    done = asyncio.run(gateway.complete(resolve("local/m"), MSG, max_tokens=16))
    assert done.ok and "heard: hello" in done.text and done.faults == ["server"] and calls["n"] == 2


def until(condition, seconds: float = 10.0, what: str = "the expected state") -> None:
    """Poll `condition` until it holds; fail, naming `what`, once `seconds` have passed."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"never reached {what}"
        time.sleep(0.01)


def _refuses(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(path))
        except OSError:
            return True
    return False


def _exited(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # exited, not yet reaped by its parent: a zombie leader whose other threads have all gone too
    # (the leader turns Z while the rest still close the files they share, the listening socket among them)
    try:
        return open(f"/proc/{pid}/stat").read().split()[2] == "Z" and len(os.listdir(f"/proc/{pid}/task")) <= 1
    except FileNotFoundError:  # reaped since the kill above
        return True


def test_a_stale_socket_and_lock_left_by_a_killed_engine_do_not_block_a_new_one(home):
    chat("warm up")
    pid = shared_engine.status()["pid"]
    os.kill(pid, signal.SIGKILL)
    until(lambda: _exited(pid), what=f"engine {pid} gone")
    assert (home / "engine.sock").exists() and (home / "engine.lock").exists()  # left behind
    assert shared_engine.status() is None
    reply = text(chat("fresh"))
    assert "heard: fresh" in reply and f"pid {pid}" not in reply


def test_a_second_daemon_exits_at_once_while_one_holds_the_lock(home):
    chat("warm up")
    second = subprocess.run([sys.executable, "-m", "debatekit.models.local.daemon"], capture_output=True, text=True,
                            timeout=30)
    assert second.returncode == 0 and "another shared engine is running" in second.stderr


def test_the_daemon_stops_after_its_idle_time_and_not_while_a_call_is_in_flight(tmp_path):
    now = [0.0]
    daemon = Daemon(make_engine=lambda m: None, idle=10.0, clock=lambda: now[0])
    now[0] = 9.0
    assert daemon.idle_for() == 9.0
    daemon.in_flight = 1
    now[0] = 100.0
    assert daemon.idle_for() == 0.0
    daemon.in_flight, daemon.last = 0, 95.0
    assert daemon.idle_for() == 5.0


def test_engine_mode_is_shared_by_default_and_checked(monkeypatch):
    from debatekit.models.errors import LocalModelError

    monkeypatch.delenv("DEBATEKIT_LOCAL_ENGINE", raising=False)
    assert shared_engine.mode() == "shared"
    monkeypatch.setenv("DEBATEKIT_LOCAL_ENGINE", "Process")
    assert shared_engine.mode() == "process"
    monkeypatch.setenv("DEBATEKIT_LOCAL_ENGINE", "both")
    with pytest.raises(LocalModelError, match="must be shared or process"):
        shared_engine.mode()


def test_engines_in_separate_processes_share_the_cores(tmp_path, monkeypatch):
    """Where a separate engine is wanted, its threads come out of what other processes' engines hold."""
    from debatekit.models.local import engine as local

    monkeypatch.setenv("DEBATEKIT_HOME", str(tmp_path))
    monkeypatch.delenv("DEBATEKIT_LOCAL_THREADS", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        claims = tmp_path / "engine" / "threads"
        claims.mkdir(parents=True)
        (claims / str(other.pid)).write_text("5")
        (claims / "999999999").write_text("8")  # a dead process's claim is ignored and removed
        assert local.claim_threads() == 3
        assert not (claims / "999999999").exists() and (claims / str(os.getpid())).read_text() == "3"
        monkeypatch.setenv("DEBATEKIT_LOCAL_THREADS", "6")
        assert local.claim_threads() == 6
    finally:
        other.kill()


def test_a_stopped_engine_is_reported_unresponsive_not_waited_for(home, monkeypatch):
    from debatekit.cli.app import engine_line

    chat("wake")
    pid = shared_engine.status()["pid"]
    os.kill(pid, signal.SIGSTOP)  # holds its socket, answers nothing: a hung engine
    try:
        started = time.monotonic()
        assert shared_engine.status(timeout=0.5) == {"unresponsive": True, "models": []}
        assert time.monotonic() - started < 30
        monkeypatch.setattr(shared_engine, "STATUS_TIMEOUT_S", 0.5)
        assert engine_line().startswith("local engine: not answering")
    finally:
        os.kill(pid, signal.SIGCONT)
    assert shared_engine.status()["pid"] == pid


def test_a_run_on_no_local_model_never_asks_the_engine(monkeypatch):
    monkeypatch.setattr(shared_engine, "status", lambda *a, **k: pytest.fail("asked the engine"))
    shared_engine.preflight([])  # a scripted or API run: nothing to check, nobody to ask
