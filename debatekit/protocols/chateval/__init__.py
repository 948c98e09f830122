"""ChatEval (Chan et al. 2023, "ChatEval: Towards Better LLM-based Evaluators through Multi-Agent
Debate", arXiv:2308.07201; official code: github.com/thunlp/ChatEval).

A panel of referees, each with its own role description, discusses the item for `rounds`
rounds and each gives a final answer in its last turn; the panel's answer is their majority
(or, with `aggregate="mean"`, the mean of numeric answers: the paper's mean score). Every
referee is shown one prompt built from the same template: the question, the panel's task, the
discussion so far, its role, a call to speak briefly, and in its last turn the instruction
for a final judgement. `strategy` decides what "the discussion so far" holds:

- `one_by_one`: referees speak in turn, in the order of `agents`; each sees every earlier
  message, those of the current round included.
- `simultaneous`: all referees speak at once; each sees the earlier rounds only.
- `simultaneous_summarizer`: as `simultaneous`, and after every round but the last a
  summarizer folds that round's messages into a running summary; the next round's referees see
  only the latest summary (with `keep_history`, the earlier rounds' messages and every summary,
  as the official code does). If the summarizer fails, the next round sees the previous summary
  and the messages it has not folded in, which the next summary then takes up.

The debate always runs `rounds` rounds (no early stop, as in the official code); a referee
whose call fails is left out of what the others see and out of the vote, never counted as a
wrong answer.

Where debatekit departs from the official code (commits 56b320c0, 3bb65abc, 0c586559, 138aa1d2):

- Task: the official code scores pairs of assistant answers (1-10 each); here the referees
  answer the dataset item (an option letter, yes/no, a number or text, `answer`), in free text
  ending `Answer: X` or in JSON (`answer_format`). Prompts and roles are in debatekit's own words;
  the News Author's role (consistency with the article) is a fact checker (consistency with the
  question).
- Every turn, not only the last, ends with an answer line, so every round's answers are traced
  (the official code asks for scores only in the final turn). The final-turn instruction goes to
  each referee's turns in the last round, as in the official code.
- The discussion is written into the prompt as `[name]: text` lines (the older official code);
  the newest code sends each earlier message as a separate assistant message instead.
- The summarizer is one agent (`summarizer`, model `models["summarizer"]`) called once after each
  round but the last; the official code runs one summarizer per referee, each re-reading that
  referee's whole memory at the start of its turn (at temperature 0 they write the same text).
  It is given the running summary and only the new round's messages (the official one gets the
  whole memory as "new lines").
- By default the summary replaces the history (the issue's design: only summaries are carried
  forward); the official code appends it to the history, which `keep_history=True` restores.
- The final answer is the majority (ties: the answer of the referee earliest in `agents`) or the
  mean of the last round's answers; the official repository stores the referees' texts and has
  no aggregation step.
- Failures: an unparsable reply gets one repair prompt and a provider fault the gateway's retries
  (the official agent re-asks up to 3 times for either); a referee that still has no reply is
  left out of the discussion and the vote (the official updater skips its empty message too, but
  adds a `[Silence]` line when nobody spoke; nothing is added here).
- Defaults: 3 referees, 2 rounds, `one_by_one`, temperature 0 (the three-role configs); up to 5
  default roles (General Public, Critic, Fact Checker, Psychologist, Scientist).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from debatekit.datasets.voting import agreement_rate, majority
from debatekit.engine import Outcome
from debatekit.protocols.chateval import prompts as P
from debatekit.protocols.chateval.prompts import SUMMARIZER, Said
from debatekit.protocols.shared.answers import DEFAULT_FORMAT, AnswerFormat, AnswerKind, spec_for
from debatekit.protocols.shared.personas import describe
from debatekit.protocols.shared.agents import Agents, Models, agent_names, models_of
from debatekit.registry import ProtocolError, Role, protocol

Strategy = Literal["one_by_one", "simultaneous", "simultaneous_summarizer"]
NUMERIC = ("integer", "number")


class ChatEvalOutput(BaseModel):
    """What a chateval debate keeps besides the final answer."""

    strategy: Strategy
    """How the referees talked."""
    answers: dict[str, Any]
    """Each referee's answer in the last round (None: its call failed)."""
    summaries: list[str] = []
    """The summarizer's running summary after each round but the last (simultaneous_summarizer)."""


@protocol("chateval", paper="Chan et al. 2023", output=ChatEvalOutput, role=Role(label="ChatEval"))
def chateval(
    agents: Agents = 3,
    rounds: Annotated[int, Field(ge=1, le=10)] = 2,
    strategy: Strategy = "one_by_one",
    aggregate: Literal["majority", "mean"] = "majority",
    keep_history: bool = False,
    temperature: float = 0.0,
    answer: AnswerKind = "auto",
    answer_format: AnswerFormat = DEFAULT_FORMAT,
    personas: list[str] = [],
    models: Models = [],
):
    """A panel of referees with distinct roles talks it over (in turn, at once, or via a summarizer); majority vote."""
    names = list(P.ROLES)[:agents] if isinstance(agents, int) and agents <= len(P.ROLES) else agent_names(agents)
    role = roles_of(names, personas)
    summarized = strategy == "simultaneous_summarizer"
    if keep_history and not summarized:
        raise ProtocolError("chateval: keep_history applies only to strategy simultaneous_summarizer")
    if summarized and SUMMARIZER in names:
        raise ProtocolError(f"chateval: {SUMMARIZER!r} is the summarizer's name; call the referee something else")
    if aggregate == "mean" and answer not in ("auto", *NUMERIC):
        raise ProtocolError(f"chateval: aggregate=mean needs numeric answers, not answer={answer}")
    model_of = models_of(names + [SUMMARIZER] if summarized else names, models, "chateval")
    panel = Panel(names, role, strategy, rounds, aggregate, keep_history, temperature, model_of)

    async def run(item, debate):
        spec = spec_for(item, answer, answer_format)
        if aggregate == "mean" and spec.kind not in NUMERIC:
            raise ProtocolError(f"chateval: aggregate=mean needs numeric answers; item {item.id!r} asks for "
                                f"{spec.kind}")
        return await Discussion(panel, item, spec, debate).run()

    return run


@dataclass(frozen=True)
class Panel:
    """A chateval panel as configured: its referees, their roles and models, and how they talk."""

    names: list[str]
    role: dict[str, str]
    strategy: Strategy
    rounds: int
    aggregate: str
    keep_history: bool
    temperature: float
    model_of: dict[str, str | None]

    @property
    def summarized(self) -> bool:
        return self.strategy == "simultaneous_summarizer"


class Discussion:
    """One item's discussion: what has been said so far (summaries included), and who is shown what."""

    def __init__(self, panel: Panel, item, spec, debate):
        self.panel, self.item, self.spec, self.debate = panel, item, spec, debate
        self.said: list[Said] = []  # the whole discussion in order, summaries included
        self.summaries: list[str] = []

    async def run(self) -> Outcome:
        await self.debate.rounds(self.step, self.panel.rounds)
        last = self.debate.history[-1].answers if self.debate.history else {}
        votes = [a for a in last.values() if a is not None]
        final = mean_of(votes, self.spec.kind) if self.panel.aggregate == "mean" else majority(votes)
        return Outcome(final_answer=final, converged=bool(votes) and agreement_rate(list(last.values())) == 1.0,
                       output={"strategy": self.panel.strategy, "answers": last, "summaries": self.summaries})

    async def step(self, round_no: int) -> None:
        panel = self.panel
        if panel.strategy == "one_by_one":
            turns = []
            for name in panel.names:
                turns.append(await self.speak(name, round_no))
                self.heard(turns[-1])
        else:
            turns = await self.debate.gather(self.speak(name, round_no) for name in panel.names)
            for turn in turns:
                self.heard(turn)
        extra = {}
        if panel.summarized and round_no < panel.rounds:
            extra["summary"] = await self.summarize(round_no)
        self.debate.record_round(round_no, {t.agent: t.parsed.answer if t.ok else None for t in turns}, **extra)

    def shown(self, round_no: int) -> list[Said]:
        """The discussion a referee speaking now in `round_no` is shown."""
        if self.panel.strategy == "one_by_one":
            return list(self.said)
        earlier = [s for s in self.said if s.round < round_no]
        if self.panel.summarized and not self.panel.keep_history:
            # the latest summary, and what it has not folded in (the summarizer failed)
            return [s for s in earlier if s.speaker == SUMMARIZER][-1:] + self.unsummarized(round_no - 1)
        return earlier

    def unsummarized(self, upto: int) -> list[Said]:
        """The referees' messages after the latest summary, up to round `upto`."""
        done = next((s.round for s in reversed(self.said) if s.speaker == SUMMARIZER), 0)
        return [s for s in self.said if done < s.round <= upto and s.speaker != SUMMARIZER]

    def speak(self, name: str, round_no: int):
        panel = self.panel
        prompt = P.turn(self.spec, self.item.question, self.shown(round_no), name, panel.role[name],
                        len(panel.names), final=round_no == panel.rounds)
        return self.debate.ask(name, [{"role": "user", "content": prompt}], self.spec.output, phase="discuss",
                               round=round_no, temperature=panel.temperature, model=panel.model_of[name])

    def heard(self, turn) -> None:
        if turn.ok:
            self.said.append(Said(turn.round, turn.agent, self.spec.shown(turn.parsed)))

    async def summarize(self, round_no: int) -> str | None:
        current = self.summaries[-1] if self.summaries else ""
        prompt = P.summary(current, self.unsummarized(round_no))
        turn = await self.debate.ask(SUMMARIZER, [{"role": "user", "content": prompt}], None,
                                     phase="summarize", round=round_no, temperature=self.panel.temperature,
                                     model=self.panel.model_of[SUMMARIZER])
        if not turn.ok:  # the next round sees the previous summary and the messages it lacks
            return None
        self.summaries.append(turn.text.strip())
        self.said.append(Said(round_no, SUMMARIZER, self.summaries[-1]))
        return self.summaries[-1]


def roles_of(names: list[str], personas: list[str]) -> dict[str, str]:
    """Each referee's role description: `personas` one per agent, else the default roles in order."""
    if len(names) < 2:
        raise ProtocolError("chateval: a panel needs at least 2 referees")
    if personas:
        if len(personas) != len(names):
            raise ProtocolError(f"chateval: give one persona per referee ({len(names)} referees, "
                                f"{len(personas)} personas)")
        return {name: describe(persona, "chateval") for name, persona in zip(names, personas)}
    if len(names) > len(P.ROLES):
        raise ProtocolError(f"chateval: there are {len(P.ROLES)} default roles; give `personas` for "
                            f"{len(names)} referees")
    return dict(zip(names, P.ROLES.values()))


def mean_of(votes: list, kind: str) -> float | int | None:
    """The mean of numeric answers; to the nearest whole number (halves to even) when answers are integers."""
    if not votes:
        return None
    mean = sum(float(v) for v in votes) / len(votes)
    return round(mean) if kind == "integer" else mean
