"""The printed report of seed 004 ("Expected Output"), rebuilt from a finished debate's record.

`debatekit show RUN_DIR ITEM` prints it for judge_refine debates.
"""

from __future__ import annotations

import json
from pathlib import Path

from debatekit.protocols.judge_refine.hypotheses import display_name, resolution_steps
from debatekit.records.schemas import DebateRecord

RULE = "=" * 70
STOPPED = {"plateau": "Score plateau detected", "consensus": "Consensus reached",
           "max_rounds": "Max rounds reached", "timeout": "Stopped: debate time limit",
           "budget": "Stopped: token budget spent"}
CONVERGENCE = {"plateau": "score plateau", "consensus": "consensus"}


def report(record: DebateRecord, folder: Path | None = None) -> str:
    """The seed's report: rounds with top scores and improvements, the best hypothesis, the trajectory.

    Args:
        record: a judge_refine debate (one line of debates.jsonl).
        folder: the debate's own folder (`items/<id>/`); its `score.json` adds the scoring lines.
    """
    out = record.output
    rounds = out.get("rounds", [])
    total = out.get("total_rounds", len(rounds))
    lines = [RULE, f"DEBATE PROTOCOL - {total} ROUND{'S' if total != 1 else ''}", RULE, ""]
    previous = None
    for i, r in enumerate(rounds):
        n, last = r["round_number"], i == len(rounds) - 1
        title = "Initial Hypotheses" if n == 1 else ("Final Refinement" if last else "Refinement")
        lines.append(f"ROUND {n}: {title}")
        if n == 1:
            for name, hyps in r["hypotheses"].items():
                count = len(hyps)
                lines.append(f"  - {display_name(name)}: {count} hypothes{'is' if count == 1 else 'es'}")
        else:
            lines.append("  - Final improvements made" if last else "  - Reasoners refined based on feedback")
        top = r.get("top_hypothesis")
        score = top["judge_score"] if top else None
        judged = r.get("judge_evaluation", {})
        if score is None:
            lines.append(f"  - Judge Evaluation: no scores ({judged.get('error') or 'judge failed'})")
        else:
            lines.append(f"  - Judge Evaluation: Top score = {score}/100 ({display_name(top['source'])})")
        if n > 1 and score is not None and previous is not None:
            lines.append(f"  - Improvement: {score - previous:+d} points")
        if judged.get("order"):
            shown = ", ".join(f"{o['label']}={display_name(o['source'])}" for o in judged["order"])
            lines.append(f"  - Judge saw {'shuffled' if judged.get('shuffled') else 'in order'}, "
                         f"sources hidden: {shown}")
        if last:
            lines.append(f"  - Convergence: {STOPPED.get(record.stop_reason, record.stop_reason)}")
        previous = score if score is not None else previous
        lines.append("")

    final = out.get("final_hypothesis")
    lines += [RULE, "FINAL RESULT", RULE, ""]
    if not final:
        lines.append("No hypothesis (every reasoner call failed).")
    else:
        score = final.get("judge_score")
        lines += [f"Best Hypothesis (Score: {'-' if score is None else score}/100):",
                  f"  Source: {final['source']}", f"  Hypothesis: {final['hypothesis']}",
                  f"  Confidence: {final['confidence']:.2f}", f"  Rounds Refined: {final['rounds_refined']}", ""]
        lines += ["  Evidence:", *(f"    - {e}" for e in final.get("evidence") or ["(none)"]), ""]
        steps = resolution_steps(final.get("resolution", "")) or ["(none)"]
        lines += ["  Resolution:", *(f"    {k}. {s}" for k, s in enumerate(steps, 1)), ""]
    lines.append(trajectory_line(out.get("improvement_trajectory", [])))
    why = CONVERGENCE.get(record.stop_reason or "")
    lines.append(f"Convergence: Achieved ({why})" if out.get("convergence_achieved") and why
                 else f"Convergence: Not achieved ({record.stop_reason})")
    lines += _scoring(record, folder)
    return "\n".join(lines)


def trajectory_line(scores: list) -> str:
    """`Improvement Trajectory: 85 → 90 → 92 (+7 points over 3 rounds)`."""
    shown = " → ".join("-" if s is None else str(s) for s in scores) or "-"
    known = [s for s in scores if s is not None]
    gain = f" ({known[-1] - known[0]:+d} points over {len(scores)} rounds)" if len(known) >= 2 else ""
    return f"Improvement Trajectory: {shown}{gain}"


def _scoring(record: DebateRecord, folder: Path | None) -> list[str]:
    path = folder / "score.json" if folder else None
    if path is None or not path.exists():
        return [] if record.correct is None else ["", f"Names the true cause (keywords): {record.correct}"]
    score = json.loads(path.read_text(encoding="utf-8"))
    groups = ", ".join(("✓ " if g["matched"] else "✗ ") + (g["keywords"] if isinstance(g["keywords"], str)
                       else " | ".join(g["keywords"][:3])) for g in score["groups"])
    lines = ["", RULE, "SCORING", RULE, f"True root cause: {score['root_cause']}",
             f"Keyword match: {'yes' if score['keyword_match'] else 'no'} ({groups})"]
    if score.get("grade"):
        grade = score["grade"]
        lines.append(f"Judge grade: {grade['score']}/100, same cause: {grade['same_cause']} - {grade['explanation']}")
    return lines
