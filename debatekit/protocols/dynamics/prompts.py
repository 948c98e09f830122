"""Prompts of the debate-dynamics protocol (seed 003), kept short for small local models."""

from __future__ import annotations

ROUTER = (
    "Route this business decision.\nDecision: {question}\nOptions:\n{options}\nValue at risk: {value}. "
    "Reversible: {reversible}.\nsimple: a factual lookup, one option is plainly right. debate: options "
    "with trade-offs between roles (most decisions). council: critical for the company's survival.")

SYSTEM = ("You are the {role} in a decision debate at a company. Use only the evidence shown; "
          "cite it as [RAG:chunk_id]. Be brief and concrete.")

POSITION = (
    "Decision: {question}\nOptions:\n{options}\nEvidence:\n{evidence}\n\n"
    "Give your position. recommendation: the option letter. premises: the 1-2 facts it rests on. "
    "risks: the main risk kinds. timing: when to act. confidence: 0-100. limitations: what you do not "
    "know. rag_query: a few words to search the knowledge base for missing evidence, or empty.")

REBUTTAL = (
    "Decision: {question}\nOptions:\n{options}\nEvidence:\n{evidence}\n\nYour position: {own}\n"
    "Other positions:\n{others}\n\n"
    "Rebut: agreements with the others, divergences (confront the evidence), blind spots in their "
    "positions, whether you keep your position (yes/no/partially), then your updated position.")

REFINEMENT = (
    "Decision: {question}\nOptions:\n{options}\nEvidence:\n{evidence}\n\nYour position: {own}\n"
    "Other positions:\n{others}\n\nAgreed, do not re-debate: {agreed}.\nStill disputed: {disputed}.\n"
    "Divergences raised: {divergences}\n"
    "Final refinement: address only the disputed points and try one last approach, then give your "
    "updated position.")

SYNTHESIS = (
    "Synthesize this debate into one decision.\nDecision: {question}\nOptions:\n{options}\n"
    "Positions:\n{positions}\nConvergence: {convergence}.{breaker}\n"
    "Give the recommended option letter, the decision, consensus points, unresolved divergences, "
    "whether a divergence is critical, the risk level, whether the evidence covers the question "
    "(in_scope), and your confidence 0-100.")

BREAKER_NOTE = " The circuit breaker stopped the debate ({reason}): state the divergences explicitly."

COUNCIL = (
    "You are {member} on a {size}-member council. Decision: {question}\nOptions:\n{options}\n"
    "Evidence:\n{evidence}\n{context}\nVote: the option letter, a short rationale, your confidence 0-100.")

COUNCIL_CONTEXT = ("Escalated to the council because: {reasons}.\nSynthesis: option {recommendation}, "
                   "confidence {confidence}: {decision}\nDivergences: {divergences}\nPositions:\n{positions}")
