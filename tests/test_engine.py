import asyncio

import pytest
from pydantic import BaseModel

from debatekit import registry
from debatekit.datasets import Item
from debatekit.engine import Debate, Limits, Outcome, Phase, reply_budget
from debatekit.engine.stopping import STOP_REASONS, agreement, plateau
from debatekit.models import scripted
from debatekit.models.gateway import Gateway
from debatekit.models.model import resolve
from debatekit.records.schemas import RoundRecord, RunConfig
from debatekit.runner import run

ITEM = Item(id="i1", question="q?", answer=1)


class Num(BaseModel):
    answer: int


def debate(model, limits=None, events=None):
    return Debate(ITEM, gateway=Gateway(backoff=0.001), model=resolve(model), run_id="r", debate_id="d",
                  limits=limits or Limits(), on_event=(events.append if events is not None else None))


def test_gather_runs_agents_and_records_one_event_per_call(model_from):
    events = []
    model = model_from(lambda req: {"answer": int(req.agent[-1])})
    d = debate(model, events=events)

    async def go():
        return await d.gather(d.ask(f"a{i}", [{"role": "user", "content": "q"}], Num, phase="answer", round=1)
                              for i in (1, 2, 3))

    turns = asyncio.run(go())
    assert [t.parsed.answer for t in turns] == [1, 2, 3]
    assert sorted((e.agent, e.round, e.phase) for e in events) == [
        ("a1", 1, "answer"), ("a2", 1, "answer"), ("a3", 1, "answer")]
    assert d.usage.calls == 3 and d.usage.completion_tokens > 0


def test_the_call_event_keeps_the_unreadable_first_reply_and_the_repair_prompt():
    events = []
    model = scripted.register("e-repair", replies=["no idea", '{"answer": 3}'])
    d = debate(model, events=events)

    async def go():
        return await d.ask("a", [{"role": "user", "content": "q"}], Num, phase="p", round=1)

    turn = asyncio.run(go())
    assert turn.ok and turn.parsed.answer == 3
    (event,) = events
    assert event.text == '{"answer": 3}' and event.parse_failures == 1
    assert [r["text"] for r in event.repairs] == ["no idea"]
    assert event.repairs[0]["repair_prompt"] == scripted.get("e-repair").requests[1].messages[-1]["content"]


def test_each_call_gets_a_distinct_stable_seed(model_from):
    seeds = []
    model = model_from(lambda req: seeds.append(req.params["seed"]) or {"answer": 1})
    d = debate(model)
    asyncio.run(d.gather(d.ask(a, [{"role": "user", "content": "q"}], Num, phase="p", round=1) for a in "xyz"))
    d2 = debate(model)
    asyncio.run(d2.gather(d2.ask(a, [{"role": "user", "content": "q"}], Num, phase="p", round=1) for a in "xyz"))
    assert len(set(seeds[:3])) == 3 and seeds[:3] == seeds[3:]


def test_round_timeout_cuts_off_slow_agents_and_logs_them(model_from):
    events = []
    model = model_from(lambda req: scripted.Delayed(600, {"answer": 1}) if req.agent == "slow" else {"answer": 2})
    d = debate(model, Limits(round_timeout=5), events)
    turns = asyncio.run(d.gather(d.ask(a, [{"role": "user", "content": "q"}], Num, phase="critique", round=1)
                                 for a in ("fast", "slow")))
    assert turns[0].ok and not turns[1].ok and turns[1].completion.error_kind == "timeout"
    assert d.log == ["TIMEOUT: slow in critique"]
    assert {e.agent: e.error_kind for e in events} == {"fast": None, "slow": "timeout"}


def test_model_errors_become_failed_turns_not_exceptions():
    model = scripted.register("e-bad", replies=[scripted.Fault("bad_request")])
    d = debate(model)

    async def go():
        return await d.ask("a", [{"role": "user", "content": "q"}], Num, phase="p", round=1)

    turn = asyncio.run(go())
    assert not turn.ok and turn.error and d.usage.errors == 1


def test_round_loop_stops_on_agreement(model_from):
    d = debate(model_from(lambda req: {"answer": 1}))

    async def step(n):
        d.record_round(n, {"a": 1, "b": 1})

    assert asyncio.run(d.rounds(step, 5, stop=[agreement])) == "agreement"
    assert len(d.history) == 1 and d.stop_reason == "agreement"


def test_round_loop_runs_to_max_rounds_without_agreement(model_from):
    d = debate(model_from(lambda req: {"answer": 1}))

    async def step(n):
        d.record_round(n, {"a": 1, "b": 2})

    assert asyncio.run(d.rounds(step, 3, stop=[agreement])) == "max_rounds"
    assert [r.round for r in d.history] == [1, 2, 3]


def test_token_budget_stops_the_debate(model_from):
    d = debate(model_from(lambda req: {"answer": 1}), Limits(token_budget=3))

    async def step(n):
        await d.ask("a", [{"role": "user", "content": "q"}], Num, phase="p", round=n)
        d.record_round(n, {"a": 1})

    assert asyncio.run(d.rounds(step, 10)) == "budget"
    assert len(d.history) == 2  # 2 completion tokens per call: the budget of 3 is spent after 2 rounds


def test_debate_timeout_stops_rounds_and_cuts_calls(model_from):
    d = debate(model_from(lambda req: scripted.Delayed(0.4, {"answer": 1})), Limits(debate_timeout=1.0))

    async def step(n):
        await d.gather([d.ask("a", [{"role": "user", "content": "q"}], Num, phase="p", round=n)])
        d.record_round(n, {"a": 1})

    assert asyncio.run(d.rounds(step, 100)) == "timeout"
    assert 1 <= len(d.history) <= 3 and "TIMEOUT: a in p" in d.log  # the call running at the limit is cut


def test_plateau_rule():
    rule = plateau("score", 5)
    rounds = [RoundRecord(round=1, extra={"score": 80}), RoundRecord(round=2, extra={"score": 83})]
    assert rule(rounds[:1]) is None and rule(rounds) == "plateau"
    rounds[1].extra["score"] = 90
    assert rule(rounds) is None


def test_agreement_needs_every_agent_answered():
    assert agreement([RoundRecord(round=1, answers={"a": 1, "b": None})]) is None
    assert agreement([RoundRecord(round=1, answers={"a": "Yes", "b": " yes"})]) == "agreement"


def test_debate_writes_its_own_files_atomically(tmp_path):
    d = Debate(ITEM, gateway=Gateway(), model=resolve("scripted/schema"), run_id="r", debate_id="d",
               folder=tmp_path / "i1")
    path = d.write("debate_round1_nla.json", {"round": 1})
    assert path.read_text().strip().startswith("{") and '"round": 1' in path.read_text()
    assert Debate(ITEM, gateway=Gateway(), model=resolve("m"), run_id="r", debate_id="d").write("x.json", {}) is None


def test_ask_timeout_caps_the_whole_call_and_gather_timeout_caps_the_phase(model_from):
    from debatekit.models.providers import litellm_module

    litellm_module()  # imported before the clock matters
    d = debate(model_from(lambda req: scripted.Delayed(60 if req.agent == "slow" else 0.0, {"answer": 1})))
    q = [{"role": "user", "content": "q"}]

    async def go():
        assert (await d.ask("fast", q, Num, phase="warm-up")).ok  # litellm's first call sets itself up
        alone = await d.ask("slow", q, Num, phase="p", round=1, timeout=0.5)
        none_left = await d.ask("fast", q, Num, phase="p", round=1, timeout=0.0)
        phase = await d.gather([d.ask("slow", q, Num, phase="g", round=2), d.ask("fast", q, Num, phase="g", round=2)],
                               timeout=5.0)
        return alone, none_left, phase

    alone, none_left, (slow, fast) = asyncio.run(go())
    assert not alone.ok and alone.completion.error_kind == "timeout" and not none_left.ok
    assert fast.ok and not slow.ok
    assert d.log == ["TIMEOUT: slow in p", "TIMEOUT: fast in p", "TIMEOUT: slow in g"]


def _phases_debate(fire_after: str | None, fire_from: int = 1, max_rounds: int = 4, min_rounds: int = 1):
    """A debate whose rounds are three phases; a stop rule fires after `fire_after` from round `fire_from`."""
    d = Debate(ITEM, gateway=Gateway(), model=resolve("m"), run_id="r", debate_id="d")
    ran, state = [], {"phase": None, "round": 0}

    def phase(name):
        async def run(r):
            ran.append((r, name))
            state.update(phase=name, round=r)
            if name == "record":
                d.record_round(r, {"a": r})
        return run

    def rule(history):
        return "converged" if state["phase"] == fire_after and state["round"] >= fire_from else None

    reason = asyncio.run(d.rounds([Phase(phase("answer")), Phase(phase("critique"), when=lambda r: r < max_rounds),
                                   Phase(phase("record"))], max_rounds, stop=[rule], min_rounds=min_rounds))
    return reason, ran, d


def test_a_stop_rule_skips_the_rounds_optional_phases_but_not_the_required_ones():
    reason, ran, d = _phases_debate(fire_after="answer", fire_from=2)
    assert reason == "converged" == d.stop_reason
    assert ran == [(1, "answer"), (1, "critique"), (1, "record"), (2, "answer"), (2, "record")]
    assert [r.round for r in d.history] == [1, 2]


def test_an_optional_phase_runs_only_where_it_is_due():
    reason, ran, _ = _phases_debate(fire_after=None, max_rounds=2)
    assert reason == "max_rounds"
    assert ran == [(1, "answer"), (1, "critique"), (1, "record"), (2, "answer"), (2, "record")]


def test_stop_rules_are_not_asked_before_the_minimum_round():
    reason, ran, d = _phases_debate(fire_after="critique", fire_from=1, min_rounds=3)
    assert reason == "converged" and len(d.history) == 3
    assert ran[-3:] == [(3, "answer"), (3, "critique"), (3, "record")]


def test_the_engine_checks_the_budget_before_every_round_for_every_protocol():
    d = Debate(ITEM, gateway=Gateway(), model=resolve("m"), run_id="r", debate_id="d", limits=Limits(token_budget=10))
    ran = []

    async def spend(r):
        ran.append(r)
        d.usage.completion_tokens += 6

    assert asyncio.run(d.rounds([Phase(spend), Phase(spend, when=lambda r: True)], 5)) == "budget"
    assert ran == [1, 1] and d.limit_reached() == "budget"


@pytest.mark.parametrize("declared, status", [({}, "failed"), ({"gave_up": "the agents gave up"}, "ok")])
def test_a_debate_may_end_only_with_a_shared_or_declared_stop_reason(tmp_path, arithmetic_file, declared, status):
    def factory():
        async def solve(item, debate):
            debate.stop_reason = "gave_up"
            return Outcome(final_answer=1)

        return solve

    registry.protocol("_gives_up", stop_reasons=declared)(factory)
    try:
        result = run(RunConfig(protocol="_gives_up", dataset=str(arithmetic_file), limit=1, model="scripted/schema"),
                     tmp_path / "run", progress=False)
    finally:
        registry._protocols.pop("_gives_up", None)
    (debate,) = result.debates
    assert debate.status == status and debate.stop_reason == "gave_up"
    assert (debate.error or "").startswith("" if declared else "ProtocolError: protocol '_gives_up' ended a debate "
                                           "with the undeclared stop reason 'gave_up'")
    assert "gave_up" not in STOP_REASONS


def test_max_tokens_come_from_the_ask_then_the_reply_schema_then_the_limits(model_from):
    from typing import ClassVar

    class Budgeted(Num):
        max_reply_tokens: ClassVar[int] = 77

    sent = []
    model = model_from(lambda req: sent.append(req.params.get("max_tokens")) or {"answer": 1})
    d = debate(model, limits=Limits(max_tokens=300))

    async def go():
        talk = [{"role": "user", "content": "q"}]
        await d.ask("a", talk, Budgeted, phase="p1")
        await d.ask("a", talk, Budgeted, phase="p2", max_tokens=55)
        await d.ask("a", talk, Num, phase="p3")

    asyncio.run(go())
    assert sent == [77, 55, 300] and reply_budget(Budgeted) == 77 and reply_budget(None) is None


def test_a_fault_outside_the_calls_stops_the_phase_and_leaves_no_unretrieved_task(model_from):
    """A trace that cannot be written fails every call of the phase: gather raises the first
    fault and retrieves the others, so asyncio reports no 'exception was never retrieved'."""
    model = model_from(lambda req: {"answer": 1})

    def full_disk(event):
        raise OSError(28, "No space left on device")

    d = Debate(ITEM, gateway=Gateway(backoff=0.001), model=resolve(model), run_id="r", debate_id="d",
               limits=Limits(), on_event=full_disk)
    reported = []

    async def go():
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: reported.append(context))
        try:
            await d.gather(d.ask(f"a{i}", [{"role": "user", "content": "q"}], Num, phase="answer", round=1)
                           for i in range(4))
        except OSError as exc:
            return exc
        finally:
            import gc

            gc.collect()

    assert "No space left" in str(asyncio.run(go()))
    assert reported == []
