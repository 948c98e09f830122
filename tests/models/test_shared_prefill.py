"""Identical prompts sent together are read once on the local engine (`SharedPrefill`): the
grouping on its own, then the engine with a fake llama.cpp that parks idle slots' prompts as the
real one was measured to (docs/local-engine.md), then the real model (marked)."""

import sys
import threading
import time
import types

import pytest

from debatekit.models.local import engine as local
from debatekit.models.local.prefix_cache import PrefixCache
from debatekit.models.local.prefix_cache import SharedPrefill
from tests.models.test_prefix_cache import FakeParams

LONG = [{"role": "system", "content": "s"}, {"role": "user", "content": "word " * 600}]


def _at_once(calls: list, seconds: float = 30) -> list:
    """Run every call in a thread of its own, all at once; their results in order (each waited
    for up to `seconds`)."""
    results = [None] * len(calls)
    threads = [threading.Thread(target=lambda i=i: results.__setitem__(i, calls[i]())) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds)
    return results


def _window_closes_at(sharer, members):
    """The first member's wait ends once `members` requests have joined (not after a time)."""
    def wait(seconds):
        for _ in range(1000):
            if sum(g.members for g in sharer.groups.values()) == members:
                return
            time.sleep(0.01)
        raise AssertionError("the other members never joined")

    sharer.sleep = wait


def _together(sharer, members, prime, messages=LONG):
    """Send `members` requests of the same messages at once to the grouping alone."""
    _window_closes_at(sharer, members)
    return _at_once([lambda: sharer.join(messages, prime)] * members)


def test_a_short_prompt_or_a_lone_request_is_not_primed():
    primed = []
    sharer = SharedPrefill(min_chars=1000, sleep=lambda s: None)
    assert sharer.join([{"role": "user", "content": "short"}], lambda: primed.append(1)) is None
    assert sharer.join(LONG, lambda: primed.append(1)) is None  # nobody joined in the window
    assert primed == [] and sharer.groups == {}


def test_requests_sent_together_are_primed_once_and_the_primer_is_charged_to_one_of_them():
    calls = []
    results = _together(SharedPrefill(), 3, lambda: calls.append(1) or {"prompt_n": 600})
    assert calls == [1]
    assert sorted((r["work"] or {}).get("prompt_n", 0) for r in results) == [0, 0, 600]


def test_a_failed_primer_lets_every_member_go_on_its_own():
    def prime():
        raise RuntimeError("engine down")

    sharer = SharedPrefill()
    results = _together(sharer, 3, prime)
    assert sorted(results, key=str) == [None, {"work": None}, {"work": None}]  # the first goes as if alone
    assert sharer.groups == {}


class ParkingServer:
    """A fake llama.cpp server with `n` slots, a word a token. A request pinned to a slot
    (`id_slot`) reuses what that slot holds; one the server places goes to its least-recently-used
    idle slot and restores the longest prefix parked in the host cache. After a request has been
    placed, every other idle slot is parked: what llama.cpp did when measured (a pinned request
    never restores, and the first request placed after a primer did not find it parked).
    `overlap` holds that many long requests (a primer aside) in their slots until all have been
    placed, as calls of minutes overlap on a real engine."""

    def __init__(self, n: int, overlap: int = 1):
        self.held, self.busy, self.used = [()] * n, [False] * n, [-1] * n
        self.parked: set[tuple] = set()
        self.clock, self.log, self.lock = 0, [], threading.Lock()
        self.gate = threading.Barrier(overlap)

    def handle_chat_completions(self, request, on_chunk):
        tokens = tuple(w for m in request["messages"] for w in (m["content"] or "").split())
        with self.lock:
            slot = request.get("id_slot")
            if slot is None:
                slot = min((s for s in range(len(self.busy)) if not self.busy[s]), key=lambda s: (self.used[s], -s))
                reuse = max([_common(p, tokens) for p in self.parked] + [_common(self.held[slot], tokens)])
            else:
                reuse = _common(self.held[slot], tokens)
            reuse = min(reuse, len(tokens) - 1)  # the last prompt token is always read again
            self.parked |= {self.held[s] for s in range(len(self.busy)) if not self.busy[s] and s != slot}
            self.busy[slot], self.clock = True, self.clock + 1
            text = f"r{self.clock}"
            self.log.append((len(tokens), request.get("id_slot"), slot, len(tokens) - reuse))
        if len(tokens) > 100 and request.get("max_tokens") != 1:
            self.gate.wait(30)
        on_chunk({"choices": [{"index": 0, "delta": {"content": text}}]})
        with self.lock:
            self.held[slot] = tokens + (text,)
            self.busy[slot], self.used[slot] = False, self.clock
        on_chunk({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "__verbose": {"id_slot": slot},
                  "timings": {"prompt_n": len(tokens) - reuse, "cache_n": reuse, "prompt_ms": float(len(tokens) - reuse)}})
        on_chunk({"choices": [], "usage": {"prompt_tokens": len(tokens), "completion_tokens": 1,
                                           "prompt_tokens_details": {"cached_tokens": reuse}}})


def _common(a: tuple, b: tuple) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


@pytest.fixture
def engine(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "xllamacpp", types.SimpleNamespace(CommonParams=FakeParams, Server=lambda p: None))
    engine = local.Engine(tmp_path / "m.gguf", 6, cache=PrefixCache(ram_mib=64, reuse=True))
    engine.server = ParkingServer(6, overlap=3)
    for i in range(6):  # every slot holds something, as on a busy engine
        engine.chat({"messages": [{"role": "user", "content": f"warm {i}"}], "seed": i})
    engine.server.log.clear()
    return engine


def _three_at_once(engine, messages=LONG):
    _window_closes_at(engine.shared, 3)
    return _at_once([lambda i=i: engine.chat({"messages": messages, "seed": i}) for i in range(3)])


def test_three_identical_prompts_are_read_once_and_counted_once(engine):
    replies = _three_at_once(engine)
    prompt = len(LONG[0]["content"].split()) + len(LONG[1]["content"].split())
    log = engine.server.log
    assert len(log) == 5  # the primer, the nudge that parks it, the three requests
    primer, nudge, *members = log
    assert primer[0] == prompt and primer[3] == prompt  # read whole, once
    assert nudge[0] == 1
    assert [m[1] for m in members] == [None] * 3  # placed by the server, which restores the parked prompt
    assert [m[3] for m in members] == [1, 1, 1]
    # the trace counts the prompt read once: on the request that ran the primer
    read = sorted(r["usage"]["prompt_tokens"] - r["usage"]["prompt_tokens_details"]["cached_tokens"] for r in replies)
    assert read == [1, 1, prompt]  # at most the request's prompt: the primer read it, the member 1 token
    assert sorted(r["timings"]["prompt_n"] for r in replies) == [1, 1, 1 + prompt + nudge[3]]


def test_without_sharing_each_identical_prompt_is_read_again(engine):
    engine.shared = None
    _at_once([lambda i=i: engine.chat({"messages": LONG, "seed": i}) for i in range(3)])
    prompt = len(LONG[0]["content"].split()) + len(LONG[1]["content"].split())
    assert sorted(entry[3] for entry in engine.server.log) == [prompt] * 3


def test_an_engine_without_a_host_cache_does_not_share(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "xllamacpp", types.SimpleNamespace(CommonParams=FakeParams, Server=lambda p: None))
    assert local.Engine(tmp_path / "m.gguf", 2, cache=PrefixCache(ram_mib=0, reuse=True)).shared is None
    assert local.Engine(tmp_path / "m.gguf", 2, cache=PrefixCache(ram_mib=64, reuse=False)).shared is None
    assert local.Engine(tmp_path / "m.gguf", 2, cache=PrefixCache(ram_mib=64, reuse=True)).shared is not None


@pytest.mark.local_model
def test_three_identical_long_prompts_are_read_once_on_the_local_model(monkeypatch):
    """Three requests with one long prompt (over 500 tokens) sent at once to a fresh 4-slot engine in
    this process: one reads the prompt, the other two find it parked. Costs about 30 s here (an
    engine load, 3 calls of 4 tokens)."""
    monkeypatch.delenv("DEBATEKIT_LOCAL_CACHE_RAM", raising=False)
    monkeypatch.delenv("DEBATEKIT_LOCAL_PREFIX_REUSE", raising=False)
    monkeypatch.setenv("DEBATEKIT_LOCAL_SLOTS", "4")
    monkeypatch.setenv("DEBATEKIT_LOCAL_ENGINE", "process")  # a fresh 4-slot engine in this process
    monkeypatch.setattr(local, "_engines", {})
    text = "Review this discussion. " + " ".join(f"Agent {i % 3} said {i * 7} at step {i}." for i in range(60))
    messages = [{"role": "user", "content": text}]
    try:
        engine = local.engine()
        engine.shared.window_s = 5.0  # a loaded machine may start the three threads slowly
        replies = _at_once([lambda i=i: engine.chat({"messages": messages, "max_tokens": 4, "seed": i,
                                                     "temperature": 0.7}) for i in range(3)], seconds=600)
    finally:  # else this test session would hold the cores' claim, and later shared engines get 1 thread
        local.unload()
    prompt = replies[0]["usage"]["prompt_tokens"]
    read = sorted(r["usage"]["prompt_tokens"] - r["usage"]["prompt_tokens_details"]["cached_tokens"] for r in replies)
    assert prompt > 500 and read[0] <= 2 and read[1] <= 2 and read[2] >= prompt - 30, (prompt, read)
