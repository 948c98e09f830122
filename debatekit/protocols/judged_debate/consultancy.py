"""Consultancy (Khan et al. 2024, "Debating with More Persuasive LLMs Leads to More Truthful Answers").

One consultant argues for an assigned answer, the right one or the distractor, over `rounds`
rounds; it reads hidden evidence that the judge never sees. With `interactive` (the official
default), from round 2 the judge first reads the transcript and asks the consultant one question,
which the consultant then answers. At the end the judge, possibly a weaker model (`judge_model`),
reads the question, the two answers and the transcript and picks an answer with a probability,
once as run and once with the answer letters swapped. Quotes are checked in code as in
`judged_debate`. Follows the official code (ucl-dark/llm_debate: `core/config/experiment/
consultancy.yaml`, `consultants/v1.yaml`, `judge/consultancy/{default,intermediary}.yaml`,
`core/rollouts/quality_sim.py`, `core/agents/judge_quality.py`, `core/judge.py`): the consultant's
prompt is rebuilt every call (role, position confirmed in a prefilled reply, evidence,
transcript with the judge's questions and its own arguments, the request: an opening, then a reply
to the judge's latest question); the final judge is not told which answer the consultant defends.

Where debatekit departs from the official code, and why:

- Prompts are debatekit's own words with the same structure; the evidence replaces the story.
- Right half of the time: the code runs the whole set twice (a correct and an incorrect
  consultant). Here the consultant's side is drawn per item from the run seed (the issue asks for
  it), so about half the items get the right answer; the report prints the fraction and the
  judge's accuracy on each side. Positions A/B are drawn per item from the seed too.
- The questioning judge lists the two answers in A/B order; the code always lists the right one
  first, a cue debatekit does not give.
- The judge's probability is asked for in the reply (`Probability: P`) instead of read from token
  log-probabilities; one final answer per item from the two readings' mean probability (see
  `judged_debate`). A judge reply with no readable verdict is not scored as a wrong answer.
- One sample per argument (no 3-candidate sampling, 140-300-word filter or best-of-N); a reply
  without `<argument>` tags gets one repair request, then counts as missing. A failed question
  leaves that round without one, and the consultant is asked for its next argument instead.
- The questioning and the final judge are the same model (`judge_model`); the code configures
  them separately (both GPT-4 Turbo in the paper's runs).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from debatekit.engine import Outcome, derive_seed
from debatekit.protocols.judged_debate import prompts as P
from debatekit.protocols.judged_debate.advocates import (advocate_messages, advocate_system, advocate_turn, argument_model,
                                                         question_model, render)
from debatekit.protocols.judged_debate.items import CandidateKind, EvidenceItem, setup_for
from debatekit.protocols.judged_debate.judging import JudgedOutput, decide, judge, judge_prompt, order_report
from debatekit.protocols.judged_debate.quotes import check_quotes, truncate
from debatekit.protocols.shared.answers import DEFAULT_FORMAT, AnswerFormat
from debatekit.registry import Role, Views, protocol

SPEAKERS = [("question", "Judge"), ("consultant", "Consultant")]


class ConsultancyOutput(JudgedOutput):
    consultant_answer: Any
    """The answer the consultant argued for (as the item's answer)."""
    consultant_correct: bool
    questions: list[str]
    quotes: dict[str, int]
    """The consultant's count of verified and unverified quotes."""
    missing: list[str]


def consultancy_report(path) -> str:
    """Over a run: how often the consultant had the right answer, and the judge's accuracy on each side."""
    from debatekit.records.trace import RunFolder

    done = [d for d in RunFolder(path).debates() if d.answered and "consultant_correct" in d.output]
    if not done:
        return ""
    lines = [order_report(path)]
    honest = [d for d in done if d.output["consultant_correct"]]
    lines.append(f"consultant argued for the right answer in {len(honest)} of {len(done)} debates")
    for label, group in (("right", honest), ("wrong", [d for d in done if not d.output["consultant_correct"]])):
        right = sum(bool(d.correct) for d in group)
        lines.append(f"judge accuracy when the consultant was {label}: "
                     + (f"{right / len(group):.2f} ({right}/{len(group)})" if group else "n/a"))
    return "\n".join(line for line in lines if line)


@protocol("consultancy", paper="Khan et al. 2024", item=EvidenceItem, output=ConsultancyOutput,
          views=Views(run=consultancy_report), role=Role(label="cons"))
def consultancy(
    rounds: Annotated[int, Field(ge=1, le=10)] = 3,
    interactive: bool = True,
    judge_model: str | None = None,
    both_orders: bool = True,
    word_limit: Annotated[int, Field(ge=10)] = 200,
    max_words: Annotated[int, Field(ge=10)] = 300,
    temperature: float = 0.4,
    question_temperature: float = 0.4,
    judge_temperature: float = 0.0,
    answer: CandidateKind = "auto",
    answer_format: AnswerFormat = DEFAULT_FORMAT,
):
    """One consultant argues an assigned answer (right half the time); the judge questions it and decides."""

    async def run(item, debate):
        setup = setup_for(item, debate.seed, answer, "consultancy")
        honest = derive_seed(debate.seed, item.id, "consultant") % 2 == 0
        side = setup.correct if honest else 1 - setup.correct
        session = Consultation(item, debate, setup, side, interactive, judge_model, word_limit, max_words,
                               temperature, question_temperature, answer_format)
        await debate.rounds(session.step, rounds)
        judgements = await judge(debate, setup, session.judge_prompt, model=judge_model,
                                 temperature=judge_temperature, answer_format=answer_format,
                                 both_orders=both_orders, protocol="consultancy")
        final, output = decide(setup, judgements)
        return Outcome(final_answer=final, output={
            **output, "consultant_answer": setup.values[side], "consultant_correct": honest,
            "quotes": session.quotes, "questions": [r["question"] for r in session.said if r.get("question")],
            "missing": session.missing})

    return run


class Consultation:
    """One item's consultancy: the judge's questions and the consultant's arguments, round by round."""

    def __init__(self, item, debate, setup, side: int, interactive: bool, judge_model: str | None,
                 word_limit: int, max_words: int, temperature: float, question_temperature: float,
                 answer_format: AnswerFormat):
        self.item, self.debate, self.setup, self.side = item, debate, setup, side
        self.interactive, self.judge_model = interactive, judge_model
        self.word_limit, self.max_words, self.answer_format = word_limit, max_words, answer_format
        self.temperature, self.question_temperature = temperature, question_temperature
        self.system = advocate_system(P.CONSULTANT_SYSTEM, word_limit, answer_format)
        self.said: list[dict[str, str | None]] = []
        self.quotes = {"verified": 0, "unverified": 0}
        self.missing: list[str] = []

    async def step(self, number: int) -> None:
        setup, side = self.setup, self.side
        asking = self.interactive and number > 1
        current: dict[str, str | None] = {"question": await self.question(number) if asking else None}
        spoken = sum(1 for r in self.said if r.get("consultant"))
        template = P.OPENING if not spoken else P.ANSWER_QUESTION if current["question"] else P.NEXT_ARGUMENT
        mine, theirs = setup.candidates[side], setup.candidates[1 - side]
        transcript = render([*self.said, current], SPEAKERS) if self.said or current["question"] else ""
        body = advocate_turn(setup.evidence, "consultancy", transcript,
                             template.format(question=self.item.question, mine=mine),
                             P.CONSULTANT_STEPS[1 if not spoken else 2], self.word_limit, self.answer_format)
        turn = await self.debate.ask("consultant", advocate_messages(self.system, self.item.question, mine, theirs,
                                                                     body, other_tag="other_answer"),
                                     argument_model(setup.values[side], self.answer_format), phase="argue",
                                     round=number, temperature=self.temperature)
        found = check_quotes(truncate(turn.parsed.argument, self.max_words), setup.evidence) if turn.ok else None
        current["consultant"] = found.text if found else None
        if found:
            self.quotes["verified"] += len(found.verified)
            self.quotes["unverified"] += len(found.unverified)
        else:
            self.missing.append(f"round {number} consultant")
        self.said.append(current)
        self.debate.record_round(number, {"consultant": setup.values[side] if found else None},
                                 question=current["question"], verified=found.verified if found else [],
                                 unverified=found.unverified if found else [])

    async def question(self, number: int) -> str | None:
        """The judge's question to the consultant before its turn in round `number` (None if the call failed)."""
        text = self.answer_format == "text"
        shape, ask = (P.QUESTION_TEXT, P.ASK_TEXT) if text else (P.QUESTION_JSON, P.ASK_JSON)
        prompt = P.QUESTIONER.format(output=shape, ask=ask, quotes=P.JUDGE_QUOTES, question=self.item.question,
                                     a=self.setup.candidates[0], b=self.setup.candidates[1],
                                     transcript=render(self.said, SPEAKERS))
        turn = await self.debate.ask("judge", [{"role": "user", "content": prompt}], question_model(self.answer_format),
                                     phase="question", round=number, temperature=self.question_temperature,
                                     model=self.judge_model)
        if not turn.ok:
            self.missing.append(f"round {number} question")
            return None
        return turn.parsed.question.strip()

    def judge_prompt(self, swapped: bool) -> str:
        """What the judge reads at the end, the candidates in swapped order when `swapped`."""
        return judge_prompt(P.CONSULTANCY_JUDGE, "consultancy", "the consultant's", self.item.question,
                            self.setup.shown(swapped), render(self.said, SPEAKERS), self.answer_format)
