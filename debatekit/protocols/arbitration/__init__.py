"""Contradiction detection and arbitration (seed 001, SPEC S1): the debate node between agents and verify.

Agent reports -> contradiction detection (in code, `contradictions.detect`) -> one neutral
arbitrator call per contradiction, all of a debate at once in batches of `batch_size`
(`debate.gather`) -> checks ("no hallucination": a recommended value or citation must be one of
the reports' own) -> confidence-weighted consensus with adjusted reports (`consensus`).

- Zero contradictions: status "skipped", no model call.
- Reports come from the dataset (`reports="given"`) or from analyst agents that read the item's
  source documents (`reports="analysts"`).
- Source authority and freshness are data: the item's `source_authority` / `prefer_fresher`,
  overridden by the parameters of the same name.
- Progress events (`running`, `batch`, `complete` with counts and latency) are always kept in
  the output and `progress.json`, and sent to `progress_hook` ("module:function") when set;
  from Python, `progress_hook` may be any callable; as a workflow node
  (`await debatekit.node("arbitration", {"agent_reports": [...], "event_callback": cb})`) the
  seed's `event_callback(node, status, counts, latency_ms)` is called too.
"""

from __future__ import annotations

import importlib
import inspect
import time
from typing import Annotated, Any, Callable, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from debatekit.engine import Outcome
from debatekit.protocols.arbitration.consensus import Action, Resolution, build_consensus, check
from debatekit.protocols.arbitration.contradictions import Citation, Contradiction, Finding, Report, Rules, detect
from debatekit.protocols.arbitration.scoring import TruthEntry, run_report, score_resolutions, score_values
from debatekit.protocols.shared.fields import Probability
from debatekit.protocols.shared.personas import describe
from debatekit.registry import Node, Views, protocol


class SourceDocument(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    source: str
    date: str
    text: str


class ArbitrationItem(BaseModel):
    """One `metric_reports` row: agent reports on a question, their sources, and the expected contradictions."""

    model_config = ConfigDict(extra="forbid")
    id: str
    question: str = ""
    reports: list[Report] = []
    source_documents: list[SourceDocument] = []
    source_authority: list[str] = []
    prefer_fresher: bool = False
    scenario: Literal["none", "simple", "source_conflict", "both_valid", "three_way"] | None = None
    truth: list[TruthEntry] = []


class ArbitrationVerdict(BaseModel):
    """The arbitrator's decision on one contradiction (the seed's output format)."""

    model_config = ConfigDict(title="Verdict")  # its name in the response format, so in every request and cache key

    max_reply_tokens: ClassVar[int] = 320

    explanation: str = Field(description="Why, citing the sources, periods and definitions.",
                             json_schema_extra={"maxLength": 300})
    resolution: Resolution = Field(description="Which agent is correct, both, or neither.")
    recommended_value: float | None = Field(description="Agent 1's or Agent 2's value, or null.")
    recommended_citation: str | None = Field(description="Agent 1's or Agent 2's citation, or null.",
                                             json_schema_extra={"maxLength": 160})
    confidence: Probability = Field(description="Confidence in this resolution, 0.0-1.0.")
    action: Action = Field(description="use_agent1 | use_agent2 | use_both | flag_for_review.")


class AnalystFinding(BaseModel):
    metric: str = Field(description="Short metric name.", json_schema_extra={"maxLength": 60})
    value: float = Field(description="The number, as stated in the document.")
    unit: str = Field(description="%, USD millions, days, ...", json_schema_extra={"maxLength": 20})
    period: str = Field(description="2024-Q3, FY2024, 2024-09, ...", json_schema_extra={"maxLength": 12})
    document: str = Field(description="Id of the document it comes from, e.g. D1.", json_schema_extra={"maxLength": 4})
    confidence: Probability
    interpretation: Literal["improving", "declining", "stable", "increasing", "decreasing"]


class AnalystReport(BaseModel):
    max_reply_tokens: ClassVar[int] = 400
    findings: list[AnalystFinding] = Field(max_length=5, description="The key findings, at most 5.")


class DebateResults(BaseModel):
    """The seed's `debate_results` counts."""

    model_config = ConfigDict(extra="forbid")
    contradictions_found: int
    resolved: int
    flagged_for_review: int
    consensus_narrative: str
    latency_ms: float
    status: Literal["complete", "skipped"]


class ArbitrationOutput(BaseModel):
    """`Outcome.output` of arbitration: the seed's node results, its files' contents and the scores."""

    model_config = ConfigDict(extra="forbid")
    debate_results: DebateResults
    contradictions: list[dict[str, Any]]
    resolutions: list[dict[str, Any]]
    consensus: dict[str, Any]
    progress: list[dict[str, Any]]
    score: dict[str, Any]
    reports: list[dict[str, Any]] | None = None
    """Analyst mode: the reports the analysts wrote."""


def _node_item(state: dict) -> ArbitrationItem:
    """The seed's node input: `agent_reports` (Report dicts or models)."""
    return ArbitrationItem(id=str(state.get("id", "node")), reports=[
        r if isinstance(r, Report) else Report.model_validate(r) for r in state.get("agent_reports", [])])


def _node_params(state: dict) -> dict:
    """The seed's `event_callback(node, status, counts?, latency_ms?)` as the progress hook."""
    callback = state.get("event_callback")
    if callback is None:
        return {}

    async def relay(event: dict) -> None:
        if inspect.isawaitable(reply := callback(*_seed_args(event))):
            await reply

    return {"progress_hook": relay}


def _node_result(state: dict, outcome: Outcome, debate) -> dict:
    """The state with the adjusted reports and the seed's `debate_results`."""
    return {**state, "agent_reports": outcome.output["consensus"]["adjusted_reports"],
            "debate_results": outcome.output["debate_results"]}


@protocol("arbitration", paper="seed 001", item=ArbitrationItem, views=Views(run=run_report),
          node=Node(_node_item, _node_result, _node_params), output=ArbitrationOutput,
          stop_reasons={"complete": "every contradiction found was arbitrated",
                        "skipped": "the reports had no contradiction to arbitrate"})
def arbitration(
    reports: Literal["given", "analysts"] = "given",
    analysts: Annotated[int, Field(ge=2, le=5)] = 2,
    analyst_personas: list[str] = [],
    analyst_models: list[str] = [],
    judge_model: str | None = None,
    temperature: float = 0.0,
    threshold: Annotated[float, Field(gt=0, lt=1)] = 0.05,
    confidence_gap: Annotated[float, Field(gt=0, le=1)] = 0.3,
    batch_size: Annotated[int, Field(ge=1)] = 8,
    source_authority: list[str] = [],
    prefer_fresher: bool | None = None,
    show_sources: bool = True,
    aliases: dict[str, str] = {},
    progress_hook: str | Callable | None = None,
):
    """Detect contradictions between agent reports in code; one arbitrator call each; weighted consensus."""
    rules = Rules(threshold=threshold, confidence_gap=confidence_gap, aliases=aliases)
    hook = load_hook(progress_hook)
    personas = [describe(p, "arbitration") for p in analyst_personas] or ANALYST_PERSONAS

    async def run(item: ArbitrationItem, debate) -> Outcome:
        given = reports == "given"
        agent_reports = item.reports if given else await write_reports(
            item, debate, analysts, personas, analyst_models, temperature)
        result = await arbitrate(
            agent_reports, debate, rules=rules, documents=item.source_documents,
            authority=source_authority or item.source_authority,
            prefer_fresher=item.prefer_fresher if prefer_fresher is None else prefer_fresher,
            show_sources=show_sources, batch_size=batch_size, model=judge_model,
            temperature=temperature, on_progress=hook)
        found, verdicts = result.pop("_contradictions"), result.pop("_verdicts")
        if given:
            scores = score_resolutions(item.truth, found, verdicts)
            score = scores["resolution_accuracy"] if item.truth else float(not found)
        else:
            scores = score_values(item.truth, result["consensus"]["adjusted_reports"])
            score = scores["value_accuracy"]
        if not given:
            result["reports"] = [r.model_dump(mode="json") for r in agent_reports]
        flagged = result["debate_results"]["flagged_for_review"]
        debate.stop_reason = result["debate_results"]["status"]
        unanswered = bool(verdicts) and all(v.flag_reason == "arbitrator_failed" for v in verdicts)
        return Outcome(
            final_answer=None if unanswered else [
                [v.metric_name, v.agent1_name, v.agent2_name, v.resolution, v.action] for v in verdicts],
            output={**result, "score": scores}, converged=not flagged, needs_human_review=bool(flagged),
            escalation_reason=f"{flagged} contradiction(s) flagged for review" if flagged else None,
            score=score, correct=None if score is None else score == 1.0)

    return run


async def arbitrate(reports: list[Report], debate, *, rules: Rules | None = None,
                    documents: list[SourceDocument] = (), authority: list[str] = (), prefer_fresher: bool = False,
                    show_sources: bool = True, batch_size: int = 8, model: str | None = None,
                    temperature: float = 0.0, on_progress: Callable | None = None) -> dict:
    """The seed's debate node over reports: detection, arbitration, consensus; writes the per-debate files."""
    progress: list[dict] = []
    started = time.perf_counter()

    async def emit(status: str, **data) -> None:
        event = {"node": "debate", "status": status, "ts": round(time.time(), 3), **data}
        progress.append(event)
        debate.log.append(f"PROGRESS: {status} {data}" if data else f"PROGRESS: {status}")
        if on_progress is not None:
            try:
                reply = on_progress(event)
                if inspect.isawaitable(reply):
                    await reply
            except Exception as exc:  # noqa: BLE001 - a broken hook must not end the debate
                debate.log.append(f"PROGRESS HOOK FAILED: {type(exc).__name__}: {exc}")

    await emit("running")
    found = detect(list(reports), rules or Rules())
    debate.write("contradictions.json", {"contradictions": [c.model_dump(mode="json") for c in found]})
    verdicts = []
    batches = [found[i:i + batch_size] for i in range(0, len(found), batch_size)]
    for number, batch in enumerate(batches, 1):
        turns = await debate.gather(debate.ask(
            "arbitrator", [{"role": "user", "content": arbitrator_prompt(
                c, documents, authority, prefer_fresher, show_sources)}], ArbitrationVerdict,
            phase="arbitrate", round=number, model=model, temperature=temperature) for c in batch)
        verdicts += [check(c, t.parsed.model_dump() if t.ok else None, t.error) for c, t in zip(batch, turns)]
        if len(batches) > 1:
            await emit("batch", batch=number, of=len(batches), arbitrated=len(verdicts))
    consensus = build_consensus(list(reports), found, verdicts)
    latency_ms = 0.0 if not found else round((time.perf_counter() - started) * 1000, 1)
    results = {"contradictions_found": len(found), "resolved": consensus.resolved_contradictions,
               "flagged_for_review": consensus.flagged_for_review,
               "consensus_narrative": consensus.consensus_narrative, "latency_ms": latency_ms,
               "status": "complete" if found else "skipped"}
    await emit("complete", contradictions=len(found), resolved=consensus.resolved_contradictions,
               flagged=consensus.flagged_for_review, latency_ms=latency_ms, result=results["status"])
    output = {"debate_results": results, "contradictions": [c.model_dump(mode="json") for c in found],
              "resolutions": [v.model_dump(mode="json") for v in verdicts],
              "consensus": consensus.model_dump(mode="json"), "progress": progress}
    for name, key in (("resolutions.json", "resolutions"), ("consensus.json", "consensus"),
                      ("debate_results.json", "debate_results"), ("progress.json", "progress")):
        debate.write(name, {key: output[key]})
    return {**output, "_contradictions": found, "_verdicts": verdicts}


async def write_reports(item: ArbitrationItem, debate, n: int, personas: list[str], models: list[str],
                        temperature: float) -> list[Report]:
    """Analyst mode: n analysts read the source documents and report findings (structured output)."""
    names = [f"agent{i + 1}" for i in range(n)]
    docs = {d.id: d for d in item.source_documents}
    shown = "\n".join(f"[{d.id}] {d.source} ({d.date}): {d.text}" for d in item.source_documents)
    turns = await debate.gather(debate.ask(
        name, [{"role": "system", "content": personas[i % len(personas)]},
               {"role": "user", "content": ANALYST_PROMPT.format(question=item.question, documents=shown)}],
        AnalystReport, phase="analyse", round=0, temperature=temperature,
        model=models[i % len(models)] if models else None) for i, name in enumerate(names))
    reports = []
    for turn in turns:
        findings = []
        for f in turn.parsed.findings if turn.ok else []:
            doc = docs.get(f.document.strip().strip("[]").upper())
            if doc is None:
                debate.log.append(f"DROPPED: {turn.agent} cited unknown document {f.document!r} for {f.metric!r}")
                continue
            findings.append(Finding(metric=f.metric, value=f.value, unit=f.unit, period=f.period,
                                    citation=Citation(source=doc.source, date=doc.date),
                                    confidence=f.confidence, interpretation=f.interpretation))
        reports.append(Report(agent=turn.agent, findings=findings))
    return reports


def _seed_args(event: dict) -> tuple:
    if event["status"] != "complete":
        return ("debate", event["status"])
    counts = {"contradictions": event["contradictions"], "resolved": event["resolved"], "flagged": event["flagged"]}
    return ("debate", "complete", counts, event["latency_ms"])


def load_hook(spec: str | Callable | None) -> Callable | None:
    """A progress hook: a callable, or "package.module:function" (settable from the CLI with --set)."""
    if not spec or callable(spec):
        return spec or None
    module, _, name = spec.partition(":")
    if not name:
        raise ValueError(f"progress_hook {spec!r} is not 'module:function'")
    return getattr(importlib.import_module(module), name)


def arbitrator_prompt(c: Contradiction, documents, authority, prefer_fresher: bool, show_sources: bool) -> str:
    """The seed's DEBATE_PROMPT for one contradiction, with authority and freshness from the data."""
    f1, f2 = c.agent1_finding, c.agent2_finding
    cited = {f.citation.source for f in (f1, f2)}
    docs = [d for d in documents if d.source in cited] if show_sources else []
    return ARBITRATOR_PROMPT.format(
        metric=c.metric_name, a1=c.agent1_name, a2=c.agent2_name, f1=_finding(f1), f2=_finding(f2),
        conflict=_conflict(c), authority=" > ".join(authority) or "none given",
        freshness=FRESHER if prefer_fresher else AUTHORITY_FIRST,
        documents="".join(f"\n- [{d.source}, {d.date}]: {d.text}" for d in docs) or " none shown")


def _finding(f: Finding) -> str:
    return (f"{f.value:g} {f.unit}, period {f.period}, [{f.citation.source}, {f.citation.date}] "
            f"(confidence: {f.confidence:g}, interpretation: {f.interpretation})")


def _conflict(c: Contradiction) -> str:
    f1, f2 = c.agent1_finding, c.agent2_finding
    if c.kind in ("value", "source"):
        return f"the values differ by {c.relative_difference:.0%}"
    if c.kind == "interpretation":
        return f"same value, conflicting interpretations ({f1.interpretation} vs {f2.interpretation})"
    return f"same value and interpretation, different confidence ({f1.confidence:g} vs {f2.confidence:g})"


ARBITRATOR_PROMPT = """You are a neutral arbitrator conducting a structured debate between two agents who have conflicting findings.

CONTRADICTION ({conflict}):
- Metric: {metric}
- Agent 1 ({a1}): {f1}
- Agent 2 ({a2}): {f2}

CITED SOURCES:{documents}

TASK:
1. Analyze both citations to determine source reliability
2. Check if values are actually measuring the same thing (e.g., same time period, same definition)
3. Determine if both can be correct (different methodologies/sources)
4. If only one can be correct, determine which based on:
   - Source authority ({authority})
   - Data freshness ({freshness})
   - Citation completeness
   - Agent confidence

Use only the data above: recommended_value is Agent 1's or Agent 2's value or null; recommended_citation is one of their citations or null.
Reply in JSON: explanation, resolution (agent1_correct | agent2_correct | both_valid | neither_valid), recommended_value, recommended_citation, confidence (0.0-1.0), action (use_agent1 | use_agent2 | use_both | flag_for_review)."""

FRESHER = "for the same metric and period the more recent source wins, before authority"
AUTHORITY_FIRST = "authority decides; the more recent source only breaks ties"

ANALYST_PROMPT = """Question: {question}

Documents:
{documents}

Report the key metrics that answer the question (at most 5). For each: metric (short name), value (a number as stated), unit, period, document (its id, e.g. D1), confidence (0.0-1.0), interpretation (improving, declining, stable, increasing or decreasing)."""

ANALYST_PERSONAS = [
    "You are a meticulous financial analyst. You quote figures exactly as the documents state them.",
    "You are a fast macro analyst. You focus on headline figures and trends.",
    "You are a sceptical analyst. You prefer the most authoritative and most recent source.",
]
