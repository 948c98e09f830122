"""Debate dynamics (seed 003, S3): routing, convergence checkpoints, circuit breaker, council.

Route (simple: one role / debate: all agents / council: critical) -> round 1 positions in
parallel -> convergence of four points (>= 70% converges) -> round 2 rebuttals, one agent
after the other -> round 3 refinement on the disputed points only -> circuit breaker ->
synthesis -> emit, a 3-member council, or a human (S3.6). Agents read an internal knowledge
base (at most 5 queries, cited `[RAG:chunk_id]`, citations checked). Every number of the seed
is a parameter with the seed's default. Per debate: `debate_log.json` (the seed's fields) and,
when the breaker fired, `circuit_breaker.json`. Pure rules live in `dynamics_rules`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field

from debatekit.datasets import datasets_dir
from debatekit.engine import Outcome
from debatekit.protocols.dynamics import prompts as P
from debatekit.protocols.dynamics.log import breaker_report, debate_log
from debatekit.protocols.dynamics.models import (Decision, DynamicsOutput, Position, Rebuttal, Route, Synthesis, Vote,
                                                 answer, describe, letter, stance)
from debatekit.protocols.dynamics.params import Params
from debatekit.protocols.dynamics.retrieval import KnowledgeBase, Retriever, chunk_ref, citations
from debatekit.protocols.dynamics.rules import (LETTERS, BreakerLimits, BreakerReason, Convergence, Escalation,
                                                Thresholds, breaker, convergence, council_verdict, escalate,
                                                fallback_synthesis, option_letter, stance_hash)
from debatekit.protocols.shared.fields import caps
from debatekit.records.trace import now
from debatekit.registry import Node, protocol

KINDS = {1: ("posicoes_iniciais", "positions"), 2: ("rebatidas", "rebuttal")}  # then "refinamento"
TIME_LIMITS = ("agent_timeout_s", "round_timeout_s", "total_timeout_s", "council_timeout_s", "rag_timeout_s")


def _node_item(state: dict) -> Decision:
    """A decision from the state: `question`, `options`, `knowledge`; optional `value_at_risk`, `reversible`,
    `critical`."""
    fields = set(Decision.model_fields)
    return Decision.model_validate({"id": "node", **{k: v for k, v in state.items() if k in fields}})


def _node_result(state: dict, outcome: Outcome, debate) -> dict:
    """The state plus `debate` (decision, convergence, breaker, synthesis, escalation) and `needs_human_review`."""
    result = {**outcome.output, "decision": outcome.final_answer, "converged": outcome.converged,
              "escalation_reason": outcome.escalation_reason, "log": debate.log, "usage": debate.usage.model_dump()}
    return {**state, "debate": result, "needs_human_review": outcome.needs_human_review}


@protocol("dynamics", paper="seed 003", item=Decision, node=Node(_node_item, _node_result),
          output=DynamicsOutput,
          flags={"agents": None, "rounds": "max_rounds"},
          stop_reasons={"single_agent": "one agent answered alone (routed that way)",
                        "council_route": "routed straight to the council, no debate",
                        "total_timeout": "circuit breaker: the debate's total time ran out",
                        "max_iterations": "circuit breaker: too many round attempts",
                        "loop": "circuit breaker: the same positions repeated",
                        "max_refinements": "circuit breaker: refinement rounds exhausted"})
def dynamics(
    agents: Annotated[list[str], Field(min_length=2)] = ["CFO", "COO"],
    route: Literal["auto", "simple", "debate", "council"] = "auto",
    min_rounds: Annotated[int, Field(ge=1)] = 1,
    max_rounds: Annotated[int, Field(ge=1)] = 3,
    max_iterations: Annotated[int, Field(ge=1)] = 5,
    max_refinements: Annotated[int, Field(ge=1)] = 2,
    loop_repeats: Annotated[int, Field(ge=2)] = 2,
    convergence_threshold: float = 70.0,
    emit_threshold: float = 70.0,
    human_threshold: float = 50.0,
    council_threshold: float = 60.0,
    value_at_risk_threshold: float = 100_000.0,
    council_size: Annotated[int, Field(ge=1)] = 3,
    council_roles: Annotated[list[str], Field(min_length=1)] = ["CEO", "General Counsel", "Chief Risk Officer"],
    agent_timeout_s: Annotated[float, Field(gt=0)] = 30.0,
    round_timeout_s: Annotated[float, Field(gt=0)] = 120.0,
    total_timeout_s: Annotated[float, Field(gt=0)] = 300.0,
    council_timeout_s: Annotated[float, Field(gt=0)] = 180.0,
    rag_max_queries: Annotated[int, Field(ge=0)] = 5,
    rag_timeout_s: Annotated[float, Field(gt=0)] = 15.0,
    time_scale: Annotated[float, Field(gt=0)] | Literal["auto"] = "auto",
    rag_top_k: Annotated[int, Field(ge=1)] = 3,
    premise_overlap: float = 0.25,
    risk_overlap: float = 0.5,
    evidence_chars: Annotated[int, Field(ge=50)] = 300,
    knowledge_dir: str | None = None,
    temperature: float = 0.7,
    text_caps: bool = True,
):
    """Routed debate: convergence checkpoints, circuit breaker, timeouts, internal RAG, council/human escalation.

    `text_caps=false` sends the reply models without their character caps (`fields.uncapped`): the
    run's `--max-tokens` is then the only bound on a reply.
    """
    cfg = Params(**locals(), out=caps(text_caps))

    async def run(item, debate) -> Outcome:
        return await Session(cfg, item, debate).run()

    return run


@dataclass
class Loop:
    """The state of the rounds loop between round attempts."""

    agents: list[str]
    single: bool
    """One agent answers alone (routed that way)."""
    conv: Convergence = field(default_factory=lambda: Convergence(None))
    hashes: list[str] = field(default_factory=list)
    """Each valid round's stance hash (the breaker's loop check)."""
    done: int = 0
    """Valid rounds so far."""
    iteration: int = 0
    refinements: int = 0
    valid: bool = False
    """The latest attempt had enough usable positions."""
    positions: dict[str, Position] = field(default_factory=dict)
    partial: list[str] = field(default_factory=list)
    breaker: BreakerReason | None = None


class Session:
    """One debate of the protocol: its state between rounds and the debate log it builds."""

    def __init__(self, cfg: Params, item: Decision, debate):
        scale = cfg.time_scale  # every time limit of the seed, stretched for a slow model
        if scale == "auto":
            scale = debate.model.kind.time_scale
        cfg = replace(cfg, time_scale=scale, **{k: getattr(cfg, k) * scale for k in TIME_LIMITS})
        self.cfg, self.item, self.debate = cfg, item, debate
        folder = Path(cfg.knowledge_dir or datasets_dir() / "knowledge") / item.knowledge
        self.rag = Retriever(KnowledgeBase.from_folder(folder), cfg.rag_max_queries, cfg.rag_timeout_s, cfg.rag_top_k)
        self.options = "\n".join(f"{LETTERS[i]}) {o}" for i, o in enumerate(item.options))
        self.shown: dict[str, list] = {}  # chunks each agent has seen
        self.latest: dict[str, Position] = {}  # each agent's latest position
        self.raised: list[str] = []  # divergences raised in the latest rebuttals
        self.rounds: list[dict] = []  # the seed's `rodadas`
        self.started = now()

    def left(self) -> float:
        return max(0.0, self.cfg.total_timeout_s - self.debate.elapsed)

    async def run(self) -> Outcome:
        c, item, d = self.cfg, self.item, self.debate
        shared = await self.retrieve(item.question, None)
        route = c.route if c.route != "auto" else "council" if item.critical else await self.route()
        conv, reason, synthesis = Convergence(None), None, None
        if route == "council":
            esc = Escalation("council", ["routed to the council"])
            d.stop_reason = "council_route"
        else:
            agents = c.agents[:1] if route == "simple" else c.agents
            self.shown = {a: list(shared) for a in agents}
            conv, reason = await self.rounds_loop(agents, single=route == "simple")
            synthesis = await self.synthesize(conv, reason, route)
            esc = escalate(confidence=synthesis["confidence"], convergence=conv.score,
                           critical_divergence=synthesis["critical_divergence"], value_at_risk=item.value_at_risk,
                           reversible=item.reversible, breaker=reason, out_of_scope=not synthesis["in_scope"],
                           catastrophic=synthesis["risk_level"] == "catastrophic", t=self.thresholds())
        council = await self.council(synthesis, esc.reasons, shared) if esc.to == "council" else None
        chosen = (council or {}).get("recommendation") or (synthesis or {}).get("recommendation")
        to, human_reasons = esc.to, esc.reasons if esc.to == "human" else []
        if council is not None and not council["emits"]:
            to, human_reasons = "human", [f"council confidence {council['confidence']:g} < {c.council_threshold:g}"]
        target = {"none": "NENHUM", "council": "COUNCIL", "human": "HUMANO"}[to]
        if reason:
            d.write("circuit_breaker.json", breaker_report(reason, self.rounds, c.max_rounds, conv,
                                                          self.explicit_divergences(conv), target))
        escalation = {"to": to, "reasons": esc.reasons, "council": council, "human_reasons": human_reasons}
        final = item.options[LETTERS.index(chosen)] if chosen else None
        d.write("debate_log.json", debate_log(
            session_id=d.debate_id, started=self.started, finished=now(), query=item.question,
            participants=list(self.shown) + (council or {}).get("members", []), route=route, rounds=self.rounds,
            rag=self.rag.summary(), conv=conv, synthesis=synthesis, breaker=reason, target=target, council=council,
            elapsed_s=d.elapsed, tokens=d.usage.prompt_tokens + d.usage.completion_tokens))
        converged = None if conv.score is None else conv.score >= c.convergence_threshold
        docs = {ch.doc for ch in self.rag.returned.values()}
        return Outcome(
            final_answer=final, converged=converged, needs_human_review=to == "human",
            escalated_to=None if to == "none" else to,
            escalation_reason="; ".join(human_reasons) if to == "human" else None,
            output={"route": route, "recommendation": chosen,
                    "time_limits_s": {"time_scale": c.time_scale, **{k: getattr(c, k) for k in TIME_LIMITS}},
                    "convergence": conv.score, "points": conv.points,
                    "circuit_breaker": reason, "synthesis": synthesis, "escalation": escalation,
                    "rag": self.rag.summary(), "agreement_as_expected": None if converged is None or
                    item.expected_agreement is None else converged == item.expected_agreement,
                    "source_recall": len(docs & set(item.sources)) / len(item.sources) if item.sources else None})

    # --- routing, rounds -------------------------------------------------------------------
    async def route(self) -> str:
        item = self.item
        user = P.ROUTER.format(question=item.question, options=self.options, reversible={
            True: "yes", False: "no", None: "unknown"}[item.reversible],
            value="unknown" if item.value_at_risk is None else f"${item.value_at_risk:,.0f}")
        turn = await self.debate.ask("router", [{"role": "user", "content": user}], self.cfg.out(Route), phase="routing",
                                     temperature=0.0, timeout=min(self.cfg.agent_timeout_s, self.left()))
        return turn.parsed.route if turn.ok else "debate"

    async def rounds_loop(self, agents: list[str], single: bool) -> tuple[Convergence, str | None]:
        """Rounds on the engine until convergence or a circuit-breaker trigger; the last convergence and trigger."""
        c, d = self.cfg, self.debate
        self.loop = Loop(agents, single)
        self.breaker_limits = BreakerLimits(c.max_rounds, c.max_iterations, c.max_refinements, c.total_timeout_s,
                                            c.loop_repeats)
        reason = await d.rounds(self.round, c.max_iterations, stop=[self.single_answer, self.converged, self.broken])
        if reason not in ("single_agent", "converged"):
            d.log.append(f"CIRCUIT BREAKER: {reason}")
        return self.loop.conv, self.loop.breaker

    def single_answer(self, history) -> str | None:
        return "single_agent" if self.loop.single and self.loop.valid else None

    def converged(self, history) -> str | None:
        s = self.loop
        return "converged" if s.valid and s.conv.score >= self.cfg.convergence_threshold and \
            s.done >= self.cfg.min_rounds else None

    def broken(self, history) -> str | None:
        """The circuit breaker (S3.4) after a round without convergence."""
        s, d = self.loop, self.debate
        s.breaker = breaker(rounds=s.done, iterations=s.iteration, refinements=s.refinements, elapsed=d.elapsed,
                            hashes=s.hashes, limits=self.breaker_limits)
        return s.breaker

    async def search(self) -> None:
        """The searches agents asked for in the round before, within the query limit."""
        s = self.loop
        for agent, p in s.positions.items():
            if agent not in s.partial and p.rag_query.strip():
                self.shown[agent] += [ch for ch in await self.retrieve(p.rag_query, agent)
                                      if ch not in self.shown[agent]]

    async def round(self, iteration: int) -> None:
        """One attempt at the next round; a void one (too few usable positions) is run again."""
        c, d, s, opts = self.cfg, self.debate, self.loop, self.item.options
        if iteration > 1:
            await self.search()
        number, s.iteration = s.done + 1, iteration
        kind, phase = KINDS.get(number, ("refinamento", "refinement"))
        began = d.elapsed
        positions, timeouts, partial = await self.play(number, phase, s.agents, s.conv, iteration)
        entry = {"numero": number, "tipo": kind, "iteracao": iteration,
                 "agentes_responderam": [a for a in positions if a not in partial],
                 "agentes_timeout": timeouts, "agentes_parciais": partial}
        s.valid, s.positions, s.partial = len(positions) >= (1 if s.single else 2), positions, partial
        if s.valid:
            s.done, s.refinements = s.done + 1, s.refinements + (kind == "refinamento")
            stances = [stance(a, p, opts) for a, p in positions.items()]
            s.conv = Convergence(None, agents=list(positions)) if s.single else convergence(
                stances, c.premise_overlap, c.risk_overlap)
            s.hashes.append(stance_hash(stances))
            changes = sum(a in self.latest and letter(self.latest[a], opts) != letter(p, opts)
                          for a, p in positions.items())
            self.latest.update(positions)
            entry.update(convergencia=s.conv.score, pontos=s.conv.points, mudancas_posicao=changes, hash=s.hashes[-1])
            d.record_round(number, {a: answer(positions.get(a), opts) for a in s.agents}, convergence=s.conv.score,
                           points=s.conv.points, kind=kind, iteration=iteration, partial=partial)
        else:
            entry.update(convergencia=None, vazia=True)
            d.log.append(f"VOID: round {number} ({phase}) has too few usable positions; run again")
        entry["duracao_ms"] = round((d.elapsed - began) * 1000)
        self.rounds.append(entry)

    async def play(self, number: int, phase: str, agents: list[str], conv: Convergence, sample: int):
        """One round: parallel positions (1), sequential rebuttals (2) or parallel refinements (3+)."""
        c, d = self.cfg, self.debate
        began, current = d.elapsed, dict(self.latest)

        def ask(agent: str, timeout: float):
            return d.ask(agent, self.messages(agent, phase, conv, current), c.out(Position if number == 1 else Rebuttal),
                         phase=phase, round=number, temperature=c.temperature, sample=sample, timeout=timeout)

        if phase == "rebuttal":
            turns = []
            for agent in agents:  # each agent sees the rebuttals given before its own
                round_left = min(c.round_timeout_s - (d.elapsed - began), self.left())
                turns.append(turn := await ask(agent, max(0.0, min(c.agent_timeout_s, round_left))))
                if turn.ok:
                    current[agent] = turn.parsed.updated
        else:
            turns = await d.gather((ask(a, c.agent_timeout_s) for a in agents),
                                   timeout=min(c.round_timeout_s, self.left()))
        positions, timeouts, partial = {}, [], []
        raised = []
        for turn in turns:
            if turn.ok:
                p = turn.parsed if number == 1 else turn.parsed.updated
                raised += [] if number == 1 else [f"{turn.agent}: {x}" for x in turn.parsed.divergences]
                _, invalid = self.rag.check([chunk_ref(e) for e in p.evidence] + citations(turn.text),
                                                turn.agent, number)
                if invalid:
                    d.log.append(f"INVALID CITATION: {turn.agent} in {phase}: {', '.join(invalid)}")
                positions[turn.agent] = p
            elif turn.completion.error_kind == "timeout":
                timeouts.append(turn.agent)
                if turn.agent in self.latest:  # the partial answer: its position of the round before
                    positions[turn.agent] = self.latest[turn.agent]
                    partial.append(turn.agent)
        self.raised = raised or self.raised
        return positions, timeouts, partial

    def messages(self, agent: str, phase: str, conv: Convergence, current: dict) -> list[dict]:
        opts = self.item.options
        fields = {"question": self.item.question, "options": self.options, "evidence": self.evidence(agent),
                  "own": describe(current.get(agent), opts),
                  "others": "\n".join(f"- {o}: {describe(p, opts)}" for o, p in current.items() if o != agent)}
        if phase == "positions":
            user = P.POSITION.format(**fields)
        elif phase == "rebuttal":
            user = P.REBUTTAL.format(**fields)
        else:
            user = P.REFINEMENT.format(**fields, agreed=", ".join(conv.consensus) or "nothing",
                                       disputed=", ".join(conv.divergent), divergences="; ".join(self.raised) or "none")
        return [{"role": "system", "content": P.SYSTEM.format(role=agent)}, {"role": "user", "content": user}]

    # --- synthesis, council ----------------------------------------------------------------
    async def synthesize(self, conv: Convergence, reason: str | None, route: str) -> dict:
        """The synthesizer's call; from the current state without a model when time is up or it fails."""
        c, d = self.cfg, self.debate
        stances = [stance(a, p, self.item.options) for a, p in self.latest.items()]
        explicit = self.explicit_divergences(conv)
        reduced = reason == "total_timeout" or self.left() == 0.0
        if self.latest and not reduced:
            positions = "\n".join(f"- {a}: {describe(p, self.item.options)}" for a, p in self.latest.items())
            note = P.BREAKER_NOTE.format(reason=reason) if reason else ""
            convergence = "n/a (one agent)" if conv.score is None else (
                f"{conv.score:g}% (agreed: {', '.join(conv.consensus) or 'nothing'}; "
                f"disputed: {', '.join(conv.divergent) or 'nothing'})")
            user = P.SYNTHESIS.format(question=self.item.question, options=self.options, positions=positions,
                                      convergence=convergence, breaker=note)
            turn = await d.ask("synthesizer", [{"role": "user", "content": user}], c.out(Synthesis), phase="synthesis",
                               temperature=0.2, timeout=min(c.agent_timeout_s, self.left()))
            if turn.ok and option_letter(turn.parsed.recommendation, self.item.options):
                out = turn.parsed.model_dump()
                out["recommendation"] = option_letter(out["recommendation"], self.item.options)
                return {**out, "divergences_explicit": explicit, "source": "synthesizer", "reduced_by_timeout": False}
            reduced = self.left() == 0.0
        chosen, confidence = fallback_synthesis(stances, conv.score)
        if reduced:
            d.log.append("TOTAL TIMEOUT: synthesis from the current state; confidence REDUCED BY TIMEOUT")
        return {"recommendation": chosen, "decision": "", "consensus": conv.consensus, "divergences": conv.divergent,
                "critical_divergence": False, "risk_level": None, "in_scope": True, "confidence": confidence,
                "divergences_explicit": explicit, "source": "state", "reduced_by_timeout": reduced}

    async def council(self, synthesis: dict | None, reasons: list[str], shared: list) -> dict:
        """The council (S3.6): members vote in parallel; >= the council threshold emits."""
        c, d = self.cfg, self.debate
        members = [c.council_roles[i % len(c.council_roles)] + (f" {i // len(c.council_roles) + 1}"
                   if c.council_size > len(c.council_roles) else "") for i in range(c.council_size)]
        context = "" if synthesis is None else P.COUNCIL_CONTEXT.format(
            reasons="; ".join(reasons), recommendation=synthesis["recommendation"], confidence=synthesis["confidence"],
            decision=synthesis["decision"], divergences="; ".join(synthesis["divergences"]) or "none",
            positions="\n".join(f"- {a}: {describe(p, self.item.options)}" for a, p in self.latest.items()))
        evidence = self.evidence(None, shared)
        turns = await d.gather((d.ask(m, [{"role": "user", "content": P.COUNCIL.format(
            member=m, size=len(members), question=self.item.question, options=self.options, evidence=evidence,
            context=context)}], c.out(Vote), phase="council", temperature=c.temperature, timeout=c.council_timeout_s)
            for m in members), timeout=c.council_timeout_s)
        votes = [{"member": t.agent, "recommendation": option_letter(t.parsed.recommendation, self.item.options),
                  "confidence": t.parsed.confidence, "rationale": t.parsed.rationale} if t.ok else
                 {"member": t.agent, "recommendation": None, "confidence": 0, "error": t.error} for t in turns]
        chosen, confidence = council_verdict([(v["recommendation"], v["confidence"]) for v in votes], len(members))
        if chosen is None and synthesis:  # no vote in time: the synthesizer's synthesis stands
            chosen = synthesis["recommendation"]
            d.log.append("COUNCIL TIMEOUT: the synthesizer's synthesis stands")
        return {"members": members, "votes": votes, "recommendation": chosen, "confidence": confidence,
                "emits": confidence >= c.council_threshold}

    # --- helpers ---------------------------------------------------------------------------
    async def retrieve(self, query: str, agent: str | None) -> list:
        chunks = await self.rag.query(query, agent)
        status = self.rag.queries[-1]["status"]
        if status != "ok":
            self.debate.log.append(f"RAG {status.upper()}: {query!r} ({agent or 'moderator'})")
        return chunks

    def evidence(self, agent: str | None, chunks: list | None = None) -> str:
        chunks = (chunks if chunks is not None else self.shown.get(agent, []))[-2 * self.cfg.rag_top_k:]
        n = self.cfg.evidence_chars
        return "\n".join(f"[RAG:{ch.id}] {ch.heading}: {ch.text[:n]}" for ch in chunks) or "none"

    def explicit_divergences(self, conv: Convergence) -> list[str]:
        values = {"recommendation": lambda p: letter(p, self.item.options), "premises": lambda p: "; ".join(p.premises),
                  "risks": lambda p: ", ".join(p.risks), "timing": lambda p: p.timing}
        return [f"{point}: " + ", ".join(f"{a}={values[point](p)}" for a, p in self.latest.items())
                for point in conv.divergent]

    def thresholds(self) -> Thresholds:
        c = self.cfg
        return Thresholds(c.convergence_threshold, c.emit_threshold, c.human_threshold, c.council_threshold,
                          c.value_at_risk_threshold)
