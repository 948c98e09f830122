"""Forks of a recorded society_of_mind run, driven by scripted models: what is played back, what is
asked, what each intervention changes in what an agent reads or is told, and the errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from debatekit.cli.app import main
from debatekit.models import scripted
from debatekit.records.schemas import RunConfig
from debatekit.records.transcript import as_text, entries
from debatekit.runner import run
from debatekit.sweep.forks import (ForkError, Intervention, InterventionError, Shown, adversarial, anonymise, fork,
                                   hide, intervention, make, persona, reorder, replace, swap_model)
from debatekit.sweep.forks import interventions
from debatekit.sweep.forks.builtin import ADVERSARY, STAND_IN

ROUND1 = {"q1": [10, 11, 11], "q2": [20, 20, 20], "q3": [31, 32, 33]}
"""Each agent's answer in every round of the parent (truths 10, 20, 30): q2 agrees in round 1 and stops."""


def reply(req) -> dict:
    return {"reasoning": f"{req.agent} reasons in round {req.round}",
            "answer": ROUND1[req.item_id][int(req.agent[-1]) - 1]}


@pytest.fixture
def parent(tmp_path, arithmetic_file) -> Path:
    """A finished 3-round society_of_mind run over three items; its scripted model then serves the forks."""
    model = scripted.register("fork-parent", fn=reply)
    run(RunConfig(protocol="society_of_mind", dataset=str(arithmetic_file), model=model, params={"rounds": 3}),
        tmp_path / "parent", progress=False)
    scripted.register("fork-parent", fn=reply)  # a fresh request log for the fork
    return tmp_path / "parent"


def asked() -> list:
    return scripted.get("fork-parent").requests


def events(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines()]


def prompt(folder: Path, item: str, round: int, agent: str) -> list[dict]:
    """The messages `agent` was asked with in `round` of `item`'s debate."""
    return next(e["messages"] for e in events(folder) if (e["item_id"], e["round"], e["agent"]) == (item, round, agent))


def test_a_fork_at_round_2_plays_round_1_back_and_asks_the_model_from_round_2(parent, tmp_path):
    result = fork(parent, at_round=2, out=tmp_path / "fork", cache=False, progress=False)
    assert {r.round for r in asked()} == {2, 3}  # no round-1 prompt reached the model, the cache off
    played = [e for e in events(tmp_path / "fork") if e["round"] == 1]
    assert len(played) == 9 and all(e["cache_hit"] for e in played)
    before = {(d.item_id, d.seed): d for d in run_debates(parent)}
    assert {(d.item_id, d.seed) for d in result.debates} == set(before)  # pairs item by item, seed by seed
    assert all(d.rounds[0].answers == before[d.item_id, d.seed].rounds[0].answers for d in result.debates)
    assert len(next(d for d in result.debates if d.item_id == "q2").rounds) == 1  # it had ended: still no call
    link = json.loads((tmp_path / "fork" / "run.json").read_text())["parent"]
    record = json.loads((parent / "run.json").read_text())
    assert link == {"run": "../parent", "run_id": record["run_id"], "at_round": 2, "intervention": None,
                    "model": None, "resample": None, "params": None}  # seen from the fork's folder: they move together


def run_debates(folder: Path):
    from debatekit.records.trace import RunFolder

    return RunFolder(folder).debates()


def test_a_fork_at_round_3_asks_only_round_3(parent, tmp_path):
    fork(parent, at_round=3, out=tmp_path / "fork", cache=False, progress=False)
    assert {(r.item_id, r.round) for r in asked()} == {("q1", 3), ("q3", 3)}
    assert "parent" not in json.loads((parent / "run.json").read_text())


def test_a_fork_may_go_on_past_the_parents_agreement_only_from_the_round_after_it(parent, tmp_path):
    result = fork(parent, at_round=2, out=tmp_path / "on", cache=False, progress=False,
                  params={"stop_on_agreement": False})
    assert len(next(d for d in result.debates if d.item_id == "q2").rounds) == 3
    with pytest.raises(ForkError, match="the parent's debate of item q2 ended after round 1, so it has no round 2"):
        fork(parent, at_round=3, out=tmp_path / "late", cache=False, progress=False,
             params={"stop_on_agreement": False})
    # the debates already under way when q2 stopped the fork finish and are kept: their model calls are not lost
    assert {d.item_id for d in run_debates(tmp_path / "late")} == {"q1", "q3"}
    assert json.loads((tmp_path / "late" / "run.json").read_text())["status"] == "interrupted"


def test_replacing_an_agents_reply_by_the_wrong_answer_changes_what_the_others_read_only(parent, tmp_path):
    out = tmp_path / "fork"
    result = fork(parent, at_round=2, out=out, intervention=replace("agent1", by="wrong"), cache=False,
                  progress=False)
    stand_in = STAND_IN.format(answer=11)  # q1's most common wrong round-1 answer
    for agent in ("agent2", "agent3"):
        shown = prompt(out, "q1", 2, agent)[-1]["content"]
        assert stand_in in shown and "agent1 reasons" not in shown
    assert stand_in not in prompt(out, "q1", 2, "agent1")[-1]["content"]
    assert "agent1 reasons in round 2" in prompt(out, "q1", 3, "agent2")[-1]["content"]  # round 2's only
    (q1,) = [d for d in result.debates if d.item_id == "q1"]
    notes = q1.rounds[1].extra["intervention"]
    assert [n["replaced"] for n in notes] == [["agent1"], ["agent1"]]
    assert notes[0]["read"] == [["agent1", 11], ["agent3", 11]] and notes[0]["instead_of"][0] == ["agent1", 10]
    event = next(e for e in events(out) if (e["item_id"], e["round"], e["agent"]) == ("q1", 2, "agent2"))
    assert event["intervention"][0]["replaced"] == ["agent1"]
    text = as_text(entries(events(out), q1.debate_id))
    assert "[intervention replace] read: [['agent1', 11], ['agent3', 11]]" in text


def test_replacing_by_the_correct_answer_or_another_agents_reply(parent, tmp_path):
    fork(parent, at_round=2, out=tmp_path / "right", intervention=replace("agent2", by="correct"), cache=False,
         progress=False)
    assert STAND_IN.format(answer=10) in prompt(tmp_path / "right", "q1", 2, "agent3")[-1]["content"]
    fork(parent, at_round=2, out=tmp_path / "other", intervention=replace("agent2", by="agent3"), cache=False,
         progress=False)
    shown = prompt(tmp_path / "other", "q1", 2, "agent1")[-1]["content"]
    assert shown.count("agent3 reasons in round 1") == 2 and "agent2 reasons" not in shown


def test_an_adversarial_agent_is_told_to_argue_for_the_wrong_answer_from_the_fork_round(parent, tmp_path):
    out = tmp_path / "fork"
    fork(parent, at_round=2, out=out, intervention=adversarial("agent2"), cache=False, progress=False)
    told = ADVERSARY.format(answer=31)  # q3: a three-way tie of wrong answers goes to the first given
    for round in (2, 3):
        assert prompt(out, "q3", round, "agent2")[0]["content"].endswith(told)
        assert told not in json.dumps(prompt(out, "q3", round, "agent1"))
    assert told not in prompt(out, "q3", 1, "agent2")[0]["content"]


def test_a_swapped_model_answers_one_agent_from_the_fork_round(parent, tmp_path):
    other = scripted.register("fork-other", fn=reply)
    fork(parent, at_round=2, out=tmp_path / "fork", intervention=swap_model("agent3", other), cache=False,
         progress=False)
    assert {(r.round, r.agent) for r in scripted.get("fork-other").requests} == {(2, "agent3"), (3, "agent3")}
    assert {r.agent for r in asked()} == {"agent1", "agent2"}
    models = {(e["round"], e["agent"]): e["model"] for e in events(tmp_path / "fork") if e["item_id"] == "q1"}
    assert models[2, "agent3"] == other and models[1, "agent3"] == models[2, "agent1"] == "scripted/fork-parent"


def test_a_persona_and_a_fork_wide_model_from_the_fork_round(parent, tmp_path):
    other = scripted.register("fork-everyone", fn=reply)
    out = tmp_path / "fork"
    fork(parent, at_round=3, out=out, intervention=persona("agent1", "a sceptical accountant"), model=other,
         cache=False, progress=False)
    assert "play the following role, in place of any role described above: a sceptical accountant" in \
        prompt(out, "q1", 3, "agent1")[0]["content"]
    assert "accountant" not in json.dumps(prompt(out, "q1", 3, "agent2"))
    assert not asked() and {r.round for r in scripted.get("fork-everyone").requests} == {3}
    assert json.loads((out / "run.json").read_text())["parent"]["model"] == other


def test_a_hidden_agent_checks_its_own_answer_while_the_others_read_as_before(parent, tmp_path):
    out = tmp_path / "fork"
    result = fork(parent, at_round=2, out=out, intervention=hide("agent3"), cache=False, progress=False)
    assert prompt(out, "q1", 2, "agent3")[-1]["content"].startswith("Check your previous answer once more")
    assert "agent3 reasons in round 1" in prompt(out, "q1", 2, "agent1")[-1]["content"]
    (q1,) = [d for d in result.debates if d.item_id == "q1"]
    assert q1.rounds[1].extra["read"] == {"agent1": ["agent2", "agent3"], "agent2": ["agent1", "agent3"],
                                          "agent3": []}


def test_reordered_and_anonymised_replies(parent, tmp_path):
    out = tmp_path / "reversed"
    fork(parent, at_round=2, out=out, intervention=reorder("reverse", agent="agent1"), cache=False, progress=False)
    shown = prompt(out, "q1", 2, "agent1")[-1]["content"]
    assert shown.index("agent3 reasons") < shown.index("agent2 reasons")
    shown = prompt(out, "q1", 2, "agent2")[-1]["content"]
    assert shown.index("agent1 reasons") < shown.index("agent3 reasons")  # only agent1's view changed
    out = tmp_path / "anonymous"
    fork(parent, at_round=2, out=out, intervention=anonymise(), cache=False, progress=False)
    shown = prompt(out, "q1", 2, "agent2")[-1]["content"]
    assert "another agent reasons in round 1" in shown and "agent1 reasons" not in shown


def test_a_users_own_registered_intervention(parent, tmp_path):
    @intervention("truth_as")
    def truth_as(agent: str) -> Intervention:
        """The others read the correct answer, bare, as `agent`'s reply."""

        def show(ctx, viewer, replies):
            return [Shown(agent, f"Answer: {ctx.truth}", ctx.truth) if r.author == agent else r for r in replies]

        return Intervention(show=show, agents=(agent,))

    out = tmp_path / "fork"
    fork(parent, at_round=2, out=out, intervention=make("truth_as", {"agent": "agent3"}), cache=False,
         progress=False)
    assert "--- reply of another agent ---\nAnswer: 10\n" in prompt(out, "q1", 2, "agent1")[-1]["content"]
    described = json.loads((out / "run.json").read_text())["parent"]["intervention"]
    assert described == {"name": "truth_as", "params": {"agent": "agent3"},
                         "source": {"kind": "module", "module": __name__}}


USER_FILE = '''
from debatekit.sweep.forks import Intervention, intervention


@intervention("doubt")
def doubt(agent: str, text: str = "Doubt every number you are shown."):
    """Tell `agent` to doubt."""
    return Intervention(instruction=lambda ctx, who: text if who == agent else None, agents=(agent,))
'''


def test_a_users_intervention_from_a_file_through_the_command_line(parent, tmp_path, capsys):
    path = tmp_path / "mine.py"
    path.write_text(USER_FILE)
    out = tmp_path / "fork"
    assert main(["fork", str(parent), "--at-round", "2", "--out", str(out), "--intervention", f"{path}:doubt",
                 "--with", "agent=agent1", "--no-cache", "--quiet"]) == 0
    assert prompt(out, "q1", 2, "agent1")[0]["content"].endswith("Doubt every number you are shown.")
    described = json.loads((out / "run.json").read_text())["parent"]["intervention"]
    assert described["params"] == {"agent": "agent1", "text": "Doubt every number you are shown."}
    assert described["source"]["kind"] == "file" and "the fork against its parent" in capsys.readouterr().out


def test_the_command_line_fork_writes_its_parent_and_pairs_with_it(parent, tmp_path, capsys):
    out = tmp_path / "fork"
    assert main(["fork", str(parent), "--at-round", "2", "--out", str(out), "--replace", "agent1=wrong",
                 "--no-cache", "--quiet"]) == 0
    link = json.loads((out / "run.json").read_text())["parent"]
    assert link["at_round"] == 2 and link["intervention"]["params"] == {"agent": "agent1", "by": "wrong"}
    assert "pairs" in capsys.readouterr().out and {r.round for r in asked()} == {2, 3}


@pytest.mark.parametrize("argv, message", [
    (["--at-round", "4"], "round 4 is out of range: a fork of this society_of_mind run begins at round 2 to 3"),
    (["--at-round", "1"], "round 1 is out of range"),
    (["--at-round", "5", "--set", "rounds=5"], "round 5 is out of range: a fork of this society_of_mind run begins at "
                                               "round 2 to 4 (the fork runs to round 5 and plays back at most the "
                                               "parent's 3)"),
    (["--at-round", "2", "--set", "rounds=1"], "a fork begins at round 2, and its 'rounds' parameter is 1"),
    (["--at-round", "2", "--set", "agents=4"], "a fork keeps its parent's agents (3); the parent recorded no round "
                                               "before 2 for agents=4"),
    (["--at-round", "2", "--hide", "agent9"], "agent 'agent9' is not an agent of"),
    (["--at-round", "2", "--replace", "agent1=agent7"], "agent 'agent7' is not an agent of"),
    (["--at-round", "2", "--intervention", "nope"], "unknown intervention 'nope'; available: adversarial,"),
    (["--at-round", "2", "--intervention", "hide", "--with", "who=agent1"], "intervention 'hide', parameter"),
    (["--at-round", "2", "--replace", "agent1"], "--replace 'agent1' is not AGENT=VALUE"),
    (["--at-round", "2", "--replace", "agent1=agent1"], "agent1 by itself changes nothing"),
    (["--at-round", "2", "--swap-model", "agent1=scripted/none-such"], "no scripted model named 'none-such'"),
    (["--at-round", "2", "--with", "agent=agent1"], "--with sets a parameter of --intervention NAME"),
])
def test_bad_input_is_one_line_naming_the_problem(parent, tmp_path, capsys, argv, message):
    assert main(["fork", str(parent), "--out", str(tmp_path / "fork"), "--quiet", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("debatekit: error:") and message in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "fork").exists() and not asked()


def test_show_names_a_forks_parent_round_and_change(parent, tmp_path, monkeypatch):
    from debatekit.cli.show import show

    fork(parent, at_round=2, out=tmp_path / "fork", intervention=replace("agent1", by="wrong"), cache=False,
         progress=False, resample=3)
    monkeypatch.chdir(tmp_path)
    assert show("fork").startswith("fork of parent at round 2: replace agent=agent1 by=wrong, resample 3\n\nitem")
    assert not show("parent").startswith("fork of")


def test_a_fork_may_extend_its_parents_debates_by_a_round(parent, tmp_path):
    from debatekit.cli.show import show

    result = fork(parent, at_round=4, out=tmp_path / "fork", params={"rounds": 4}, cache=False, progress=False)
    assert result.record.parent.params == {"rounds": 4}  # what it set otherwise, in run.json and in show
    assert show(tmp_path / "fork").splitlines()[0].endswith("at round 4: no change, set rounds=4")
    assert {(r.item_id, r.round) for r in asked()} == {("q1", 4), ("q3", 4)}
    assert [len(d.rounds) for d in sorted(result.debates, key=lambda d: d.item_id)] == [4, 1, 4]


def test_a_fork_is_not_written_inside_its_parents_folder(parent, capsys):
    assert main(["fork", str(parent), "--at-round", "2", "--out", str(parent / "sub"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"--out {parent / 'sub'} is inside the parent run's folder" in err and len(err.strip().splitlines()) == 1
    assert not (parent / "sub").exists() and not asked()
    assert main(["fork", str(parent), "--at-round", "2", "--out", str(parent), "--quiet"]) == 2
    assert f"--out {parent} is the parent run's folder: a fork is a run folder of its own" in capsys.readouterr().err


def test_an_intervention_on_what_agents_read_is_refused_where_the_protocol_does_not_show_through_the_engine(
        parent, tmp_path, monkeypatch):
    from debatekit import registry

    monkeypatch.setattr(registry.get("society_of_mind"), "shows_replies", False)
    for change in (replace("agent1", by="wrong"), hide("agent1"), anonymise(), reorder("reverse")):
        with pytest.raises(ForkError, match=f"intervention '{change.name}' changes the replies an agent reads, and "
                                            "protocol 'society_of_mind' does not show them through Debate.shown"):
            fork(parent, at_round=2, out=tmp_path / change.name, intervention=change, progress=False)
        assert not (tmp_path / change.name).exists()
    fork(parent, at_round=2, out=tmp_path / "adv", intervention=adversarial("agent1"), cache=False, progress=False)


def test_the_protocols_that_say_they_show_replies_through_the_engine_are_those_that_do():
    import sys

    from debatekit import registry

    for name, spec in registry.available().items():
        if spec.source["kind"] != "builtin":
            continue
        path = Path(sys.modules[spec.factory.__module__].__file__)
        files = path.parent.glob("*.py") if path.name == "__init__.py" else [path]  # a package: all its files
        calls = any("debate.shown(" in f.read_text() for f in files)
        assert spec.shows_replies == calls, name


def test_a_folder_that_is_not_a_run_is_named(tmp_path, capsys):
    assert main(["fork", str(tmp_path), "--at-round", "2", "--out", str(tmp_path / "fork")]) == 2
    assert f"debatekit: error: {tmp_path} is not a run folder (no run.json)" in capsys.readouterr().err


def test_a_fork_whose_parameters_change_an_earlier_prompt_fails_naming_the_first_call(parent, tmp_path):
    with pytest.raises(ForkError, match=r"item q\d, agent\d answer round 1: no reply was recorded for this prompt, "
                                        r"in the record of .*parent; .*or its parameters now ask otherwise"):
        fork(parent, at_round=2, out=tmp_path / "fork", params={"answer_format": "json"}, cache=False,
             progress=False)
    assert not asked()  # it stopped at the first call it could not play back: nothing asked of the model
    assert run_debates(tmp_path / "fork") == []


def _rewrite_events(folder: Path, change) -> None:
    """Each of the run's call events through `change` (None drops it)."""
    kept = [e for e in map(change, events(folder)) if e is not None]
    (folder / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in kept))


def test_a_call_missing_from_the_parents_record_stops_the_fork_before_that_debate_is_recorded(parent, tmp_path):
    _rewrite_events(parent, lambda e: None if (e["item_id"], e["agent"], e["round"]) == ("q3", "agent1", 1) else e)
    out = tmp_path / "fork"
    with pytest.raises(ForkError, match="item q3, agent1 answer round 1: no reply was recorded for this prompt"):
        fork(parent, at_round=2, out=out, cache=False, progress=False)
    assert "q3" not in {d.item_id for d in run_debates(out)}  # never recorded as a debate of the fork
    record = json.loads((out / "run.json").read_text())
    assert record["status"] == "interrupted" and "not_recorded" in record["reason"]
    with pytest.raises(ForkError, match="item q3, agent1 answer round 1"):  # a resume stops there again
        fork(parent, at_round=2, out=out, cache=False, progress=False, resume=True)
    assert "q3" not in {d.item_id for d in run_debates(out)}


def test_a_parent_reply_that_no_longer_reads_is_played_back_as_the_parent_read_it(parent, tmp_path):
    def unreadable(e):  # a reply the run read, which today's reader cannot
        if (e["item_id"], e["agent"], e["round"]) == ("q1", "agent2", 1):
            e = {k: v for k, v in e.items() if k != "replies"} | {"text": "I think the answer is eleven."}
        return e

    _rewrite_events(parent, unreadable)
    result = fork(parent, at_round=2, out=tmp_path / "fork", cache=False, progress=False)
    assert {r.round for r in asked()} == {2, 3}
    (q1,) = [d for d in result.debates if d.item_id == "q1"]
    assert q1.rounds[0].answers == {"agent1": 10, "agent2": 11, "agent3": 11}  # the parent's reading, not today's
    played = next(e for e in events(tmp_path / "fork") if (e["item_id"], e["agent"], e["round"]) == ("q1", "agent2", 1))
    assert played["output"]["answer"] == 11 and not played["faults"] and played["cache_hit"]


def test_a_parent_call_repaired_in_the_run_is_played_back_with_its_repair_though_today_reads_it_first(
        tmp_path, arithmetic_file, monkeypatch):
    from debatekit.models import reading as reader

    def prose_once(req):
        repairing = "Your previous reply" in req.messages[-1]["content"]
        if (req.item_id, req.agent, req.round) == ("q1", "agent2", 1) and not repairing:
            return "I think it is eleven."
        return reply(req)

    model = scripted.register("fork-parent", fn=prose_once)
    run(RunConfig(protocol="society_of_mind", dataset=str(arithmetic_file), model=model, params={"rounds": 2}),
        tmp_path / "parent", progress=False)
    repaired = [e for e in events(tmp_path / "parent") if e["repairs"]]
    assert [(e["item_id"], e["agent"], e["round"], e["output"]["answer"]) for e in repaired] == [("q1", "agent2", 1, 11)]
    reading = reader.parse

    def lenient(output, text, free_text, ending):  # today's reader reads the prose the run had repaired
        if "eleven" in text:
            return output.model_validate({"reasoning": text, "answer": 12})
        return reading(output, text, free_text, ending)

    monkeypatch.setattr(reader, "parse", lenient)
    scripted.register("fork-parent", fn=prose_once)
    result = fork(tmp_path / "parent", at_round=2, out=tmp_path / "fork", cache=False, progress=False)
    assert {r.round for r in asked()} == {2}  # the repair too came from the record
    (q1,) = [d for d in result.debates if d.item_id == "q1"]
    assert q1.rounds[0].answers["agent2"] == 11
    played = next(e for e in events(tmp_path / "fork") if (e["item_id"], e["agent"], e["round"]) == ("q1", "agent2", 1))
    assert [r["text"] for r in played["repairs"]] == ["I think it is eleven."] and played["faults"] == ["parse"]


def test_a_parent_call_repaired_before_repairs_were_recorded_plays_back_the_reply_it_ended_with(parent, tmp_path):
    def repaired_long_ago(e):  # as an older run wrote it: a repair counted, the reply it repaired not kept
        if (e["item_id"], e["agent"], e["round"]) == ("q1", "agent2", 1):
            e = {k: v for k, v in e.items() if k not in ("repairs", "replies")}
            e["parse_failures"] = 1
        return e

    _rewrite_events(parent, repaired_long_ago)
    result = fork(parent, at_round=2, out=tmp_path / "fork", cache=False, progress=False)
    assert {r.round for r in asked()} == {2, 3}
    (q1,) = [d for d in result.debates if d.item_id == "q1"]
    assert q1.rounds[0].answers == {"agent1": 10, "agent2": 11, "agent3": 11}
    assert "agent2 reasons in round 1" in prompt(tmp_path / "fork", "q1", 2, "agent1")[-1]["content"]


def test_a_factory_that_returns_no_intervention_is_an_error():
    @intervention("broken")
    def broken():
        return "nothing"

    with pytest.raises(InterventionError, match="intervention 'broken' returned str, not an Intervention"):
        broken()


def test_a_fork_resumes_only_as_the_same_fork(parent, tmp_path):
    out = tmp_path / "fork"
    fork(parent, at_round=2, out=out, intervention=hide("agent1"), cache=False, progress=False)
    again = fork(parent, at_round=2, out=out, intervention=hide("agent1"), resume=True, progress=False)
    assert len(again.debates) == 3 and json.loads((out / "run.json").read_text())["parent"]["at_round"] == 2
    with pytest.raises(ForkError, match="not a fork of the same run, round and intervention"):
        fork(parent, at_round=2, out=out, intervention=hide("agent2"), resume=True, progress=False)


def test_a_fork_recorded_before_its_parent_block_kept_params_resumes(parent, tmp_path):
    out = tmp_path / "fork"
    fork(parent, at_round=2, out=out, params={"stop_on_agreement": False}, cache=False, progress=False, limit=1)
    record = json.loads((out / "run.json").read_text())
    assert record["parent"].pop("params") == {"stop_on_agreement": False}
    (out / "run.json").write_text(json.dumps(record))  # as a fork written before the field existed
    again = fork(parent, at_round=2, out=out, params={"stop_on_agreement": False}, resume=True, progress=False)
    assert len(again.debates) == 3


def test_a_resume_records_the_parent_as_seen_from_where_the_fork_is_now(parent, tmp_path):
    out = tmp_path / "fork"
    fork(parent, at_round=2, out=out, intervention=hide("agent1"), cache=False, progress=False, limit=1)
    moved = tmp_path / "elsewhere" / "forks"
    moved.mkdir(parents=True)
    out.rename(moved / "fork")
    again = fork(parent, at_round=2, out=moved / "fork", intervention=hide("agent1"), resume=True, progress=False)
    link = json.loads((moved / "fork" / "run.json").read_text())["parent"]
    assert len(again.debates) == 3 and link["run"] == "../../../parent"
    assert (moved / "fork" / link["run"]).resolve() == parent.resolve()


# --- the wrong answer ----------------------------------------------------------------------------

class Item:
    def __init__(self, answer, choices=()):
        self.id, self.answer, self.choices = "x", answer, list(choices)


def parent_round(*answers):
    from debatekit.records.schemas import DebateRecord, RoundRecord

    return DebateRecord(run_id="r", debate_id="d", item_id="x", protocol="society_of_mind", status="ok",
                        rounds=[RoundRecord(round=1, answers={f"agent{k + 1}": a for k, a in enumerate(answers)})])


@pytest.mark.parametrize("truth, choices, answers, wrong", [
    (10, (), (12, 11, 11, 10), 11),              # the most common wrong answer
    (10, (), (12, 11, 10), 12),                  # a tie: the one given first
    (10, (), (10, None, 10.0), 11),              # none wrong: the truth + 1
    (2.5, (), (), 3.5),
    ("42", (), (), 43),                          # a number written as text
    ("yes", (), ("yes",), "no"),
    (True, (), (), "no"),
    ("B", ("red", "blue", "green"), ("B", "b"), "C"),  # the next option letter
    ("C", ("red", "blue", "green"), (), "A"),    # after the last, the first
    ("A", ("studio", "studio", "flat"), (), "C"),  # an option that reads as the truth's is the truth
    ("B", ("studio", "flat", "studio"), ("C",), "C"),  # the parent's wrong answer, as it was given
    ("paris", (), (), None),                     # free text: no fallback
    (None, (), (3,), None),                      # no truth: nothing is wrong
])
def test_the_wrong_answer_is_the_parents_most_common_wrong_one_else_the_fallback(truth, choices, answers, wrong):
    from debatekit.sweep.forks import wrong_answer

    assert wrong_answer(Item(truth, choices), parent_round(*answers) if answers else None) == wrong


def test_an_intervention_that_needs_a_wrong_answer_fails_on_an_item_without_one(tmp_path):
    path = tmp_path / "text.jsonl"
    path.write_text(json.dumps({"id": "t1", "question": "Capital of France?", "answer": "paris"}) + "\n")
    model = scripted.register("fork-text", fn=lambda req: "It is Paris.\nAnswer: paris")
    run(RunConfig(protocol="society_of_mind", dataset=str(path), model=model,
                  params={"rounds": 2, "stop_on_agreement": False}), tmp_path / "parent", progress=False)
    with pytest.raises(ForkError, match="item t1 has no wrong answer for intervention 'adversarial'"):
        fork(tmp_path / "parent", at_round=2, out=tmp_path / "fork", intervention=adversarial("agent1"),
             progress=False)


def test_a_run_of_several_seeds_forks_seed_by_seed(tmp_path, arithmetic_file):
    model = scripted.register("fork-seeds", fn=reply)
    run(RunConfig(protocol="society_of_mind", dataset=str(arithmetic_file), model=model, limit=1, seed=5, seeds=2,
                  params={"rounds": 2}), tmp_path / "parent", progress=False)
    scripted.register("fork-seeds", fn=reply)
    result = fork(tmp_path / "parent", at_round=2, out=tmp_path / "fork", cache=False, progress=False)
    assert sorted((d.item_id, d.seed) for d in result.debates) == [("q1", 5), ("q1", 6)]
    assert {(r.round, r.call.get("seed")) for r in scripted.get("fork-seeds").requests} == {(2, 5), (2, 6)}


def test_the_conformity_analysis_reads_a_real_forks_round_and_planted_agent(parent, tmp_path):
    from debatekit import analysis

    fork(parent, at_round=2, out=tmp_path / "fork", intervention=replace("agent1", by="correct"), cache=False,
         progress=False)
    assert analysis.fork_parent(tmp_path / "fork")["at_round"] == 2
    effect = analysis.fork_effect(tmp_path / "fork", parent, pushed="truth")
    explicit = analysis.follow_rate(tmp_path / "fork", parent, "truth", fork_round=2, agents=["agent2", "agent3"])
    assert effect.follow.equals(explicit)  # round and planted agent came from the fork's run.json
    assert effect.accuracy.iloc[0].pairs == 3


def test_an_agent_that_takes_the_answer_it_is_shown_is_counted_as_following_it(parent, tmp_path):
    """Scripted followers: agent2 and agent3 give the stand-in's answer whenever their prompt shows it, their
    own otherwise. The correct answer shown as agent1's round-1 reply is followed by all four agents that did not
    have it (q1's and q3's agent2 and agent3), and by none in the parent; agent1, who read its own reply, is not
    counted."""
    said = STAND_IN.split("{answer}")[0]

    def follower(req) -> dict:
        shown = req.prompt.rsplit(said, 1)
        if req.agent != "agent1" and len(shown) == 2:
            return {"reasoning": "I take the result shown", "answer": int(shown[1].split(".")[0])}
        return reply(req)

    from debatekit import analysis

    scripted.register("fork-parent", fn=follower)
    fork(parent, at_round=2, out=tmp_path / "fork", intervention=replace("agent1", by="correct"), cache=False,
         progress=False)
    follow = analysis.follow_rate(tmp_path / "fork", parent, "truth").set_index("round")
    assert follow.loc[2, ["items", "agents", "left_out", "fork_followed", "control_followed"]].tolist() == [2, 4, 0, 4, 0]
    assert follow.loc[2, "difference"] == 1.0
    effect = analysis.fork_accuracy(tmp_path / "fork", parent).iloc[0]
    # q1's final majority turns from 11 to the truth 10; q3's from none (31, 32, 33) to 30
    assert (effect.only_config, effect.only_baseline) == (2, 0)


def test_a_fork_of_the_first_items_goes_on_to_the_rest_when_resumed(parent, tmp_path):
    first = fork(parent, at_round=2, out=tmp_path / "fork", cache=False, progress=False, limit=1)
    assert {d.item_id for d in first.debates} == {"q1"} and {r.item_id for r in asked()} == {"q1"}
    assert json.loads((tmp_path / "fork" / "run.json").read_text())["config"]["limit"] == 1  # the fork's --limit
    q1_calls = len(asked())
    rest = fork(parent, at_round=2, out=tmp_path / "fork", cache=False, progress=False, resume=True)
    assert {d.item_id for d in rest.debates} == {"q1", "q2", "q3"}
    assert [r.item_id for r in asked()].count("q1") == q1_calls  # q1 was not asked again
    assert {r.item_id for r in asked()} == {"q1", "q3"}  # q2 had ended at round 1: no call
    forked = json.loads((tmp_path / "fork" / "run.json").read_text())
    assert forked["config"]["limit"] is None and [r["limit"] for r in forked["resumes"]] == [None]
    with pytest.raises(ForkError, match="at least 1"):
        fork(parent, at_round=2, out=tmp_path / "other", limit=0, progress=False)


def test_a_forks_concurrency_is_its_own_and_a_resume_may_change_it(parent, tmp_path, capsys):
    """--concurrency 1 runs one debate at a time (each item's calls in one block); the default runs them as
    the parent did (4 at once: the items' calls interleave); either way each call is asked with the same
    messages under the same seed (a model that batches calls may still answer them differently)."""
    def blocks(requests) -> list[str]:
        return [key for i, key in enumerate(r.item_id for r in requests) if i == 0 or requests[i - 1].item_id != key]

    def calls(requests) -> list[tuple]:
        return sorted((r.item_id, r.round, r.agent, r.params.get("seed"), json.dumps(r.messages)) for r in requests)

    assert main(["fork", str(parent), "--at-round", "2", "--out", str(tmp_path / "one"), "--no-cache", "--quiet",
                 "--concurrency", "1"]) == 0
    one = asked()
    assert blocks(one) == ["q1", "q3"]
    assert json.loads((tmp_path / "one" / "run.json").read_text())["config"]["concurrency"] == 1
    scripted.register("fork-parent", fn=reply)
    together = fork(parent, at_round=2, out=tmp_path / "together", cache=False, progress=False)
    assert len(blocks(asked())) > 2 and together.record.config.concurrency == 4
    assert calls(asked()) == calls(one)
    scripted.register("fork-parent", fn=reply)
    fork(parent, at_round=2, out=tmp_path / "grown", cache=False, progress=False, limit=1, concurrency=1)
    grown = fork(parent, at_round=2, out=tmp_path / "grown", cache=False, progress=False, resume=True, concurrency=2)
    assert calls(asked()) == calls(one) and len(grown.debates) == len(together.debates)
    with pytest.raises(SystemExit, match="2"):
        main(["fork", str(parent), "--at-round", "2", "--out", str(tmp_path / "x"), "--concurrency", "0"])
    assert "--concurrency: must be at least 1, got 0" in capsys.readouterr().err


def test_a_fork_that_changes_nothing_repeats_the_parents_seeds_unless_told_to_resample(parent, tmp_path):
    def seeds_by_place(requests) -> dict:
        return {(r.item_id, r.round, r.agent): r.params.get("seed") for r in requests}

    scripted.register("fork-parent", fn=reply)
    run(RunConfig(protocol="society_of_mind", dataset=str(parent.parent / "arith.jsonl"), model="scripted/fork-parent",
                  params={"rounds": 3}, cache=False), tmp_path / "again", progress=False)
    original = seeds_by_place(asked())  # the parent's calls, asked again under its run seed
    scripted.register("fork-parent", fn=reply)
    fork(parent, at_round=2, out=tmp_path / "same", cache=False, progress=False)
    same = seeds_by_place(asked())
    assert same and all(same[place] == original[place] for place in same)
    scripted.register("fork-parent", fn=reply)
    fork(parent, at_round=2, out=tmp_path / "resampled", cache=False, progress=False, resample=1)
    resampled = seeds_by_place(asked())
    assert resampled.keys() == same.keys() and all(resampled[p] != same[p] for p in same)
    assert json.loads((tmp_path / "resampled" / "run.json").read_text())["parent"]["resample"] == 1


def test_anonymise_scrubs_an_agents_name_as_replies_write_it():
    from debatekit.sweep.forks.interventions import scrub

    text = "Agent_3 said 12, agent 3 agreed, AGENT3 and agent-3 too; agent13 and agent 33 are others."
    assert scrub(text, {"agent3"}) == ("another agent said 12, another agent agreed, another agent and another "
                                       "agent too; agent13 and agent 33 are others.")
    assert scrub("the critic and critics", {"critic"}) == "the another agent and critics"


def test_a_parent_recorded_with_a_relative_dataset_path_is_forked_from_elsewhere_with_dataset(
        tmp_path, arithmetic_file, monkeypatch):
    data = tmp_path / "data"
    data.mkdir()
    (data / "arith.jsonl").write_bytes(Path(arithmetic_file).read_bytes())
    monkeypatch.chdir(data)
    model = scripted.register("fork-parent", fn=reply)
    run(RunConfig(protocol="society_of_mind", dataset="arith.jsonl", model=model, params={"rounds": 2}),
        tmp_path / "parent", progress=False)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    with pytest.raises(ForkError, match=r"arith.jsonl.*\(give the parent's dataset file with --dataset PATH\)"):
        fork(tmp_path / "parent", at_round=2, out=tmp_path / "lost", cache=False, progress=False)
    assert not (tmp_path / "lost").exists()
    result = fork(tmp_path / "parent", at_round=2, out=tmp_path / "fork", cache=False, progress=False,
                  dataset="../data/arith.jsonl", limit=1)
    assert len(result.debates) == 1
    monkeypatch.chdir(data)  # a resume may name the same file another way
    again = fork(tmp_path / "parent", at_round=2, out=tmp_path / "fork", progress=False, dataset="arith.jsonl",
                 resume=True)
    assert len(again.debates) == 3
    (data / "other.jsonl").write_text((data / "arith.jsonl").read_text().replace('"answer": 10', '"answer": 11'))
    with pytest.raises(ForkError, match="changed since the run"):
        fork(tmp_path / "parent", at_round=2, out=tmp_path / "other", cache=False, progress=False,
             dataset="../data/other.jsonl")


@pytest.mark.parametrize("change", ["wrong", "file"])
def test_a_fork_plays_back_from_its_own_record_with_its_change_and_resampled_seeds(parent, tmp_path, change):
    """rescore and rerecord run a fork's debates again as the fork ran them: the intervention made again
    from run.json (built in, or from the user's file), the parent's wrong answers, the resampled seeds."""
    from debatekit.sweep.rerecord import rerecord
    from debatekit.sweep.rescore import rescore

    out = tmp_path / "fork"
    if change == "file":
        (tmp_path / "mine.py").write_text(USER_FILE.replace('"doubt"', '"doubt_more"'))  # a name of its own
        made = make(f"{tmp_path / 'mine.py'}:doubt_more", {"agent": "agent1"})  # in this test process
    else:
        made = replace("agent1", by="wrong")
    fork(parent, at_round=2, out=out, intervention=made, cache=False, progress=False, resample=1)
    forked = len(asked())
    if change == "file":  # forgotten, as in a new process: the play-back imports the file again
        interventions._registered.pop("doubt_more")
        interventions._loaded.difference_update({k for k in interventions._loaded if "mine.py@" in k})
    result = rescore(out)
    assert (result.debates, result.kept, result.changed, result.readings) == (3, [], [], [])
    assert result.calls == 9 + 6 + 6  # round 1 of each item, rounds 2 and 3 of the two that had not agreed
    check = rerecord(out, ask_model=False)
    assert not check.stale and not check.asked
    assert len(asked()) == forked  # neither asked the model


def test_a_fork_whose_parent_has_moved_is_not_played_back_and_says_where_it_looked(parent, tmp_path, capsys):
    out = tmp_path / "fork"
    fork(parent, at_round=2, out=out, intervention=replace("agent1", by="wrong"), cache=False, progress=False)
    parent.rename(tmp_path / "elsewhere")
    assert main(["rescore", str(out)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "forks the run in ../parent, which is not there" in err


def test_a_fork_plays_back_with_the_wrong_answers_it_was_made_with_though_its_parent_is_read_again(parent, tmp_path):
    """The wrong answer comes from the fork's own round 1 (the parent's as the fork played it back): a parent
    whose round-1 answers were read otherwise since (a `rescore --write` with a mended reader) changes none."""
    from debatekit.sweep.rescore import rescore

    out = tmp_path / "fork"
    fork(parent, at_round=2, out=out, intervention=replace("agent1", by="wrong"), cache=False, progress=False)
    lines = [json.loads(line) for line in (parent / "debates.jsonl").read_text().splitlines()]
    for d in lines:  # every wrong round-1 answer read as another number now: the parent's wrong answer moves
        d["rounds"][0]["answers"] = {a: v + 100 if v != {"q1": 10, "q2": 20, "q3": 30}[d["item_id"]] else v
                                     for a, v in d["rounds"][0]["answers"].items()}
    (parent / "debates.jsonl").write_text("".join(json.dumps(d) + "\n" for d in lines))
    result = rescore(out)
    assert (result.kept, result.changed, result.readings) == ([], [], [])


def test_a_forks_rounds_before_the_fork_round_keep_its_parents_readings(parent, tmp_path):
    """Round 1 of a fork is its parent's, as the parent read it: a rescore reads again only what the fork asked."""
    from debatekit.sweep.rescore import rescore

    out = tmp_path / "fork"
    fork(parent, at_round=2, out=out, cache=False, progress=False, resample=1)

    def read_otherwise(e):  # the parent's reader, at the time, read 12 where today's reads 11
        if (e["item_id"], e["agent"], e["round"]) == ("q1", "agent2", 1):
            e = e | {"output": e["output"] | {"answer": 12}}
        return e

    _rewrite_events(out, read_otherwise)
    result = rescore(out, write=True)
    assert (result.kept, result.readings) == ([], [])
    played = next(e for e in events(out) if (e["item_id"], e["agent"], e["round"]) == ("q1", "agent2", 1))
    assert played["output"]["answer"] == 12


def test_recording_a_fork_again_never_asks_the_model_for_a_round_before_the_fork_round(parent, tmp_path):
    from debatekit.records.trace import RunFolderError
    from debatekit.sweep.rerecord import rerecord

    out = tmp_path / "fork"
    fork(parent, at_round=2, out=out, cache=False, progress=False)
    _rewrite_events(out, lambda e: None if (e["item_id"], e["agent"], e["round"]) == ("q3", "agent1", 1) else e)
    forked = len(asked())
    assert rerecord(out, ask_model=False).stale
    with pytest.raises(RunFolderError, match=r"asks 1 call\(s\) before its fork round 2 that its parent did not "
                                             r"record \(first: agent1 answer round 1, item q3\)"):
        rerecord(out)
    assert len(asked()) == forked


def test_recording_a_fresh_fork_again_plays_it_back_once_and_writes_nothing(parent, tmp_path, monkeypatch):
    """The no-model check a fork gets first is the whole run when nothing is stale: not played back twice."""
    from debatekit.sweep import rerecord as module

    out = tmp_path / "fork"
    fork(parent, at_round=2, out=out, intervention=replace("agent1", by="wrong"), cache=False, progress=False)
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    runs, real = [], module.run
    monkeypatch.setattr(module, "run", lambda *a, **k: runs.append(k["intervention"]) or real(*a, **k))
    forked = len(asked())
    result = module.rerecord(out)
    assert not result.stale and not result.written and len(runs) == 1 and runs[0].at_round == 2
    assert len(asked()) == forked and {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before


def test_recording_a_fork_again_asks_the_model_only_for_what_it_lost_after_the_fork_round(parent, tmp_path):
    from debatekit.sweep.rerecord import rerecord

    out = tmp_path / "fork"
    fork(parent, at_round=2, out=out, intervention=replace("agent1", by="wrong"), cache=False, progress=False)
    lost = ("q1", "agent2", 2)
    _rewrite_events(out, lambda e: None if (e["item_id"], e["agent"], e["round"]) == lost else e)
    forked = len(asked())
    result = rerecord(out)
    assert result.stale and result.written and len(asked()) == forked + 1
    assert (asked()[-1].item_id, asked()[-1].agent, asked()[-1].round) == lost
    assert not rerecord(out, ask_model=False).stale
    shown = asked()[-1].messages[-1]["content"]  # asked again with the fork's change: the stand-in shown
    assert STAND_IN.format(answer=11) in shown and "agent1 reasons" not in shown


def test_a_fork_made_with_an_intervention_your_module_registered_imports_that_module_to_play_back(
        parent, tmp_path, monkeypatch):
    import sys

    from debatekit.sweep.rescore import rescore

    (tmp_path / "my_changes.py").write_text(USER_FILE.replace('"doubt"', '"doubt_module"'))
    monkeypatch.syspath_prepend(str(tmp_path))
    import my_changes

    out = tmp_path / "fork"
    fork(parent, at_round=2, out=out, intervention=my_changes.doubt(agent="agent2"), cache=False, progress=False)
    interventions._registered.pop("doubt_module")  # a new process, which has not imported it
    del sys.modules["my_changes"]
    assert rescore(out).kept == []
    assert "doubt_module" in interventions._registered


def test_a_fork_whose_intervention_file_changed_since_is_not_played_back(parent, tmp_path):
    from debatekit.sweep.rescore import rescore

    path = tmp_path / "mine.py"
    path.write_text(USER_FILE.replace('"doubt"', '"doubt_file"'))
    out = tmp_path / "fork"
    fork(parent, at_round=2, out=out, intervention=make(f"{path}:doubt_file", {"agent": "agent1"}), cache=False,
         progress=False)
    path.write_text(USER_FILE.replace('"doubt"', '"doubt_file"').replace("Doubt every", "Trust every"))
    with pytest.raises(ForkError, match=f"its file {path} changed since the fork"):
        rescore(out)


def test_a_fork_made_with_a_plugins_intervention_plays_back_only_with_that_plugin_version(parent, tmp_path, monkeypatch):
    import sys

    from debatekit.sweep.rescore import rescore

    site = tmp_path / "site"
    (site / "doubtpkg").mkdir(parents=True)
    (site / "doubtpkg" / "__init__.py").write_text(USER_FILE.replace('"doubt"', '"doubt_plugin"'))

    def install(version):
        for old in site.glob("doubtpkg-*.dist-info"):
            shutil.rmtree(old)
        info = site / f"doubtpkg-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: doubtpkg\nVersion: {version}\n")
        (info / "entry_points.txt").write_text("[debatekit.interventions]\ndoubt_plugin = doubtpkg\n")
        interventions._registered.pop("doubt_plugin", None)  # a new process: nothing of the plugin loaded yet
        interventions._loaded.discard("plugins")
        sys.modules.pop("doubtpkg", None)

    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(interventions, "_registered", dict(interventions._registered))  # the plugin gone after
    monkeypatch.setattr(interventions, "_loaded", set(interventions._loaded))
    install("0.3")
    made = make("doubt_plugin", {"agent": "agent1"})
    assert made.source["kind"] == "package" and made.source["version"] == "0.3"
    out = tmp_path / "fork"
    fork(parent, at_round=2, out=out, intervention=made, cache=False, progress=False)
    install("0.3")
    assert rescore(out).kept == []  # the same version: played back whole
    install("0.4")
    with pytest.raises(ForkError, match=r"made with doubtpkg 0\.3, and doubtpkg 0\.4 is installed \(install "
                                        r"doubtpkg 0\.3 to play it back\)$"):
        rescore(out)


def test_a_fork_made_from_a_file_beside_it_plays_back_after_the_three_move_together(parent, tmp_path):
    """run.json names the intervention's file as seen from the fork, as it names the parent: a study
    committed with its file plays back in any clone; a fork that recorded the file's absolute path
    still resumes with it."""
    from debatekit.sweep.rescore import rescore

    (tmp_path / "mine.py").write_text(USER_FILE.replace('"doubt"', '"doubt_beside"'))
    out = tmp_path / "fork"
    made = make(f"{tmp_path / 'mine.py'}:doubt_beside", {"agent": "agent1"})
    fork(parent, at_round=2, out=out, intervention=made, cache=False, progress=False, limit=2)
    recorded = json.loads((out / "run.json").read_text())["parent"]["intervention"]["source"]
    assert recorded["path"] == "../mine.py"
    moved = tmp_path / "clone"
    moved.mkdir()
    for name in ("parent", "fork", "mine.py"):
        (shutil.copytree if (tmp_path / name).is_dir() else shutil.copy)(tmp_path / name, moved / name)
    (tmp_path / "mine.py").unlink()  # only the clone's file is left
    assert rescore(moved / "fork").kept == []
    # an older fork, its file's path absolute on another machine: the same file, so the same fork to resume
    run_json = moved / "fork" / "run.json"
    record = json.loads(run_json.read_text())
    record["parent"]["intervention"]["source"]["path"] = "/home/someone/study/mine.py"
    run_json.write_text(json.dumps(record))
    again = make(f"{moved / 'mine.py'}:doubt_beside", {"agent": "agent1"})
    result = fork(moved / "parent", at_round=2, out=moved / "fork", intervention=again, cache=False, progress=False,
                  resume=True)
    assert sorted(d.item_id for d in result.debates) == ["q1", "q2", "q3"]
    (moved / "mine.py").write_text(USER_FILE.replace('"doubt"', '"doubt_beside"').replace("Doubt every", "Trust every"))
    edited = make(f"{moved / 'mine.py'}:doubt_beside", {"agent": "agent1"})
    with pytest.raises(ForkError, match="not a fork of the same run, round and intervention"):
        fork(moved / "parent", at_round=2, out=moved / "fork", intervention=edited, resume=True, progress=False)


def test_two_files_registering_one_intervention_name_clash_unless_they_are_copies(tmp_path):
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir(), (tmp_path / "c").mkdir()
    text = USER_FILE.replace('"doubt"', '"doubt_twice"')
    (tmp_path / "a" / "mine.py").write_text(text)
    (tmp_path / "b" / "mine.py").write_text(text)  # another checkout of the same study
    (tmp_path / "c" / "mine.py").write_text(text.replace("Doubt every", "Trust every"))
    for folder in ("a", "b", "a"):  # each records its own path, though the three are one intervention
        made = make(f"{tmp_path / folder / 'mine.py'}:doubt_twice", {"agent": "agent1"})
        assert made.instruction(None, "agent1") == "Doubt every number you are shown."
        assert made.source["path"] == str(tmp_path / folder / "mine.py")
    with pytest.raises(InterventionError, match="'doubt_twice' from .* clashes with the one from .*rename one"):
        make(f"{tmp_path / 'c' / 'mine.py'}:doubt_twice", {"agent": "agent1"})
