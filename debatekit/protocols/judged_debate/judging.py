"""The judge of judged debate, consultancy and the blind judge (Khan et al. 2024): its prompt and
reply model (`Answer:` and `Probability:` lines, or JSON), `judge` reading the record twice (as run
and with the positions swapped, as the official `core/judge.py` does), `decide` turning the
readings into one answer, and `order_report` over a run."""

from __future__ import annotations

import functools
from typing import Any, Callable, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, model_validator
from pydantic.json_schema import SkipJsonSchema

from debatekit._base.answer_kinds import LETTERS
from debatekit.protocols.judged_debate import prompts as P
from debatekit.protocols.judged_debate.items import Setup
from debatekit.protocols.shared import extract
from debatekit.protocols.shared.fields import Probability
from debatekit.registry import ProtocolError


class JudgeVerdict(BaseModel):
    """A judge's decision: its reasoning, the letter it picks, and how likely that pick is right."""

    model_config = ConfigDict(title="Verdict")  # its name in the response format, so in every request and cache key

    # The pick is the verdict. A probability below 0.5 for the chosen answer (the embedded model
    # writes `Probability: 0` beside a clear `Answer: B`), or none at all, states no usable
    # confidence: the reading counts as undecided (0.5) and what the judge wrote is kept in `stated`.
    # (A comment, not the docstring: the docstring is the JSON schema's description the judge reads.)
    thinking: str
    answer: Literal["A", "B"]
    probability: Probability
    stated: SkipJsonSchema[float | None] = None

    @model_validator(mode="after")
    def _undecided_below_half(self) -> "JudgeVerdict":
        if "stated" not in self.model_fields_set:  # JSON: the number it wrote is the one read
            self.stated = self.probability
        if self.probability < 0.5:
            self.probability = 0.5
        return self


@functools.lru_cache(maxsize=64)
def verdict_model(shown: tuple[str, str], answer_format: str) -> type[BaseModel]:
    """The judge's reply model for candidates shown as A and B (text replies also match their wording)."""
    if answer_format == "json":
        return JudgeVerdict

    class TextJudgeVerdict(JudgeVerdict):
        repair_prompt: ClassVar[str] = P.VERDICT_REPAIR

        @classmethod
        def from_text(cls, text: str) -> JudgeVerdict:
            # the verdict must be stated (an `Answer:` line), not guessed from prose ("no idea" is not "no")
            letter = extract.extract("choice", text, list(shown)) if extract.MARKER.search(text) else None
            if letter not in ("A", "B"):
                raise ValueError("no `Answer: A` or `Answer: B` line in the reply")
            chance = extract.probability(text)
            return cls(thinking=text, answer=letter, probability=0.5 if chance is None else chance, stated=chance)

    return TextJudgeVerdict


def verdict_request(answer_format: str) -> tuple[str, str]:
    """The judge's (thinking instruction, verdict instruction) for the answer format."""
    return (P.THINK_TEXT, P.VERDICT_TEXT) if answer_format == "text" else (P.THINK_JSON, P.VERDICT_JSON)


def judge_prompt(intro: str, kind: str, whose: str, question: str, shown: tuple[str, str], transcript: str,
                 answer_format: str, who: str = "") -> str:
    """The final judge's message: its role (`intro`), the quote rules, the question with the candidates
    as shown (A, B), the transcript of the `kind` ("debate", "consultancy") and the verdict request."""
    closing, verdict = verdict_request(answer_format)
    return P.JUDGE.format(intro=intro, quotes=P.JUDGE_QUOTES, question=question, a=shown[0], b=shown[1], who=who,
                          kind=kind, transcript=transcript, closing=closing, whose=whose, verdict=verdict)


# --- the judge ------------------------------------------------------------------------------

class Judgement(BaseModel):
    """One reading of the record by the judge."""

    order: Literal["as_run", "swapped"]
    letter: Literal["A", "B"]
    """The letter picked, in this reading's order."""
    answer: Any
    """The candidate it stands for, as the item's answer."""
    probability: float
    """The probability this reading gives its pick: the judge's, or 0.5 when it stated none in [0.5, 1]."""
    stated_probability: float | None = None
    """What the judge wrote as its probability (None: nothing readable)."""
    correct: bool


class JudgedOutput(BaseModel):
    """What every judged protocol reports for one item."""

    candidates: dict[str, str]
    """{"A": ..., "B": ...} as run."""
    correct_position: Literal["A", "B"]
    judgements: list[Judgement]
    p_correct: float | None
    """The judge's probability on the right answer, averaged over its readings."""
    order_accuracy: float | None
    """The share of readings that picked the right answer (the paper's accuracy, both orders averaged)."""


async def judge(debate, setup: Setup, prompt: Callable[[bool], str], *, model: str | None, temperature: float,
                answer_format: str, both_orders: bool, protocol: str) -> list[Judgement]:
    """The judge's verdicts: on the record as run and, with `both_orders`, with A and B swapped.

    `prompt(swapped)` is the judge's message for one order. Readings whose call failed are left
    out; when every reading failed on an unreadable reply, the debate fails (a ProtocolError),
    so that a judge who gave no verdict is never scored as a wrong answer.
    """
    orders = [False, True] if both_orders else [False]
    turns = await debate.gather(
        debate.ask("judge", [{"role": "user", "content": prompt(swapped)}],
                   verdict_model(setup.shown(swapped), answer_format),
                   phase="judge_swapped" if swapped else "judge", temperature=temperature, model=model)
        for swapped in orders)
    out = []
    for swapped, turn in zip(orders, turns):
        if turn.ok:
            position = LETTERS.index(turn.parsed.answer) ^ int(swapped)
            out.append(Judgement(order="swapped" if swapped else "as_run", letter=turn.parsed.answer,
                                 answer=setup.values[position], probability=turn.parsed.probability,
                                 stated_probability=turn.parsed.stated, correct=position == setup.correct))
    if not out and all(t.completion.error_kind == "parse" for t in turns):
        raise ProtocolError(f"{protocol}: the judge gave no readable verdict ({turns[0].error})")
    return out


def decide(setup: Setup, judgements: list[Judgement]) -> tuple[Any, dict]:
    """The final answer (the candidate with the higher mean probability; a tie goes to the first
    reading's pick) and the shared output fields."""
    output = {"candidates": dict(zip("AB", setup.candidates)), "correct_position": "AB"[setup.correct],
              "judgements": [j.model_dump() for j in judgements], "p_correct": None, "order_accuracy": None}
    if not judgements:
        return None, output
    on_correct = [j.probability if j.correct else 1 - j.probability for j in judgements]
    p_correct = sum(on_correct) / len(on_correct)
    wrong_value = setup.values[1 - setup.correct]
    final = setup.values[setup.correct] if p_correct > 0.5 else wrong_value if p_correct < 0.5 else judgements[0].answer
    output.update(p_correct=round(p_correct, 4),
                  order_accuracy=sum(j.correct for j in judgements) / len(judgements))
    return final, output


def order_report(path) -> str:
    """Over a run: the judge's accuracy per reading (both orders pooled, the paper's measure) and its
    mean probability on the right answer."""
    from debatekit.records.trace import RunFolder

    outputs = [d.output for d in RunFolder(path).debates() if d.answered and d.output.get("judgements")]
    readings = [j for o in outputs for j in o["judgements"]]
    if not readings:
        return ""
    right = sum(j["correct"] for j in readings)
    mean_p = sum(o["p_correct"] for o in outputs) / len(outputs)
    return (f"judge accuracy over its readings (both orders pooled): {right / len(readings):.2f} "
            f"({right}/{len(readings)}); mean probability on the right answer {mean_p:.2f}")
