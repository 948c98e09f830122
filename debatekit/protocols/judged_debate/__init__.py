"""Judged debate (Khan et al. 2024, "Debating with More Persuasive LLMs Leads to More Truthful Answers").

Two debaters each defend one of two candidate answers (the right one and a distractor) over
`rounds` rounds. Both read hidden evidence that the judge never sees; they back their arguments
with `<quote>` tags, which are checked against the evidence in code and shown to everyone from
then on as `<v_quote>` (found) or `<u_quote>` (not found). A judge, possibly a weaker model
(`judge_model`), reads the question, the two answers and the transcript and picks an answer
with a probability. Flow, roles and visibility follow the official code (ucl-dark/llm_debate:
`core/rollouts/quality_sim.py`, `quality_seq.py`, `core/agents/debater_quality.py`,
`judge_quality.py`, `core/judge.py`, `web/backend/services/parser.py`):

- Debater A defends answer A, Debater B answer B. Every call rebuilds the debater's prompt: its
  role, its position (confirmed in a prefilled reply), the evidence, the transcript so far (its
  own argument first in each round, then the opponent's) and the request with round-specific
  thinking steps (opening; critique; counter the critiques). Only the `<argument>` part reaches
  anyone else; it is cut to `max_words` words (`... <TRUNCATED>`).
- `turns="simultaneous"` (the code's default): both debaters speak at once each round and see
  earlier rounds only. `turns="sequential"`: Debater A speaks first; from round 2 Debater B also
  sees A's argument of the same round (round 1 stays simultaneous, as in `quality_seq.py`).
- Quotes: tags a model wrote as `<v_quote>`/`<u_quote>` are turned back into `<quote>`; a quote
  is verified when, after the official normalisation (curly quotes straightened, ASCII
  punctuation removed, lower case, spaces collapsed), it is a substring of the evidence.
- The judge reads the debate twice, as run and with the positions swapped (answer letters,
  debater names and the order of their arguments exchanged), as `core/judge.py` does.

Where debatekit departs from the official code, and why:

- Prompts are debatekit's own words, with the same structure (what each role is told, sees and
  must write). The evidence (StrategyQA's facts, `evidence` lists, `context` passages) takes the
  place of the QuALITY story.
- Sides: the code always gives the right answer to position A when debating and lets the swapped
  reading balance it; here whether the right answer is A is drawn per item from the run seed (the
  issue asks for it), so the debaters and, with sequential turns, the first speaker are balanced
  across items too. The distractor of a multiple-choice item is drawn from the seed (the code uses
  QuALITY's annotated "best distractor", which other datasets lack); yes/no items give yes and no.
- The judge's probability: the default official judge gives only a letter, and its optional
  probability comes from the A/B token log-probabilities, which debatekit's models may not give.
  The judge is asked for it instead: a last line `Probability: P` (0.5 to 1, for its chosen answer).
  A pick with no readable probability, or one below 0.5, stands as undecided (0.5; what the judge
  wrote is kept as `stated_probability`): a verdict is never lost for want of a number.
- One final answer per debate: the code scores the two readings separately. Here the answer is
  the candidate with the higher mean probability over the readings (a tie goes to the as-run
  reading); each reading is kept in the output with its own correctness (`order_accuracy` is the
  paper's accuracy averaged over orders).
- Sequential debates are judged once (`both_orders` defaults to off there): the code cannot swap a
  sequential debate at judging time either and instead generates a second debate with the other
  debater first; debatekit does not run the debate twice, the seeded sides balance who speaks first.
- One sample per argument (the code samples 3 candidates and keeps one of 70-150 words with a
  quote). Not offered: best-of-N and critique refinement of arguments, the cross-examining judge
  of interactive debate (off in the code's plain debate), a majority over repeated verdicts
  (`n_vote`), judging only the first rounds (`round_limit`), and the "round ended" stand-in the
  code uses when a prompt outgrows a fine-tuned model's context. A reply
  without `<argument>` tags gets one repair request, then counts as a missing argument (listed in
  `missing`) where the code stops and retries the whole debate. A judge reply with no readable
  `Answer:` is not counted as a wrong answer (the code counts inconclusive verdicts as wrong).
- `answer_format="json"`: arguments and verdicts as JSON objects instead of tagged text.
- As in the code, arguments are not rewritten when the swapped reading renames the debaters.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from debatekit.engine import Outcome
from debatekit.protocols.judged_debate import prompts as P
from debatekit.protocols.judged_debate.advocates import (advocate_messages, advocate_system, advocate_turn, argument_model,
                                                         render)
from debatekit.protocols.judged_debate.items import CandidateKind, EvidenceItem, setup_for
from debatekit.protocols.judged_debate.judging import JudgedOutput, decide, judge, judge_prompt, order_report
from debatekit.protocols.judged_debate.quotes import check_quotes, truncate
from debatekit.protocols.shared.answers import DEFAULT_FORMAT, AnswerFormat
from debatekit.registry import ProtocolError, Role, Views, protocol

AGENTS = ("debater_a", "debater_b")
NAMES = ("Debater A", "Debater B")
KEYS = ("a", "b")


class DebateOutput(JudgedOutput):
    turns: Literal["simultaneous", "sequential"]
    sides: dict[str, Any]
    """Each debater's answer (as the item's answer)."""
    quotes: dict[str, dict[str, int]]
    """Each debater's count of verified and unverified quotes."""
    missing: list[str]
    """Arguments that could not be read ("round 2 debater_b")."""


@protocol("judged_debate", paper="Khan et al. 2024", item=EvidenceItem, output=DebateOutput,
          views=Views(run=order_report), role=Role(label="JD"))
def judged_debate(
    rounds: Annotated[int, Field(ge=1, le=10)] = 3,
    turns: Literal["simultaneous", "sequential"] = "simultaneous",
    judge_model: str | None = None,
    both_orders: bool | None = None,
    word_limit: Annotated[int, Field(ge=10)] = 100,
    max_words: Annotated[int, Field(ge=10)] = 150,
    temperature: float = 0.4,
    judge_temperature: float = 0.0,
    answer: CandidateKind = "auto",
    answer_format: AnswerFormat = DEFAULT_FORMAT,
):
    """Two debaters argue for opposite answers from hidden evidence; a judge without it decides."""
    if both_orders and turns == "sequential":
        raise ProtocolError("judged_debate: both_orders needs simultaneous turns (a sequential debate cannot "
                            "be read with the speakers swapped); leave both_orders unset")
    swap = turns == "simultaneous" if both_orders is None else both_orders

    async def run(item, debate):
        setup = setup_for(item, debate.seed, answer, "judged_debate")
        exchange = Exchange(item, debate, setup, turns, word_limit, max_words, temperature, answer_format)
        await debate.rounds(exchange.step, rounds)
        judgements = await judge(debate, setup, exchange.judge_prompt, model=judge_model,
                                 temperature=judge_temperature, answer_format=answer_format, both_orders=swap,
                                 protocol="judged_debate")
        final, output = decide(setup, judgements)
        return Outcome(final_answer=final, output={**output, "turns": turns, "quotes": exchange.quotes,
                                                   "missing": exchange.missing,
                                                   "sides": dict(zip(AGENTS, setup.values))})

    return run


class Exchange:
    """One item's debate: the two debaters' turns round by round, with their quotes checked."""

    def __init__(self, item, debate, setup, turns: str, word_limit: int, max_words: int, temperature: float,
                 answer_format: AnswerFormat):
        self.item, self.debate, self.setup = item, debate, setup
        self.turns, self.word_limit, self.max_words = turns, word_limit, max_words
        self.temperature, self.answer_format = temperature, answer_format
        self.said: list[dict[str, str | None]] = []  # finished rounds: {"a": marked argument, "b": ...}
        self.quotes = {agent: {"verified": 0, "unverified": 0} for agent in AGENTS}
        self.missing: list[str] = []

    async def step(self, number: int) -> None:
        current: dict[str, str | None] = {}
        checked: dict = {}
        if self.turns == "simultaneous" or number == 1:
            first, second = await self.debate.gather([self.ask(0, number, current), self.ask(1, number, current)])
            self.keep(0, first, number, current, checked)
        else:
            self.keep(0, await self.ask(0, number, current), number, current, checked)
            second = await self.ask(1, number, current)
        self.keep(1, second, number, current, checked)
        self.said.append(current)
        values = self.setup.values
        self.debate.record_round(number, {AGENTS[s]: values[s] if current.get(KEYS[s]) else None for s in (0, 1)},
                                 verified={a: c.verified for a, c in checked.items()},
                                 unverified={a: c.unverified for a, c in checked.items()})

    def ask(self, side: int, number: int, current: dict):
        """Debater `side`'s turn in round `number`, shown the finished rounds and `current` so far."""
        setup, own, other = self.setup, KEYS[side], KEYS[1 - side]
        shown = [*self.said, current] if any(current.values()) else self.said
        transcript = render(shown, [(own, NAMES[side]), (other, NAMES[1 - side])])
        spoken = sum(1 for r in self.said if r.get(own))
        request = (P.OPENING if not spoken else P.NEXT_ARGUMENT).format(
            question=self.item.question, mine=setup.candidates[side])
        body = advocate_turn(setup.evidence, "debate", transcript, request, P.DEBATER_STEPS[min(spoken + 1, 3)],
                             self.word_limit, self.answer_format)
        system = advocate_system(P.DEBATER_SYSTEM, self.word_limit, self.answer_format, name=NAMES[side])
        messages = advocate_messages(system, self.item.question, setup.candidates[side],
                                     setup.candidates[1 - side], body)
        return self.debate.ask(AGENTS[side], messages, argument_model(setup.values[side], self.answer_format),
                               phase="argue", round=number, temperature=self.temperature)

    def keep(self, side: int, turn, number: int, current: dict, checked: dict) -> None:
        """Record debater `side`'s argument with its quotes checked (None when its call failed)."""
        if not turn.ok:
            current[KEYS[side]] = None
            self.missing.append(f"round {number} {AGENTS[side]}")
            return
        found = check_quotes(truncate(turn.parsed.argument, self.max_words), self.setup.evidence)
        current[KEYS[side]] = found.text
        checked[AGENTS[side]] = found
        self.quotes[AGENTS[side]]["verified"] += len(found.verified)
        self.quotes[AGENTS[side]]["unverified"] += len(found.unverified)

    def judge_prompt(self, swapped: bool) -> str:
        """What the judge reads: the transcript, with the speakers' places swapped when `swapped`."""
        speakers = [("b", NAMES[0]), ("a", NAMES[1])] if swapped else [("a", NAMES[0]), ("b", NAMES[1])]
        return judge_prompt(P.DEBATE_JUDGE, "debate", "each debater's", self.item.question, self.setup.shown(swapped),
                            render(self.said, speakers), self.answer_format,
                            who=P.DEBATE_WHO.format(name_a=NAMES[0], name_b=NAMES[1]))


from debatekit.protocols.judged_debate import blind, consultancy  # noqa: E402,F401  (register blind_judge, consultancy)
