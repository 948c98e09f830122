"""Baselines run through the same engine: one agent, and self-consistency (k samples, majority)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from debatekit.datasets.voting import agreement_rate, majority
from debatekit.engine import Outcome, TieBreak, tie_seed
from debatekit.protocols.shared import samples as samples_of
from debatekit.protocols.shared.answers import DEFAULT_FORMAT, AnswerFormat, AnswerKind, first_messages, spec_for
from debatekit.protocols.shared.personas import describe
from debatekit.registry import Role, protocol


@protocol("single", paper="baseline", role=Role(baseline="single"))
def single(temperature: float = 0.7, answer: AnswerKind = "auto", answer_format: AnswerFormat = DEFAULT_FORMAT,
           persona: str | None = None):
    """One agent answers once; `persona` a catalogue name or a description (`protocols.shared.personas`)."""
    persona = describe(persona, "single") if persona is not None else None

    async def run(item, debate):
        spec = spec_for(item, answer, answer_format)
        turn = await debate.ask("agent1", first_messages(spec, item.question, persona), spec.output,
                                phase="answer", round=1, temperature=temperature)
        final = turn.parsed.answer if turn.ok else None
        debate.record_round(1, {"agent1": final})
        debate.stop_reason = "max_rounds"
        return Outcome(final_answer=final, output={"reasoning": turn.parsed.reasoning if turn.ok else None})

    return run


@protocol("self_consistency", paper="Wang et al. 2022", role=Role(baseline="equal_budget", label="SC"))
def self_consistency(samples: Annotated[int, Field(ge=1)] = 6, temperature: float = 0.7,
                     answer: AnswerKind = "auto", answer_format: AnswerFormat = DEFAULT_FORMAT,
                     tie_break: TieBreak = "first", reuse: str | None = None):
    """k independent samples of one agent, majority vote (Wang et al. 2022).

    A tie goes to the first sample's answer, or with `tie_break="random"` to one drawn with the run's
    seed and the item. With `reuse` (a society_of_mind run folder; in a study grid, the name of its
    debate point's protocol) the first samples are that debate's round-1 answers, checked to be draws
    of the same prompt at the same temperature (`shared.samples`), and only the rest are drawn here."""

    async def run(item, debate):
        spec = spec_for(item, answer, answer_format)
        messages, model = first_messages(spec, item.question), spec.output
        shared = samples_of.round_one(reuse, item, messages, temperature) if reuse else None
        answers = {f"sample{k + 1}": a for k, a in enumerate((shared.answers if shared else [])[:samples])}
        turns = await debate.gather(
            debate.ask(f"sample{k + 1}", messages, model, phase="answer", round=1,
                       temperature=temperature, sample=k) for k in range(len(answers), samples))
        answers |= {t.agent: t.parsed.answer if t.ok else None for t in turns}
        debate.record_round(1, answers)
        debate.stop_reason = "max_rounds"
        rate = agreement_rate(list(answers.values()))
        output = {"agreement": rate}
        if shared:  # what the shared draws cost lives in the debate run's events; the vote arm's accounts add it
            output["shared"] = {"from": shared.folder, "samples": min(len(shared.answers), samples),
                                "completion_tokens": shared.completion_tokens}
        return Outcome(final_answer=majority(answers.values(), tie_seed(tie_break, debate, item)), converged=rate == 1.0,
                       output=output)

    return run
