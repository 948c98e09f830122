"""Prefix reuse on the local engine (issue 17): its settings, how they reach llama.cpp and
`debatekit serve`, and the per-call engine timings in the trace. A fake xllamacpp / fake engine
stands in for the model, except in the `local_model` test."""

import json
import sys
import types
from pathlib import Path

import pytest

from benchmarks import local_engine
from debatekit.cli import serve
from debatekit.cli import app as cli
from debatekit.models.errors import LocalModelError
from debatekit.models.local import engine as local
from debatekit.models.local import settings, weights
from debatekit.models.local.prefix_cache import PrefixCache
from debatekit.records.schemas import RunConfig
from debatekit.runner import run


@pytest.fixture
def no_cache_env(monkeypatch):
    monkeypatch.delenv("DEBATEKIT_LOCAL_CACHE_RAM", raising=False)
    monkeypatch.delenv("DEBATEKIT_LOCAL_PREFIX_REUSE", raising=False)


def test_default_settings_park_prefixes_and_pick_slots_least_recently_used(no_cache_env):
    cache = local.prefix_cache(20 * 2**30)
    assert cache == PrefixCache(ram_mib=5120, reuse=True) and cache.slot_similarity == 0.0


@pytest.mark.parametrize("available, mib", [
    (20 * 2**30, 5120),  # a quarter of what is free
    (64 * 2**30, 8192),  # at most 8 GiB
    (2 * 2**30, 512),
    (1, 1),  # never 0, which would turn the cache off
    (None, 2048),  # free memory unreadable
])
def test_the_default_cache_is_a_quarter_of_the_free_memory_at_most_8_gib(no_cache_env, available, mib):
    assert local.prefix_cache(available).ram_mib == mib


def test_the_environment_beats_the_default_size(monkeypatch):
    monkeypatch.setenv("DEBATEKIT_LOCAL_CACHE_RAM", "300")
    assert local.prefix_cache(64 * 2**30).ram_mib == 300


@pytest.mark.parametrize("ram, reuse, expected", [
    ("512", "off", PrefixCache(512, False)), ("0", "on", PrefixCache(0, True)), ("-1", "OFF", PrefixCache(-1, False)),
])
def test_settings_come_from_the_environment(monkeypatch, ram, reuse, expected):
    monkeypatch.setenv("DEBATEKIT_LOCAL_CACHE_RAM", ram)
    monkeypatch.setenv("DEBATEKIT_LOCAL_PREFIX_REUSE", reuse)
    assert local.prefix_cache() == expected
    assert expected.slot_similarity == (0.0 if expected.reuse else 0.1)


@pytest.mark.parametrize("name, value", [("DEBATEKIT_LOCAL_CACHE_RAM", "lots"),
                                         ("DEBATEKIT_LOCAL_CACHE_RAM", "-2"),
                                         ("DEBATEKIT_LOCAL_PREFIX_REUSE", "maybe")])
def test_a_bad_setting_is_a_clear_error(no_cache_env, monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    with pytest.raises(LocalModelError, match=f"{name} must be .*{value!r}"):
        local.prefix_cache()


class FakeParams:
    """Stands in for xllamacpp.CommonParams with llama.cpp's defaults for the fields that matter."""

    def __init__(self):
        self.model = types.SimpleNamespace(path="")
        self.cpuparams, self.cpuparams_batch = types.SimpleNamespace(), types.SimpleNamespace()
        self.cache_ram_mib, self.slot_prompt_similarity = 8192, 0.1


@pytest.fixture
def fake_xllamacpp(monkeypatch):
    built = []

    class Server:
        listening_address = "http://127.0.0.1:1"

        def __init__(self, params):
            built.append(params)

    monkeypatch.setitem(sys.modules, "xllamacpp", types.SimpleNamespace(CommonParams=FakeParams, Server=Server))
    return built


def test_the_engine_hands_the_settings_to_llama_cpp(fake_xllamacpp, tmp_path, no_cache_env, monkeypatch):
    monkeypatch.setattr(settings, "mem_available", lambda: 12 * 2**30)
    local.Engine(tmp_path / "m.gguf", 4)
    monkeypatch.setenv("DEBATEKIT_LOCAL_PREFIX_REUSE", "off")
    local.Engine(tmp_path / "m.gguf", 4, cache=PrefixCache(ram_mib=300, reuse=True))  # explicit beats env
    local.Engine(tmp_path / "m.gguf", 4)
    (on, explicit, off) = fake_xllamacpp
    assert (on.cache_ram_mib, on.slot_prompt_similarity, on.n_parallel) == (3072, 0.0, 4)  # a quarter of 12 GiB free
    assert on.n_ctx == 4 * 8192  # each slot holds a late debate round's prompt and its reply
    assert (explicit.cache_ram_mib, explicit.slot_prompt_similarity) == (300, 0.0)
    assert (off.cache_ram_mib, off.slot_prompt_similarity) == (3072, 0.1)


def test_serve_flags_override_the_environment(fake_xllamacpp, tmp_path, monkeypatch):
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"")
    monkeypatch.setenv("DEBATEKIT_LOCAL_CACHE_RAM", "4096")
    monkeypatch.setenv("DEBATEKIT_LOCAL_PREFIX_REUSE", "on")
    engine, model, _ = serve.start(str(gguf), cache_ram=512, prefix_reuse=False)
    assert engine.cache == PrefixCache(512, False) and fake_xllamacpp[-1].slot_prompt_similarity == 0.1
    engine, _, _ = serve.start(str(gguf))
    assert engine.cache == PrefixCache(4096, True) and fake_xllamacpp[-1].cache_ram_mib == 4096


def test_serve_rejects_a_bad_cache_size(capsys):
    assert cli.main(["serve", "--cache-ram", "-3"]) == 2
    assert "--cache-ram" in capsys.readouterr().err


class FakeEngine:
    """Replies like xllamacpp: usage with cached tokens and llama.cpp's per-request timings."""

    def __init__(self):
        self.requests = []

    async def achat(self, request):
        self.requests.append(request)
        n = len(request["messages"])
        return {"choices": [{"message": {"content": json.dumps({"reasoning": "sum", "answer": 7})}}],
                "usage": {"prompt_tokens": 100 * n, "completion_tokens": 20,
                          "prompt_tokens_details": {"cached_tokens": 30 * n}},
                "timings": {"cache_n": 30 * n, "prompt_n": 70 * n, "prompt_ms": 250.0 * n, "predicted_n": 20,
                            "predicted_ms": 1500.0}}


def test_engine_timings_reach_every_call_event(tmp_path, monkeypatch):
    fake = FakeEngine()
    monkeypatch.setenv("DEBATEKIT_LOCAL_ENGINE", "process")  # the fake stands in for an engine in this process
    monkeypatch.setattr(local, "engine", lambda name=weights.DEFAULT_LOCAL, advice="": fake)
    config = RunConfig(protocol="society_of_mind", dataset="arithmetic", limit=2, model=weights.DEFAULT_MODEL,
                       params={"agents": 2, "rounds": 2, "stop_on_agreement": False})
    first = run(config, tmp_path / "a", progress=False)
    events = [json.loads(line) for line in (first.path / "events.jsonl").read_text().splitlines()]
    assert len(events) == len(fake.requests) == 8
    for e in events:
        n = 2 if e["round"] == 1 else 4  # round 2 adds the agent's answer and the others' answers
        assert (e["prompt_tokens"], e["cached_tokens"]) == (100 * n, 30 * n)
        assert (e["prompt_seconds"], e["generation_seconds"]) == (0.25 * n, 1.5)
    rounds = local_engine.by_round(first.path)
    assert [(r["round"], r["calls"], r["reuse"], r["prompt_seconds"]) for r in rounds] == [
        (1, 4, 0.3, 2.0), (2, 4, 0.3, 4.0)]
    # each round-2 prompt opens with the agent's round-1 prompt (200) and reply (20): 220 of its 400 tokens
    assert "reuse_ceiling" not in rounds[0]
    assert (rounds[1]["own_tokens"], rounds[1]["reuse_ceiling"], rounds[1]["of_ceiling"]) == (880, 0.55, 0.545)
    # the same run again comes from debatekit's response cache: no engine time is claimed for it
    again = run(config, tmp_path / "b", progress=False)
    cached = [json.loads(line) for line in (again.path / "events.jsonl").read_text().splitlines()]
    assert len(fake.requests) == 8 and all(e["cache_hit"] for e in cached)
    assert all(e["prompt_seconds"] == e["generation_seconds"] == 0.0 for e in cached)


def _events(folder: Path, rows: list[dict]) -> Path:
    folder.mkdir()
    (folder / "events.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def _event(agent, round, text, prompt="p", **usage):
    return {"item_id": "q1", "round": round, "agent": agent, "phase": "answer", "text": text, "prompt_hash": prompt,
            **usage}


def test_the_benchmark_tells_an_engine_difference_from_an_inherited_one(tmp_path):
    before = _events(tmp_path / "before", [_event("a1", 1, "x"), _event("a2", 1, "y"), _event("a1", 2, "z", "p2"),
                                           _event("a2", 3, "w")])
    after = _events(tmp_path / "after", [_event("a1", 1, "x"), _event("a2", 1, "Y"), _event("a1", 2, "Z", "p2'")])
    assert local_engine.same_replies(before, after) == {
        "calls_compared": 3, "identical_replies": 1, "different_reply_after_identical_prompt": 1,
        "calls_only_in_one_side": 1}


def test_the_reuse_ceiling_is_each_agents_own_previous_conversation(tmp_path):
    rows = [_event("a1", 1, "x", prompt_tokens=100, completion_tokens=50, cached_tokens=0),
            _event("a2", 1, "y", prompt_tokens=100, completion_tokens=30, cached_tokens=90),
            {**_event("a1", 1, "x", prompt_tokens=100, completion_tokens=10), "debate_id": "other"},
            _event("a1", 2, "z", prompt_tokens=400, completion_tokens=5, cached_tokens=149),
            _event("a2", 2, "w", prompt_tokens=400, completion_tokens=5, cached_tokens=100),
            _event("a1", 3, "v", prompt_tokens=300, completion_tokens=5, cached_tokens=300)]
    rounds = {r["round"]: r for r in local_engine.by_round(_events(tmp_path / "run", rows))}
    assert rounds[2]["own_tokens"] == 150 + 130 and rounds[2]["reuse_ceiling"] == round(280 / 800, 3)
    assert rounds[2]["of_ceiling"] == round(249 / 280, 3)
    assert rounds[3]["own_tokens"] == 300  # capped at the prompt: a conversation cannot reuse more than it sends


def test_predicted_wall_scales_the_prompt_share_by_the_tokens_no_longer_processed():
    rounds = [{"prompt_seconds": 30.0, "generation_seconds": 70.0}]
    before = {"wall_s": 100.0, "prompt_tokens": 1000, "cached_prompt_tokens": 200, "by_round": rounds}
    after = {"wall_s": 80.0, "prompt_tokens": 1000, "cached_prompt_tokens": 600, "by_round": rounds}
    # 800 -> 400 tokens processed saves half of the 30% prompt share
    assert local_engine.predicted_wall(before, after) == 85.0
    assert local_engine.predicted_wall({**before, "by_round": [{"prompt_seconds": 0, "generation_seconds": 0}]},
                                       after) is None


@pytest.mark.local_model
def test_round_two_reuses_each_agents_own_conversation_through_the_shared_engine(tmp_path, monkeypatch, no_cache_env):
    """4 conversations on 2 slots of a shared engine (a 2-slot daemon of its own): some agents'
    round-1 state leaves its slot before round 2.

    llama.cpp's own slot choice reused at most each round-2 prompt's round-1 part (system prompt
    and question, shared by the debate's agents); reusing the agent's own conversation reuses its
    round-1 answer too, so round 2 reuses more tokens than all round-1 prompts hold. This runs in
    free text, the default answer format; a request carrying a JSON-schema response_format was
    measured to reuse only up to the earlier assistant turn (146 of 254 tokens, against 248 of 261
    without it): issue 17. The daemon hosts the same `local.Engine` a process loads for
    DEBATEKIT_LOCAL_ENGINE=process (whose real-model run is test_shared_prefill's), so one run here
    covers both (a second, in-process copy of this test once cost the suite 505 s).
    Costs about 2 min here (a 2-slot engine, 8 calls or more at up to 160 completion tokens).
    """
    import os
    import signal

    from debatekit.models.local import shared as shared_engine

    model_file = weights.pull(say=lambda msg: None)
    home = tmp_path / "home"
    (home / "models").mkdir(parents=True)
    (home / "models" / model_file.name).symlink_to(model_file)
    for name, value in {"DEBATEKIT_HOME": str(home), "DEBATEKIT_LOCAL_SLOTS": "2", "DEBATEKIT_LOCAL_ENGINE": "shared",
                        "DEBATEKIT_LOCAL_SPARE_SLOTS": "0",  # 2 slots in all: some round-1 states must leave
                        "DEBATEKIT_ENGINE_IDLE": "20"}.items():
        monkeypatch.setenv(name, value)
    config = RunConfig(protocol="society_of_mind", dataset="arithmetic", limit=2, cache=False, concurrency=2,
                       max_tokens=160, params={"agents": 2, "rounds": 2, "stop_on_agreement": False})
    try:
        result = run(config, tmp_path / "run", progress=False)
        status = shared_engine.status()
    finally:
        if info := shared_engine.status():
            os.kill(info["pid"], signal.SIGTERM)
    provider_calls = sum(d.usage.provider_calls for d in result.debates)  # repair requests included
    assert status["pid"] != os.getpid() and status["served"] == provider_calls >= 8
    assert list(status["slots"].values()) == [2]
    rounds = {r["round"]: r for r in local_engine.by_round(result.path)}
    assert rounds[2]["calls"] == 4 and rounds[2]["prompt_seconds"] > 0 and rounds[2]["generation_seconds"] > 0
    assert rounds[2]["reuse"] > 0 and rounds[2]["cached_tokens"] > rounds[1]["prompt_tokens"], rounds


class SlotServer:
    """A fake llama.cpp server with `n` slots: it places an unrouted request on its least-recently-used
    idle slot (highest id on a tie), honours `id_slot`, and names the slot in a verbose reply."""

    def __init__(self, n: int):
        self.used, self.clock, self.log = [-1] * n, 0, []

    def handle_chat_completions(self, request, on_chunk=None):
        reply = self._reply(request)
        if on_chunk is None:
            return reply
        verbose = reply.pop("__verbose", None)  # streamed as llama.cpp does: text, then the end, then usage
        on_chunk({"choices": [{"index": 0, "delta": {"content": reply["choices"][0]["message"]["content"]}}]})
        on_chunk({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                  **({"__verbose": verbose} if verbose else {})})
        on_chunk({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}})
        return None

    def _reply(self, request):
        slot = request.get("id_slot")
        if slot is None:
            slot = min(range(len(self.used)), key=lambda s: (self.used[s], -s))
        self.clock += 1
        self.used[slot] = self.clock
        self.log.append((request["messages"][1]["content"], len(request["messages"]), request.get("id_slot"), slot))
        reply = {"choices": [{"message": {"content": f"reply {self.clock}"}}], "usage": {}}
        return {**reply, "__verbose": {"id_slot": slot}} if request.get("verbose") else reply


def _engine(fake_xllamacpp, tmp_path, reuse=True, slots=2):
    engine = local.Engine(tmp_path / "m.gguf", slots, cache=PrefixCache(ram_mib=64, reuse=reuse))
    engine.server = SlotServer(slots)
    return engine


def _ask(engine, talk, question):
    talk.setdefault(question, [{"role": "system", "content": "s"}, {"role": "user", "content": question}])
    reply = engine.chat({"messages": talk[question]})
    assert "__verbose" not in reply
    talk[question] += [{"role": "assistant", "content": reply["choices"][0]["message"]["content"]},
                       {"role": "user", "content": "again"}]


def test_a_conversation_goes_back_to_the_idle_slot_that_holds_it(fake_xllamacpp, tmp_path):
    engine, talk = _engine(fake_xllamacpp, tmp_path), {}
    for question in ("A", "B", "B", "A", "C", "A"):
        _ask(engine, talk, question)
    # A1 and B1 go where the server puts them; B2 and A2 are sent back to their own slots (the
    # server would have put B2 on A's slot); C1 is the server's pick, which the router foresaw;
    # A3 follows A to its slot
    assert engine.server.log == [("A", 2, None, 1), ("B", 2, None, 0), ("B", 4, 0, 0), ("A", 4, 1, 1),
                                 ("C", 2, None, 0), ("A", 6, 1, 1)]


def test_routing_skips_a_busy_slot_and_an_unknown_one(fake_xllamacpp, tmp_path):
    engine, talk = _engine(fake_xllamacpp, tmp_path), {}
    _ask(engine, talk, "A")  # on slot 1
    router = engine.router
    assert router.choose(talk["A"]) == (1, 1)  # A's slot, now reserved for it
    assert router.choose(talk["A"]) == (None, 0)  # busy: the other slot, the server's choice
    router.release(1, None, None)  # that call failed: what slot 1 holds is unknown
    router.release(0, None, None)
    assert router.choose(talk["A"])[0] is None


def test_without_reuse_requests_go_unchanged_to_the_server(fake_xllamacpp, tmp_path):
    engine, talk = _engine(fake_xllamacpp, tmp_path, reuse=False), {}
    for question in ("A", "B", "B"):
        _ask(engine, talk, question)
    assert engine.router is None and [entry[2] for entry in engine.server.log] == [None, None, None]
