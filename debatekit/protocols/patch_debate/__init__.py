"""Patch debate with judge, debate override and rule-based moderator (seed 002, SPEC S2).

Aspect-based sentiment of one review sentence, in four steps:

1. Stage 1: an ATE/ATSA call extracts aspect terms with polarity (spans located in code) and
   a sentence label; a validator call lists negation/irony/contrast issues, corrections and
   a suggested label.
2. Debate: in each of `rounds` rounds the personas speak in `order` (default EPM, TAN, CJ),
   each seeing the history, and output only `proposed_edits`; the judge (CJ) returns
   final_patch, final_tuples, unresolved_conflicts, sentence_polarity and evidence spans.
   The final_patch applied to the Stage-1 tuples gives the "after debate" tuples.
3. Stage 2: the debate becomes a Debate Review Context for an ATE and an ATSA review; the
   validator corrections, ATE review, ATSA review and the debate override apply in that order.
4. The moderator (rules Z B M C A D E, no LLM) decides the final sentence label.

Outcome.output["metrics"] scores tuples (P/R/F1) and sentence labels after stages 1, 2 (debate)
and 4 (final); Outcome.correct is the final sentence label. Files per item: stage1.json,
debate_round{r}_{agent}.json, debate_output.json, patch_log.json, debate_review_context.json,
stage2.json, moderator.json.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from debatekit.engine import Outcome
from debatekit.protocols.patch_debate import mapping, moderator, override, review
from debatekit.protocols.patch_debate.agent_outputs import (
    DEFAULT_PERSONAS, AteReview, AtsaReview, DebatePersona, DebateSummary, Extraction, TurnEdits, ValidatorReport)
from debatekit.protocols.patch_debate.context import build_review_context, prompt_view
from debatekit.protocols.patch_debate.patching import apply_patch
from debatekit.protocols.patch_debate.prompts import ATE_REVIEW, ATSA_REVIEW, EXTRACT, JUDGE, SPEAKER, VALIDATE
from debatekit.protocols.patch_debate.scoring import stage_report, stage_scores
from debatekit.protocols.patch_debate.types import (
    AspectTuple, Polarity, ProposedEdit, SentenceLabel, history_line, locate, normalize_term, sentence_label)
from debatekit.registry import Node, ProtocolError, Views, protocol


class GoldAspect(BaseModel):
    model_config = ConfigDict(extra="forbid")
    term: str
    category: str
    polarity: Polarity
    span: tuple[int, int]


class AbsaItem(BaseModel):
    """One review sentence of datasets/absa_reviews.jsonl (fields documented in datasets/README.md)."""

    model_config = ConfigDict(extra="forbid")
    id: str
    lang: Literal["en", "ko"]
    text: str
    aspects: list[GoldAspect]
    sentence_label: SentenceLabel
    phenomena: list[Literal["negation", "irony", "contrast", "implicit", "comparative"]] = []

    @property
    def answer(self) -> str:
        """The ground truth the runner records: the sentence label."""
        return self.sentence_label


@dataclass
class Stage1:
    tuples: list[AspectTuple]
    ate: moderator.Signal
    report: ValidatorReport | None


@dataclass
class DebateResult:
    tuples: list[AspectTuple]                       # Stage-1 tuples with the judge's final_patch applied
    summary: dict | None = None                     # the judge's DebateSummary
    context: dict | None = None                     # the Debate Review Context
    hints: dict = field(default_factory=dict)       # aspect hints for the override
    stats: mapping.MappingStats | None = None       # how the speakers' edits mapped onto Stage 1

    @property
    def label(self) -> str | None:
        return (self.summary or {}).get("sentence_polarity") or sentence_label(t.polarity for t in self.tuples)


class PatchDebateOutput(BaseModel):
    """`Outcome.output` of patch_debate: stage metrics, final tuples, the moderator's verdict, override, mapping."""

    model_config = ConfigDict(extra="forbid")
    lang: Literal["en", "ko"]
    metrics: dict[str, Any]
    final_tuples: list[AspectTuple]
    moderator: moderator.ModeratorOutput
    override: dict[str, float | int | None]
    mapping: dict[str, Any] | None
    mapping_metrics: dict[str, Any] | None
    mapping_warnings: list[Any]


def _node_item(state: dict) -> AbsaItem:
    """A sentence to label: `{"text", "lang"?}`; no gold labels needed (the metrics are left out)."""
    return AbsaItem.model_construct(id=str(state.get("id", "node")), lang=state.get("lang", "en"), text=state["text"],
                                    aspects=[], sentence_label="neutral", phenomena=[])


def _node_result(state: dict, outcome: Outcome, debate) -> dict:
    out = {k: v for k, v in outcome.output.items() if k != "metrics"}
    return {**state, "patch_debate": {"label": outcome.final_answer, **out, "usage": debate.usage.model_dump()}}


@protocol("patch_debate", paper="seed 002", item=AbsaItem, views=Views(run=stage_report), node=Node(_node_item, _node_result),
          output=PatchDebateOutput,
          stop_reasons={"no_debate": "the first stage's tuples were kept without a debate"})
def patch_debate(
    rounds: Annotated[int, Field(ge=1, le=5)] = 1,
    order: list[str] = ["epm", "tan", "cj"],
    personas: dict[str, dict[str, str]] = {},
    enable_debate: bool = True,
    enable_debate_override: bool = True,
    debate_override: dict[str, float] = asdict(override.OverrideThresholds()),
    moderator_thresholds: dict[str, float] = asdict(moderator.ModeratorThresholds()),
    mapping_thresholds: dict[str, float] = {},
    stage2_base: Literal["stage1", "debate"] = "stage1",
    temperature: float = 0.0,
):
    """Aspect sentiment: Stage 1, EPM/TAN/CJ patch debate, Stage-2 review, rule-based moderator.

    Threshold dicts may name only some keys; the others keep the seed's values. mapping_thresholds:
    coverage_warn/high, no_match_warn/high, neutral_warn/high (see `patch_debate.mapping.MappingThresholds`).
    """
    cast = {k: DebatePersona.model_validate({**(DEFAULT_PERSONAS[k].model_dump() if k in DEFAULT_PERSONAS else {}),
                                             **v}) for k, v in {**{k: {} for k in DEFAULT_PERSONAS}, **personas}.items()}
    if unknown := [a for a in order if a not in cast]:
        raise ProtocolError(f"patch_debate: order names {unknown} without a persona; personas: {sorted(cast)}")
    override_th = _thresholds(override.OverrideThresholds, debate_override, "debate_override")
    moderator_th = _thresholds(moderator.ModeratorThresholds, moderator_thresholds, "moderator_thresholds")
    mapping_th = _thresholds(mapping.MappingThresholds, mapping_thresholds, "mapping_thresholds")

    async def run(item, debate):
        def ask(agent, system, user, out, phase, **kw):
            return debate.ask(agent, [{"role": "system", "content": system}, {"role": "user", "content": user}],
                              out, phase=phase, temperature=temperature, **kw)

        s1 = await _stage1(item, debate, ask)
        if enable_debate:
            deb = await _debate(item, debate, ask, s1, order, cast, rounds, mapping_th)
        else:
            deb, debate.stop_reason = DebateResult(tuples=s1.tuples), "no_debate"
        base = deb.tuples if stage2_base == "debate" else s1.tuples
        final, stage2_ate, stage2_atsa, over = await _stage2(
            item, debate, ask, s1, deb, base, override_th if enable_debate_override else None)
        verdict = moderator.moderate(
            s1.ate, moderator.aggregate_atsa(s1.tuples), stage2_ate, stage2_atsa,
            moderator.ValidatorSignal(suggested_label=s1.report.suggested_label, confidence=s1.report.confidence,
                                      issues=[i.model_dump() for i in s1.report.issues]) if s1.report else None,
            deb.summary, final, thresholds=moderator_th)
        debate.write("moderator.json", verdict)
        gold, truth = item.aspects, item.sentence_label
        metrics = {"stage1": stage_scores(s1.tuples, s1.ate.label, gold, truth),
                   "debate": stage_scores(deb.tuples, deb.label, gold, truth),
                   "final": stage_scores(final, verdict.final_label, gold, truth)}
        insufficient = "Z" in verdict.applied_rules
        return Outcome(
            final_answer=verdict.final_label, correct=verdict.final_label == truth,
            converged=None if deb.summary is None else not deb.summary["unresolved_conflicts"],
            needs_human_review=insufficient, escalation_reason="RuleZ: insufficient signal" if insufficient else None,
            output={"lang": item.lang, "metrics": metrics, "final_tuples": [t.model_dump() for t in final],
                    "moderator": verdict.model_dump(), "override": over.stats(),
                    "mapping": deb.stats.model_dump() if deb.stats else None,
                    "mapping_metrics": deb.stats.metrics() if deb.stats else None,
                    "mapping_warnings": (deb.context or {}).get("mapping_warnings", [])})
    return run


async def _stage1(item, debate, ask) -> Stage1:
    """ATE/ATSA extraction, then the validator on it."""
    ext = await ask("ate_atsa", EXTRACT, f"Sentence: {item.text}", Extraction, "stage1_extract")
    tuples = _stage1_tuples(ext.parsed, item.text) if ext.ok else []
    ate = moderator.Signal(label=ext.parsed.sentence_label, confidence=ext.parsed.confidence) if ext.ok \
        else moderator.Signal(label="neutral", confidence=0.0)
    val = await ask("validator", VALIDATE, f"Sentence: {item.text}\nExtraction: {_show(tuples)}",
                    ValidatorReport, "stage1_validate")
    report = val.parsed if val.ok else None
    for turn in (ext, val):
        if not turn.ok:
            debate.log.append(f"{turn.agent} failed: {turn.error}")
    debate.write("stage1.json", {"tuples": [t.model_dump() for t in tuples], "ate": ate.model_dump(),
                                 "validator": report.model_dump() if report else None})
    return Stage1(tuples, ate, report)


async def _debate(item, debate, ask, s1: Stage1, order, cast, rounds, mapping_th) -> DebateResult:
    """Speakers in `order` for `rounds` rounds (each sees the history), then the judge (S2.1-S2.3)."""
    shared = json.dumps({"stage1": _refs(s1.tuples), "stage1_label": s1.ate.label,
                         "validator": _validator_view(s1.report)}, ensure_ascii=False, separators=(",", ":"))
    lines: list[str] = []
    turns: list[dict] = []

    async def step(r: int) -> None:
        answers, said = {}, {}
        for key in order:
            system = SPEAKER.format(topic=item.text, persona=cast[key].model_dump_json(), context=shared,
                                    history="\n".join(lines) or "(none)")
            t = await ask(key, system, "Output your proposed_edits.", TurnEdits, "debate", round=r)
            edits = t.parsed.proposed_edits if t.ok else []
            if not t.ok:
                debate.log.append(f"{key} round {r}: no edits ({t.error})")
            record = {"agent": key, "round": r, "proposed_edits": [e.model_dump() for e in edits]}
            turns.append(record)
            debate.write(f"debate_round{r}_{key}.json", record)
            said[key] = [history_line(key, e) for e in edits]
            lines.extend(said[key])
            # the sentence label this speaker's edits alone would give (for the dynamics tables)
            answers[key] = sentence_label(p.polarity for p in apply_patch(s1.tuples, edits).tuples) if t.ok else None
        debate.record_round(r, answers, edits=said)

    await debate.rounds(step, rounds)
    judge = await ask("cj", JUDGE.format(topic=item.text, persona=cast["cj"].model_dump_json(), context=shared,
                                         turns="\n".join(lines) or "(no edits)"),
                      "Output the DebateSummary.", DebateSummary, "judge")
    summary = judge.parsed.model_dump() if judge.ok else None
    if not judge.ok:
        debate.log.append(f"judge failed: {judge.error}")
    patch = apply_patch(s1.tuples, judge.parsed.final_patch if judge.ok else [], text=item.text)
    edits = [(t["agent"], t["round"], ProposedEdit.model_validate(e)) for t in turns for e in t["proposed_edits"]]
    hints, stats = mapping.build_hints(edits, s1.tuples)
    context = build_review_context(summary, turns, s1.tuples, hints, stats, mapping_th)
    debate.write("debate_output.json", {"topic": item.text, "personas": {k: cast[k].model_dump() for k in order},
                                        "rounds": turns, "summary": summary})
    debate.write("patch_log.json", {"applied": patch.applied, "rejected": patch.rejected,
                                    "log": [e.model_dump() for e in patch.log]})
    debate.write("debate_review_context.json", context)
    return DebateResult(patch.tuples, summary, context, hints, stats)


async def _stage2(item, debate, ask, s1: Stage1, deb: DebateResult, base: list[AspectTuple],
                  override_th: override.OverrideThresholds | None):
    """ATE and ATSA reviews with the Debate Review Context; corrections in the seed's order, then the override."""
    user = f"Sentence: {item.text}\nStage1: {_show(base)}\nDebate: {prompt_view(deb.context)}"
    ate_rev, atsa_rev = await debate.gather([
        ask("ate_review", ATE_REVIEW, user, AteReview, "stage2_ate"),
        ask("atsa_review", ATSA_REVIEW, user, AtsaReview, "stage2_atsa")])
    for turn in (ate_rev, atsa_rev):
        if not turn.ok:
            debate.log.append(f"{turn.agent} failed: {turn.error}")
    tuples, review_log = review.apply_reviews(
        base, item.text, corrections=review.as_dicts(s1.report.corrections) if s1.report else [],
        aspect_review=review.as_dicts(ate_rev.parsed.aspect_review) if ate_rev.ok else [],
        sentiment_review=review.as_dicts(atsa_rev.parsed.sentiment_review) if atsa_rev.ok else [])
    over = override.apply_override(tuples, deb.hints if override_th else {}, text=item.text,
                                   thresholds=override_th or override.OverrideThresholds())
    ate = moderator.Signal(label=ate_rev.parsed.sentence_label, confidence=ate_rev.parsed.confidence) \
        if ate_rev.ok else None
    atsa = moderator.aggregate_atsa(over.tuples) if (ate_rev.ok or atsa_rev.ok) else None
    debate.write("stage2.json", {"tuples": [t.model_dump() for t in over.tuples], "review_log": review_log,
                                 "override": over.model_dump(), "ate": _dump(ate_rev), "atsa": _dump(atsa_rev)})
    return over.tuples, ate, atsa, over


def _thresholds(cls, given: dict, name: str):
    known = {f.name for f in fields(cls)}
    if unknown := sorted(set(given) - known):
        raise ProtocolError(f"patch_debate, parameter {name!r}: unknown key(s) {unknown}; known: {sorted(known)}")
    return cls(**given)


def _stage1_tuples(ext: Extraction, text: str) -> list[AspectTuple]:
    """Extracted aspects as tuples, spans located in the sentence, duplicates (same term) dropped."""
    out, seen = [], set()
    for a in ext.aspects:
        key = normalize_term(a.term)
        if key and key not in seen:
            seen.add(key)
            out.append(AspectTuple(term=a.term.strip(), polarity=a.polarity, confidence=a.confidence,
                                   span=locate(a.term.strip(), text)))
    return out


def _refs(tuples: list[AspectTuple]) -> list[dict]:
    return [{"aspect_ref": t.term, "polarity": t.polarity, "confidence": round(t.confidence, 2)} for t in tuples]


def _show(tuples: list[AspectTuple]) -> str:
    return json.dumps(_refs(tuples), ensure_ascii=False, separators=(",", ":"))


def _validator_view(report: ValidatorReport | None) -> dict | None:
    if report is None:
        return None
    return {"issues": [f"{i.type}:{i.aspect_ref}" for i in report.issues], "suggested_label": report.suggested_label}


def _dump(turn) -> dict | None:
    return turn.parsed.model_dump() if turn.ok else None
