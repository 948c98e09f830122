"""The response cache keys a reply on what answered it, not only on what was asked: two servers
serving one model name, other options, or a local model file replaced in place never share replies;
replies recorded under the older request-only keys still replay and resume."""

from __future__ import annotations

import json
import os

from debatekit.cli.app import main
from debatekit.models.cache import ResponseCache, replies_in, reply_record, request_key, served_key
from debatekit.models.gateway import Gateway
from tests.status_server import StatusServer, ok_body

REPLY = {"text": "Answer: 7", "finish_reason": "stop", "prompt_tokens": 40, "completion_tokens": 3}


def server_answering(value: int) -> StatusServer:
    return StatusServer(lambda n, body: (200, {}, ok_body(json.dumps({"reasoning": "r", "answer": value}))))


def items(tmp_path):
    path = tmp_path / "items.jsonl"
    path.write_text("".join(json.dumps({"id": f"q{i}", "question": f"What is {i}?", "answer": 1}) + "\n"
                            for i in range(3)))
    return path


def run_on(tmp_path, name, server, *extra) -> list[dict]:
    assert main(["run", "single", "--dataset", str(items(tmp_path)), "--model", "openai/foo", "--set",
                 "answer_format=json", "--api-base", server.base_url, "--out", str(tmp_path / name), "--quiet",
                 *extra]) == 0
    return [json.loads(line) for line in (tmp_path / name / "events.jsonl").read_text().splitlines()]


def test_a_second_server_under_the_same_model_name_is_asked_not_answered_from_the_first(tmp_path):
    with server_answering(1) as first, server_answering(2) as second:
        one = run_on(tmp_path, "one", first)
        two = run_on(tmp_path, "two", second)
        again = run_on(tmp_path, "again", first)
    assert [e["output"]["answer"] for e in one] == [1] * 3 and not any(e["cache_hit"] for e in one)
    assert [e["output"]["answer"] for e in two] == [2] * 3 and not any(e["cache_hit"] for e in two)
    assert len(second.requests) == 3
    assert all(e["cache_hit"] for e in again) and len(first.requests) == 3  # the same server: cached
    summary = json.loads((tmp_path / "two" / "run.json").read_text())["summary"]
    assert summary["cache_hits"] == 0


def test_the_endpoint_however_set_the_options_and_the_model_file_are_in_the_key(tmp_path, monkeypatch):
    model = "openai/foo"
    plain = Gateway(cache=None).served_by(model)
    monkeypatch.setenv("OPENAI_API_BASE", "http://127.0.0.1:18802/v1")
    by_env = Gateway(cache=None).served_by(model)
    assert by_env["api_base"] == "http://127.0.0.1:18802/v1" and by_env != plain
    option = Gateway(cache=None, model_options={model: {"api_base": "http://127.0.0.1:18801/v1", "api_key": "sk-x",
                                                        "top_k": 5}}).served_by(model)
    assert option == {"api_base": "http://127.0.0.1:18801/v1", "api_key": "***", "top_k": 5}  # the option wins
    assert "sk-x" not in json.dumps(option)  # the key is masked as in a trace
    weights = tmp_path / "m.gguf"
    weights.write_bytes(b"GGUF one")
    before = Gateway(cache=None).served_by(f"local/{weights}")
    weights.write_bytes(b"GGUF two, replaced in place")
    os.utime(weights, ns=(1, 1))
    after = Gateway(cache=None).served_by(f"local/{weights}")
    assert before["file"][0] == after["file"][0] == str(weights) and before["file"] != after["file"]
    keys = {served_key("r", s) for s in (plain, by_env, option, before, after)}
    assert len(keys) == 5


def test_a_reply_recorded_under_a_request_only_key_is_put_back_under_todays_key(tmp_path):
    asked = request_key("openai/foo", [{"role": "user", "content": "hi"}], {"temperature": 0}, None)
    old = {"text": "Answer: 7", "model": "openai/foo", "replies": [reply_record(asked, REPLY)]}  # before v2
    new = {"text": "Answer: 7", "model": "openai/foo", "replies": [reply_record("v2-key", REPLY, asked)]}
    served = {"api_base": "http://127.0.0.1:18801/v1"}
    expected = served_key(asked, served)
    assert replies_in(old, lambda model: served) == [(expected, REPLY)]
    assert replies_in(new, lambda model: served) == [(expected, REPLY)]
    assert replies_in(old) == [(asked, REPLY)]  # without a gateway: the key as recorded
    cache = ResponseCache(tmp_path / "c.sqlite")
    assert cache.restore(replies_in(old, lambda model: served)) == 1 and cache.get(expected) == REPLY
