"""ReConcile (Chen, Saha and Bansal 2023, "ReConcile: Round-Table Conference Improves Reasoning via
Consensus among Diverse LLMs"; official code: github.com/dinobby/ReConcile, commit 0298b28).

A round table of agents, possibly each a different model (`models`). Round 1: every agent answers
on its own with step-by-step reasoning and a confidence (0-1) that it is right. Each later round:
every agent gets the whole first prompt again plus the previous round's answers grouped by
answer (the two most common answers, each with how many agents gave it and every explanation of
that group with its stated confidence; the same text for every agent, its own reply included),
and answers again. The table stops as soon as all agents give the same answer, or after `rounds`
answer rounds. The final answer is the confidence-weighted vote of the last round: each stated
confidence is recalibrated to a weight (<=0.6: 0.1, <0.8: 0.3, <0.9: 0.5, <1: 0.8, 1: 1.0), each
answer sums its agents' weights, and the largest sum wins (ties: the answer given first in agent
order). Optionally (`convincing`, off by default) every prompt starts with convincing samples:
training items whose gold explanation turned another agent's model from wrong to right.

`rounds` counts answer rounds including the first: the default 3 is the official code's initial
round plus its default two discussion rounds (`--round 2`); debatekit's round r is its round r-1.

Where debatekit departs from the official code:
- Prompts are in debatekit's own words, with the same structure (examples, question, ask for
  step-by-step reasoning and a confidence, answer format, stay on topic; in discussion rounds the
  review request, the grouped answers and the answer format again).
- Answer format: the official code asks every model for a JSON object and parses it with
  `ast.literal_eval`; here `answer_format=text` (the default) asks for free text ending in
  `Answer: X` and `Confidence: C`, and `json` asks for a schema-constrained object
  {reasoning, answer, confidence}. Options are `A) ...` lines and answers letters (ECQA used 1-5).
  A free-text reply is read beside what it says about its confidence (`extract.beside_confidence`):
  the embedded model often writes its confidence in words after its answer ("the confidence of our
  answer is 1.0"), which the answer's reader would otherwise take as the answer.
- A reply whose answer cannot be read is a parse failure (one repair prompt, then the agent has no
  answer that round); the official code retries the call and finally substitutes a random answer
  with confidence 0.0. A failed call is never an answer: the agent is left out of that round's
  groups and vote (the debate is `degraded`), and takes part again in the next round; a round in
  which nobody answered is followed by the first-round prompt again (nothing to discuss).
- A reply whose confidence cannot be read counts as confidence 0.0 (weight 0.1) and is shown to
  the others as 0.0, as the official code does, but is recorded as None in the round. A number in
  (1, 100] is read as a percent (the official code reads "85%" but crashes on 85).
- Convincing samples: the official repository ships them precomputed per model (the script that
  chose them is not in it) and always uses them; here they are off by default and, when
  `convincing` names a training split, chosen inside each debate with traced calls (round 0,
  phases `convince_before`/`convince_after`): per distinct model, of the first `convincing_pool`
  training items, the first `convincing_samples` it answered wrongly alone and rightly when given
  the gold explanation. Their cost is counted in the debate's usage. No shipped dataset has a
  training split, so a shipped name is refused.
- A convincing sample's question is shown with its `A) ...` option lines (the official examples
  give the bare question with a numeric answer), and its explanation-hinted retry says "use this
  fact" where the official `intervene` prompt says "given the fact that".
- Agents may share a model; each agent is shown the samples of the other agents' models (the
  official code: the samples of the two other models), so with one model everyone sees its samples.
- Temperature: the official code sets none (each API's default); `temperature` None keeps the
  model's default too, and can be set.
- If nobody answered in the last round, the final answer is the vote of the latest round in which
  somebody did (the official evaluation walks back over rounds the same way).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, Field, PlainValidator

from debatekit.datasets.voting import majority
from debatekit.engine import Outcome
from debatekit.engine.stopping import agreement
from debatekit.protocols.reconcile import convincing as samples_of, prompts
from debatekit.protocols.reconcile.vote import recalibrate, weighted_vote
from debatekit.protocols.shared.answers import DEFAULT_FORMAT, AnswerFormat, AnswerKind, spec_for
from debatekit.protocols.shared.agents import Agents, Models, agent_names, models_of
from debatekit.registry import ProtocolError, Role, protocol


def _training_split(value: object) -> str:
    if isinstance(value, str):
        return value
    raise ValueError("name the training split's JSONL file (convincing=FILE.jsonl); no shipped dataset has "
                     f"a training split, got {value!r}")


class ReconcileOutput(BaseModel):
    """What a reconcile debate returns besides its final answer (all of its last voting round)."""

    answers: dict[str, Any]
    """Agent -> answer (None: no answer that round)."""
    confidence: dict[str, float | None]
    """Agent -> the confidence it stated (None: none readable; weighed as 0.0)."""
    weights: dict[str, float]
    """Agent -> its recalibrated vote weight."""
    votes: dict[str, float]
    """Answer -> the sum of its agents' weights (the winner has the largest)."""
    majority: Any
    """The plain majority answer of the same round, for comparison with the weighted vote."""
    convincing: dict[str, list[str]]
    """Agent -> ids of the training items shown to it as convincing samples (empty when off)."""


@protocol("reconcile", paper="Chen et al. 2023", output=ReconcileOutput, role=Role(label="ReC"))
def reconcile(
    agents: Agents = 3,
    models: Models = [],
    rounds: Annotated[int, Field(ge=1, le=10)] = 3,
    temperature: float | None = None,
    answer: AnswerKind = "auto",
    answer_format: AnswerFormat = DEFAULT_FORMAT,
    convincing: Annotated[str, PlainValidator(_training_split)] = "",
    convincing_samples: Annotated[int, Field(ge=1, le=16)] = 4,
    convincing_pool: Annotated[int, Field(ge=1, le=64)] = 8,
):
    """Round table: agents answer with confidences, see the grouped answers, revise; confidence-weighted vote."""
    names = agent_names(agents)
    if len(names) < 2:
        raise ProtocolError(f"reconcile: a round table needs at least 2 agents, got {len(names)}")
    if convincing_samples > convincing_pool:
        raise ProtocolError(f"reconcile: convincing_samples ({convincing_samples}) cannot exceed convincing_pool "
                            f"({convincing_pool}), the training items tried")
    model_of = models_of(names, models, "reconcile")
    training = samples_of.load(convincing) if convincing else []

    async def run(item, debate):
        spec = spec_for(item, answer, answer_format)
        shots = {n: [] for n in names}
        if training:
            shots = await samples_of.select(debate, item, training, model_of, answer=answer,
                                            answer_format=answer_format, count=convincing_samples,
                                            pool=convincing_pool, temperature=temperature)
        previous: list[Any] = []  # the replies of the previous round, in agent order

        async def step(round_no: int) -> None:
            summary = prompts.summary(spec, previous) if previous else None
            turns = await debate.gather(
                debate.ask(n, prompts.messages(spec, item.question, shots[n], summary), spec.confident_output,
                           phase="answer" if round_no == 1 else "discuss", round=round_no,
                           temperature=temperature, model=model_of[n]) for n in names)
            replies = {t.agent: t.parsed for t in turns if t.ok}
            previous[:] = list(replies.values())
            answers = {n: replies[n].answer if n in replies else None for n in names}
            confidence = {n: replies[n].confidence if n in replies else None for n in names}
            _, votes = weighted_vote(answers, confidence)
            debate.record_round(round_no, answers, confidence=confidence,
                                weight={n: recalibrate(c) for n, c in confidence.items() if answers[n] is not None},
                                votes=votes)

        await debate.rounds(step, rounds, stop=[agreement])
        last = next((r for r in reversed(debate.history) if any(a is not None for a in r.answers.values())), None)
        answers = last.answers if last else {n: None for n in names}
        confidence = last.extra["confidence"] if last else {n: None for n in names}
        final, votes = weighted_vote(answers, confidence)
        return Outcome(final_answer=final, converged=debate.stop_reason == "agreement",
                       output=ReconcileOutput(
                           answers=answers, confidence=confidence, votes=votes,
                           weights={n: recalibrate(c) for n, c in confidence.items() if answers[n] is not None},
                           majority=majority(answers.values()),
                           convincing={n: [s.id for _, s in shots[n]] for n in names}).model_dump(mode="json"))

    return run
