"""Failed is not wrong, set-up errors fail fast, 429s wait as asked, several seeds (issue 13)."""

from __future__ import annotations

import asyncio
import json
import socket

import numpy as np
import pytest
from scipy import stats

from debatekit import analysis, registry
from debatekit.analysis.intervals import bootstrap_ci, nested_bootstrap_ci
from debatekit.cli.app import main
from debatekit.engine import Outcome
from debatekit.models import scripted
from debatekit.models.errors import ModelError, ModelSetupError
from debatekit.models.gateway import FAIL_FAST_AFTER, Gateway
from debatekit.models.model import resolve
from debatekit.records.schemas import RunConfig
from debatekit.registry import protocol
from debatekit.runner import run
from tests.conftest import answer
from tests.status_server import StatusServer, ok_body


def items(tmp_path, n: int):
    path = tmp_path / "items.jsonl"
    path.write_text("".join(json.dumps({"id": f"q{i}", "question": f"What is {i}?", "answer": i}) + "\n"
                            for i in range(n)))
    return path


def events(run_dir) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]


def free_port() -> int:
    """A loopback port with nothing listening on it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- failed is not wrong ------------------------------------------------------------------

def test_an_item_whose_calls_time_out_is_an_error_left_out_of_accuracy(tmp_path):
    def reply(req):
        if req.item_id == "q1":
            return scripted.Fault("timeout")
        return answer(0 if req.item_id == "q2" else int(req.item_id[1:]))  # q2 answered, wrongly

    model = scripted.register("times-out-on-q1", fn=reply)
    config = RunConfig(protocol="single", dataset=str(items(tmp_path, 4)), model=model, cache=False)
    result = run(config, tmp_path / "run", progress=False, gateway=Gateway(backoff=0.001, max_retries=1))
    by_id = {d.item_id: d for d in result.debates}
    assert by_id["q1"].status == "error" and by_id["q1"].error.startswith("timeout")
    assert by_id["q1"].correct is None and by_id["q2"].status == "ok" and by_id["q2"].correct is False
    s = result.summary
    assert s.failed == 1 and s.degraded == 0 and s.first_error.startswith("timeout")
    assert s.accuracy == pytest.approx(2 / 3)  # q0, q3 right, q2 wrong; q1 not scored
    table = analysis.load_runs([result.path]).debates.set_index("item_id")
    assert table.loc["q1", "status"] == "error" and table.loc["q0", "status"] == "ok"
    configs = analysis.config_table(analysis.load_runs([result.path]).debates, ["protocol"])
    assert configs.loc[0, "failed"] == 1 and configs.loc[0, "accuracy"] == pytest.approx(2 / 3)


def test_the_cli_warns_on_stderr_about_debates_without_an_answer(tmp_path, capsys):
    model = scripted.register("times-out-on-q0", fn=lambda req: scripted.Fault("timeout") if req.item_id == "q0"
                              else answer(int(req.item_id[1:])))
    assert main(["run", "single", "--dataset", str(items(tmp_path, 3)), "--model", model,
                 "--out", str(tmp_path / "run"), "--quiet", "--no-cache", "--wide"]) == 0
    out, err = capsys.readouterr()
    header, _, row = out.splitlines()[:3]
    cells = dict(zip(header.split()[:6], row.split()[:6]))
    assert cells["failed"] == "1" and cells["degraded"] == "0" and "1.00 [1.00, 1.00]" in row
    assert err.startswith("debatekit: warning: single: 1 of 3 debates have no answer") and "timeout" in err


@pytest.fixture
def scores_what_it_never_got():
    """A protocol that scores a missing answer as wrong, as a protocol with its own scoring might."""

    @protocol("_scores_what_it_never_got")
    def factory():
        async def solve(item, debate):
            turn = await debate.ask("agent1", [{"role": "user", "content": item.question}], phase="answer", round=1)
            return Outcome(final_answer=turn.text or None, correct=False, score=0.0)

        return solve

    yield "_scores_what_it_never_got"
    registry._protocols.pop("_scores_what_it_never_got", None)


def test_a_debate_without_an_answer_after_failed_calls_is_not_scored_whatever_the_protocol_says(
        tmp_path, scores_what_it_never_got):
    model = scripted.register("fails-on-q0", fn=lambda req: scripted.Fault("server") if req.item_id == "q0"
                              else "some reply")
    config = RunConfig(protocol=scores_what_it_never_got, dataset=str(items(tmp_path, 2)), model=model,
                       cache=False)
    result = run(config, tmp_path / "run", progress=False, gateway=Gateway(backoff=0.001, max_retries=1))
    by_id = {d.item_id: d for d in result.debates}
    assert by_id["q0"].status == "error" and by_id["q0"].correct is None and by_id["q0"].score is None
    assert by_id["q1"].status == "ok" and by_id["q1"].correct is False and by_id["q1"].score == 0.0
    assert result.summary.failed == 1 and result.summary.accuracy == 0.0
    # its loop ran on past the failed call, but that is not why it has no answer: it stopped on an error
    assert by_id["q0"].stopped == "error" and result.summary.stop_reasons == {"error": 1, "none": 1}
    frame = analysis.load_runs([result.path]).debates.set_index("item_id")
    assert frame.loc[["q0", "q1"], "stop_reason"].fillna("-").tolist() == ["error", "-"]


def test_a_reply_that_does_not_parse_is_the_models_answer_and_stays_scored(tmp_path):
    model = scripted.register("garbage", fn=lambda req: "no json here")
    config = RunConfig(protocol="single", dataset=str(items(tmp_path, 2)), model=model, cache=False)
    result = run(config, tmp_path / "run", progress=False)
    assert all(d.status == "ok" and d.correct is False for d in result.debates)
    assert result.summary.failed == 0 and result.summary.accuracy == 0.0


# --- fail fast ----------------------------------------------------------------------------

def test_a_dead_provider_stops_the_run_with_exit_1_within_a_few_calls(tmp_path, capsys):
    port = free_port()
    code = main(["run", "single", "--dataset", str(items(tmp_path, 20)), "--model", "openai/dead",
                 "--api-base", f"http://127.0.0.1:{port}/v1", "--out", str(tmp_path / "run"), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 1 and len(err.splitlines()) == 1
    assert err.startswith("debatekit: error: model 'openai/dead': ") and "Connection error" in err
    assert sum(e["calls"] for e in events(tmp_path / "run")) == FAIL_FAST_AFTER
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    assert record["status"] == "failed" and record["summary"]["accuracy"] is None


def test_an_agents_own_model_that_is_dead_stops_the_run_like_the_run_model(tmp_path):
    model = scripted.register("answers-fine", fn=lambda req: answer(1))
    dead = scripted.register("rejects-all", fn=lambda req: scripted.Fault("bad_request", "no such deployment"))
    config = RunConfig(protocol="society_of_mind", dataset=str(items(tmp_path, 12)), model=model, cache=False,
                       params={"models": {"agent2": dead}, "rounds": 1})
    with pytest.raises(ModelSetupError, match=f"model '{dead}': .*no such deployment"):
        run(config, tmp_path / "run", progress=False, gateway=Gateway(backoff=0.001))
    calls = [e for e in events(tmp_path / "run") if e["model"] == dead]
    assert sum(e["calls"] for e in calls) == FAIL_FAST_AFTER  # then every item left is left for --resume
    assert json.loads((tmp_path / "run" / "run.json").read_text())["status"] == "failed"


def test_an_agent_model_no_provider_serves_is_named_before_any_call(tmp_path):
    config = RunConfig(protocol="society_of_mind", dataset=str(items(tmp_path, 2)), model="scripted/schema",
                       params={"models": ["scripted/schema", "scripted/never-registered"]})
    with pytest.raises(ModelError, match="scripted/never-registered"):
        run(config, tmp_path / "run", progress=False)
    assert not (tmp_path / "run" / "events.jsonl").exists()


def test_a_server_answering_401_stops_the_run_naming_the_model_and_masking_the_key(tmp_path, capsys, monkeypatch):
    key = "sk-lab-PLANTED-0a1b2c"
    monkeypatch.setenv("LAB_SERVER_X", key)
    reject = {"error": {"message": "Incorrect API key provided: {auth}", "type": "invalid_request_error"}}
    with StatusServer(lambda n, body: (401, {}, "")) as server:
        server.script = lambda n, body: (401, {}, json.dumps(reject).replace(
            "{auth}", server.requests[-1]["authorization"]))
        code = main(["run", "society_of_mind", "--dataset", str(items(tmp_path, 10)), "--model", "openai/m",
                     "--api-base", server.base_url, "--api-key-env", "LAB_SERVER_X",
                     "--out", str(tmp_path / "run"), "--quiet"])
        sent = [r["authorization"] for r in server.requests]
    out, err = capsys.readouterr()
    assert code == 1 and err.startswith("debatekit: error: model 'openai/m': ") and "Incorrect API key" in err
    assert len(sent) == FAIL_FAST_AFTER and all(a == f"Bearer {key}" for a in sent)  # the key did reach the server
    assert key not in out + err and "Bearer ***" in err
    assert all(key not in p.read_text() for p in (tmp_path / "run").rglob("*") if p.is_file())


def test_resume_after_a_fail_fast_finishes_the_run(tmp_path):
    state = {"fixed": False}

    def reply(req):
        return answer(int(req.item_id[1:])) if state["fixed"] else scripted.Fault("bad_request", "unknown model")

    model = scripted.register("misconfigured", fn=reply)
    config = RunConfig(protocol="society_of_mind", dataset=str(items(tmp_path, 8)), model=model, cache=False,
                       params={"agents": 2, "rounds": 1})
    with pytest.raises(ModelSetupError, match=f"model '{model}': .*unknown model"):
        run(config, tmp_path / "run", progress=False)
    first = json.loads((tmp_path / "run" / "run.json").read_text())
    assert first["status"] == "failed" and first["summary"]["items"] < 8  # the rest were never started
    assert sum(e["calls"] for e in events(tmp_path / "run")) == FAIL_FAST_AFTER

    state["fixed"] = True
    result = run(config, tmp_path / "run", resume=True, progress=False)
    assert result.record.status == "complete" and result.summary.items == 8
    assert result.summary.failed == 0 and result.summary.accuracy == 1.0


def test_a_failure_after_the_model_answered_does_not_stop_the_run(tmp_path):
    def reply(req):
        return scripted.Fault("bad_request", "context too long") if req.item_id in ("q3", "q4", "q5", "q6") \
            else answer(int(req.item_id[1:]))

    model = scripted.register("rejects-some", fn=reply)
    config = RunConfig(protocol="single", dataset=str(items(tmp_path, 8)), model=model, cache=False, concurrency=1)
    result = run(config, tmp_path / "run", progress=False)
    assert result.record.status == "complete" and result.summary.failed == 4
    assert result.summary.accuracy == 1.0


def test_a_429_retry_after_is_honoured_and_transient_faults_retry(tmp_path):
    waits: list[float] = []

    async def sleep(seconds):
        waits.append(seconds)

    def script(n, body):
        return (429, {"Retry-After": "2"}, '{"error": {"message": "slow down"}}') if n <= 2 else (200, {}, ok_body())

    with StatusServer(script) as server:
        gateway = Gateway(backoff=0.01, sleep=sleep,
                          model_options={"openai/m": {"api_base": server.base_url, "api_key": "sk-x"}})
        done = asyncio.run(gateway.complete(resolve("openai/m"), [{"role": "user", "content": "hi"}]))
    assert done.ok and done.faults == ["rate_limit", "rate_limit"] and len(server.requests) == 3
    assert waits == [2.0, 2.0]  # not the 0.01 s and 0.02 s backoff


def test_a_502_that_mentions_a_connection_error_is_retried_not_taken_for_a_dead_server():
    def script(n, body):
        return (502, {}, '{"error": {"message": "upstream connection error"}}') if n <= 2 else (200, {}, ok_body())

    with StatusServer(script) as server:
        gateway = Gateway(backoff=0.001, model_options={"openai/m": {"api_base": server.base_url, "api_key": "x"}})
        done = asyncio.run(gateway.complete(resolve("openai/m"), [{"role": "user", "content": "hi"}]))
    assert done.ok and done.faults == ["server", "server"] and gateway.dead("openai/m") is None


def test_a_server_answering_200_with_a_body_that_is_not_json_fails_fast():
    with StatusServer(lambda n, body: (200, {}, "<html>not an API</html>")) as server:
        gateway = Gateway(backoff=0.001, model_options={"openai/m": {"api_base": server.base_url, "api_key": "x"}})

        async def many():
            return await asyncio.gather(*(gateway.complete(resolve("openai/m"), [{"role": "user", "content": str(i)}])
                                          for i in range(8)))

        done = asyncio.run(many())
    assert len(server.requests) == FAIL_FAST_AFTER and gateway.dead("openai/m").startswith("model 'openai/m': ")
    assert [c.error_kind for c in done].count("setup") == 8 - FAIL_FAST_AFTER


def test_a_missing_gguf_file_is_a_one_line_error_with_exit_1(tmp_path, capsys):
    code = main(["run", "single", "--dataset", str(items(tmp_path, 2)), "--model", "local//nonexistent.gguf"])
    err = capsys.readouterr().err.strip()
    assert code == 1 and err.startswith("debatekit: error: model 'local//nonexistent.gguf': local model file not found")


# --- seeds --------------------------------------------------------------------------------

def test_seeds_run_each_item_under_each_seed_and_report_per_seed_accuracy(tmp_path, capsys):
    def reply(req):  # right exactly when the call's seed is even: differs between seeds
        truth = int(req.item_id[1:])
        return answer(truth if req.params["seed"] % 2 == 0 else -1)

    model = scripted.register("seed-dependent", fn=reply)
    dataset = str(items(tmp_path, 6))
    assert main(["run", "single", "--dataset", dataset, "--model", model, "--seeds", "3", "--seed", "5",
                 "--out", str(tmp_path / "run"), "--quiet"]) == 0
    out = capsys.readouterr().out
    header, _, row = out.splitlines()[:3]
    assert row.split()[header.split().index("seeds")] == "3"
    result = analysis.load_runs([tmp_path / "run"])
    d = result.debates
    assert len(d) == 18 and sorted(d["seed"].unique()) == [5, 6, 7]
    per_seed = analysis.seed_accuracy(result).set_index("seed")["accuracy"]
    assert per_seed.to_dict() == pytest.approx(d.groupby("seed")["correct"].mean().to_dict())
    summary = json.loads((tmp_path / "run" / "run.json").read_text())["summary"]
    assert summary["seeds"] == 3 and summary["items"] == 6 and summary["debates"] == 18
    groups = [g.astype(float).tolist() for _, g in d.groupby("item_id")["correct"]]
    assert summary["accuracy"] == pytest.approx(d["correct"].mean())
    assert summary["accuracy_ci"] == pytest.approx(list(nested_bootstrap_ci(groups)[1:]))
    assert summary["accuracy_by_seed"] == pytest.approx({str(k): v for k, v in per_seed.items()})
    # a resumed run with the same seeds makes no new debates
    assert main(["run", "single", "--dataset", dataset, "--model", model, "--seeds", "3", "--seed", "5",
                 "--out", str(tmp_path / "run"), "--resume", "--quiet"]) == 0
    assert len((tmp_path / "run" / "debates.jsonl").read_text().splitlines()) == 18


def test_the_nested_bootstrap_resamples_items_then_seeds():
    flat = [1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.0] * 6
    mean, low, high = bootstrap_ci(flat)  # one seed per item: the plain percentile bootstrap, as scipy's
    scipy_ci = stats.bootstrap((flat,), np.mean, method="percentile", n_resamples=4000, random_state=1)
    assert mean == pytest.approx(4 / 7) and low == pytest.approx(scipy_ci.confidence_interval.low, abs=0.04)
    assert high == pytest.approx(scipy_ci.confidence_interval.high, abs=0.04) and bootstrap_ci([0.5]) == (0.5,) * 3
    mean, low, high = nested_bootstrap_ci([[1, 1, 1], [0, 0, 0]])
    assert mean == 0.5 and (low, high) == (0.0, 1.0)  # seeds agree within items: only items vary
    mean, low, high = nested_bootstrap_ci([[1, 0], [1, 0], [1, 0], [1, 0]])
    assert mean == 0.5 and 0.0 < low < 0.5 < high < 1.0  # items agree: the spread comes from the seeds


def test_a_sweep_point_takes_seeds_and_api_key_env(tmp_path, monkeypatch):
    from debatekit import sweep

    model = scripted.register("point-seeds", fn=lambda req: answer(int(req.item_id[1:])))
    dataset = str(items(tmp_path, 3))
    point = {"protocol": "single", "dataset": dataset, "model": model}
    result = sweep.run_point({**point, "seeds": 2}, str(tmp_path / "point"), progress=False)
    assert result.summary.seeds == 2 and result.summary.debates == 6 and result.summary.accuracy == 1.0
    with pytest.raises(ValueError, match="--api-key-env NOT_SET_ANYWHERE: the environment variable is not set"):
        sweep.run_point({**point, "api_key_env": "NOT_SET_ANYWHERE"}, str(tmp_path / "other"), progress=False)


def test_a_negative_token_count_is_recorded_unknown_never_summed(tmp_path, capsys):
    def script(n, body):
        reply = json.loads(ok_body('{"reasoning": "r", "answer": 1}'))
        reply["usage"] = {"prompt_tokens": 5, "completion_tokens": -3000015, "total_tokens": -3000010}
        return 200, {}, json.dumps(reply)

    with StatusServer(script) as server:
        code = main(["run", "single", "--dataset", str(items(tmp_path, 3)), "--model", "openai/m",
                     "--api-base", server.base_url, "--out", str(tmp_path / "run"), "--quiet", "--no-cache"])
    err = capsys.readouterr().err
    assert code == 0 and err.count("reported token usage that is not a count") == 1  # said once, not per call
    rows = events(tmp_path / "run")
    assert len(rows) == 3 and all(r["completion_tokens"] == 0 and "usage_unknown" in r["faults"] for r in rows)
    summary = json.loads((tmp_path / "run" / "run.json").read_text())["summary"]
    assert summary["completion_tokens"] == 0 and summary["prompt_tokens"] == 0
    assert summary["degraded"] == 0 and summary["failed"] == 0  # the replies were read: only their counts are unknown


def test_a_200_html_page_from_a_proxy_fails_fast_whatever_its_content_type(tmp_path, capsys):
    page = (200, {"Content-Type": "text/html; charset=utf-8"}, "<html><body>Sign in to the proxy</body></html>")
    with StatusServer(lambda n, body: page) as server:
        code = main(["run", "single", "--dataset", str(items(tmp_path, 6)), "--model", "openai/m",
                     "--api-base", server.base_url, "--out", str(tmp_path / "run"), "--quiet", "--no-cache"])
        sent = len(server.requests)
    err = capsys.readouterr().err.strip()
    assert code == 1 and err.count("\n") == 0 and err.startswith("debatekit: error: model 'openai/m': ")
    assert sent == FAIL_FAST_AFTER  # not retried as a flaky server, item after item
    assert json.loads((tmp_path / "run" / "run.json").read_text())["status"] == "failed"


def test_a_run_in_which_no_debate_got_an_answer_exits_non_zero_in_one_line(tmp_path, capsys):
    model = scripted.register("always-500", fn=lambda req: scripted.Fault("server"))
    code = main(["run", "single", "--dataset", str(items(tmp_path, 3)), "--model", model,
                 "--out", str(tmp_path / "run"), "--quiet", "--no-cache"])
    err = capsys.readouterr().err.strip()
    assert code == 1 and err.count("\n") == 0, err
    assert err.startswith("debatekit: error: single: none of the 3 debates run got an answer; first error: item q")
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    assert record["status"] == "failed" and record["summary"]["failed"] == 3


@pytest.mark.parametrize("reply", [
    '{"reasoning": "half a pair: \ud800 then the rest", "answer": 1}',  # the server's JSON holds "\\ud800"
    json.dumps({"reasoning": "half a pair: \ud800 then the rest", "answer": 1}),  # the model's own JSON does
], ids=["character", "escape"])
def test_a_reply_holding_a_lone_surrogate_is_kept_read_and_recorded(tmp_path, reply):
    with StatusServer(lambda n, body: (200, {}, ok_body(reply))) as server:
        code = main(["run", "single", "--dataset", str(items(tmp_path, 2)), "--model", "openai/m", "--set",
                     "answer_format=json", "--api-base", server.base_url, "--out", str(tmp_path / "run"), "--quiet"])
        assert code == 0
        again = main(["run", "single", "--dataset", str(items(tmp_path, 2)), "--model", "openai/m", "--set",
                      "answer_format=json", "--api-base", server.base_url, "--out", str(tmp_path / "again"),
                      "--quiet"])
    rows = events(tmp_path / "run")
    assert len(rows) == 2 and all(r["error"] is None and r["output"]["answer"] == 1 for r in rows)
    assert all("half a pair: \ufffd then the rest" in r["output"]["reasoning"] for r in rows)
    assert again == 0 and all(r["cache_hit"] for r in events(tmp_path / "again"))  # the cached reply reads too


@pytest.mark.parametrize("answer_format", ["json", "text"])
def test_a_400_digit_answer_and_truth_are_read_and_compared_exactly(tmp_path, answer_format):
    huge = "1" + "0" * 400
    reply = ('{"reasoning": "r", "answer": %s}' % huge) if answer_format == "json" else f"Worked.\nAnswer: {huge}"
    model = scripted.register(f"huge-{answer_format}", fn=lambda req: reply)
    data = tmp_path / "huge.jsonl"
    data.write_text(json.dumps({"id": "q0", "question": "?", "answer": 1}) + "\n"
                    + '{"id": "q1", "question": "?", "answer": %s1}\n' % huge[:-1]   # one off in its last digit
                    + '{"id": "q2", "question": "?", "answer": %s}\n' % huge)
    for out in ("run", "run"):  # the second pass resumes the finished run from its cached replies
        code = main(["run", "society_of_mind", "--dataset", str(data), "--model", model, "--set",
                     f"answer_format={answer_format}", "--out", str(tmp_path / out), "--quiet"]
                    + (["--resume"] if (tmp_path / out / "run.json").exists() else []))
        assert code == 0
    rows = {json.loads(line)["item_id"]: json.loads(line) for line in (tmp_path / "run" / "debates.jsonl").open()}
    assert [rows[q]["correct"] for q in ("q0", "q1", "q2")] == [False, False, True]
    assert all(r["final_answer"] == int(huge) for r in rows.values())
