"""Cross-critique debate (seed 000, "Exp 07"): national vs adat law agents critique each other.

Rounds (S0.5): R1 answers in parallel; R1 cross critique, each agent on every other agent,
never itself; R2 revision from the critiques received; an optional R2 critique when the
debate has not converged (or a CRITICAL is open); an optional R3 final revision when it
still has not. `rounds` (2) is the minimum, `max_rounds` (3) the ceiling.

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

from debatekit import rules as rule_engine
from debatekit.engine import Outcome
from debatekit.protocols import cross_critique_checks as checks
from debatekit.protocols import cross_critique_prompts as P
from debatekit.protocols.cross_critique_checks import Open
from debatekit.protocols.fields import Probability
from debatekit.protocols.synthesis_judge import judge
from debatekit.registry import ProtocolError, protocol


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


@protocol("cross_critique", item=LegalItem)
def cross_critique(
    personas: list[str] = ["NLA", "ALA"],
    persona_prompts: dict[str, str] = {},
    models: dict[str, str] = {},
    rounds: Annotated[int, Field(ge=1, le=10)] = 2,
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
    known = {**P.PERSONAS, **persona_prompts}
    if unknown := [p for p in personas if p not in known]:
        raise ProtocolError(f"cross_critique: unknown persona {', '.join(map(repr, unknown))}; known: "
                            f"{', '.join(known)} (add one with persona_prompts={{name: system prompt}})")
    keys = [p.lower() for p in personas]
    if len(personas) < 2 or len(set(keys)) != len(keys) or not all(k.replace("_", "").isalnum() for k in keys):
        raise ProtocolError("cross_critique: needs at least 2 personas with distinct alphanumeric names")
    if rounds > max_rounds:
        raise ProtocolError(f"cross_critique: rounds ({rounds}) exceeds max_rounds ({max_rounds})")
    rule_set = rule_engine.load(rules) if rules else []

    async def run(item, debate):
        fired = rule_engine.evaluate(rule_set, item.facts) if item.facts else []
        valid = {p.id for p in item.context} | {r.id for r in fired}
        known_rules = {r.id for r in rule_set}
        system = {a: {"role": "system", "content": known[a]} for a in personas}
        evidence = {a: P.context_block(item.context, fired if a in rule_personas else [], passage_chars)
                    for a in personas}
        query = P.question_block(item.question, item.domain_hint)
        answers: dict[str, AgentOutput | None] = {a: None for a in personas}
        gaps: list[dict] = []
        violations: list[dict] = []
        checks_done: list[dict] = []
        opts = {"temperature": temperature}

        def ask_answer(agent: str, r: int, received: list[Open]):
            before = answers[agent]
            if before is None:  # round 1, or an agent whose earlier answer failed
                task = P.ANSWER_TASK.format(round=r, agent=agent, max_claims=max_claims)
                prompt = f"{query}\n\n{evidence[agent]}\n\n{task}"
            else:
                task = P.REVISE_TASK.format(round=r, agent=agent, max_claims=max_claims)
                prompt = (f"{query}\n\n{evidence[agent]}\n\nYour previous answer (round {before.round}):\n"
                          f"{P.show_answer(before)}\n\nCritiques you received:\n{P.show_critiques(received)}\n\n{task}")
            return debate.ask(agent, [system[agent], {"role": "user", "content": prompt}], AnswerBody,
                              phase="answer" if r == 1 else "revise", round=r, max_tokens=answer_tokens,
                              model=models.get(agent), **opts)

        async def answer_round(r: int, standing: list[Open]) -> dict[str, float | None]:
            turns = await debate.gather(ask_answer(a, r, [o for o in standing if o.target == a]) for a in personas)
            changes = {}
            for turn in turns:
                a, before = turn.agent, answers[turn.agent]
                if not turn.ok:
                    debate.log.append(f"NO_OUTPUT: {a} in {turn.phase} round {r}: {turn.error}")
                    changes[a] = None
                    continue
                body: AnswerBody = turn.parsed
                if len(body.claims) > max_claims:
                    violations.append({"round": r, "agent": a, "guard": "claims_capped",
                                       "detail": f"{len(body.claims)} claims, kept {max_claims}"})
                output = AgentOutput(round=r, agent=a, answer=body.answer, claims=body.claims[:max_claims],
                                     uncertainties=body.uncertainties, open_questions=body.open_questions)
                answers[a] = output
                gaps.extend(checks.evidence_gaps(a, r, output.claims, valid, known_rules))
                debate.write(f"debate_round{r}_{a.lower()}.json", output)
                changes[a] = checks.answer_change(before.answer if before else None, output.answer)
            return changes

        async def critique_one(critic: str, target: str, r: int) -> list[Open]:
            shown = answers[target]
            target_gaps = [g for g in gaps if g["agent"] == target and g["round"] == shown.round]
            task = P.CRITIQUE_TASK.format(round=r, agent=critic, target=target,
                                          at_least=f"at least {min_critiques} " if r == 1 and min_critiques else "")
            prompt = (f"{query}\n\n{evidence[critic]}\n\nAnswer of {target} (round {shown.round}):\n"
                      f"{P.show_answer(shown)}{P.show_gaps(target_gaps)}\n\n{task}")
            talk = [system[critic], {"role": "user", "content": prompt}]
            ask = dict(phase="critique", round=r, max_tokens=critique_tokens, model=models.get(critic), **opts)
            turn = await debate.ask(critic, talk, CritiqueBody, **ask)
            problems = checks.critique_problems(turn.parsed.critiques, r, min_critiques) if turn.ok else []
            if problems:  # S0.8: re-asked once, then recorded as a violation
                talk += [{"role": "assistant", "content": turn.text},
                         {"role": "user", "content": P.REASK.format(problems="; ".join(problems),
                                                                    min_critiques=min_critiques)}]
                retry = await debate.ask(critic, talk, CritiqueBody, **{**ask, "phase": "critique_retry"})
                if retry.ok:
                    turn, problems = retry, checks.critique_problems(retry.parsed.critiques, r, min_critiques)
                violations.extend({"round": r, "agent": critic, "target": target, "guard": p.split(":")[0],
                                   "detail": p} for p in problems)
            if not turn.ok:
                debate.log.append(f"NO_OUTPUT: {critic} in critique of {target} round {r}: {turn.error}")
                return []
            output = CritiqueOutput(round=r, agent=critic, target=target, critiques=turn.parsed.critiques)
            debate.write(f"critique_round{r}_{critic.lower()}_on_{target.lower()}.json", output)
            return [Open(critic, target, c) for c in output.critiques]

        async def critique_round(r: int) -> list[Open]:
            pairs = [(a, b) for a in personas for b in personas if a != b and answers[b] is not None]
            results = await asyncio.gather(*(critique_one(a, b, r) for a, b in pairs))  # in parallel
            return [o for group in results for o in group]

        def check(r: int, after: str, standing: list[Open], changes: dict) -> dict:
            state = checks.convergence(standing, changes, max_major=max_major, max_change=max_change,
                                       mode=convergence)
            checks_done.append({"round": r, "after": after, **state})
            return state

        def record(r: int, standing: list[Open], changes: dict) -> None:
            debate.record_round(r, {a: o.answer if o else None for a, o in answers.items()},
                                answer_change=changes, critiques=_counts(standing),
                                checks=[c for c in checks_done if c["round"] == r])

        # R1: answers, then cross critique
        changes = await answer_round(1, [])
        standing = await critique_round(1)
        state, ended, last = None, "max_rounds", 1
        if rounds == 1 or max_rounds == 1:
            state = check(1, "critique", standing, {})
        record(1, standing, changes)
        for r in range(2, max_rounds + 1):
            if state is not None and state["converged"] and r > rounds:
                break
            if debate.timed_out or debate.over_budget:
                ended = "timeout" if debate.timed_out else "budget"
                break
            last = r
            changes = await answer_round(r, standing)
            state = check(r, "revision", standing, changes)
            if r >= rounds and state["converged"] and not state["critical"] or r == max_rounds:
                record(r, standing, changes)
                break
            standing = await critique_round(r)  # the optional critique: conflict still high
            state = check(r, "critique", standing, changes)
            record(r, standing, changes)
        converged = bool(state and state["converged"])
        if converged:
            ended = "converged"
        debate.stop_reason = ended

        # S0.7 escalation on the final state
        unsupported = {a: checks.unsupported_share(o.claims, valid) for a, o in answers.items() if o}
        triggers = checks.escalation(standing, changes, unsupported, converged=converged, ended=ended,
                                     last_round=last, max_unsupported=max_unsupported, max_change=max_change)
        final_gaps = [g for g in gaps if answers[g["agent"]] and g["round"] == answers[g["agent"]].round]
        summary = {**checks.summarize(item.question, answers, standing, valid, final_gaps),
                   "rounds_used": last, "converged": converged, "stop_reason": ended,
                   "escalation": triggers, "guard_violations": violations, "rule_results": [r.id for r in fired]}
        debate.write("debate_summary.json", summary)

        # supervisor: only the summary and the final revisions (their claims are in the summary)
        finals = "\n".join(f"{a} (round {o.round}): {o.answer}" for a, o in answers.items() if o)
        synth = await debate.ask("SUP", [{"role": "system", "content": P.SUPERVISOR}, {"role": "user", "content":
                                 P.SYNTHESIS_TASK.format(summary=json.dumps(summary, ensure_ascii=False),
                                                         finals=finals)}],
                                 Synthesis, phase="synthesis", round=None, max_tokens=answer_tokens,
                                 model=supervisor_model, temperature=0.0)
        synthesis = synth.parsed if synth.ok else None
        if synthesis:
            debate.write("supervisor_synthesis.json", synthesis)
        text = synthesis.synthesis + "".join(f"\n- {k}" for k in synthesis.key_points) if synthesis else None
        score, judgement = await judge(debate, item, text, judge_model)
        reason = "; ".join(f"{t['trigger']}: {t['detail']}" for t in triggers) or None
        return Outcome(
            final_answer=synthesis.synthesis if synthesis else None, converged=converged,
            needs_human_review=bool(triggers), escalation_reason=reason, score=score,
            output={"rounds_used": last, "stop_reason": ended, "checks": checks_done, "escalation": triggers,
                    "guard_violations": violations, "evidence_gaps": gaps, "unsupported": unsupported,
                    "rule_results": [r.id for r in fired], "judgement": judgement,
                    "synthesis": synthesis.model_dump() if synthesis else None})

    return run


async def node(state: dict, *, model: str | None = None, folder: str | None = None, **params) -> dict:
    """The debate as one workflow-graph node (the seed's LangGraph placement).

    `state` holds the seed's inputs `query`, `context` (passages `{id, text, source?, kind?}`),
    optional `domain_hint` and `facts`; the node returns the state plus `debate` (`answer`: the
    supervisor's synthesis, convergence, escalation, checks) and `needs_human_review`; files go
    to `folder` if given.
    """
    from pathlib import Path

    from debatekit import registry
    from debatekit.engine import Debate
    from debatekit.gateway import Gateway, default_model

    passages = [Passage(id=str(p["id"]), text=p["text"], source=p.get("source", ""), kind=p.get("kind", "passage"))
                for p in state.get("context", [])]
    item = LegalItem(id=str(state.get("id", "node")), question=state["query"], domain_hint=state.get("domain_hint"),
                     context=passages, facts=state.get("facts", {}))
    solver = registry.get("cross_critique").build(params)
    debate = Debate(item, gateway=Gateway(), model=model or default_model(), run_id="node", debate_id="node",
                    folder=Path(folder) if folder else None)
    outcome = await solver(item, debate)
    result = {**outcome.output, "answer": outcome.final_answer, "converged": outcome.converged,
              "escalation_reason": outcome.escalation_reason, "usage": debate.usage.model_dump()}
    return {**state, "debate": result, "needs_human_review": outcome.needs_human_review}


def _counts(standing: list[Open]) -> dict:
    severities = [o.critique.severity for o in standing]
    return {s: severities.count(s) for s in ("CRITICAL", "MAJOR", "MINOR")}
