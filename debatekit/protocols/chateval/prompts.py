"""ChatEval's prompts, in debatekit's own words, keeping the structure of the official template:
the question, the panel's task, the discussion so far, the speaker's role, a call to speak
briefly, and (in the speaker's last turn only) the instruction for a final judgement."""

from __future__ import annotations

from typing import NamedTuple

from debatekit.protocols.shared.answers import AnswerSpec

SUMMARIZER = "summarizer"
"""The summarizer's agent name (simultaneous_summarizer); no referee may take it."""

ROLES = {
    "general_public": (
        "You speak for the general public: a thoughtful reader without special training who wants to get "
        "this right. Rely on common sense and on your own thinking, and be ready to be the first to commit "
        "to the answer you find best."),
    "critic": (
        "You are the critic. Probe the other referees' arguments for gaps so that every judgement on the "
        "panel is well founded, and when two options look equally good, put forward the case for the other one."),
    "fact_checker": (
        "You are the fact checker. Hold every argument to what the question actually says and to "
        "well-established facts, and help the panel settle on the answer those support."),
    "psychologist": (
        "You are a psychologist. You think about how people behave and what they usually mean by what they "
        "say, and you use that to help the panel find the right answer."),
    "scientist": (
        "You are a scientist. You reason systematically, check each step the way you would check an "
        "experiment, and help the panel find the right answer."),
}
"""Default referees, name -> role description; modelled on the paper's General Public, Critic,
News Author (here a fact checker: consistency with the source becomes consistency with the
question), Psychologist and Scientist, rewritten for answering a question."""


class Said(NamedTuple):
    """One message of the discussion: a referee's turn, or the summarizer's summary."""

    round: int
    speaker: str
    text: str


def history(said: list[Said]) -> str:
    """The discussion as `[speaker]: text` lines."""
    return "\n\n".join(f"[{s.speaker}]: {s.text.strip()}" for s in said)


def turn(spec: AnswerSpec, question: str, seen: list[Said], name: str, role: str, panel: int, final: bool) -> str:
    """What a referee is shown when it speaks: the official template's parts, in order."""
    discussion = history(seen) or "(Nobody has spoken yet.)"
    ending = FINAL if final else INTERIM
    return (f"[Question]\n{spec.question(question)}\n\n"
            f"[Your task]\n{TASK.format(others=_others(panel - 1))}\n\n"
            f"[Discussion so far]\n{discussion}\n\n"
            f"[Your role]\n{role}\n\n"
            f"It is your turn to speak, {name}. Keep it short and clear.\n{ending} {spec.closing()}")


def _others(n: int) -> str:
    return "1 other referee has" if n == 1 else f"{n} other referees have"


def summary(current: str, new: list[Said]) -> str:
    """The summarizer's prompt: the running summary and the new messages to fold into it."""
    return (f"{SUMMARY}\n\n[Current summary]\n{current or '(empty: nothing has been summarized yet)'}\n\n"
            f"[New messages]\n{history(new) or '(none)'}\n\n[Updated summary]")


TASK = ("You are one of a panel of referees answering this question; {others} the same question. Discuss it "
        "with them: weigh what they say critically, and think it through yourself before you settle on a final "
        "answer.")
INTERIM = "Say where you stand for now and why."
FINAL = ("This is your last turn: give your final judgement. Explain it fully first, and do not let the order in "
         "which the options or the other referees' views were presented sway you. You need not agree with the "
         "other referees.")
SUMMARY = ("You keep the running summary of a panel discussion. Fold the new messages below into the current "
           "summary and reply with the updated summary only: which answer each speaker holds, their main "
           "reasons, and where they disagree.")
