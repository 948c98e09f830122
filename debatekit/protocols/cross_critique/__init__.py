"""Cross-critique debate (seed 000, "Exp 07"): national vs adat law agents critique each other.

Rounds (S0.5): R1 answers in parallel; R1 cross critique, each agent on every other agent,
never itself; R2 revision from the critiques received; an optional R2 critique when the
debate has not converged (or a CRITICAL is open); an optional R3 final revision when it
still has not. `min_rounds` (2) is the minimum, `max_rounds` (3) the ceiling (`--rounds`).

Convergence (S0.6), checked after every revision (on the critiques it answered) and after
every optional critique (on the new critiques): `few_severe` (no CRITICAL, MAJOR <= 1),
`no_domain_conflict`, `stable` (answer change < `max_change` and no CRITICAL). The seed
ends the debate when one of them holds (`convergence="any"`). The answer change is the
word-level difflib ratio of consecutive `answer` texts (see `cross_critique_checks`),
reported per round and agent in `debates.jsonl` and the trace.

Escalation (S0.7) sets `needs_human_review` with the triggers as reason; evidence is checked
by code: a cited id that is neither a context passage nor a rule that fired is a gap.
Files per debate (S0.9): debate_round{r}_{agent}.json, critique_round{r}_{a}_on_{b}.json,
debate_summary.json, supervisor_synthesis.json, score.json.
"""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from debatekit.engine import Outcome, Phase
from debatekit.protocols.cross_critique import checks, prompts as P, rules as rule_engine
from debatekit.protocols.cross_critique.checks import Open
from debatekit.protocols.cross_critique.judge import judge
from debatekit.protocols.cross_critique.params import Params
from debatekit.protocols.cross_critique.review import review_lines
from debatekit.protocols.shared.fields import Probability
from debatekit.registry import Node, ProtocolError, Views, protocol

# --- dataset item ---------------------------------------------------------------------------

class Passage(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    source: str
    kind: str
    text: str


class LegalItem(BaseModel):
    """A legal question with retrieved context passages and structured facts (legal_conflicts)."""

    model_config = ConfigDict(extra="forbid")
    id: str
    question: str
    domain_hint: str | None = None
    context: list[Passage]
    facts: dict[str, Any] = {}
    reference: str | None = None
    must_mention: list[str] = []
    expected_conflict: bool | None = None


# --- agent outputs (the seed's JSON shapes) -------------------------------------------------

Short = Annotated[str, Field(json_schema_extra={"maxLength": 120})]  # bounded list items for the local model
Id = Annotated[str, Field(json_schema_extra={"maxLength": 12})]


class Claim(BaseModel):
    id: str = Field(description="Claim id: C1, C2, ...", json_schema_extra={"maxLength": 6})
    statement: str = Field(description="The claim in one sentence.", json_schema_extra={"maxLength": 220})
    evidence: list[Id] = Field(description="Ids of the passages or rules that support it (P1, R-MIN-1).",
                               json_schema_extra={"maxItems": 3})
    confidence: Probability = Field(description="0 to 1.")
    assumptions: list[Short] = Field(description="Assumptions the claim relies on.", json_schema_extra={"maxItems": 2})


class AnswerBody(BaseModel):
    """What an agent writes in an answer or revision round."""

    answer: str = Field(description="Short, structured answer.", json_schema_extra={"maxLength": 500})
    claims: list[Claim] = Field(description="Main claims (the engine caps them).", json_schema_extra={"maxItems": 10})
    uncertainties: list[Short] = Field(description="What is uncertain.", json_schema_extra={"maxItems": 2})
    open_questions: list[Short] = Field(description="Questions left open.", json_schema_extra={"maxItems": 2})


class AgentOutput(BaseModel):
    """The seed's per-round agent output: debate_round{r}_{agent}.json."""

    round: int
    agent: str
    answer: str
    claims: list[Claim]
    uncertainties: list[str]
    open_questions: list[str]


class Critique(BaseModel):
    model_config = ConfigDict(json_schema_extra=lambda s: s.update(required=list(s["properties"])))
    id: str = Field(description="Critique id: K1, K2, ...", json_schema_extra={"maxLength": 6})
    target_claim_id: str = Field(description="Id of the criticised claim.", json_schema_extra={"maxLength": 6})
    issue_type: Literal["evidence_gap", "logic_gap", "conflict", "domain_mismatch", "overclaim"]
    description: str = Field(description="The specific critique.", json_schema_extra={"maxLength": 220})
    severity: Literal["CRITICAL", "MAJOR", "MINOR"]
    suggested_fix: str = Field("", description="A concrete fix (mandatory).", json_schema_extra={"maxLength": 200})


class CritiqueBody(BaseModel):
    critiques: list[Critique] = Field(description="The critiques.", json_schema_extra={"maxItems": 5})


class CritiqueOutput(BaseModel):
    """The seed's critique format: critique_round{r}_{agent}_on_{target}.json."""

    round: int
    agent: str
    target: str
    critiques: list[Critique]


class Synthesis(BaseModel):
    synthesis: str = Field(description="The supervisor's answer to the query.", json_schema_extra={"maxLength": 1000})
    key_points: list[Short] = Field(description="At most 5 key points.", json_schema_extra={"maxItems": 5})
    confidence: Probability


class CrossCritiqueOutput(BaseModel):
    """`Outcome.output` of cross_critique: the debate summary's verdicts, checks and the synthesis."""

    model_config = ConfigDict(extra="forbid")
    rounds_used: int
    stop_reason: str
    checks: list[dict[str, Any]]
    escalation: list[dict[str, Any]]
    guard_violations: list[dict[str, Any]]
    evidence_gaps: list[dict[str, Any]]
    unsupported: dict[str, float]
    rule_results: list[str]
    judgement: dict[str, Any] | None
    synthesis: Synthesis | None


def _node_item(state: dict) -> LegalItem:
    """The seed's node inputs: `query`, `context` (passages `{id, text, source?, kind?}`), `domain_hint?`, `facts?`."""
    passages = [Passage(id=str(p["id"]), text=p["text"], source=p.get("source", ""), kind=p.get("kind", "passage"))
                for p in state.get("context", [])]
    return LegalItem(id=str(state.get("id", "node")), question=state["query"], domain_hint=state.get("domain_hint"),
                     context=passages, facts=state.get("facts", {}))


def _node_result(state: dict, outcome: Outcome, debate) -> dict:
    """The state plus `debate` (the synthesis as `answer`, convergence, escalation, checks) and `needs_human_review`."""
    result = {**outcome.output, "answer": outcome.final_answer, "converged": outcome.converged,
              "escalation_reason": outcome.escalation_reason, "usage": debate.usage.model_dump()}
    return {**state, "debate": result, "needs_human_review": outcome.needs_human_review}


@protocol("cross_critique", paper="seed 000", item=LegalItem, node=Node(_node_item, _node_result),
          output=CrossCritiqueOutput, flags={"agents": None, "rounds": "max_rounds"}, views=Views(review=review_lines))
def cross_critique(
    agents: list[str] = ["NLA", "ALA"],
    persona_prompts: dict[str, str] = {},
    models: dict[str, str] = {},
    min_rounds: Annotated[int, Field(ge=1, le=10)] = 2,
    max_rounds: Annotated[int, Field(ge=1, le=10)] = 3,
    convergence: Literal["any", "all"] = "any",
    max_major: Annotated[int, Field(ge=0)] = 1,
    max_change: Annotated[float, Field(ge=0, le=1)] = 0.15,
    max_unsupported: Annotated[float, Field(ge=0, le=1)] = 0.3,
    min_critiques: Annotated[int, Field(ge=0)] = 3,
    max_claims: Annotated[int, Field(ge=1)] = 8,
    rules: str | None = "legal_rules",
    rule_personas: list[str] = ["ALA"],
    passage_chars: Annotated[int, Field(ge=50)] | None = 600,
    temperature: float = 0.3,
    answer_tokens: Annotated[int, Field(ge=64)] = 900,
    critique_tokens: Annotated[int, Field(ge=64)] = 700,
    supervisor_model: str | None = None,
    judge_model: str | None = None,
):
    """Two legal agents (NLA, ALA) answer, cross-critique and revise; supervisor synthesis, judge score."""
    params = dict(locals())  # the parameters, before any other name is bound
    known = {**P.PERSONAS, **persona_prompts}
    if unknown := [p for p in agents if p not in known]:
        raise ProtocolError(f"cross_critique: unknown persona {', '.join(map(repr, unknown))}; known: "
                            f"{', '.join(known)} (add one with persona_prompts={{name: system prompt}})")
    keys = [p.lower() for p in agents]
    if len(agents) < 2 or len(set(keys)) != len(keys) or not all(k.replace("_", "").isalnum() for k in keys):
        raise ProtocolError("cross_critique: needs at least 2 agents with distinct alphanumeric names")
    if min_rounds > max_rounds:
        raise ProtocolError(f"cross_critique: min_rounds ({min_rounds}) exceeds max_rounds ({max_rounds})")
    cfg = Params(**params, prompts={a: known[a] for a in agents}, rule_set=rule_engine.load(rules) if rules else [])

    async def run(item, debate) -> Outcome:
        return await Session(cfg, item, debate).run()

    return run


class Session:
    """One debate: the agents' latest answers, the standing critiques and what the checks found."""

    def __init__(self, cfg: Params, item: LegalItem, debate):
        self.cfg, self.item, self.debate = cfg, item, debate
        self.fired = rule_engine.evaluate(cfg.rule_set, item.facts) if item.facts else []
        self.valid = {p.id for p in item.context} | {r.id for r in self.fired}
        self.known_rules = {r.id for r in cfg.rule_set}
        self.system = {a: {"role": "system", "content": cfg.prompts[a]} for a in cfg.agents}
        self.evidence = {a: P.context_block(item.context, self.fired if a in cfg.rule_personas else [],
                                            cfg.passage_chars) for a in cfg.agents}
        self.query = P.question_block(item.question, item.domain_hint)
        self.answers: dict[str, AgentOutput | None] = {a: None for a in cfg.agents}
        self.standing: list[Open] = []  # the critiques of the latest critique phase
        self.changes: dict[str, float | None] = {}  # answer change of the latest answer phase
        self.state: dict | None = None  # the latest convergence check
        self.gaps: list[dict] = []
        self.violations: list[dict] = []
        self.checks: list[dict] = []

    async def run(self) -> Outcome:
        c, d = self.cfg, self.debate
        ended = await d.rounds([Phase(self.answer_phase), Phase(self.critique_phase, when=self.critique_due),
                                Phase(self.record)], c.max_rounds, stop=[self.converged], min_rounds=c.min_rounds)
        converged = bool(self.state and self.state["converged"])
        if converged:
            ended = d.stop_reason = "converged"
        last = len(d.history)
        # S0.7 escalation on the final state
        unsupported = {a: checks.unsupported_share(o.claims, self.valid) for a, o in self.answers.items() if o}
        triggers = checks.escalation(self.standing, self.changes, unsupported, converged=converged, ended=ended,
                                     last_round=last, max_unsupported=c.max_unsupported, max_change=c.max_change)
        final_gaps = [g for g in self.gaps if self.answers[g["agent"]]
                      and g["round"] == self.answers[g["agent"]].round]
        summary = {**checks.summarize(self.item.question, self.answers, self.standing, self.valid, final_gaps),
                   "rounds_used": last, "converged": converged, "stop_reason": ended, "escalation": triggers,
                   "guard_violations": self.violations, "rule_results": [r.id for r in self.fired]}
        d.write("debate_summary.json", summary)
        synthesis = await self.synthesize(summary)
        text = synthesis.synthesis + "".join(f"\n- {k}" for k in synthesis.key_points) if synthesis else None
        score, judgement = await judge(d, self.item, text, c.judge_model)
        reason = "; ".join(f"{t['trigger']}: {t['detail']}" for t in triggers) or None
        return Outcome(
            final_answer=synthesis.synthesis if synthesis else None, converged=converged,
            needs_human_review=bool(triggers), escalation_reason=reason, score=score,
            output={"rounds_used": last, "stop_reason": ended, "checks": self.checks, "escalation": triggers,
                    "guard_violations": self.violations, "evidence_gaps": self.gaps, "unsupported": unsupported,
                    "rule_results": [r.id for r in self.fired], "judgement": judgement,
                    "synthesis": synthesis.model_dump() if synthesis else None})

    # --- the round: answers (or revisions), the optional critique, the record ------------------
    def critique_due(self, r: int) -> bool:
        """Round 1 always critiques; later rounds only while a revision may follow (S0.5)."""
        return r == 1 or r < self.cfg.max_rounds

    def converged(self, history) -> str | None:
        """Stop rule: the latest check converged (after a revision, only with no CRITICAL open)."""
        s = self.checks[-1] if self.checks else None
        return "converged" if s and s["converged"] and (s["after"] == "critique" or not s["critical"]) else None

    async def answer_phase(self, r: int) -> None:
        received = {a: [o for o in self.standing if o.target == a] for a in self.cfg.agents}
        turns = await self.debate.gather(self.ask_answer(a, r, received[a]) for a in self.cfg.agents)
        self.changes = {turn.agent: self.take_answer(turn, r) for turn in turns}
        if r > 1:
            self.check(r, "revision")

    async def critique_phase(self, r: int) -> None:
        pairs = [(a, b) for a in self.cfg.agents for b in self.cfg.agents if a != b and self.answers[b]]
        results = await asyncio.gather(*(self.critique_one(a, b, r) for a, b in pairs))  # in parallel
        self.standing = [o for group in results for o in group]
        if r > 1 or self.cfg.min_rounds == 1 or self.cfg.max_rounds == 1:
            self.check(r, "critique")

    async def record(self, r: int) -> None:
        self.debate.record_round(r, {a: o.answer if o else None for a, o in self.answers.items()},
                                 answer_change=self.changes,
                                 critiques=_counts(self.standing),
                                 checks=[c for c in self.checks if c["round"] == r])

    def check(self, r: int, after: str) -> None:
        c = self.cfg
        changes = self.changes if after == "revision" or r > 1 else {}
        self.state = checks.convergence(self.standing, changes, max_major=c.max_major, max_change=c.max_change,
                                        mode=c.convergence)
        self.checks.append({"round": r, "after": after, **self.state})

    # --- answers -------------------------------------------------------------------------------
    def ask_answer(self, agent: str, r: int, received: list[Open]):
        c, before = self.cfg, self.answers[agent]
        if before is None:  # round 1, or an agent whose earlier answer failed
            task = P.ANSWER_TASK.format(round=r, agent=agent, max_claims=c.max_claims)
            prompt = f"{self.query}\n\n{self.evidence[agent]}\n\n{task}"
        else:
            task = P.REVISE_TASK.format(round=r, agent=agent, max_claims=c.max_claims)
            prompt = (f"{self.query}\n\n{self.evidence[agent]}\n\nYour previous answer (round {before.round}):\n"
                      f"{P.show_answer(before)}\n\nCritiques you received:\n{P.show_critiques(received)}\n\n{task}")
        return self.debate.ask(agent, [self.system[agent], {"role": "user", "content": prompt}], AnswerBody,
                               phase="answer" if r == 1 else "revise", round=r, max_tokens=c.answer_tokens,
                               model=c.models.get(agent), temperature=c.temperature)

    def take_answer(self, turn, r: int) -> float | None:
        """Keep an agent's answer (claims capped, evidence checked, file written); its change, if known."""
        a, before, d = turn.agent, self.answers[turn.agent], self.debate
        if not turn.ok:
            d.log.append(f"NO_OUTPUT: {a} in {turn.phase} round {r}: {turn.error}")
            return None
        body: AnswerBody = turn.parsed
        if len(body.claims) > self.cfg.max_claims:
            self.violations.append({"round": r, "agent": a, "guard": "claims_capped",
                                    "detail": f"{len(body.claims)} claims, kept {self.cfg.max_claims}"})
        output = AgentOutput(round=r, agent=a, answer=body.answer, claims=body.claims[:self.cfg.max_claims],
                             uncertainties=body.uncertainties, open_questions=body.open_questions)
        self.answers[a] = output
        self.gaps.extend(checks.evidence_gaps(a, r, output.claims, self.valid, self.known_rules))
        d.write(f"debate_round{r}_{a.lower()}.json", output)
        return checks.answer_change(before.answer if before else None, output.answer)

    # --- critiques -----------------------------------------------------------------------------
    async def critique_one(self, critic: str, target: str, r: int) -> list[Open]:
        c, d, shown = self.cfg, self.debate, self.answers[target]
        target_gaps = [g for g in self.gaps if g["agent"] == target and g["round"] == shown.round]
        task = P.CRITIQUE_TASK.format(round=r, agent=critic, target=target,
                                      at_least=f"at least {c.min_critiques} " if r == 1 and c.min_critiques else "")
        prompt = (f"{self.query}\n\n{self.evidence[critic]}\n\nAnswer of {target} (round {shown.round}):\n"
                  f"{P.show_answer(shown)}{P.show_gaps(target_gaps)}\n\n{task}")
        talk = [self.system[critic], {"role": "user", "content": prompt}]
        ask = dict(phase="critique", round=r, max_tokens=c.critique_tokens, model=c.models.get(critic),
                   temperature=c.temperature)
        turn = await d.ask(critic, talk, CritiqueBody, **ask)
        problems = checks.critique_problems(turn.parsed.critiques, r, c.min_critiques) if turn.ok else []
        if problems:  # S0.8: re-asked once, then recorded as a violation
            talk += [{"role": "assistant", "content": turn.text},
                     {"role": "user", "content": P.REASK.format(problems="; ".join(problems),
                                                                min_critiques=c.min_critiques)}]
            retry = await d.ask(critic, talk, CritiqueBody, **{**ask, "phase": "critique_retry"})
            if retry.ok:
                turn, problems = retry, checks.critique_problems(retry.parsed.critiques, r, c.min_critiques)
            self.violations.extend({"round": r, "agent": critic, "target": target, "guard": p.split(":")[0],
                                    "detail": p} for p in problems)
        if not turn.ok:
            d.log.append(f"NO_OUTPUT: {critic} in critique of {target} round {r}: {turn.error}")
            return []
        output = CritiqueOutput(round=r, agent=critic, target=target, critiques=turn.parsed.critiques)
        d.write(f"critique_round{r}_{critic.lower()}_on_{target.lower()}.json", output)
        return [Open(critic, target, k) for k in output.critiques]

    # --- after the rounds ----------------------------------------------------------------------
    async def synthesize(self, summary: dict) -> Synthesis | None:
        """The supervisor sees only the summary and the final revisions (their claims are in the summary)."""
        finals = "\n".join(f"{a} (round {o.round}): {o.answer}" for a, o in self.answers.items() if o)
        turn = await self.debate.ask("SUP", [{"role": "system", "content": P.SUPERVISOR}, {"role": "user", "content":
                                     P.SYNTHESIS_TASK.format(summary=json.dumps(summary, ensure_ascii=False),
                                                             finals=finals)}],
                                     Synthesis, phase="synthesis", round=None, max_tokens=self.cfg.answer_tokens,
                                     model=self.cfg.supervisor_model, temperature=0.0)
        if turn.ok:
            self.debate.write("supervisor_synthesis.json", turn.parsed)
        return turn.parsed if turn.ok else None


def _counts(standing: list[Open]) -> dict:
    severities = [o.critique.severity for o in standing]
    return {s: severities.count(s) for s in ("CRITICAL", "MAJOR", "MINOR")}
