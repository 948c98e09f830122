"""Personas: a one-word name from a shared catalogue, or a description in the user's own words.

`--set personas='[skeptic, optimist]'` gives each agent the catalogue's description of that role,
added to its system prompt; a persona with a space in it (`"You are a careful accountant."`) is a
description and is used as written. Any other single word is refused with the names the catalogue
knows, as is a list of more personas than there are agents. Fewer personas than agents are dealt
out in turn (agent 4 of 3 personas gets the first again).
"""

from __future__ import annotations

import difflib

from debatekit.registry import ProtocolError

CATALOGUE = {
    "skeptic": "You are a skeptic. Doubt every step until you have checked it yourself, and say where an "
               "argument, yours or another's, does not hold.",
    "optimist": "You are an optimist. Look for the reading of the question under which an answer works, and "
                "build on what the other answers get right.",
    "contrarian": "You are a contrarian. Before you agree with an answer, argue for the strongest alternative "
                  "and keep it only if the alternative fails.",
    "mathematician": "You are a mathematician. Write every quantity down, compute step by step, and check the "
                     "result by a second route when you can.",
    "teacher": "You are a teacher. Explain your reasoning plainly, as to a student, so that each step can be "
               "checked.",
    "scientist": "You are a scientist. Treat each claim as a hypothesis, name the evidence for it, and prefer "
                 "the answer the evidence supports best.",
    "lawyer": "You are a lawyer. Read the question's exact wording, note what it does and does not say, and "
              "argue from that wording.",
    "pragmatist": "You are a pragmatist. Prefer the plain, common-sense reading of the question and the answer "
                  "most people would judge right.",
    "critic": "You are a critic. Look for the weakest step in each answer, your own included, and fix it "
              "before you answer.",
    "novice": "You are a newcomer to the subject. Reason from first principles and say which steps you are "
              "unsure of.",
}
"""One-word persona names and the description each stands for."""


def describe(persona: str, where: str) -> str:
    """The description a persona stands for: a catalogue name's entry, or text with a space as written.

    Raises:
        ProtocolError: a single word the catalogue does not know, or a blank persona, naming `where`
            (the protocol) and the known names.
    """
    text = persona.strip() if isinstance(persona, str) else ""
    if " " in text:
        return text
    if text.lower() in CATALOGUE:
        return CATALOGUE[text.lower()]
    close = difflib.get_close_matches(text.lower(), CATALOGUE, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise ProtocolError(f"{where}: unknown persona {persona!r}: a one-word persona is one of "
                        f"{', '.join(CATALOGUE)}, and a description in your own words has spaces{hint}")


def personas_of(names: list[str], personas: list[str], where: str) -> dict[str, str | None]:
    """Each agent's persona description (None: no persona), the list dealt out over `names` in turn.

    Raises:
        ProtocolError: more personas than agents, or a persona `describe` refuses.
    """
    if len(personas) > len(names):
        raise ProtocolError(f"{where}: {len(personas)} personas for {len(names)} agents: give at most one "
                            f"persona per agent")
    described = [describe(p, where) for p in personas]
    return {name: described[i % len(described)] if described else None for i, name in enumerate(names)}
