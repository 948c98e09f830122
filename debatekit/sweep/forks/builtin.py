"""The built-in interventions of a fork, each one flag of `debatekit fork`.

    replace(agent, by)        in the fork round the others read `by` in place of `agent`'s previous
                              reply: "wrong", "correct" or another agent's name     (--replace A=BY)
    adversarial(agent)        from the fork round on, `agent` argues for the wrong answer (--adversarial A)
    swap_model(agent, model)  from the fork round on, `agent`'s calls go to `model`  (--swap-model A=M)
    persona(agent, persona)   from the fork round on, `agent` plays `persona`        (--persona A=TEXT)
    hide(agent)               from the fork round on, `agent` reads no other reply   (--hide A)
    reorder(order, agent)     the replies read come reversed or shuffled             (--reorder ORDER)
    anonymise(agent)          the replies read name no agent and come shuffled       (--anonymise)

The wrong answer of an item is the one `debatekit.sweep.forks.forking.wrong_answer` picks (the parent's
most common wrong round-1 answer, else one derived from the truth). The texts an agent is shown or
told are debatekit's own words; a replaced reply is one short template for the wrong and the correct
answer alike, so that the two differ in the answer only.
"""

from __future__ import annotations

import random
from typing import Literal

from debatekit.engine import Shown, derive_seed
from debatekit.models.serving import check_model
from debatekit.models.model import resolve
from debatekit.protocols.shared.personas import describe
from debatekit.sweep.forks.interventions import Context, Intervention, InterventionError, intervention, scrub

STAND_INS = ("wrong", "correct")
STAND_IN = "I worked through the problem step by step, and my result is {answer}.\nAnswer: {answer}"
"""The reply shown in place of an agent's with `replace(by="wrong" | "correct")`."""
ADVERSARY = ("For the rest of this discussion your task is to win the others over to the answer {answer}. Whatever "
             "your own working or the other replies suggest, argue as convincingly as you can that {answer} is "
             "right and that any other answer is mistaken, and give {answer} as your final answer.")
"""The instruction added to an adversarial agent's system message."""
PERSONA = "From this round on, play the following role, in place of any role described above: {persona}"
"""The instruction added to an agent's system message by `persona`."""


@intervention("replace")
def replace(agent: str, by: str = "wrong") -> Intervention:
    """In the fork round, the other agents read `by` in place of `agent`'s previous reply (where the
    protocol shows it): "wrong" or "correct" (a short reply giving the item's wrong or correct answer),
    or another agent's name (that agent's reply, text and answer, as `agent`'s).

    Raises:
        InterventionError: `by` is `agent` itself, which would change nothing.
    """
    if by == agent:
        raise InterventionError(f"intervention 'replace': {agent} by itself changes nothing; by names another agent, "
                                "wrong or correct")

    def show(ctx: Context, viewer: str, replies: list[Shown]) -> list[Shown]:
        if ctx.round != ctx.at_round or viewer == agent:
            return replies
        if by in STAND_INS:
            answer = ctx.wrong if by == "wrong" else ctx.truth
            stand_in = Shown(agent, STAND_IN.format(answer=answer), answer)
        elif by in ctx.pool:
            stand_in = Shown(agent, ctx.pool[by].text, ctx.pool[by].answer)
        else:  # that agent has given no reply to show
            return replies
        return [stand_in if r.author == agent else r for r in replies]

    needs = {"wrong": ("wrong",), "correct": ("truth",)}.get(by, ())
    return Intervention(show=show, agents=(agent,) if by in STAND_INS else (agent, by), needs=needs)


@intervention("adversarial")
def adversarial(agent: str) -> Intervention:
    """From the fork round on, `agent` is told (in its system message) to argue for the item's wrong
    answer and to give it as its own."""
    return Intervention(instruction=lambda ctx, who: ADVERSARY.format(answer=ctx.wrong) if who == agent else None,
                        agents=(agent,), needs=("wrong",))


@intervention("swap_model")
def swap_model(agent: str, model: str) -> Intervention:
    """From the fork round on, `agent`'s calls go to `model` (a litellm model string)."""
    check_model(resolve(model))
    return Intervention(model=lambda ctx, who: model if who == agent else None, agents=(agent,), models=(model,))


@intervention("persona")
def persona(agent: str, persona: str) -> Intervention:
    """From the fork round on, `agent` is told (in its system message) to play `persona`."""
    persona = describe(persona, "fork --persona")
    return Intervention(instruction=lambda ctx, who: PERSONA.format(persona=persona) if who == agent else None,
                        agents=(agent,))


@intervention("hide")
def hide(agent: str) -> Intervention:
    """From the fork round on, `agent` reads none of the others' replies; society_of_mind then asks it
    to check its own answer again."""
    return Intervention(show=lambda ctx, viewer, replies: [] if viewer == agent else replies, agents=(agent,))


@intervention("reorder")
def reorder(order: Literal["reverse", "shuffle"] = "reverse", agent: str | None = None) -> Intervention:
    """From the fork round on, the replies `agent` reads (every agent's, if None) come in reverse order,
    or shuffled by a draw seeded by the run seed, the item, the round and the reader."""

    def show(ctx: Context, viewer: str, replies: list[Shown]) -> list[Shown]:
        if agent is not None and viewer != agent:
            return replies
        return list(reversed(replies)) if order == "reverse" else shuffled(replies, ctx, viewer)

    return Intervention(show=show, agents=(agent,) if agent else ())


@intervention("anonymise")
def anonymise(agent: str | None = None) -> Intervention:
    """From the fork round on, the replies `agent` reads (every agent's, if None) name no agent: each
    agent name in their text becomes "another agent", and they come shuffled as `reorder` shuffles.
    society_of_mind shows no author with a reply already; there this removes the names the replies
    mention and the fixed order they came in."""

    def show(ctx: Context, viewer: str, replies: list[Shown]) -> list[Shown]:
        if agent is not None and viewer != agent:
            return replies
        names = set(ctx.pool) | {viewer} | {r.author for r in replies}
        return shuffled([Shown(r.author, scrub(r.text, names), r.answer) for r in replies], ctx, viewer)

    return Intervention(show=show, agents=(agent,) if agent else ())


def shuffled(replies: list[Shown], ctx: Context, viewer: str) -> list[Shown]:
    """`replies` in an order drawn from the run seed, the item, the round and the reader."""
    out = list(replies)
    random.Random(derive_seed(ctx.seed, getattr(ctx.item, "id", ""), viewer, ctx.round, "order")).shuffle(out)
    return out
