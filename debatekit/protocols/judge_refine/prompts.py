"""Prompts of judge_refine (seed 004): reasoner focus, initial and refinement prompts, judge, grader.

The refinement prompt is the seed's template verbatim; each reasoner's user message starts with
the same incident block in every round so the local engine's prompt cache can reuse it.
"""

from __future__ import annotations

from debatekit.protocols.judge_refine import hypotheses as logic


def messages(name: str, focus: str, item, key_lines: int, instructions: str) -> list[dict]:
    """A reasoner's messages: its focus, the incident as its focus reads it, then the instructions."""
    views = VIEWS.get(name, ("logs", "knowledge"))
    parts = [f"=== INCIDENT ===\n{item.question}"]
    if "logs" in views:
        parts.append(f"=== LOGS ===\n{item.logs}")
    if "errors" in views:
        parts.append("=== KEY LOG LINES ===\n" + "\n".join(logic.key_log_lines(item.logs, max(key_lines, 1))))
    if "knowledge" in views:
        parts.append("=== SIMILAR PAST INCIDENTS (knowledge base) ===\n" + "\n".join(
            f"[{k.id}] {k.title}\n  Summary: {k.summary}\n  Root cause: {k.root_cause}\n  Resolution: {k.resolution}"
            for k in item.knowledge))
    return [{"role": "system", "content": f"{SYSTEM_ROLE}\n{focus}"},
            {"role": "user", "content": "\n\n".join(parts) + "\n\n" + instructions}]


def initial_prompt(n: int) -> str:
    return INITIAL.format(n=n if n == 3 else f"3 to {n}")


def refine_prompt(name: str, tops: dict[str, dict]) -> str:
    """The seed's refinement template, filled with the reasoner's previous top and the others' tops."""
    own = tops[name]
    ev = own.get("evaluation") or {}
    others = "\n".join(f"- {n} (score {h['judge_score']}/100): {h['hypothesis']}"
                       for n, h in tops.items() if n != name) or "(none)"
    return REFINE.format(previous_hypothesis=own["hypothesis"], previous_score=own["judge_score"],
                         previous_confidence=own["confidence"],
                         strengths="\n".join(f"- {s}" for s in ev.get("strengths", [])) or "- (none)",
                         weaknesses="\n".join(f"- {s}" for s in ev.get("weaknesses", [])) or "- (none)",
                         detailed_feedback=ev.get("feedback", ""), other_hypotheses=others)


def judge_prompt(item, shown: list[dict], key_lines: int) -> str:
    lines = "\n".join(logic.key_log_lines(item.logs, key_lines)) if key_lines else "(not shown)"
    listing = "\n\n".join(
        f"[{s['label']}] {s['hypothesis']}\n  Category: {s['category']}; components: "
        f"{', '.join(s['affected_components'])}\n  Reasoning: {s['reasoning']}\n  Evidence: "
        f"{' | '.join(s['evidence'])}\n  Resolution: {s['suggested_resolution']}" for s in shown)
    labels = ", ".join(s["label"] for s in shown)
    return JUDGE.format(question=item.question, lines=lines, listing=listing, labels=labels)


# --- prompts ------------------------------------------------------------------------------------

SYSTEM_ROLE = "You are a root-cause analysis (RCA) reasoner for production incidents. Reply with JSON only."

FOCUS = {
    "log_focused": "You are the log-focused reasoner: you read the raw logs (errors, exceptions, timestamps, "
                   "the order of events) and base every hypothesis on specific log lines.",
    "kg_focused": "You are the knowledge-focused reasoner: you compare the incident with similar past incidents "
                  "in the knowledge base (symptoms, known root causes, fixes) and cite the KB ids you rely on.",
    "hybrid": "You are the hybrid reasoner: you combine the log evidence with the knowledge base; a hypothesis "
              "must fit the log lines and, where one applies, a known past pattern.",
}
FOCUS["knowledge"] = FOCUS["kg_focused"]
# what each focus reads of the incident; custom reasoners read logs and knowledge
VIEWS = {"log_focused": ("logs",), "kg_focused": ("errors", "knowledge"), "knowledge": ("errors", "knowledge"),
         "hybrid": ("logs", "knowledge")}

INITIAL = """=== INSTRUCTIONS ===
Give {n} different root-cause hypotheses, the most likely first. Beware of red herrings: not every warning is the cause. For each:
- hypothesis: one sentence naming the failing component and what went wrong
- confidence: 0.0-1.0
- reasoning: why, briefly
- evidence: up to 3 short quotes of log lines or KB ids
- category: hardware|software|network|config|resource
- affected_components: up to 3 names
- suggested_resolution: the fix, in short steps"""

REFINE = """You are refining your root cause hypothesis based on judge feedback.

=== YOUR PREVIOUS HYPOTHESIS ===
Hypothesis: {previous_hypothesis}
Score: {previous_score}/100
Confidence: {previous_confidence}

=== JUDGE FEEDBACK ===
Strengths:
{strengths}

Weaknesses:
{weaknesses}

Feedback: {detailed_feedback}

=== OTHER REASONERS' TOP HYPOTHESES ===
{other_hypotheses}

=== INSTRUCTIONS ===
Refine your hypothesis by:
1. Addressing the weaknesses identified by the judge
2. Incorporating insights from other reasoners
3. Strengthening evidence and reasoning
4. Improving resolution steps

Provide refined hypothesis in JSON format:
{{
  "hypothesis": "Refined root cause description",
  "confidence": 0.0-1.0,
  "reasoning": "Improved reasoning addressing feedback",
  "evidence": ["Enhanced evidence list"],
  "category": "hardware|software|network|config|resource",
  "affected_components": ["Components"],
  "suggested_resolution": "Improved resolution steps",
  "changes_made": "Summary of refinements"
}}"""

JUDGE_SYSTEM = ("You are the judge of a root-cause analysis debate. Score each hypothesis 0-100 on its own merits: "
                "does it explain all the observed errors, cite real evidence from the logs, name the specific "
                "failing component, and give a workable fix? The order of the hypotheses means nothing. "
                "Reply with JSON only.")

JUDGE = """=== INCIDENT ===
{question}

=== KEY LOG LINES ===
{lines}

=== HYPOTHESES ===
{listing}

=== INSTRUCTIONS ===
For each of {labels}: strengths, weaknesses, feedback (what to change to score higher), and a score 0-100. Then give the label of the best hypothesis in `top_hypothesis`."""

GRADE_PROMPT = """Ground-truth root cause of an incident:
{truth}

Proposed root cause:
{proposed}

Does the proposed root cause identify the same underlying cause as the ground truth? Explain briefly, then answer same_cause (true/false) and a score 0-100."""
