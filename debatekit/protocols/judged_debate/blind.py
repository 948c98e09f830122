"""The judge alone (Khan et al. 2024's blind judge, `core/config/experiment/judge/baselines/blind.yaml`).

The judge of `judged_debate` and `consultancy` with no debate and no evidence: it reads the
question and the same two candidates, at the same positions (drawn from the run seed), and picks
one with a probability, reading them in both orders as `core/judge.py` does for every judge. Run
it with the judge's model next to the judged protocols on the same items, and debatekit's paired
comparison says whether the debate helped the judge:

    debatekit run blind_judge judged_debate consultancy --dataset strategyqa --set judge_model=WEAK

Departures from the official code: the prompt in debatekit's own words; the probability asked
for in the reply (`Probability: P`) instead of read from token log-probabilities; one final
answer per item from the readings' mean probability (see `judged_debate`).
"""

from __future__ import annotations

from debatekit.engine import Outcome
from debatekit.protocols.judged_debate import prompts as P
from debatekit.protocols.judged_debate.items import CandidateKind, EvidenceItem, setup_for
from debatekit.protocols.judged_debate.judging import JudgedOutput, decide, judge, order_report, verdict_request
from debatekit.protocols.shared.answers import DEFAULT_FORMAT, AnswerFormat
from debatekit.registry import Role, Views, protocol


@protocol("blind_judge", paper="Khan et al. 2024 (baseline)", item=EvidenceItem, output=JudgedOutput,
          views=Views(run=order_report), role=Role(baseline="single", label="blind"))
def blind_judge(
    judge_model: str | None = None,
    both_orders: bool = True,
    judge_temperature: float = 0.0,
    answer: CandidateKind = "auto",
    answer_format: AnswerFormat = DEFAULT_FORMAT,
):
    """The judge of judged_debate alone: the two candidates, no debate, no evidence (baseline)."""

    async def run(item, debate):
        setup = setup_for(item, debate.seed, answer, "blind_judge")
        _, verdict = verdict_request(answer_format)

        def prompt(swapped: bool) -> str:
            a, b = setup.shown(swapped)
            return P.BLIND_JUDGE.format(question=item.question, a=a, b=b, verdict=verdict)

        judgements = await judge(debate, setup, prompt, model=judge_model, temperature=judge_temperature,
                                 answer_format=answer_format, both_orders=both_orders, protocol="blind_judge")
        final, output = decide(setup, judgements)
        debate.record_round(1, {"judge": final})
        debate.stop_reason = "max_rounds"
        return Outcome(final_answer=final, output=output)

    return run
