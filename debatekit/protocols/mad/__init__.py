"""MAD: an affirmative and a negative debater, a moderator, and a judge as a last resort.

Liang et al. 2023, "Encouraging Divergent Thinking in Large Language Models through Multi-Agent
Debate" (official code: github.com/Skytliang/Multi-Agents-Debate, `interactive.py` with
`code/utils/config4all.json`, the question-answering entry point).

Round 1: the affirmative answers the question; the negative is shown that answer and told it
disagrees ("tit for tat") and must give its own; the moderator is shown both and decides
whether one answer is clearly preferred. Each later round: the affirmative is shown the
negative's latest turn, the negative the affirmative's new turn, both asked whether they agree
(from round 2 on nobody is told to disagree), then the moderator again. Every role keeps its own
conversation; the debaters never see the moderator. As soon as the moderator gives an answer
the debate ends with it (`adaptive_break`, stop reason `moderator`). If no round ends that way,
a judge (the moderator's system prompt, a fresh conversation) is shown the two opening
statements, lists the candidate answers, then gives the final answer. Each round records both
debaters' answers and the moderator's decision (`moderator`: preference, supported_side, answer,
or the error of a failed call); `converged` says whether the debaters' last answers agree.

Where debatekit departs from the official code:
- Prompts are in debatekit's own words; each keeps what its role is told, shown and asked for.
  Multiple-choice options are shown under the question as `A) ...` lines; rounds are numbers,
  not ordinal words.
- The debaters end each turn with an answer (`Answer: X`, or a JSON `answer` with
  `answer_format=json`), read in code and recorded per round; the official debaters write free
  text and no answer is taken from them.
- The moderator ends with `Preference:`, `Side:` and `Answer:` lines (or a JSON object), read in
  code with one repair round; the official code `eval`s a Python dict and crashes on anything else.
  As in the official code, the debate ends when the moderator's answer is non-empty (the
  preference flag is recorded, not tested). The judge's final answer is read like a debater's.
- A failed call does not crash the debate: a failed moderator call counts as no preference; a
  debater whose call failed is shown to the others as a note saying so and its unanswered
  prompt is dropped from its conversation; a failed judge call leaves no final answer (the
  runner records the debate as `error`, not scored). A reply that does not parse after repair
  is the model's own: for the judge it is a wrong answer, as for every protocol.
- `adaptive_break=False` (no such switch in the official code, which always breaks): every round
  runs, with the moderator called each round; the final answer is then the last moderator
  answer if it gave one, else the judge's (the official code's rule after its loop). A debate cut
  short by debatekit's time or token limit goes to the judge like one that ran out of rounds.
- Not a departure, but unlike debatekit's issue text ("a judge reads the whole debate"): the
  judge sees only the two opening statements, as in the official code.
- Not carried over: the translation runner's baseline agent (`code/debate4tran.py`), retries with
  backoff (the gateway's own apply), `max_tokens` = context left (debatekit's limit applies).
  Options: a model per role (`models`) and for the judge (`judge_model`); the official code uses
  one model for all. `temperature` defaults to the official 0.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from debatekit.datasets.voting import answers_equal
from debatekit.engine import Outcome
from debatekit.protocols.mad import prompts
from debatekit.protocols.shared.answers import DEFAULT_FORMAT, AnswerFormat, AnswerKind, spec_for
from debatekit.records.schemas import RoundRecord
from debatekit.registry import ProtocolError, Role, protocol

ROLES = ("affirmative", "negative", "moderator")


class MadOutput(BaseModel):
    """What a `mad` debate returns besides its final answer."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    decided_by: Literal["moderator", "judge"] | None = None
    """Who gave the final answer; None when nobody could (a failed judge call)."""
    supported_side: Literal["affirmative", "negative"] | None = None
    """The side the deciding moderator backed (None when the judge decided)."""
    moderator: list[dict[str, Any]] = []
    """The moderator's decision each round: preference, supported_side, answer (or error)."""
    candidates: str | None = None
    """The judge's list of candidate answers (its first stage), when the judge ran."""
    reasoning: str | None = None
    """The deciding reply's reasoning (the moderator's or the judge's)."""


@protocol("mad", paper="Liang et al. 2023", output=MadOutput, role=Role(label="MAD"),
          stop_reasons={"moderator": "the moderator preferred one answer and ended the debate with it"})
def mad(
    rounds: Annotated[int, Field(ge=1, le=10)] = 3,
    adaptive_break: bool = True,
    temperature: float = 0.0,
    answer: AnswerKind = "auto",
    answer_format: AnswerFormat = DEFAULT_FORMAT,
    models: dict[str, str] = {},
    judge_model: str | None = None,
):
    """Affirmative vs negative debater, a moderator that may end the debate, a judge otherwise (Liang et al.)."""
    stray = sorted(set(models) - set(ROLES))
    if stray:
        raise ProtocolError(f"mad: models given for {', '.join(map(repr, stray))}; roles: {', '.join(ROLES)} "
                            "(the judge's model is judge_model)")

    async def run(item, debate):
        spec = spec_for(item, answer, answer_format)
        decision = prompts.decision_model(spec)
        chats = {side: [{"role": "system", "content": prompts.debater_system(spec, item.question)}]
                 for side in ROLES[:2]}
        chats["moderator"] = [{"role": "system", "content": prompts.moderator_system(spec, item.question)}]
        latest: dict[str, str] = {}  # each side's latest argument, as the others are shown it
        reasons: dict[int, str] = {}  # the moderator's reasoning by round
        openings: dict[str, str] = {}

        async def argue(side: str, prompt: str, round_no: int) -> Any:
            chats[side].append(prompts.asked(prompt, spec))
            turn = await debate.ask(side, chats[side], spec.output, phase="argue", round=round_no,
                                    temperature=temperature, model=models.get(side))
            kept = _keep(chats[side], turn)
            latest[side] = (spec.shown(turn.parsed) if turn.ok else turn.text) if kept else prompts.MISSING
            openings.setdefault(side, latest[side])
            return turn.parsed.answer if turn.ok else None

        async def step(round_no: int) -> None:
            first = round_no == 1
            said = await argue("affirmative", spec.question(item.question) if first else
                               prompts.REBUT.format(argument=latest["negative"]), round_no)
            replied = await argue("negative", (prompts.OPPOSE if first else prompts.REBUT).format(
                argument=latest["affirmative"]), round_no)
            chats["moderator"].append(prompts.moderate(spec, round_no, latest["affirmative"], latest["negative"]))
            turn = await debate.ask("moderator", chats["moderator"], decision, phase="moderate", round=round_no,
                                    temperature=temperature, model=models.get("moderator"))
            _keep(chats["moderator"], turn)
            if turn.ok:
                reasons[round_no] = turn.parsed.reason
            debate.record_round(round_no, {"affirmative": said, "negative": replied},
                                moderator=prompts.decision_record(turn))

        await debate.rounds(step, rounds, stop=[moderator_break] if adaptive_break else [])
        out = MadOutput(moderator=[r.extra["moderator"] for r in debate.history])
        final = None
        if debate.history and has_answer(decided := debate.history[-1].extra["moderator"]):
            final, out.decided_by, out.supported_side = decided["answer"], "moderator", decided["supported_side"]
            out.reasoning = reasons[debate.history[-1].round]
        elif len(openings) == 2:
            final = await judge(item, debate, spec, openings, out, judge_model, temperature)
        last = debate.history[-1].answers if debate.history else {}
        converged = last.get("affirmative") is not None and answers_equal(last["affirmative"], last.get("negative"))
        return Outcome(final_answer=final, converged=converged, output=out.model_dump(mode="json"))

    return run


async def judge(item, debate, spec, openings: dict[str, str], out: MadOutput, judge_model: str | None,
                temperature: float) -> Any:
    """The judge's two stages in one conversation: list the candidates, then answer."""
    chat = [{"role": "system", "content": prompts.moderator_system(spec, item.question)},
            {"role": "user", "content": prompts.CANDIDATES.format(**openings)}]
    listed = await debate.ask("judge", chat, None, phase="candidates", temperature=temperature,
                              model=judge_model)
    if not listed.ok:
        return None
    out.candidates = listed.text
    chat += [{"role": "assistant", "content": listed.text},
             prompts.asked(prompts.VERDICT.format(question=spec.question(item.question)), spec)]
    verdict = await debate.ask("judge", chat, spec.output, phase="judge", temperature=temperature,
                               model=judge_model)
    if not verdict.ok:
        return None
    out.decided_by, out.reasoning = "judge", verdict.parsed.reasoning
    return verdict.parsed.answer


def moderator_break(history: list[RoundRecord]) -> str | None:
    """Stop when the latest round's moderator gave an answer (the official test: a non-empty answer)."""
    return "moderator" if history and has_answer(history[-1].extra["moderator"]) else None


def has_answer(decision: dict) -> bool:
    """Whether a recorded moderator decision gave an answer (a failed call gives none)."""
    return decision.get("answer") not in (None, "")


def _keep(chat: list[dict], turn) -> bool:
    """Add the reply to the role's conversation; without one, drop the unanswered prompt."""
    if turn.text:
        chat.append({"role": "assistant", "content": turn.text})
        return True
    chat.pop()
    return False
