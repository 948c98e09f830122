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

`update` picks how an agent updates after round 1 (Choi, Zhu and Li 2025, "Debate or Vote: Which
Yields Better Decisions in Multi-Agent Large Language Models?", arXiv 2508.17536, MAD-Conformist and
MAD-Follower): `debate` (the default) asks every agent to revise; `conformist` lets an agent whose
previous answer is the previous round's majority answer keep its reply, and asks only the others;
`follower` lets each agent, with probability `follow_rate` (0.3 in the paper), take the majority
answer, and asks the others. The majority answer is the most common answer of the previous round; a
tie (or no answer) is no majority, and then every agent revises. The paper's released code has
neither rule; these follow its text as its authors explained it (their repository's issue 2): a
follower takes the majority answer, not the answer of one other agent drawn at random. Where
debatekit differs: an agent that keeps or takes a reply makes no
model call; it takes the whole reply (reasoning and answer) of the first agent, in the order of
`agents`, that gave the majority answer (its own if it gave it), and that reply joins its conversation
after the round's prompt as if it had written it; the follower's draw is seeded by the run seed, the
item, the agent and the round. Each such round records who took whose reply (`adopted`).

The replies an agent reads go through `Debate.shown`, so a fork of a run (`debatekit fork`) can
replace, hide or reorder them; each revision round records whose replies each agent read (`read`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from debatekit.datasets.voting import agreement_rate, answers_equal, majority, tied_answers
from debatekit.engine import Outcome, Shown, TieBreak, derive_seed, tie_seed
from debatekit.engine.stopping import agreement
from debatekit.protocols.shared.agents import Agents, Models, agent_names, models_of
from debatekit.protocols.shared.answers import (DEFAULT_FORMAT, AnswerFormat, AnswerKind, AnswerSpec, first_messages,
                                                spec_for)
from debatekit.protocols.shared.personas import personas_of
from debatekit.protocols.shared.topology import Topology, resolve
from debatekit.registry import Role, protocol

Update = Literal["debate", "conformist", "follower"]


class SocietyOutput(BaseModel):
    """What a society_of_mind debate outputs."""

    answers: dict[str, Any] = Field(description="Each agent's answer in the last round with any answer "
                                                "(None: that agent gave none).")
    topology: dict[str, list[str]] = Field(description="Each agent -> the agents whose previous-round answers "
                                                       "it reads.")


@protocol("society_of_mind", paper="Du et al. 2023", output=SocietyOutput, role=Role(label="SoM"), shows_replies=True)
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
    update: Update = "debate",
    follow_rate: Annotated[float, Field(ge=0, le=1)] = 0.3,
):
    """N agents answer, then revise after reading each other's answers; majority vote.

    A tie goes to the first agent's answer, or with `tie_break="random"` to one drawn with the run's
    seed and the item. `update` "conformist" or "follower" replaces the revision of some agents by
    keeping or taking the majority reply (see the module)."""
    names = agent_names(agents)
    reads = resolve(topology, names, "society_of_mind")
    persona = personas_of(names, personas, "society_of_mind")
    model_of = models_of(names, models)

    async def run(item, debate):
        spec = spec_for(item, answer, answer_format)
        output = spec.output
        talk = {n: first_messages(spec, item.question, persona[n]) for n in names}
        last: dict[str, Any] = {}  # each agent's latest parsed answer
        said: dict[str, str] = {}  # and the text of that reply

        async def step(round_no: int) -> None:
            read = {n: [o for o in reads[n] if o in last] for n in names}
            adopted = takers(update, names, debate, item, round_no, follow_rate) if round_no > 1 else {}
            if round_no > 1:
                pool = {o: Shown(o, spec.shown(reply), reply.answer) for o, reply in last.items()}
                for n in names:
                    shown = debate.shown(n, round_no, [pool[o] for o in read[n]], pool)
                    read[n] = [s.author for s in shown]
                    talk[n].append({"role": "user", "content": debate_prompt(spec, [s.text for s in shown],
                                                                             item.question)})
            # the replies taken are last round's: a source that revises this round must not pass on its new one
            before = {n: (last[source], said[source]) for n, source in adopted.items()}
            turns = await debate.gather(
                debate.ask(n, talk[n], output, phase="answer" if round_no == 1 else "revise", round=round_no,
                           temperature=temperature, model=model_of[n]) for n in names if n not in adopted)
            answers = {}
            for turn in turns:
                answers[turn.agent] = turn.parsed.answer if turn.ok else None
                if turn.ok:
                    talk[turn.agent].append({"role": "assistant", "content": turn.text})
                    last[turn.agent], said[turn.agent] = turn.parsed, turn.text
                elif round_no > 1:
                    talk[turn.agent].pop()  # keep the conversation well formed for the next round
            for n in adopted:  # no call: last round's majority reply becomes theirs
                last[n], said[n] = before[n]
                talk[n].append({"role": "assistant", "content": said[n]})
                answers[n] = last[n].answer
            extra = {"read": read, **({"adopted": adopted} if adopted else {})} if round_no > 1 else {}
            debate.record_round(round_no, {n: answers[n] for n in names}, **extra)

        await debate.rounds(step, rounds, stop=[agreement] if stop_on_agreement else [])
        final_round = next((r for r in reversed(debate.history) if any(
            a is not None for a in r.answers.values())), None)
        answers = list(final_round.answers.values()) if final_round else []
        return Outcome(final_answer=majority(answers, tie_seed(tie_break, debate, item)),
                       converged=agreement_rate(answers) == 1.0,
                       output={"answers": final_round.answers if final_round else {}, "topology": reads})

    return run


def takers(update: str, names: list[str], debate, item, round_no: int, follow_rate: float) -> dict[str, str]:
    """The agents that make no call this round under `update` ("conformist", "follower"; none under
    "debate"), each with the agent whose previous reply it keeps or takes: the first agent that gave the
    previous round's majority answer, or itself if it gave it. No majority (a tie, or an answer that
    only one agent gave, the others having none): none."""
    if update == "debate":
        return {}
    previous = debate.history[-1].answers
    top = tied_answers([previous.get(n) for n in names])
    if len(top) != 1:
        return {}
    holders = [n for n in names if previous.get(n) is not None and answers_equal(previous[n], top[0])]
    if len(holders) < 2:  # one answer among failed calls is not a majority
        return {}
    if update == "conformist":
        return {n: n for n in holders}
    drawn = [n for n in names if derive_seed(debate.seed, item.id, n, round_no, "follow") / 2**31 < follow_rate]
    return {n: n if n in holders else holders[0] for n in drawn}


def debate_prompt(spec: AnswerSpec, others: list[str], question: str) -> str:
    """The revision prompt: the other agents' latest replies (as `spec.shown` shows them), then a
    request to re-check and answer; with no replies to show, a request to check one's own answer again."""
    if not others:
        return (f"Check your previous answer once more: is it correct? Then give your answer again. "
                f"The question was: {spec.question(question)}\n\n{spec.closing()}")
    shown = "\n\n".join(f"--- reply of another agent ---\n{text}" for text in others)
    return (f"Other agents have answered the same question. Their latest replies:\n\n{shown}\n\n"
            f"Treat these replies as extra material, not as the truth: they may be right or wrong. Go "
            f"through your own earlier reasoning and theirs step by step, decide what holds up, and answer "
            f"again. The question was: {spec.question(question)}\n\n{spec.closing()}")
