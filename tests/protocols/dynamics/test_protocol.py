"""dynamics (seed 003) driven end to end by scripted models; assertions on the trace files."""

import asyncio
import json
import time

import pytest

from debatekit.models import scripted
from debatekit.models.gateway import Gateway
from debatekit.models.model import resolve
from debatekit.protocols.dynamics.retrieval import KnowledgeBase
from debatekit.records.schemas import RunConfig
from debatekit.runner import run

OPTIONS = ["Sign the 36-month renewal", "Take the 12-month bridge and migrate", "Migrate before March"]
KB = {
    "colo-renewal.md": "# Colocation renewal\n\n## Bridge\nThe 12-month bridge costs $69k a month.\n\n"
                       "## Long term\nThe 36-month renewal costs $61k a month and needs new hardware.\n",
    "migration-postmortem.md": "# Migration post-mortem\n\n## Lesson\nNever migrate to a hard contract deadline.\n",
}


@pytest.fixture(scope="module", autouse=True)
def _litellm_warm():
    """One call first, so litellm's import and first-call set-up never count against small timeouts."""
    asyncio.run(Gateway().complete(resolve("scripted/schema"), [{"role": "user", "content": "warm up"}]))


@pytest.fixture
def setup(tmp_path):
    """Write a knowledge folder and a dataset; returns a function running the protocol."""
    (tmp_path / "knowledge" / "kb").mkdir(parents=True)
    for name, text in KB.items():
        (tmp_path / "knowledge" / "kb" / name).write_text(text)

    def go(fn, item=None, limit=1, **params):
        row = {"id": "d1", "question": "Renew the Frankfurt colocation contract or migrate?", "options": OPTIONS,
               "knowledge": "kb", "value_at_risk": 50_000, "reversible": True, "critical": False, **(item or {})}
        data = tmp_path / "decisions.jsonl"
        data.write_text(json.dumps(row) + "\n")
        model = scripted.register(f"dyn-{time.monotonic_ns()}", fn=fn)
        out = tmp_path / f"run-{time.monotonic_ns()}"
        params = {"knowledge_dir": str(tmp_path / "knowledge"), "route": "debate", **params}
        result = run(RunConfig(protocol="dynamics", dataset=str(data), model=model, params=params, cache=False),
                     out, progress=False)
        (debate,) = result.debates
        # an agent that timed out leaves the debate answered but degraded (it is scored)
        timed_out = any(line.startswith("TIMEOUT") for line in debate.log)
        assert debate.status == ("degraded" if timed_out else "ok"), debate.error
        folder = out / "items" / "d1"
        log = json.loads((folder / "debate_log.json").read_text())["debate_log"]
        events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
        breaker = folder / "circuit_breaker.json"
        return debate, log, events, json.loads(breaker.read_text()) if breaker.exists() else None

    return go


def pos(rec="B", premises=("bridge costs 69k a month",), risks=("cost",), timing="next_quarter", conf=80,
        evidence=(), reasoning="see evidence", query=""):
    return {"recommendation": rec, "position": f"I recommend {rec}.", "reasoning": reasoning,
            "premises": list(premises), "risks": list(risks), "timing": timing, "evidence": list(evidence),
            "confidence": conf, "limitations": "none", "rag_query": query}


def reb(keep="yes", divergences=("timing",), **kw):
    return {"agreements": ["cost"], "divergences": list(divergences), "blind_spots": ["hardware"],
            "keeps_position": keep, "updated": pos(**kw)}


def syn(rec="B", conf=80, critical=False, risk="medium", in_scope=True):
    return {"recommendation": rec, "decision": f"Do {rec}.", "consensus": ["cost"], "divergences": [],
            "critical_divergence": critical, "risk_level": risk, "in_scope": in_scope, "confidence": conf}


def vote(rec="B", conf=80):
    return {"recommendation": rec, "rationale": "evidence", "confidence": conf}


def script(rounds: dict, synthesis=None, votes=None, route="debate"):
    """Replies by phase: rounds {(round, agent): reply}, a synthesis, council votes by member."""
    def fn(req):
        if req.phase == "routing":
            return {"route": route, "reason": "scripted"}
        if req.phase == "synthesis":
            return synthesis or syn()
        if req.phase == "council":
            return (votes or {}).get(req.agent, vote())
        reply = rounds[(req.round, req.agent)]
        return reply(req) if callable(reply) else reply
    return fn


DIVERGE_1 = {(1, "CFO"): pos("A", timing="within_a_year", risks=("delivery",)), (1, "COO"): pos("B")}


def test_convergence_in_round_one_emits(setup):
    fn = script({(1, "CFO"): pos("B"), (1, "COO"): pos("B", premises=("the bridge costs $69k",))})
    debate, log, events, breaker = setup(fn)
    assert debate.stop_reason == "converged" and debate.converged and breaker is None
    assert debate.final_answer == OPTIONS[1] and not debate.needs_human_review and debate.escalated_to is None
    assert debate.output["escalation"]["to"] == "none" and debate.output["convergence"] == 100.0
    assert sorted((e["phase"], e["agent"], e["round"]) for e in events) == [
        ("positions", "CFO", 1), ("positions", "COO", 1), ("synthesis", "synthesizer", None)]
    # the seed's debate log, its field names kept
    assert set(log) == {"session_id", "timestamp_inicio", "timestamp_fim", "query", "participantes", "rota",
                        "rodadas", "rag_queries", "resultado", "metricas"}
    assert log["session_id"] == debate.debate_id and log["participantes"] == ["CFO", "COO"]
    (r1,) = log["rodadas"]
    assert r1["numero"] == 1 and r1["tipo"] == "posicoes_iniciais" and r1["convergencia"] == 100.0
    assert r1["agentes_responderam"] == ["CFO", "COO"] and r1["agentes_timeout"] == [] and r1["duracao_ms"] >= 0
    assert log["resultado"] == {**log["resultado"], "convergencia_final": 100.0, "confianca_sintese": 80,
                                "escalado_para": "NENHUM", "circuit_breaker": False}
    assert log["metricas"]["rodadas_executadas"] == 1 and log["metricas"]["tokens_consumidos"] > 0
    assert log["metricas"]["tempo_total_ms"] >= 0 and log["rag_queries"]["total"] == 1


def test_time_scale_stretches_every_time_limit_of_the_seed(setup):
    fn = script({(1, "CFO"): pos("B"), (1, "COO"): pos("B")})
    debate, *_ = setup(fn)
    seed = {"time_scale": 1.0, "agent_timeout_s": 30.0, "round_timeout_s": 120.0, "total_timeout_s": 300.0,
            "council_timeout_s": 180.0, "rag_timeout_s": 15.0}
    assert debate.output["time_limits_s"] == seed  # a scripted (non-local) model keeps the seed's numbers
    debate, *_ = setup(fn, time_scale=2)
    assert debate.output["time_limits_s"] == {k: v * 2 for k, v in seed.items()}


def test_round_one_prompt_carries_evidence_and_options(setup):
    seen = {}

    def fn(req):
        seen[(req.phase, req.agent)] = req.prompt
        return script({(1, "CFO"): pos(), (1, "COO"): pos()})(req)

    setup(fn)
    prompt = seen[("positions", "CFO")]
    assert "You are the CFO" in prompt and "B) Take the 12-month bridge and migrate" in prompt
    assert "[RAG:CR_" in prompt and "69k" in prompt


def test_rebuttals_are_sequential_and_round_two_converges(setup):
    seen = {}

    def coo_rebuttal(req):
        seen["coo"] = req.prompt
        return reb("partially", rec="B")

    fn = script({**DIVERGE_1, (2, "CFO"): reb("no", rec="B", timing="next_quarter", risks=("cost",)),
                 (2, "COO"): coo_rebuttal})
    debate, log, events, breaker = setup(fn)
    assert debate.stop_reason == "converged" and len(debate.rounds) == 2 and breaker is None
    assert [r.extra["convergence"] for r in debate.rounds] == [25.0, 100.0]
    assert "- CFO: option B" in seen["coo"]  # COO saw CFO's updated round-2 position, not its round-1 A
    rebuttals = [e for e in events if e["phase"] == "rebuttal"]
    assert [e["agent"] for e in rebuttals] == ["CFO", "COO"] and rebuttals[0]["ts"] <= rebuttals[1]["ts"]
    assert rebuttals[0]["output"]["keeps_position"] == "no"
    assert log["rodadas"][1]["tipo"] == "rebatidas" and log["rodadas"][1]["mudancas_posicao"] == 1
    assert debate.rounds[1].answers == {"CFO": OPTIONS[1], "COO": OPTIONS[1]}


def test_round_three_refines_only_the_disputed_points(setup):
    seen = {}

    def cfo_refine(req):
        seen["cfo"] = req.prompt
        return reb(rec="B", timing="next_quarter")

    fn = script({**DIVERGE_1, (2, "CFO"): reb(rec="A", timing="within_a_year", risks=("cost",)),
                 (2, "COO"): reb(rec="B", divergences=("bridge is cheaper",)),
                 (3, "CFO"): cfo_refine, (3, "COO"): reb(rec="B")})
    debate, log, events, breaker = setup(fn)
    assert debate.stop_reason == "converged"
    assert [r.extra["convergence"] for r in debate.rounds] == [25.0, 50.0, 100.0]
    assert "Agreed, do not re-debate: premises, risks." in seen["cfo"]
    assert "Still disputed: recommendation, timing." in seen["cfo"] and "COO: bridge is cheaper" in seen["cfo"]
    assert log["rodadas"][2]["tipo"] == "refinamento" and breaker is None


def changing(round_no):  # diverging positions that change every round (no loop)
    timing = ["immediately", "within_a_year", "later", "immediately", "within_a_year"][round_no - 1]
    return {(round_no, "CFO"): (pos if round_no == 1 else reb)(rec="A", timing=timing, risks=("delivery",)),
            (round_no, "COO"): pos("B") if round_no == 1 else reb(rec="B")}


def all_rounds(n):
    table = {}
    for r in range(1, n + 1):
        table.update(changing(r))
    return table


def test_breaker_max_rounds_forces_synthesis_then_council_emits(setup):
    seen = {}
    fn = script(all_rounds(3), synthesis=syn("B", 75), votes={})
    debate, log, events, breaker = setup(lambda req: seen.setdefault(req.phase, req.prompt) and fn(req))
    assert debate.stop_reason == "max_rounds" and len(debate.rounds) == 3 and debate.converged is False
    assert breaker["motivo"] == "max_rounds" and breaker["rodadas_executadas"] == "3 de 3"
    assert breaker["convergencia_final"] == 25.0 and breaker["agentes_em_conflito"] == [["CFO", "COO"]]
    assert "recommendation: CFO=A, COO=B" in breaker["divergencias_nao_resolvidas"]
    assert breaker["acao"] == "Escalando para COUNCIL" and "CIRCUIT BREAKER: max_rounds" in debate.log
    esc = debate.output["escalation"]
    assert esc["to"] == "council" and "convergence 25 < 70" in esc["reasons"]
    assert esc["council"]["confidence"] == 80.0 and esc["council"]["emits"] and not debate.needs_human_review
    assert debate.escalated_to == "council"
    assert sorted(e["agent"] for e in events if e["phase"] == "council") == ["CEO", "Chief Risk Officer",
                                                                            "General Counsel"]
    assert "circuit breaker stopped the debate (max_rounds): state the divergences explicitly" in seen["synthesis"]
    assert "Convergence: 25% (agreed: premises; disputed: recommendation, risks, timing)." in seen["synthesis"]
    assert debate.output["synthesis"]["divergences_explicit"]
    assert log["resultado"]["escalado_para"] == "COUNCIL" and log["resultado"]["circuit_breaker"] is True


def test_breaker_loop_is_an_impasse_and_a_split_council_goes_to_a_human(setup):
    fn = script({**DIVERGE_1, (2, "CFO"): reb(rec="A", timing="within_a_year", risks=("delivery",)),
                 (2, "COO"): reb(rec="B")}, synthesis=syn("B", 72),
                votes={"CEO": vote("A", 90), "General Counsel": vote("B", 90), "Chief Risk Officer": vote("C", 90)})
    debate, log, events, breaker = setup(fn)
    assert debate.stop_reason == "loop" and len(debate.rounds) == 2 and breaker["motivo"] == "loop"
    esc = debate.output["escalation"]
    assert "impasse (loop detected)" in esc["reasons"] and esc["council"]["confidence"] == 30.0
    assert esc["to"] == "human" and debate.needs_human_review and debate.escalated_to == "human"
    assert debate.escalation_reason == "council confidence 30 < 60"
    assert log["resultado"]["escalado_para"] == "HUMANO" and breaker["acao"] == "Escalando para HUMANO"


def test_breaker_max_refinements(setup):
    debate, log, events, breaker = setup(script(all_rounds(5)), max_rounds=5)
    assert debate.stop_reason == "max_refinements" and len(debate.rounds) == 4
    assert [r["tipo"] for r in log["rodadas"]] == ["posicoes_iniciais", "rebatidas", "refinamento", "refinamento"]


def test_breaker_max_iterations_after_void_rounds_goes_to_a_human(setup):
    seeds = set()

    def fn(req):
        if req.phase == "positions" and req.agent == "COO":
            seeds.add(req.params["seed"])
            return "not json at all"
        return script({(1, "CFO"): pos()})(req)

    debate, log, events, breaker = setup(fn)
    assert debate.stop_reason == "max_iterations" and breaker["motivo"] == "max_iterations"
    assert [r["iteracao"] for r in log["rodadas"]] == [1, 2, 3, 4, 5] and all(r["vazia"] for r in log["rodadas"])
    assert debate.rounds == [] and debate.needs_human_review
    assert "circuit breaker: max_iterations" in debate.escalation_reason
    assert len([e for e in events if e["agent"] == "COO" and e["phase"] == "positions"]) == 5
    assert len(seeds) == 5  # each retry has its own seed, so a cached failure is not replayed
    assert debate.usage.parse_failures == 10  # 5 attempts, each with one repair


def test_breaker_total_timeout_synthesizes_from_state_with_reduced_confidence(setup):
    hang = lambda reply: (lambda req: scripted.Delayed(60, reply))  # noqa: E731 - cut by the total timeout
    fn = script({(1, "CFO"): pos("A", timing="later"), (1, "COO"): pos("B"),
                 (2, "CFO"): hang(reb(rec="A")), (2, "COO"): hang(reb(rec="B"))})
    debate, log, events, breaker = setup(fn, total_timeout_s=4.0)
    assert debate.stop_reason == "total_timeout" and breaker["motivo"] == "total_timeout"
    assert "TIMEOUT: CFO in rebuttal" in debate.log and "TIMEOUT: COO in rebuttal" in debate.log
    assert log["rodadas"][1]["agentes_parciais"] == ["CFO", "COO"]  # their round-1 positions stand in
    synthesis = debate.output["synthesis"]
    assert synthesis["source"] == "state" and synthesis["reduced_by_timeout"] is True
    assert log["resultado"]["confianca_reduzida_por_timeout"] is True
    assert not [e for e in events if e["phase"] == "synthesis"]  # no model call after the total timeout
    assert synthesis["confidence"] == 50.0  # min(mean confidence 80, convergence 50)


def test_agent_timeout_excludes_the_agent_and_the_round_runs_again(setup):
    calls = {"n": 0}

    def coo(req):
        calls["n"] += 1
        return scripted.Delayed(60, pos()) if calls["n"] == 1 else pos()

    debate, log, events, breaker = setup(script({(1, "CFO"): pos(), (1, "COO"): coo}), agent_timeout_s=3.0)
    assert "TIMEOUT: COO in positions" in debate.log
    first, second = log["rodadas"]
    assert first["agentes_timeout"] == ["COO"] and first["vazia"] and first["convergencia"] is None
    assert second["iteracao"] == 2 and second["convergencia"] == 100.0 and debate.stop_reason == "converged"


def test_round_timeout_cuts_a_slow_agent_which_keeps_its_partial_position(setup):
    fn = script({(1, "CFO"): pos("A"), (1, "COO"): pos("B"), (1, "CTO"): pos("B"),
                 (2, "CFO"): reb(rec="B"), (2, "COO"): reb(rec="B"), (2, "CTO"): reb(rec="B"),
                 (3, "CFO"): reb(rec="B"), (3, "COO"): reb(rec="B"),
                 (3, "CTO"): lambda req: scripted.Delayed(60, reb(rec="B"))})
    # round 2 converges only if CTO agrees; make round 2 diverge on timing to reach round 3
    fn2 = lambda req: reb(rec="B", timing="later") if (req.round, req.agent) == (2, "CTO") else fn(req)  # noqa: E731
    debate, log, events, breaker = setup(fn2, agents=["CFO", "COO", "CTO"], round_timeout_s=3.0,
                                         convergence_threshold=95)
    third = log["rodadas"][2]
    assert third["agentes_timeout"] == ["CTO"] and third["agentes_parciais"] == ["CTO"]
    assert "TIMEOUT: CTO in refinement" in debate.log
    assert debate.rounds[2].answers["CTO"] == OPTIONS[1]  # its round-2 position, used as the partial answer


@pytest.mark.parametrize("item, synthesis, reason", [
    ({}, syn(conf=65), "confidence 65 < 70"),
    ({}, syn(critical=True), "critical divergence"),
    ({"value_at_risk": 2_900_000}, syn(), "value at risk 2.9e+06 > 100000"),
    ({"reversible": False}, syn(), "irreversible decision"),
])
def test_each_council_trigger_convenes_three_members(setup, item, synthesis, reason):
    fn = script({(1, "CFO"): pos(), (1, "COO"): pos()}, synthesis=synthesis)
    debate, log, events, breaker = setup(fn, item=item)
    esc = debate.output["escalation"]
    assert esc["to"] == "council" and esc["reasons"] == [reason] and esc["council"]["emits"]
    assert len([e for e in events if e["phase"] == "council"]) == 3 and not debate.needs_human_review


@pytest.mark.parametrize("synthesis, reason", [
    (syn(conf=40), "confidence 40 < 50"),
    (syn(in_scope=False), "out of scope"),
    (syn(risk="catastrophic"), "catastrophic risk"),
])
def test_each_human_trigger_skips_the_council(setup, synthesis, reason):
    fn = script({(1, "CFO"): pos(), (1, "COO"): pos()}, synthesis=synthesis)
    debate, log, events, breaker = setup(fn, item={"reversible": False})
    assert debate.needs_human_review and debate.escalation_reason == reason
    assert not [e for e in events if e["phase"] == "council"] and log["resultado"]["escalado_para"] == "HUMANO"


def test_router_call_picks_simple_one_agent_then_synthesis(setup):
    seen = {}
    fn = script({(1, "CFO"): pos(conf=90)}, route="simple")
    debate, log, events, breaker = setup(lambda req: seen.setdefault(req.phase, req.prompt) and fn(req), route="auto")
    assert [e["phase"] for e in events] == ["routing", "positions", "synthesis"]  # SIMPLES -> SINTESE (seed)
    assert "Convergence: n/a (one agent)." in seen["synthesis"] and "- CFO: option B" in seen["synthesis"]
    assert debate.stop_reason == "single_agent" and debate.output["route"] == "simple"
    assert debate.final_answer == OPTIONS[1] and debate.output["escalation"]["to"] == "none"
    assert log["participantes"] == ["CFO"] and debate.converged is None


def test_simple_route_still_escalates_on_the_synthesis(setup):
    """Out of scope and catastrophic risk come from the synthesis, so the one-agent route reaches them too."""
    fn = script({(1, "CFO"): pos(conf=90)}, synthesis=syn(risk="catastrophic"), route="simple")
    debate, log, events, breaker = setup(fn, route="auto")
    assert debate.output["route"] == "simple" and debate.needs_human_review
    assert "catastrophic" in debate.escalation_reason and log["resultado"]["escalado_para"] == "HUMANO"


def test_critical_item_goes_straight_to_the_council(setup):
    fn = script({}, votes={"CEO": vote("C", 70), "General Counsel": vote("C", 60), "Chief Risk Officer": vote("C", 80)})
    debate, log, events, breaker = setup(fn, item={"critical": True}, route="auto")
    assert sorted(e["phase"] for e in events) == ["council"] * 3
    assert debate.final_answer == OPTIONS[2] and debate.output["escalation"]["council"]["confidence"] == 70.0
    assert debate.output["route"] == "council" and log["resultado"]["escalado_para"] == "COUNCIL"


def test_agents_searches_count_against_the_query_limit(setup):
    fn = script({(1, "CFO"): pos("A", timing="later", risks=("delivery",), query="36-month hardware"),
                 (1, "COO"): pos("B", query="deadline lesson"),
                 (2, "CFO"): reb(rec="B"), (2, "COO"): reb(rec="B")})
    seen = {}

    def spy(req):
        seen[(req.round, req.agent)] = req.prompt
        return fn(req)

    debate, log, events, breaker = setup(spy, rag_max_queries=2)
    rag = log["rag_queries"]
    assert [q["status"] for q in rag["consultas"]] == ["ok", "ok", "refused"]
    assert (rag["total"], rag["sucesso"], rag["recusadas"]) == (2, 2, 1)
    assert "RAG REFUSED: 'deadline lesson' (COO)" in debate.log
    assert "new hardware" in seen[(2, "CFO")]  # the chunk its search returned is shown next round


def test_citations_outside_the_returned_chunks_are_recorded(setup):
    fn = script({(1, "CFO"): pos(evidence=["[RAG:MP_01]", "CR_02"], reasoning="as [RAG:INVENTED_1] shows"),
                 (1, "COO"): pos()})
    debate, log, events, breaker = setup(fn, rag_top_k=1)
    rag = log["rag_queries"]
    assert rag["consultas"][0]["chunks"] == ["MP_01"]  # top 1 for the question: CR_02 exists but was not returned
    assert rag["chunks_citados"] == ["MP_01"]
    assert rag["citacoes_invalidas"] == [{"chunk_id": "CR_02", "agent": "CFO", "round": 1},
                                         {"chunk_id": "INVENTED_1", "agent": "CFO", "round": 1}]
    assert any(line.startswith("INVALID CITATION: CFO in positions") for line in debate.log)


def test_slow_retrieval_times_out_and_the_debate_goes_on(setup, monkeypatch):
    monkeypatch.setattr(KnowledgeBase, "search", lambda self, query, k=3: time.sleep(0.4) or [])
    debate, log, events, breaker = setup(script({(1, "CFO"): pos(), (1, "COO"): pos()}), rag_timeout_s=0.05)
    assert log["rag_queries"]["timeout"] == 1 and debate.stop_reason == "converged"
    assert any(line.startswith("RAG TIMEOUT") for line in debate.log)


def test_node_runs_one_decision_from_a_state_dict(tmp_path):
    import debatekit

    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "colo.md").write_text(KB["colo-renewal.md"])
    model = scripted.register("dyn-node", fn=script({(1, "CFO"): pos(), (1, "COO"): pos()}))
    state = {"question": "Renew or migrate?", "options": OPTIONS, "knowledge": "kb", "value_at_risk": 10,
             "reversible": True, "other": "kept"}
    out = asyncio.run(debatekit.node("dynamics", state, model=model, folder=str(tmp_path / "files"), route="debate",
                           knowledge_dir=str(tmp_path)))
    assert out["other"] == "kept" and out["debate"]["decision"] == OPTIONS[1] and out["needs_human_review"] is False
    assert out["debate"]["converged"] and (tmp_path / "files" / "debate_log.json").exists()


def test_shipped_dataset_runs_with_the_schema_model(tmp_path):
    result = run(RunConfig(protocol="dynamics", dataset="decisions", limit=2, model="scripted/schema",
                           cache=False), tmp_path / "run", progress=False)
    assert [d.status for d in result.debates] == ["ok", "ok"]
    for d in result.debates:
        assert (tmp_path / "run" / "items" / d.item_id / "debate_log.json").exists()


@pytest.mark.parametrize("caps", [True, False])
def test_text_caps_off_sends_every_reply_model_without_character_caps(setup, caps):
    schemas = {}

    def fn(req):
        schemas[req.phase] = json.dumps(req.schema)
        return inner(req)

    inner = script({(1, "CFO"): pos("B", reasoning="r" * 400), (1, "COO"): pos("B")})
    debate, _, events, _ = setup(fn, route="auto", text_caps=caps)
    assert set(schemas) == {"routing", "positions", "synthesis"}
    assert all(('"maxLength"' in s) == caps for s in schemas.values())
    assert '"maxItems"' in schemas["positions"]  # list lengths stay bounded
    cfo = next(e for e in events if e["agent"] == "CFO")
    assert cfo["output"]["reasoning"] == "r" * 400 and debate.status == "ok"  # parsing never enforced the caps
