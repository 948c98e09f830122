"""`--resume --retry-degraded`: debates that answered although some calls failed are run again.

A long study keeps every finished debate; one whose calls partly failed (a context overflow
since fixed, a provider down for a minute) is scored as `degraded` and kept by a plain resume.
Retrying it asks the model only for the calls that failed: the rest come from the response cache.
"""

from __future__ import annotations

import json
from collections import Counter

from debatekit.cli.app import main
from debatekit.models import scripted
from debatekit.records.schemas import RunConfig
from debatekit.records.trace import RunFolder
from debatekit.runner import run
from tests.conftest import answer


def flaky_last_round(name: str, asked: Counter, broken: dict) -> str:
    """Answers each item's truth (10, 20, 30); while `broken["on"]`, agent1's round-2 call on q2 fails."""

    def reply(req: scripted.Request):
        asked[req.item_id, req.agent, req.round] += 1
        if broken["on"] and (req.item_id, req.agent, req.round) == ("q2", "agent1", 2):
            return scripted.Fault("server")
        return answer(int(req.item_id[1:]) * 10)

    return scripted.register(name, fn=reply)


def test_retry_runs_again_only_the_degraded_debate_and_asks_only_for_its_failed_call(tmp_path, arithmetic_file):
    asked, broken = Counter(), {"on": True}
    model = flaky_last_round("flaky-round2", asked, broken)
    config = RunConfig(protocol="society_of_mind", dataset=str(arithmetic_file), model=model,
                       params={"agents": 3, "rounds": 2, "stop_on_agreement": False})
    out = tmp_path / "run"
    first = run(config, out, progress=False)
    assert Counter(d.status for d in first.debates) == {"ok": 2, "degraded": 1}

    broken["on"] = False
    asked.clear()
    plain = run(config, out, resume=True, progress=False)  # a plain resume keeps the degraded debate
    assert not asked and Counter(d.status for d in plain.debates) == {"ok": 2, "degraded": 1}

    again = run(config, out, resume=True, retry_degraded=True, progress=False)
    # only q2 ran again, and of its six calls only the one that had failed reached the model
    assert asked == Counter({("q2", "agent1", 2): 1})
    kept = {d.item_id: d for d in RunFolder(out).debates()}
    assert sorted(kept) == ["q1", "q2", "q3"] and all(d.status == "ok" and d.correct for d in kept.values())
    assert kept["q2"].rounds[-1].answers == {"agent1": 20, "agent2": 20, "agent3": 20}
    assert again.summary.degraded == 0 and again.summary.debates == 3


def test_a_retry_that_gets_no_answer_keeps_the_degraded_record(tmp_path, arithmetic_file):
    def reply(req: scripted.Request):
        if down["on"] and req.item_id == "q2":
            return scripted.Fault("server")
        if req.item_id == "q2" and (req.agent, req.round) == ("agent1", 2):
            return scripted.Fault("server")
        return answer(int(req.item_id[1:]) * 10)

    down = {"on": False}
    model = scripted.register("down-on-retry", fn=reply)
    config = RunConfig(protocol="society_of_mind", dataset=str(arithmetic_file), model=model, cache=False,
                       params={"agents": 3, "rounds": 2, "stop_on_agreement": False})
    out = tmp_path / "run"
    first = {d.item_id: d for d in run(config, out, progress=False).debates}
    assert first["q2"].status == "degraded" and first["q2"].final_answer == 20

    down["on"] = True  # every q2 call fails now: the retry ends with no answer
    again = run(config, out, resume=True, retry_degraded=True, progress=False)
    kept = {d.item_id: d for d in RunFolder(out).debates()}
    assert kept["q2"].debate_id == first["q2"].debate_id and kept["q2"].status == "degraded"
    assert again.summary.degraded == 1 and again.summary.failed == 0
    # the failed retry stays in the trace: its record, then the old one again as the item's last
    rows = [line for line in (out / "debates.jsonl").read_text().splitlines() if '"q2"' in line]
    assert [json.loads(r)["status"] for r in rows] == ["degraded", "error", "degraded"]


def test_the_cli_names_degraded_debates_and_retries_them(tmp_path, arithmetic_file, capsys):
    asked, broken = Counter(), {"on": True}
    model = flaky_last_round("flaky-round2-cli", asked, broken)
    out = str(tmp_path / "run")
    argv = ["run", "society_of_mind", "--dataset", str(arithmetic_file), "--model", model, "--rounds", "2",
            "--set", "stop_on_agreement=false", "--out", out, "--quiet"]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "1 of 3 debates answered although some of their calls failed" in err and "--retry-degraded" in err

    broken["on"] = False
    asked.clear()
    assert main([*argv, "--resume", "--retry-degraded"]) == 0
    assert asked == Counter({("q2", "agent1", 2): 1}) and "degraded" not in capsys.readouterr().err


def test_retry_degraded_without_resume_is_one_clear_line(tmp_path, capsys):
    argv = ["run", "single", "--dataset", "arithmetic", "--model", "scripted/schema", "--retry-degraded",
            "--out", str(tmp_path / "run")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("debatekit: error:") and "--retry-degraded needs --resume" in err
    assert len(err.splitlines()) == 1 and not (tmp_path / "run").exists()


def test_a_retry_on_a_machine_without_the_cache_still_asks_only_for_the_failed_call(
        tmp_path, arithmetic_file, monkeypatch):
    asked, broken = Counter(), {"on": True}
    model = flaky_last_round("flaky-round2-fresh", asked, broken)
    config = RunConfig(protocol="society_of_mind", dataset=str(arithmetic_file), model=model,
                       params={"agents": 3, "rounds": 2, "stop_on_agreement": False})
    out = tmp_path / "run"
    run(config, out, progress=False)
    broken["on"] = False
    asked.clear()
    monkeypatch.setenv("DEBATEKIT_CACHE_DIR", str(tmp_path / "another-machine"))  # an empty cache
    again = run(config, out, resume=True, retry_degraded=True, progress=False)
    assert asked == Counter({("q2", "agent1", 2): 1})  # the other five came back from the debate's events
    assert again.summary.degraded == 0
    record = json.loads((out / "run.json").read_text())
    assert record["resumes"][-1]["restored_replies"] == 5
