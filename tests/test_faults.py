"""Fault injection in the gateway path: 20% mixed faults, nothing lost, every fault traced."""

from __future__ import annotations

import hashlib
import json
import random
from collections import Counter

from debatekit.models import scripted
from debatekit.models.gateway import Gateway
from debatekit.records.schemas import RunConfig
from debatekit.runner import run
from tests.conftest import answer

# injected kind -> the kind the trace must record for it
KINDS = {"timeout": "timeout", "hang": "timeout", "rate_limit": "rate_limit", "server": "server",
         "invalid_json": "parse", "schema_violation": "parse", "empty": "empty"}
FAULT_RATE = 0.2


def fault_injecting_model(name: str, injected: list[str]) -> str:
    """Answers the truth, except that 20% of attempts (deterministic per call and attempt) fail."""
    attempts: Counter = Counter()

    def reply(req: scripted.Request):
        key = (req.item_id, req.agent, req.round, req.phase, len(req.messages))
        attempts[key] += 1
        seed = int(hashlib.sha256(repr((key, attempts[key])).encode()).hexdigest()[:12], 16)
        rng = random.Random(seed)
        truth = int(req.item_id.split("-")[1])
        if rng.random() >= FAULT_RATE:
            return answer(truth)
        kind = rng.choice(sorted(KINDS))
        injected.append(kind)
        return {
            "timeout": scripted.Fault("timeout"),                # the provider reports a timeout
            "hang": scripted.Fault("hang"),                      # no reply: the call timeout cuts it
            "rate_limit": scripted.Fault("rate_limit"),          # 429
            "server": scripted.Fault("server"),                  # 500
            "invalid_json": '{"reasoning": "cut off", "answ',    # not JSON
            "schema_violation": {"reasoning": "x", "answer": "forty-two"},  # JSON, wrong type
            "empty": "",
        }[kind]

    return scripted.register(name, fn=reply)


def dataset(tmp_path, n=30):
    path = tmp_path / "items.jsonl"
    path.write_text("".join(json.dumps({"id": f"item-{i}", "question": f"What is {i}?", "answer": i}) + "\n"
                            for i in range(n)))
    return path


def test_a_30_item_sweep_at_20_percent_mixed_faults_loses_nothing(tmp_path):
    injected: list[str] = []
    model = fault_injecting_model("faulty-20", injected)
    config = RunConfig(protocol="society_of_mind", dataset=str(dataset(tmp_path)), model=model, cache=False,
                       concurrency=8, call_timeout=3,
                       params={"agents": 3, "rounds": 2, "stop_on_agreement": False})
    result = run(config, tmp_path / "run", progress=False, gateway=Gateway(backoff=0.001, timeout=3))

    # every item has exactly one result line, answered or explicitly failed
    lines = (tmp_path / "run" / "debates.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    ids = [r["item_id"] for r in rows]
    assert sorted(ids) == sorted(f"item-{i}" for i in range(30)) and len(ids) == len(set(ids))
    for r in rows:
        assert r["status"] in ("ok", "degraded", "error", "failed")
        assert r["final_answer"] is not None or r["status"] in ("error", "failed") or r["usage"]["errors"] == 3

    # every call is traced, and is either an output or an explicit error with its kind
    events = [json.loads(line) for line in (tmp_path / "run" / "events.jsonl").read_text().splitlines()]
    assert len(events) == 30 * 3 * 2
    # a debate is ok exactly when none of its calls failed without a reply (parse failures are answers)
    unanswered = Counter(e["debate_id"] for e in events if e["error"] and e["error_kind"] != "parse")
    assert all((r["status"] == "ok") == (unanswered[r["debate_id"]] == 0) for r in rows)
    for e in events:
        assert (e["output"] is not None) != (e["error"] is not None), e
        if e["error"]:
            assert e["error_kind"] in set(KINDS.values()) | {"error"} and e["error"].startswith(e["error_kind"])

    # every injected fault is in the trace, with its kind: the counts match exactly
    assert len(injected) > 30 and set(injected) == set(KINDS)   # all kinds occurred
    traced = Counter(kind for e in events for kind in e["faults"])
    assert traced == Counter(KINDS[k] for k in injected)
    assert result.summary.parse_failures == traced["parse"]
    assert result.summary.timeouts == traced["timeout"]
    assert result.summary.retries == traced["timeout"] + traced["rate_limit"] + traced["server"] + traced["empty"]
    # the run still answers: retries and repair recover most calls
    assert sum(e["output"] is not None for e in events) >= 0.95 * len(events)
    assert result.record.status == "complete"


def test_an_agent_whose_calls_all_fail_is_recorded_and_the_debate_still_ends(tmp_path):
    def reply(req):
        return scripted.Fault("server") if req.agent == "agent1" else answer(int(req.item_id.split("-")[1]))

    model = scripted.register("faulty-agent1", fn=reply)
    config = RunConfig(protocol="society_of_mind", dataset=str(dataset(tmp_path, 3)), model=model, cache=False,
                       params={"agents": 3, "rounds": 2})
    result = run(config, tmp_path / "run", progress=False, gateway=Gateway(backoff=0.001, max_retries=1))
    # an answer was reached although agent1's calls failed: degraded, and scored
    assert len(result.debates) == 3 and all(d.status == "degraded" and d.correct for d in result.debates)
    assert result.summary.degraded == 3 and result.summary.failed == 0
    failed = [json.loads(line) for line in (tmp_path / "run" / "events.jsonl").read_text().splitlines()]
    failed = [e for e in failed if e["agent"] == "agent1"]
    assert failed and all(e["error_kind"] == "server" and e["faults"] == ["server", "server"] for e in failed)
