"""A judge scorer: does a synthesis state the points of the item's reference note?

The judge is one model call (recorded like any other, phase `score`, agent `judge`). It
returns a verdict per `must_mention` point (or the `reference` as a single point when the
item has none); the score is the share of points judged mentioned, in [0, 1].
"""

from __future__ import annotations

from pydantic import BaseModel, Field


class PointVerdict(BaseModel):
    point: int = Field(description="The point's number.")
    mentioned: bool = Field(description="Whether the synthesis states the point.")


class Judgement(BaseModel):
    verdicts: list[PointVerdict] = Field(description="One verdict per point, in order.",
                                         json_schema_extra={"maxItems": 12})


async def judge(debate, item, synthesis: str | None, model: str | None = None,
                max_tokens: int = 300) -> tuple[float | None, dict | None]:
    """Score `synthesis` against `item.must_mention` / `item.reference`.

    Returns:
        (score, judgement): score None when the item has no reference or the judge call
        failed; 0.0 when there is no synthesis. The judgement is also written to `score.json`.
    """
    points = list(getattr(item, "must_mention", None) or []) or (
        [item.reference] if getattr(item, "reference", None) else [])
    if not points:
        return None, None
    if not synthesis:
        return 0.0, {"verdicts": [], "score": 0.0, "error": "no synthesis"}
    numbered = "\n".join(f"{i}. {p}" for i, p in enumerate(points, start=1))
    prompt = JUDGE_TASK.format(reference=getattr(item, "reference", None) or "-", points=numbered, synthesis=synthesis)
    turn = await debate.ask("judge", [{"role": "system", "content": JUDGE}, {"role": "user", "content": prompt}],
                            Judgement, phase="score", round=None, max_tokens=max_tokens, model=model, temperature=0.0)
    if not turn.ok:
        return None, {"verdicts": [], "score": None, "error": turn.error}
    said = {v.point: v.mentioned for v in turn.parsed.verdicts if 1 <= v.point <= len(points)}
    verdicts = [{"point": p, "mentioned": bool(said.get(i, False))} for i, p in enumerate(points, start=1)]
    result = {"verdicts": verdicts, "score": sum(v["mentioned"] for v in verdicts) / len(points)}
    debate.write("score.json", result)
    return result["score"], result


JUDGE = ("You grade a legal synthesis against a reference. For each numbered point, decide whether the "
         "synthesis states it (same meaning, not the same words). Be strict: a point that is missing, "
         "vague or contradicted is not mentioned.")
JUDGE_TASK = ("Reference note:\n{reference}\n\nPoints a correct synthesis must state:\n{points}\n\nSynthesis "
              "to grade:\n{synthesis}\n\nReply in JSON: `verdicts`, one per point in order, each with `point` "
              "(its number) and `mentioned` (true or false).")
