"""Society of mind (Du et al. 2023, "Improving Factuality and Reasoning through Multiagent Debate").

N agents answer independently (`agents`: how many, named agent1..N, or their names); in each next
round every agent reads the previous answers of the agents its `topology` lets it read and
revises its own, keeping its own conversation. The final answer is the majority vote of the last
round (a tie to the first agent's answer unless `tie_break` is "random"). The debate stops early
when all agents agree (configurable).

`topology` (Li et al. 2024, "Improving Multi-Agent Debate with Sparse Communication Topology")
decides who reads whom: `full` (every other agent, Du et al.'s debate and the default), `ring`
(the agent before and the one after, in the order of `agents`), `star` (the first agent reads
all, the others only it) or an explicit adjacency `{agent: [agents it reads]}`; see
`debatekit.protocols.shared.topology` for the exact rules. An agent with nobody to read in a round (an
empty list, a single agent, or neighbours that have not answered yet) is asked to check its own
answer instead. The resolved topology is in the output (`topology`) and each revision round
records which agents' answers each agent was shown (`read`).

Where it differs from the papers' code: prompts in debatekit's own words (the revision prompt
also says the other replies may be wrong, where Du et al. call them additional information or
advice; the self-check prompt is Du et al.'s single-agent one, reworded); answers parsed into
`reasoning` and `answer` (free text ending `Answer: X`, or JSON) and another agent's reply shown
as its reasoning and answer; the early stop on agreement (Du et al. always run every round); a
failed call is no answer: that agent is left out of the vote, and the others keep reading the
last answer it did give. Li et al. published no code: `ring` follows the paper's
neighbour-connected graph (each agent reads two neighbours); `star` and explicit adjacencies are
debatekit's.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, Field, PlainValidator

from debatekit.datasets.voting import agreement_rate, majority
from debatekit.engine import Outcome, TieBreak, agreement, tie_seed
from debatekit.protocols.shared.answers import (DEFAULT_FORMAT, AnswerFormat, AnswerKind, AnswerSpec, first_messages,
                                                spec_for)
from debatekit.protocols.shared.topology import Topology, resolve
from debatekit.registry import ProtocolError, protocol

MAX_AGENTS = 16


def _agents(value: object) -> int | list[str]:
    if isinstance(value, int) and not isinstance(value, bool):
        if 1 <= value <= MAX_AGENTS:
            return value
        raise ValueError(f"a count of agents must be 1 to {MAX_AGENTS}, got {value}")
    if (isinstance(value, list) and 1 <= len(value) <= MAX_AGENTS and len(set(map(str, value))) == len(value)
            and all(isinstance(name, str) and name.strip() for name in value)):
        return list(value)
    raise ValueError(f"give a count of agents or 1 to {MAX_AGENTS} distinct, non-blank agent names, got {value!r}")


def _models(value: object) -> dict[str, str] | list[str]:
    if isinstance(value, list) and all(isinstance(model, str) for model in value):
        return list(value)
    if isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        return dict(value)
    raise ValueError(f"give {{agent name: model}} or a list of models dealt out to the agents in turn, got {value!r}")


Agents = Annotated[int | list[str], PlainValidator(_agents)]
Models = Annotated[dict[str, str] | list[str], PlainValidator(_models)]


class SocietyOutput(BaseModel):
    """What a society_of_mind debate outputs."""

    answers: dict[str, Any] = Field(description="Each agent's answer in the last round with any answer "
                                                "(None: that agent gave none).")
    topology: dict[str, list[str]] = Field(description="Each agent -> the agents whose previous-round answers "
                                                       "it reads.")


@protocol("society_of_mind", paper="Du et al. 2023", output=SocietyOutput, short="SoM")
def society_of_mind(
    agents: Agents = 3,
    rounds: Annotated[int, Field(ge=1, le=10)] = 2,
    stop_on_agreement: bool = True,
    temperature: float = 0.7,
    answer: AnswerKind = "auto",
    answer_format: AnswerFormat = DEFAULT_FORMAT,
    personas: list[str] = [],
    models: Models = [],
    topology: Topology = "full",
    tie_break: TieBreak = "first",
):
    """N agents answer, then revise after reading each other's answers; majority vote.

    A tie goes to the first agent's answer, or with `tie_break="random"` to one drawn with the run's
    seed and the item."""
    names = agent_names(agents)
    reads = resolve(topology, names, "society_of_mind")
    persona = {name: personas[i % len(personas)] if personas else None for i, name in enumerate(names)}
    model_of = models_of(names, models)

    async def run(item, debate):
        spec = spec_for(item, answer, answer_format)
        output = spec.output
        talk = {n: first_messages(spec, item.question, persona[n]) for n in names}
        last: dict[str, object] = {}  # each agent's latest parsed answer

        async def step(round_no: int) -> None:
            shown = {n: [o for o in reads[n] if o in last] for n in names}
            if round_no > 1:
                for n in names:
                    others = [last[o] for o in shown[n]]
                    talk[n].append({"role": "user", "content": debate_prompt(spec, others, item.question)})
            turns = await debate.gather(
                debate.ask(n, talk[n], output, phase="answer" if round_no == 1 else "revise",
                           round=round_no, temperature=temperature, model=model_of[n]) for n in names)
            for turn in turns:
                if turn.ok:
                    talk[turn.agent].append({"role": "assistant", "content": turn.text})
                    last[turn.agent] = turn.parsed
                elif round_no > 1:
                    talk[turn.agent].pop()  # keep the conversation well formed for the next round
            debate.record_round(round_no, {t.agent: t.parsed.answer if t.ok else None for t in turns},
                                **({"read": shown} if round_no > 1 else {}))

        await debate.rounds(step, rounds, stop=[agreement] if stop_on_agreement else [])
        final_round = next((r for r in reversed(debate.history) if any(
            a is not None for a in r.answers.values())), None)
        answers = list(final_round.answers.values()) if final_round else []
        return Outcome(final_answer=majority(answers, tie_seed(tie_break, debate, item)),
                       converged=agreement_rate(answers) == 1.0,
                       output={"answers": final_round.answers if final_round else {}, "topology": reads})

    return run


def agent_names(agents: int | list[str]) -> list[str]:
    """The agents' names: agent1..N for a count, else the given names."""
    return [f"agent{i + 1}" for i in range(agents)] if isinstance(agents, int) else list(agents)


def models_of(names: list[str], models: dict[str, str] | list[str],
              protocol: str = "society_of_mind") -> dict[str, str | None]:
    """Each agent's model (None: the run's): `models` maps agent names to models, or is a list taken in
    turn over the agents; a name not among `names` is an error that names `protocol`."""
    if isinstance(models, dict):
        stray = sorted(set(models) - set(names))
        if stray:
            raise ProtocolError(f"{protocol}: models given for {', '.join(map(repr, stray))}, "
                                f"not among agents {names}")
        return {name: models.get(name) for name in names}
    return {name: models[i % len(models)] if models else None for i, name in enumerate(names)}


def debate_prompt(spec: AnswerSpec, others: list, question: str) -> str:
    """The revision prompt: the other agents' latest replies, then a request to re-check and answer;
    with no replies to show, a request to check one's own answer again."""
    if not others:
        return (f"Check your previous answer once more: is it correct? Then give your answer again. "
                f"The question was: {spec.question(question)}\n\n{spec.closing()}")
    shown = "\n\n".join(f"--- reply of another agent ---\n{spec.shown(o)}" for o in others)
    return (f"Other agents have answered the same question. Their latest replies:\n\n{shown}\n\n"
            f"Treat these replies as extra material, not as the truth: they may be right or wrong. Go "
            f"through your own earlier reasoning and theirs step by step, decide what holds up, and answer "
            f"again. The question was: {spec.question(question)}\n\n{spec.closing()}")
