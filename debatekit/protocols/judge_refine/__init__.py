"""Judge-scored iterative refinement of root-cause hypotheses (seed 004, SPEC S4).

Round 1: agents with distinct focus (log_focused, kg_focused, hybrid) each give 3-5
hypotheses; a judge scores every hypothesis 0-100 with strengths, weaknesses and feedback and
picks a top one. Rounds 2..N: each reasoner refines its best hypothesis from its previous
hypothesis and score, the judge's feedback and the other agents' top hypotheses, and says
what it changed; the judge scores the refined ones. The debate stops on a score plateau (the
top score improves by less than `min_improvement`), on consensus (every reasoner's top
hypothesis has the same category and overlapping affected components), or at `rounds`.

Bias guard: the judge sees the hypotheses under neutral labels H1..Hn, sources hidden, in an
order shuffled per item and round (seeded by the run seed); the order is in the output and
in `items/<id>/judge_round<r>.json`. The final hypothesis is the best-scored of all rounds.
"""

from __future__ import annotations

import warnings
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from debatekit.engine import Outcome
from debatekit.engine.stopping import plateau
from debatekit.models.budget import reply_tokens
from debatekit.protocols.judge_refine import hypotheses as logic
from debatekit.protocols.judge_refine.params import Params
from debatekit.protocols.judge_refine.prompts import (FOCUS, GRADE_PROMPT, JUDGE_SYSTEM, initial_prompt, judge_prompt,
                                                      messages, refine_prompt)
from debatekit.protocols.judge_refine.report import report
from debatekit.protocols.shared.fields import Probability, caps
from debatekit.registry import ProtocolError, Views, protocol

Category = Literal["hardware", "software", "network", "config", "resource"]


def _text(n: int, description: str):
    return Field(description=description, json_schema_extra={"maxLength": n})


Short = Annotated[str, Field(json_schema_extra={"maxLength": 100})]
Name = Annotated[str, Field(json_schema_extra={"maxLength": 40})]


class KBNote(BaseModel):
    """A past incident of the knowledge base."""

    model_config = ConfigDict(extra="forbid")
    id: str
    title: str
    summary: str
    root_cause: str
    resolution: str


class Incident(BaseModel):
    """One row of datasets/incidents.jsonl."""

    model_config = ConfigDict(extra="forbid")
    id: str
    question: str
    logs: str
    knowledge: list[KBNote]
    root_cause: str
    keywords: list[str | list[str]]
    category: Category


class Hypothesis(BaseModel):
    """A root-cause hypothesis (S4.1)."""

    hypothesis: str = _text(160, "The root cause in one sentence: the failing component and what went wrong.")
    confidence: Probability = Field(description="How sure you are, 0.0-1.0.")
    reasoning: str = _text(200, "Why this is the cause, briefly.")
    evidence: list[Short] = Field(max_length=3, description="Up to 3 short quotes of log lines or KB ids.")
    category: Category
    affected_components: list[Name] = Field(max_length=3, description="Up to 3 component names.")
    suggested_resolution: str = _text(180, "The fix, in short steps.")


class RefinedHypothesis(Hypothesis):
    """A refined hypothesis (S4.3)."""

    changes_made: str = _text(160, "Summary of refinements.")


class Evaluation(BaseModel):
    """The judge's verdict on one hypothesis (S4.2)."""

    strengths: list[Short] = Field(max_length=2, description="What the hypothesis gets right.")
    weaknesses: list[Short] = Field(max_length=2, description="What is missing or wrong.")
    feedback: str = _text(160, "What to change to score higher.")
    score: int = Field(ge=0, le=100, description="0-100: explains all errors, real evidence, specific, workable fix.")


def hypotheses_model(n: int) -> type[BaseModel]:
    return create_model("Hypotheses", hypotheses=(list[Hypothesis], Field(
        min_length=3, max_length=n, description=f"3 to {n} different hypotheses, most likely first.")))


def judge_schema(labels: list[str]) -> type[BaseModel]:
    """One required evaluation per label, in order, then the top pick (bounded, nothing skipped)."""
    fields: dict[str, Any] = {label: (Evaluation, ...) for label in labels}
    fields["top_hypothesis"] = (Literal[tuple(labels)], Field(description="Label of the best hypothesis."))
    return create_model("JudgeEvaluation", **fields)


class Grade(BaseModel):
    """Optional scorer: does the final hypothesis name the true root cause?"""

    explanation: str = _text(200, "What matches and what differs.")
    same_cause: bool
    score: int = Field(ge=0, le=100, description="100: the same root cause; 0: unrelated.")


class JudgeRefineOutput(BaseModel):
    """`Outcome.output` of judge_refine: the seed's result (rounds, final hypothesis, convergence, trajectory)."""

    model_config = ConfigDict(extra="forbid")
    rounds: list[dict[str, Any]]
    final_hypothesis: dict[str, Any] | None
    convergence_achieved: bool
    total_rounds: int
    improvement_trajectory: list[int | None]


@protocol("judge_refine", paper="seed 004", item=Incident, output=JudgeRefineOutput,
          flags={"agents": None}, views=Views(debate=report))
def judge_refine(
    agents: list[str] = ["log_focused", "kg_focused", "hybrid"],
    focus: dict[str, str] = {},
    hypotheses: Annotated[int, Field(ge=3, le=5)] = 3,
    rounds: Annotated[int, Field(ge=1, le=10)] = 3,
    min_improvement: float = 5.0,
    stop_on_consensus: bool = True,
    shuffle: bool = True,
    judge_log_lines: Annotated[int, Field(ge=0, le=50)] = 10,
    temperature: float = 0.7,
    judge_temperature: float = 0.2,
    score_with_judge: bool = False,
    models: dict[str, str] = {},
    judge_model: str | None = None,
    text_caps: bool = True,
):
    """Reasoners propose root-cause hypotheses; a judge scores them; agents refine until plateau.

    `text_caps=false` sends the reply models without their character caps (`fields.uncapped`); each
    call's token budget, derived from the schema, grows to match (a string with no cap counts
    `budget.UNBOUNDED_STRING` characters). The grader of `score_with_judge` keeps its schema either
    way: it measures the protocol, so a capped and an uncapped run are scored by the same grader."""
    params = dict(locals())  # the parameters, before any other name is bound
    names, focus_of = _reasoners(agents, focus)
    if "judge" in models and "judge" not in names:
        warnings.warn("judge_refine: models['judge'] is now judge_model; the old key goes in the next release",
                      DeprecationWarning, stacklevel=2)
        params["judge_model"] = judge_model or models["judge"]
    cfg = Params(**params, names=names, focus_of=focus_of, hyp_model=hypotheses_model(hypotheses),
                 out=caps(text_caps))

    async def run(item, debate) -> Outcome:
        return await Session(cfg, item, debate).run()

    return run


class Session:
    """One debate: each reasoner's best scored hypothesis so far and the seed's per-round output."""

    def __init__(self, cfg: Params, item: Incident, debate):
        self.cfg, self.item, self.debate = cfg, item, debate
        self.tops: dict[str, dict] = {}  # each reasoner's best hypothesis of its latest scored round
        self.rounds_out: list[dict] = []

    async def run(self) -> Outcome:
        c, d = self.cfg, self.debate
        stop = [lambda h: "consensus" if h[-1].extra.get("consensus") else None] if c.stop_on_consensus else []
        reason = await d.rounds(self.step, c.rounds, stop=[*stop, plateau("top_score", c.min_improvement)])
        final = _final(self.rounds_out)
        output = {"rounds": self.rounds_out, "final_hypothesis": final,
                  # a plateau counts even in the last round: the seed's expected report for 3 of 3 rounds says
                  # "Convergence: Achieved (score plateau)" (its code's `len(rounds) < max_rounds` would not)
                  "convergence_achieved": reason in ("plateau", "consensus"), "total_rounds": len(self.rounds_out),
                  "improvement_trajectory": [r["top_hypothesis"] and r["top_hypothesis"]["judge_score"]
                                             for r in self.rounds_out]}
        correct, score = await _score(d, self.item, final, c.score_with_judge, c.models.get("grader"))
        unscored = final is None or final["judge_score"] is None
        return Outcome(final_answer=final and final["hypothesis"], output=output, correct=correct, score=score,
                       converged=output["convergence_achieved"], needs_human_review=unscored,
                       escalation_reason="the judge scored no hypothesis" if unscored else None)

    def ask(self, name: str, r: int, refine: bool):
        c, d, item = self.cfg, self.debate, self.item
        prompt = refine_prompt(name, self.tops) if refine else initial_prompt(c.hypotheses)
        schema, phase = (c.out(RefinedHypothesis), "refine") if refine else (c.out(c.hyp_model), "hypothesize")
        return d.ask(name, messages(name, c.focus_of[name], item, c.judge_log_lines, prompt), schema, phase=phase,
                     round=r, temperature=c.temperature, model=c.models.get(name), max_tokens=reply_tokens(schema))

    async def step(self, r: int) -> None:
        c, d, names = self.cfg, self.debate, self.cfg.names
        refine = [n for n in names if r > 1 and n in self.tops]
        proposals = {}
        for t in await d.gather(self.ask(n, r, n in refine) for n in names):
            items = ([t.parsed.model_dump()] if t.agent in refine else
                     [h.model_dump() for h in t.parsed.hypotheses]) if t.ok else []
            proposals[t.agent] = [dict(h, source=t.agent, round=r) for h in items]
        order = logic.judge_order([(n, i) for n in names for i in range(len(proposals[n]))],
                                  d.seed, self.item.id, r, shuffle=c.shuffle)
        evaluation = await self.judge(r, order, proposals)
        feedback = {(e["source"], e["index"]): e for e in evaluation["evaluations"]}
        best = {n: max((dict(h, evaluation=feedback[(n, i)]) for i, h in enumerate(proposals[n])
                        if (n, i) in feedback), key=lambda h: h["judge_score"], default=None) for n in names}
        self.tops.update({n: h for n, h in best.items() if h is not None})
        top = evaluation.pop("top")
        self.rounds_out.append({"round_number": r, "hypotheses": proposals, "judge_evaluation": evaluation,
                                "top_hypothesis": top})
        d.record_round(r, {n: h["hypothesis"] if h else None for n, h in best.items()},
                       top_score=top and top["judge_score"], top_source=top and top["source"],
                       scores={n: h and h["judge_score"] for n, h in best.items()}, consensus=logic.consensus(best))

    async def judge(self, r: int, order: list[dict], proposals: dict) -> dict:
        """Score this round's hypotheses; annotate them with `judge_score`; pick the top one."""
        c, d, item = self.cfg, self.debate, self.item
        shown = [dict(o, **proposals[o["source"]][o["index"]]) for o in order]
        result = {"order": order, "shuffled": c.shuffle, "sources_hidden": True, "evaluations": [],
                  "judge_top_pick": None, "ok": False, "error": None, "top": None}
        if not shown:
            result["error"] = "no hypotheses to judge"
            return result
        prompt = judge_prompt(item, shown, c.judge_log_lines)
        verdict_model = c.out(judge_schema([s["label"] for s in shown]))
        turn = await d.ask("judge", [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": prompt}],
                           verdict_model, phase="judge", round=r, temperature=c.judge_temperature,
                           model=c.judge_model, max_tokens=reply_tokens(verdict_model))
        d.write(f"judge_round{r}.json", {"round": r, "order": order, "shuffled": c.shuffle, "prompt": prompt,
                                         "reply": turn.parsed.model_dump() if turn.ok else None, "error": turn.error})
        if not turn.ok:
            result["error"] = turn.error
            d.log.append(f"judge failed in round {r}: {turn.error}")
            return result
        verdict = turn.parsed.model_dump()
        for s in shown:
            e = verdict[s["label"]]
            proposals[s["source"]][s["index"]]["judge_score"] = e["score"]
            result["evaluations"].append({"label": s["label"], "source": s["source"], "index": s["index"], **e})
        pick = verdict["top_hypothesis"]
        result.update(ok=True, judge_top_pick={"label": pick, "source": next(s["source"] for s in shown
                                                                             if s["label"] == pick)})
        # the top one is the highest score; among equal scores, the judge's pick, then presentation order
        best = max(result["evaluations"], key=lambda e: (e["score"], e["label"] == pick))
        result["top"] = proposals[best["source"]][best["index"]]
        return result


def _reasoners(names: list[str], focus: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """Validate reasoner names: built-in ones or ones given a focus prompt."""
    known = {**FOCUS, **focus}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ProtocolError(f"judge_refine: unknown reasoner {', '.join(map(repr, unknown))}; built-in: "
                            f"{', '.join(FOCUS)}; give others a focus prompt with --set focus='{{name: ...}}'")
    if not names or len(set(names)) != len(names):
        raise ProtocolError(f"judge_refine: agents must be distinct and at least one, got {names}")
    stray = sorted(set(focus) - set(names))
    if stray:
        raise ProtocolError(f"judge_refine: focus given for {', '.join(map(repr, stray))}, not among agents {names}")
    return names, {n: known[n] for n in names}


def _final(rounds_out: list[dict]) -> dict | None:
    """Best-scored hypothesis of all rounds (later rounds win ties); unscored: the last round's first."""
    scored = [h for r in rounds_out for hs in r["hypotheses"].values() for h in hs if h.get("judge_score") is not None]
    pool = scored or [h for r in rounds_out[-1:] for hs in r["hypotheses"].values() for h in hs]
    if not pool:
        return None
    best = max(pool, key=lambda h: (h.get("judge_score") or 0, h["round"]))
    return {"hypothesis": best["hypothesis"], "confidence": best["confidence"],
            "judge_score": best.get("judge_score"), "source": best["source"], "reasoning": best["reasoning"],
            "evidence": best["evidence"], "resolution": best["suggested_resolution"],
            "rounds_refined": best["round"], "category": best["category"],
            "affected_components": best["affected_components"], "changes_made": best.get("changes_made")}


async def _score(debate, item, final: dict | None, with_judge: bool, model: str | None):
    """Keyword match (Outcome.correct) and, optionally, a judge's 0-1 grade against `root_cause`."""
    named = "" if final is None else " ".join([final["hypothesis"], *final["affected_components"]])
    correct, groups = logic.keyword_match(named, item.keywords)
    record = {"keyword_match": correct, "groups": [{"keywords": k, "matched": m} for k, m in zip(item.keywords, groups)],
              "root_cause": item.root_cause, "grade": None}
    score = None
    if with_judge and final is not None:
        turn = await debate.ask("grader", [{"role": "user", "content": GRADE_PROMPT.format(
            truth=item.root_cause, proposed=final["hypothesis"])}], Grade, phase="score", temperature=0.0,
            model=model, max_tokens=reply_tokens(Grade))
        if turn.ok:
            record["grade"] = turn.parsed.model_dump()
            score = turn.parsed.score / 100
    debate.write("score.json", record)
    debate.log.append(f"keyword match: {correct} ({sum(groups)}/{len(groups)} groups)")
    return correct, score
