import asyncio
import re
from typing import ClassVar

import pytest
from pydantic import BaseModel

from debatekit.models import scripted
from debatekit.models.cache import ResponseCache
from debatekit.models.gateway import Gateway
from debatekit.models.model import resolve
from debatekit.protocols.shared.answers import AnswerSpec, first_messages


class Num(BaseModel):
    answer: int


MSG = [{"role": "user", "content": "what is 2+2?"}]


def complete(gateway, model, messages=MSG, output=Num, **kw):
    return asyncio.run(gateway.complete(resolve(model), messages, output, **kw))


def test_structured_output_is_parsed_with_usage():
    model = scripted.register("g-ok", replies=['{"answer": 4}'])
    c = complete(Gateway(), model)
    assert c.ok and c.parsed == Num(answer=4)
    assert c.prompt_tokens == 3 and c.completion_tokens == 2 and c.cost == 0.0
    assert c.calls == 1 and c.faults == []


def test_transient_faults_are_retried_and_recorded():
    model = scripted.register("g-retry", replies=[scripted.Fault("rate_limit"), scripted.Fault("server"),
                                                  scripted.Fault("timeout"), '{"answer": 4}'])
    c = complete(Gateway(backoff=0.001), model)
    assert c.ok and c.parsed.answer == 4
    assert c.faults == ["rate_limit", "server", "timeout"] and c.retries == 3 and c.calls == 4


def test_retries_are_bounded_then_the_error_is_returned_not_raised():
    model = scripted.register("g-down", replies=[scripted.Fault("server")] * 10)
    c = complete(Gateway(backoff=0.001, max_retries=2), model)
    assert not c.ok and c.error_kind == "server" and c.calls == 3


def test_non_transient_error_is_not_retried():
    model = scripted.register("g-bad", replies=[scripted.Fault("bad_request"), '{"answer": 4}'])
    c = complete(Gateway(backoff=0.001), model)
    assert c.error_kind == "error" and c.calls == 1 and "BadRequest" in c.error


def test_invalid_output_gets_one_repair_round():
    model = scripted.register("g-repair", replies=['{"answer": "four"}', '{"answer": 4}'])
    c = complete(Gateway(), model)
    assert c.ok and c.parsed.answer == 4 and c.parse_failures == 1
    repair = scripted.get("g-repair").requests[1].messages
    assert repair[-2] == {"role": "assistant", "content": '{"answer": "four"}'}
    assert "answer" in repair[-1]["content"]


def test_each_unreadable_reply_is_kept_with_its_error_and_the_repair_prompt_that_followed():
    model = scripted.register("g-keep", replies=['{"answer": "four"}', '{"answer": 4}'])
    c = complete(Gateway(), model)
    sent = scripted.get("g-keep").requests[1].messages[-1]["content"]
    assert c.text == '{"answer": 4}'
    assert c.repairs == [{"text": '{"answer": "four"}', "error": c.repairs[0]["error"], "repair_prompt": sent}]
    assert "answer" in c.repairs[0]["error"]
    readable = complete(Gateway(), scripted.register("g-keep-ok", replies=['{"answer": 4}']))
    assert readable.repairs == []


def test_output_still_invalid_after_repair_is_a_recorded_parse_failure():
    model = scripted.register("g-garbage", replies=["not json at all", "still not json"])
    c = complete(Gateway(), model)
    assert not c.ok and c.parsed is None and c.error_kind == "parse" and c.parse_failures == 2


def test_empty_reply_is_retried():
    model = scripted.register("g-empty", replies=["", '{"answer": 4}'])
    c = complete(Gateway(backoff=0.001), model)
    assert c.ok and c.faults == ["empty"]


def test_hanging_call_times_out_and_is_retried():
    model = scripted.register("g-hang", replies=[scripted.Fault("hang"), '{"answer": 4}'])
    c = complete(Gateway(backoff=0.001), model, timeout=0.1)
    assert c.ok and c.faults == ["timeout"] and c.timeouts == 1


def test_cache_replays_without_provider_calls(tmp_path):
    model = scripted.register("g-cache", replies=['{"answer": 4}'])
    gateway = Gateway(cache=ResponseCache(tmp_path / "c.sqlite"))
    first = complete(gateway, model, seed=1)
    second = complete(gateway, model, seed=1)
    assert first.calls == 1 and not first.cache_hit
    assert second.calls == 0 and second.cache_hit and second.parsed.answer == 4
    assert second.completion_tokens == first.completion_tokens
    assert len(scripted.get("g-cache").requests) == 1


def test_cache_key_includes_parameters(tmp_path):
    model = scripted.register("g-keys", replies=['{"answer": 4}', '{"answer": 5}'])
    gateway = Gateway(cache=ResponseCache(tmp_path / "c.sqlite"))
    assert complete(gateway, model, seed=1).parsed.answer == 4
    assert complete(gateway, model, seed=2).parsed.answer == 5


def test_without_cache_every_call_reaches_the_provider():
    model = scripted.register("g-nocache", replies=['{"answer": 4}', '{"answer": 4}'])
    gateway = Gateway(cache=None)
    complete(gateway, model)
    complete(gateway, model)
    assert len(scripted.get("g-nocache").requests) == 2


def test_concurrency_is_limited_per_model():
    gateway = Gateway(concurrency=2)
    state = {"now": 0, "max": 0}

    async def fake_call(model, messages, params, fmt, caller):
        state["now"] += 1
        state["max"] = max(state["max"], state["now"])
        await asyncio.sleep(0.01)
        state["now"] -= 1
        return {"text": '{"answer": 1}', "prompt_tokens": 1, "completion_tokens": 1, "cost": 0.0}

    gateway._call = fake_call

    async def many():
        return await asyncio.gather(*(gateway.complete(resolve("scripted/x"), MSG, Num) for _ in range(8)))

    results = asyncio.run(many())
    assert all(r.ok for r in results) and state["max"] == 2


@pytest.mark.parametrize("model, first_alone", [("openai/gpt-4o-mini", True),
                                                 ("local/qwen2.5-coder-1.5b-instruct", False)])
def test_a_provider_not_yet_heard_from_gets_one_call_but_the_local_engine_fills_its_slots(model, first_alone):
    """Before any answer, a provider gets its calls one at a time (a wrong key fails once); the
    embedded model, checked before the run, gets as many as its slots at once from the start."""
    gateway = Gateway(concurrency=4)
    state = {"now": 0, "before_first_answer": 0, "answered": False}

    async def fake_call(model, messages, params, fmt, caller):
        state["now"] += 1
        if not state["answered"]:
            state["before_first_answer"] = max(state["before_first_answer"], state["now"])
        await asyncio.sleep(0.02)
        state["now"] -= 1
        state["answered"] = True
        return {"text": '{"answer": 1}', "prompt_tokens": 1, "completion_tokens": 1, "cost": 0.0}

    gateway._call = fake_call

    async def many():
        return await asyncio.gather(*(gateway.complete(resolve(model), MSG, Num) for _ in range(4)))

    assert all(r.ok for r in asyncio.run(many()))
    assert state["before_first_answer"] == (1 if first_alone else 4)


def test_scripted_model_sees_schema_and_seed():
    model = scripted.register("g-seen", replies=['{"answer": 4}'])
    complete(Gateway(), model, seed=7, temperature=0.5)
    request = scripted.get("g-seen").requests[0]
    assert request.schema["properties"]["answer"]["type"] == "integer"
    assert request.params["seed"] == 7 and request.params["temperature"] == 0.5


def test_schema_model_makes_valid_output_for_any_schema():
    c = complete(Gateway(), "scripted/schema")
    assert c.ok and isinstance(c.parsed.answer, int)


@pytest.mark.parametrize("kind, choices, allowed", [
    ("choice", ("red", "green", "blue"), {"A", "B", "C"}), ("yesno", (), {"yes", "no"}), ("integer", (), None)])
def test_schema_model_ends_a_free_text_reply_with_an_answer_of_the_asked_kind(kind, choices, allowed):
    spec = AnswerSpec(kind=kind, format="text", choices=choices)
    answers = {complete(Gateway(), "scripted/schema", first_messages(spec, f"q{i}?"), spec.output,
                        seed=i).parsed.answer for i in range(12)}
    assert answers <= allowed if allowed else all(isinstance(a, int) for a in answers)
    assert len(answers) > 1  # drawn per prompt, not one constant


def test_a_local_model_timeout_is_not_retried(monkeypatch):
    calls = []

    async def slow_call(model, messages, params, fmt, caller):
        calls.append(model)
        await asyncio.sleep(5)

    gateway = Gateway(backoff=0.001)
    monkeypatch.setattr(gateway, "_call", slow_call)
    c = asyncio.run(gateway.complete(resolve("local/qwen2.5-coder-1.5b-instruct"), MSG, Num, timeout=0.05))
    assert c.error_kind == "timeout" and len(calls) == 1


class Said(BaseModel):
    """A free-text answer: the reply must end with `Answer: N`."""

    answer: int
    repair_prompt: ClassVar[str] = "Could not read your answer: {error}\nEnd with a line `Answer: N`."

    @classmethod
    def from_text(cls, text: str) -> "Said":
        found = re.findall(r"Answer: (\d+)", text)
        if not found:
            raise ValueError("no `Answer:` line")
        return cls(answer=int(found[-1]))


def _replies(gateway, *replies):
    """Make the gateway's provider answer with `replies` (text, finish_reason[, completion_tokens: 7])
    in turn; returns the requests."""
    sent, queue = [], list(replies)

    async def fake_call(model, messages, params, fmt, caller):
        sent.append(messages)
        text, finish, tokens = (*queue.pop(0), 7)[:3]
        return {"text": text, "finish_reason": finish, "prompt_tokens": 10, "completion_tokens": tokens, "cost": 0.0}

    gateway._call = fake_call
    return sent


def test_a_reply_cut_off_at_max_tokens_is_repaired_with_a_request_to_keep_it_short():
    gateway = Gateway()
    sent = _replies(gateway, ("<thinking> First, the debaters disagree about", "length"), ("Short: 4.\nAnswer: 4", "stop"))
    c = complete(gateway, "scripted/cut", output=Said, max_tokens=64)
    assert c.ok and c.parsed.answer == 4 and c.faults == ["parse", "cut_off"]
    repair = sent[1][-1]["content"]
    assert repair.startswith("Could not read your answer: no `Answer:` line (the reply was cut off at the 64-token limit)")
    assert "limit of 64 tokens" in repair and "Keep this reply short" in repair


def test_a_reply_that_ended_on_its_own_gets_the_plain_repair():
    gateway = Gateway()
    sent = _replies(gateway, ("I think it is four.", "stop"), ("Answer: 4", "stop"))
    c = complete(gateway, "scripted/plain", output=Said)
    assert c.ok and c.faults == ["parse"]
    assert sent[1][-1]["content"] == "Could not read your answer: no `Answer:` line\nEnd with a line `Answer: N`."


def test_a_reply_cut_off_twice_is_a_parse_failure_that_says_so():
    gateway = Gateway()
    _replies(gateway, ("<thinking> one", "length"), ("<thinking> two", "length"))
    c = complete(gateway, "scripted/cut-twice", output=Said, max_tokens=32)
    assert c.error_kind == "parse" and c.faults == ["parse", "cut_off", "parse", "cut_off"]
    assert c.error == "parse: no `Answer:` line (the reply was cut off at the 32-token limit)"


def test_a_reply_with_no_finish_reason_that_used_every_allowed_token_counts_as_cut_off():
    gateway = Gateway()  # no finish_reason: a reply cached before debatekit kept it
    sent = _replies(gateway, ("<thinking> a long way", None, 64), ("Answer: 4", None, 3))
    c = complete(gateway, "scripted/old-cache", output=Said, max_tokens=64)
    assert c.ok and c.faults == ["parse", "cut_off"] and "Keep this reply short" in sent[1][-1]["content"]
    short = Gateway()
    _replies(short, ("no answer here", None), ("Answer: 4", None))
    assert complete(short, "scripted/short", output=Said, max_tokens=64).faults == ["parse"]  # 7 of 64 tokens used


def test_a_reply_the_engine_stopped_looping_is_repaired_with_a_request_not_to_repeat():
    gateway = Gateway()
    sent = _replies(gateway, ("x = 2\n" * 50, "loop"), ("Short.\nAnswer: 4", "stop"))
    c = complete(gateway, "scripted/loop", output=Said, max_tokens=64)
    assert c.ok and c.parsed.answer == 4 and c.faults == ["parse", "loop"] and c.loops == 1 and c.cut_off_unread == 0
    repair = sent[1][-1]["content"]
    assert "(the reply repeated itself and was stopped)" in repair and "Do not repeat yourself" in repair


def test_a_reply_cut_off_while_repeating_one_span_counts_as_a_loop():
    gateway = Gateway()
    _replies(gateway, ("Let me see. " + "The sum is 12 and the sum is 12. " * 30, "length"), ("Answer: 12", "stop"))
    c = complete(gateway, "scripted/cut-loop", output=Said, max_tokens=64)
    assert c.ok and c.faults == ["parse", "loop"]


class LastNumber(BaseModel):
    """Reads `Answer: N`, or else the reply's last number (the extractor's fallback for finished replies)."""

    answer: int
    reads_unfinished: ClassVar[bool] = True

    @classmethod
    def from_text(cls, text: str, finished: bool = True) -> "LastNumber":
        marked = re.findall(r"Answer: (\d+)", text)
        found = marked or ([] if not finished else re.findall(r"\d+", text))
        if not found:
            raise ValueError("no answer")
        return cls(answer=int(found[-1]))


def test_a_cut_off_reply_is_not_read_from_its_last_number():
    """A reply cut off mid-computation ends on an intermediate number, which is not its answer."""
    gateway = Gateway()
    sent = _replies(gateway, ("12. Cost of the twelfth glass: 0.6 x 5 = 3\n13. Cost of the", "length"),
                    ("Answer: 64", "stop"))
    c = complete(gateway, "scripted/cut-number", output=LastNumber, max_tokens=64)
    assert c.parsed.answer == 64 and c.faults == ["parse", "cut_off"] and len(sent) == 2
    finished = Gateway()
    _replies(finished, ("The cost is 3 dollars", "stop"))
    assert complete(finished, "scripted/ended", output=LastNumber).parsed.answer == 3


def test_a_reply_longer_than_the_stored_cap_is_read_as_the_model_wrote_it():
    """debatekit's own truncation marker (with its character limit) is never read as the answer."""
    from debatekit.models.reading import MAX_REPLY_CHARS

    gateway = Gateway()
    _replies(gateway, ("word " * MAX_REPLY_CHARS + "\nAnswer: 3", "stop"))
    c = complete(gateway, "scripted/huge", output=LastNumber)
    assert c.ok and c.parsed.answer == 3 and "reply truncated" in c.text


def _slow_provider(gateway, replies: list, asked: list):
    """A provider that answers after a pause, in turn from `replies` (a Fault raises), counting its calls."""
    mine: list = []

    async def fake_call(model, messages, params, fmt, caller):
        asked.append(messages[-1]["content"])
        mine.append(None)
        reply = replies[len(mine) - 1]
        await asyncio.sleep(0.05)
        if isinstance(reply, Exception):
            raise reply
        return {"text": reply, "prompt_tokens": 3, "completion_tokens": 2, "cost": 0.0}

    gateway._call = fake_call


def test_a_request_identical_to_one_in_flight_is_asked_once_and_counted_as_a_cache_hit(tmp_path):
    """Two runs started together (two gateways, one loop, one cache file): the second asker of the
    same request waits for the first one's reply instead of asking the model again."""
    cache = tmp_path / "c.sqlite"
    first, second = Gateway(cache=ResponseCache(cache)), Gateway(cache=ResponseCache(cache))
    asked: list = []
    _slow_provider(first, ['{"answer": 4}'], asked)
    _slow_provider(second, ['{"answer": 5}', '{"answer": 6}'], asked)

    async def both():
        return await asyncio.gather(first.complete(resolve("scripted/x"), MSG, Num, seed=1),
                                    second.complete(resolve("scripted/x"), MSG, Num, seed=1),
                                    second.complete(resolve("scripted/x"), MSG, Num, seed=2))

    a, b, other = asyncio.run(both())
    assert len(asked) == 2  # seed 1 once, seed 2 once
    assert a.calls == 1 and not a.cache_hit and a.parsed.answer == 4
    assert b.calls == 0 and b.cache_hit and b.parsed.answer == 4
    assert other.calls == 1 and not other.cache_hit


def test_a_waiting_request_asks_itself_when_the_call_it_waited_for_failed(tmp_path):
    gateway = Gateway(cache=ResponseCache(tmp_path / "c.sqlite"), max_retries=0)
    asked: list = []
    _slow_provider(gateway, [ValueError("bad request"), '{"answer": 4}'], asked)

    async def both():
        return await asyncio.gather(gateway.complete(resolve("scripted/x"), MSG, Num),
                                    gateway.complete(resolve("scripted/x"), MSG, Num))

    failed, answered = asyncio.run(both())
    assert not failed.ok and answered.ok and answered.calls == 1 and len(asked) == 2


def test_without_the_cache_identical_requests_in_flight_are_each_asked():
    gateway = Gateway(cache=None)
    asked: list = []
    _slow_provider(gateway, ['{"answer": 4}', '{"answer": 5}'], asked)

    async def both():
        return await asyncio.gather(gateway.complete(resolve("scripted/x"), MSG, Num),
                                    gateway.complete(resolve("scripted/x"), MSG, Num))

    assert [c.parsed.answer for c in asyncio.run(both())] == [4, 5] and len(asked) == 2


def test_a_reply_models_schema_title_names_its_response_format():
    """A reply class renamed in code keeps the title its requests were sent (and cached) under."""
    from debatekit.models.reading import response_format
    from debatekit.protocols.arbitration import ArbitrationVerdict
    from debatekit.protocols.judged_debate.judging import verdict_model

    assert response_format(Num)["json_schema"]["name"] == "Num"
    for model in (ArbitrationVerdict, verdict_model(("yes", "no"), "json")):
        fmt = response_format(model)["json_schema"]
        assert fmt["name"] == fmt["schema"]["title"] == "Verdict"
