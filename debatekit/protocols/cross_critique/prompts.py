"""Prompts of the cross-critique protocol (seed 000): personas, rounds, supervisor, judge.

Kept short on purpose: the embedded 1.5B model reads ~60 prompt tokens per second.
"""

from __future__ import annotations

import json

PERSONAS = {
    "NLA": ("You are the National Law Agent (NLA) in a structured debate on Indonesian law. Your focus: "
            "national law - KUHPerdata, UU Perkawinan 1/1974, UUPA 5/1960, the KHI for Muslims and the "
            "general jurisprudence (yurisprudensi) of the Mahkamah Agung. Every claim cites evidence ids "
            "from the context; a claim without evidence is a risk."),
    "ALA": ("You are the Adat Law Agent (ALA) in a structured debate on Indonesian law. Your focus: adat "
            "norms (Minangkabau, Bali, Java) and the formal rules of the rule engine (ids like R-MIN-1). "
            "Every claim cites evidence ids from the context or the rule engine; a claim without evidence "
            "is a risk."),
}
SUPERVISOR = ("You are the Supervisor (SUP) of a debate between legal agents. You did not take part. From "
              "the debate summary and the agents' final answers, write one balanced synthesis: what each "
              "legal order (national, adat) says, which claims are agreed, how the disputed points and "
              "conflicts should be resolved, and what stays uncertain.")
ANSWER_TASK = (
    "Round {round}. Answer the question from your perspective as {agent}. Reply in JSON: `answer` (a short, "
    "structured answer), `claims` (3 or 4 main claims, never more than {max_claims}; each with `id` C1, C2, ..., "
    "`statement`, `evidence` = ids from the context above, `confidence` 0-1, `assumptions`), "
    "`uncertainties`, `open_questions`.")
CRITIQUE_TASK = (
    "Round {round}. You are {agent}. Critique the answer of {target} above; never approve it without "
    "checking. Give {at_least}critiques; each with `id` K1, K2, ..., `target_claim_id` (a claim id of "
    "{target}), `issue_type` (evidence_gap, logic_gap, conflict, domain_mismatch or overclaim), "
    "`description`, `severity` (CRITICAL only for a wrong conclusion, invalid evidence or an unresolved "
    "conflict of norms; MAJOR; MINOR) and `suggested_fix` (a concrete fix; mandatory).")
REVISE_TASK = (
    "Round {round}. You are {agent}. Above are your previous answer and the critiques you received. Revise "
    "your answer: fix what the critiques show, keep what is right, cite evidence ids for every claim. Same "
    "JSON fields: `answer`, `claims` (at most {max_claims}), `uncertainties`, `open_questions`.")
REASK = ("Your critique broke the debate rules: {problems}. Reply again with the full critique: at least "
         "{min_critiques} critiques in round 1, each with a concrete `suggested_fix`.")
SYNTHESIS_TASK = ("Debate summary (debate_summary.json):\n{summary}\n\nFinal answers:\n{finals}\n\nWrite the "
                  "synthesis in JSON: `synthesis` (the answer to the query), `key_points` (at most 5), "
                  "`confidence` 0-1.")


def context_block(passages: list, rule_results: list, passage_chars: int | None) -> str:
    """The evidence an agent may cite: context passages, then the rules that fired (if shown)."""
    lines = ["Context (cite by id):"]
    for p in passages:
        text = p.text if passage_chars is None or len(p.text) <= passage_chars else p.text[: passage_chars - 3] + "..."
        lines.append(f"[{p.id}] ({p.kind}) {text}")
    if rule_results:
        lines.append("Rule engine results (cite by id):")
        lines.extend(f"[{r.id}] {r.render(passage_chars)}" for r in rule_results)
    return "\n".join(lines)


def question_block(question: str, domain_hint: str | None) -> str:
    hint = f"\nDomain hint: {domain_hint}" if domain_hint else ""
    return f"Question: {question}{hint}"


def show_answer(output) -> str:
    """An agent's answer as compact JSON (what critics and the supervisor read)."""
    return json.dumps({"answer": output.answer, "claims": [
        {"id": c.id, "statement": c.statement, "evidence": c.evidence} for c in output.claims]},
        ensure_ascii=False)


def show_critiques(critiques: list) -> str:
    return "\n".join(f"- {o.critic} {o.critique.id} on {o.critique.target_claim_id} [{o.critique.severity} "
                     f"{o.critique.issue_type}]: {o.critique.description} Fix: {o.critique.suggested_fix}"
                     for o in critiques) or "- (none)"


def show_gaps(gaps: list[dict]) -> str:
    """Evidence gaps the engine found in the target's claims, to help the critic."""
    if not gaps:
        return ""
    rows = [f"{g['claim_id']} cites {g['cited']!r} ({g['kind']})" if g["cited"] else f"{g['claim_id']} cites nothing"
            for g in gaps]
    return "\nEngine evidence check: " + "; ".join(rows)
