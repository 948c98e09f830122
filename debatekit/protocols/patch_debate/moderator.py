"""The rule-based moderator (seed 002, 6): final sentence label from Stage 1, Stage 2, validator, debate.

No LLM. Rules run in the seed's order Z, B, M, C, A, D, E; each reads the label and
confidence the previous rules left:

Z  stage1_ate and stage2_ate confidence both 0 -> neutral, 0; stop.
B  Stage 2 preferred, unless stage1_ate.conf - stage2_ate.conf >= 0.2 (drop_guard: keep Stage 1).
M  Stage 2 present and stage1_ate.label != stage2_ate.label -> mixed, max of the two confidences.
C  validator.suggested_label and (critical issue or validator.conf >= current) -> validator's label,
   confidence raised to max(current, validator.conf). Critical: negation/irony/contrast or severity high.
A  not drop_guard, span IoU(candidate_atsa, stage1_atsa) >= 0.8 and candidate_atsa.label == label
   -> confidence = mean(current, candidate_atsa.conf).
D  label != candidate_atsa.label: |diff| < 0.1 keeps the sentence ATE; otherwise the more confident wins.
E  label inferred from the debate (sentence_polarity, else final_tuples, else summary text); overrides
   when it differs and (confidence < 0.55 or label == mixed). Block reasons: inferred_empty,
   label_unchanged, confidence_too_high.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable, Literal

from pydantic import BaseModel

from debatekit.protocols.patch_debate.types import LABELS, sentence_label

CRITICAL_ISSUES = ("negation", "irony", "contrast")


@dataclass(frozen=True)
class ModeratorThresholds:
    drop_guard: float = 0.2      # Rule B
    span_iou: float = 0.8        # Rule A
    tie_margin: float = 0.1      # Rule D
    debate_max_conf: float = 0.55  # Rule E


class Signal(BaseModel):
    """An aggregated ATE or ATSA result: sentence label, confidence, span (ATSA)."""

    label: str
    confidence: float
    span: tuple[int, int] | None = None


class ValidatorSignal(BaseModel):
    suggested_label: str | None = None
    confidence: float = 0.0
    issues: list[dict[str, Any]] = []
    """Each `{type, severity?, ...}`; type negation/irony/contrast or severity high is critical."""


class ArbiterFlags(BaseModel):
    stage2_rejected_due_to_confidence: bool = False
    validator_override_applied: bool = False
    confidence_margin_used: bool = False
    rule_e_fired: bool = False
    rule_e_block_reason: str | None = None
    rule_b_applied: bool = False
    rule_e_attempted_after_b: bool = False


class ModeratorOutput(BaseModel):
    final_label: str
    confidence: float
    rationale: list[str]
    selected_stage: Literal["stage1", "stage2"]
    applied_rules: list[str]
    arbiter_flags: ArbiterFlags
    final_aspects: list[dict[str, Any]] = []


def moderate(stage1_ate: Signal, stage1_atsa: Signal, stage2_ate: Signal | None = None,
             stage2_atsa: Signal | None = None, validator: ValidatorSignal | None = None,
             debate_summary: dict | None = None, final_aspect_sentiments: Iterable[Any] = (),
             thresholds: ModeratorThresholds = ModeratorThresholds()) -> ModeratorOutput:
    """Apply rules Z, B, M, C, A, D, E in order; see the module docstring."""
    th, flags, why, rules = thresholds, ArbiterFlags(), [], []
    aspects = build_final_aspects(final_aspect_sentiments)
    stage2_conf = stage2_ate.confidence if stage2_ate else 0.0
    # Rule Z
    if stage1_ate.confidence == 0 and stage2_conf == 0:
        return ModeratorOutput(final_label="neutral", confidence=0.0, selected_stage="stage1",
                               rationale=["RuleZ: insufficient signal (both confidences 0)."],
                               applied_rules=["Z"], arbiter_flags=flags, final_aspects=aspects)
    # Rule B
    drop_guard, stage = False, "stage1"
    if stage2_ate is not None:
        flags.rule_b_applied = True
        rules.append("B")
        if _ge(stage1_ate.confidence - stage2_ate.confidence, th.drop_guard):
            drop_guard = flags.stage2_rejected_due_to_confidence = True
            why.append(f"RuleB: Stage2 drop>={th.drop_guard:g}; keep Stage1.")
        else:
            stage = "stage2"
            why.append("RuleB: Stage2 preferred.")
    ate = stage2_ate if stage == "stage2" else stage1_ate
    candidate_atsa = stage2_atsa if stage == "stage2" and stage2_atsa is not None else stage1_atsa
    label, conf = ate.label, ate.confidence
    # Rule M
    if stage2_ate is not None and stage1_ate.label != stage2_ate.label:
        label, conf = "mixed", max(stage1_ate.confidence, stage2_ate.confidence)
        rules.append("M")
        why.append("RuleM: conflicting stage1/stage2 labels -> mixed.")
    # Rule C
    if validator is not None and validator.suggested_label:
        critical = any(str(i.get("type", "")).lower() in CRITICAL_ISSUES or str(i.get("severity", "")).lower()
                       == "high" for i in validator.issues)
        if critical or _ge(validator.confidence, conf):
            label, conf = validator.suggested_label, max(conf, validator.confidence)
            flags.validator_override_applied = True
            rules.append("C")
            why.append("RuleC: Validator critical veto.")
    # Rule A
    if not drop_guard and candidate_atsa.label == label:
        overlap = span_iou(candidate_atsa.span, stage1_atsa.span)
        if overlap is not None and _ge(overlap, th.span_iou):
            conf = (conf + candidate_atsa.confidence) / 2
            rules.append("A")
            why.append(f"RuleA: IoU>={th.span_iou:g} span aligned.")
    # Rule D
    if label != candidate_atsa.label:
        flags.confidence_margin_used = True
        rules.append("D")
        label, conf = _rule_d(label, conf, candidate_atsa, th.tie_margin, why)
    # Rule E
    label = _rule_e(label, conf, debate_summary, th.debate_max_conf, flags, rules, why)
    return ModeratorOutput(final_label=label, confidence=round(conf, 6), rationale=why, selected_stage=stage,
                           applied_rules=rules, arbiter_flags=flags, final_aspects=aspects)


def infer_label_from_debate(summary: dict | None) -> str | None:
    """Sentence label from the judge's summary: sentence_polarity, else final_tuples, else its text."""
    if not summary:
        return None
    polarity = str(summary.get("sentence_polarity") or "").lower()
    if polarity in LABELS:
        return polarity
    tuples = summary.get("final_tuples") or []
    from_tuples = sentence_label(str(t.get("polarity", "")).lower() for t in tuples if isinstance(t, dict)
                                 and str(t.get("polarity", "")).lower() in ("positive", "negative", "neutral"))
    if from_tuples:
        return from_tuples
    text = " ".join(_texts(summary.get(k)) for k in ("consensus", "rationale", "key_agreements",
                                                      "key_disagreements")).lower()
    found = {label for label in ("positive", "negative") if re.search(rf"\b{label}\b", text)}
    if "mixed" in text.split() or len(found) == 2:
        return "mixed"
    if found:
        return found.pop()
    return "neutral" if re.search(r"\bneutral\b", text) else None


def aggregate_atsa(tuples: Iterable[Any]) -> Signal:
    """An ATSA result as one Signal: label implied by the tuples (neutral if none), mean confidence,
    and the span covering all located terms."""
    tuples = list(tuples)
    spans = [t.span for t in tuples if t.span]
    return Signal(label=sentence_label(t.polarity for t in tuples) or "neutral",
                  confidence=round(sum(t.confidence for t in tuples) / len(tuples), 6) if tuples else 0.0,
                  span=(min(s[0] for s in spans), max(s[1] for s in spans)) if spans else None)


def _rule_e(label: str, conf: float, summary: dict | None, max_conf: float, flags: ArbiterFlags,
            rules: list[str], why: list[str]) -> str:
    """The debate's consensus label replaces a low-confidence (or mixed) one; the reason when it does not."""
    flags.rule_e_attempted_after_b = flags.rule_b_applied
    inferred = infer_label_from_debate(summary)
    if inferred is None:
        flags.rule_e_block_reason = "inferred_empty"
    elif inferred == label:
        flags.rule_e_block_reason = "label_unchanged"
    elif not (not _ge(conf, max_conf) or label == "mixed"):
        flags.rule_e_block_reason = "confidence_too_high"
    else:
        flags.rule_e_fired = True
        rules.append("E")
        why.append(f"RuleE: debate consensus -> {inferred}.")
        return inferred
    return label


def _rule_d(label: str, conf: float, atsa: Signal, margin: float, why: list[str]) -> tuple[str, float]:
    """Sentence ATE and candidate ATSA disagree: a near tie keeps the ATE, otherwise the more confident wins."""
    if not _ge(abs(conf - atsa.confidence), margin):
        why.append(f"RuleD: diff<{margin:g} conflict -> sentence ATE.")
        return label, conf
    if atsa.confidence > conf:
        why.append(f"RuleD: diff>={margin:g} ATSA wins.")
        return atsa.label, atsa.confidence
    why.append(f"RuleD: diff>={margin:g} ATE wins.")
    return label, conf


def span_iou(a: tuple[int, int] | None, b: tuple[int, int] | None) -> float | None:
    """Intersection over union of two character spans; None when either is missing or empty."""
    if not a or not b or a[1] <= a[0] or b[1] <= b[0]:
        return None
    inter = max(0, min(a[1], b[1]) - max(a[0], b[0]))
    return inter / (max(a[1], b[1]) - min(a[0], b[0]))


def build_final_aspects(aspect_sentiments: Iterable[Any]) -> list[dict[str, Any]]:
    """The patched Stage-2 aspect sentiments as plain dicts (FinalResult.final_aspects)."""
    return [a.model_dump(mode="json") if isinstance(a, BaseModel) else dict(a) for a in aspect_sentiments]


def _texts(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return " ".join(map(str, value))
    return "" if value is None else str(value)


def _ge(a: float, b: float) -> bool:
    """a >= b, ignoring float noise (0.7 - 0.5 counts as 0.2)."""
    return round(a - b, 9) >= 0
