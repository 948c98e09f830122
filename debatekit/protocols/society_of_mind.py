"""Society of mind (Du et al. 2023, "Improving Factuality and Reasoning through Multiagent Debate").

N agents answer independently; in each next round every agent sees the other agents'
previous answers and revises its own, keeping its own conversation. The final answer is the
majority vote of the last round. The debate stops early when all agents agree (configurable).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from debatekit.engine import Outcome, agreement
from debatekit.metrics import agreement_rate, majority
from debatekit.protocols.answers import AnswerKind, answer_model, persona_system, question_prompt
from debatekit.registry import protocol


@protocol("society_of_mind")
def society_of_mind(
    agents: Annotated[int, Field(ge=1, le=16)] = 3,
    rounds: Annotated[int, Field(ge=1, le=10)] = 2,
    stop_on_agreement: bool = True,
    temperature: float = 0.7,
    answer: AnswerKind = "auto",
    personas: list[str] = [],
    models: list[str] = [],
):
    """N agents answer, then revise after reading each other's answers; majority vote."""
    names = [f"agent{i + 1}" for i in range(agents)]
    persona = {name: personas[i % len(personas)] if personas else None for i, name in enumerate(names)}
    model_of = {name: models[i % len(models)] if models else None for i, name in enumerate(names)}

    async def run(item, debate):
        output = answer_model(answer, item.answer)
        talk = {n: [{"role": "system", "content": persona_system(persona[n])},
                    {"role": "user", "content": question_prompt(item.question)}] for n in names}
        last: dict[str, object] = {}  # each agent's latest parsed answer

        async def step(round_no: int) -> None:
            if round_no > 1:
                for n in names:
                    others = [last[o] for o in names if o != n and o in last]
                    talk[n].append({"role": "user", "content": debate_prompt(others, item.question)})
            turns = await debate.gather(
                debate.ask(n, talk[n], output, phase="answer" if round_no == 1 else "revise",
                           round=round_no, temperature=temperature, model=model_of[n]) for n in names)
            for turn in turns:
                if turn.ok:
                    talk[turn.agent].append({"role": "assistant", "content": turn.text})
                    last[turn.agent] = turn.parsed
                elif round_no > 1:
                    talk[turn.agent].pop()  # keep the conversation well formed for the next round
            debate.record_round(round_no, {t.agent: t.parsed.answer if t.ok else None for t in turns})

        await debate.rounds(step, rounds, stop=[agreement] if stop_on_agreement else [])
        final_round = next((r for r in reversed(debate.history) if any(
            a is not None for a in r.answers.values())), None)
        answers = list(final_round.answers.values()) if final_round else []
        return Outcome(final_answer=majority(answers), converged=agreement_rate(answers) == 1.0,
                       output={"answers": final_round.answers if final_round else {}})

    return run


def debate_prompt(others: list, question: str) -> str:
    """The revision prompt of Du et al., with the other agents' latest answers."""
    shown = "\n\n".join(f"One agent solution: ```{o.reasoning} Answer: {o.answer}```" for o in others)
    return (f"These are the solutions to the problem from other agents:\n\n{shown}\n\n"
            f"Using the solutions from other agents as additional information, can you provide your "
            f"answer to the problem? The original problem is: {question} Examine your solution and "
            f"those of the other agents step by step, and state your final answer in the `answer` field.")
