"""Datasets and scripted roles shared by the judged_debate and consultancy tests."""

import json
import re

from debatekit.models.scripted import Fault

FACTS = ["The Nile is about 6650 km long.", "The Amazon carries more water than any other river."]


def yes_no_file(path, n=1):
    """n yes/no items whose evidence is FACTS; item k's truth alternates yes, no."""
    rows = [{"id": f"q{k}", "question": f"Is river claim {k} true?", "answer": "yes" if k % 2 == 0 else "no",
             "evidence": FACTS} for k in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def choice_file(path, n=1):
    """n multiple-choice items (five options, truth C) with FACTS as `context` passages."""
    rows = [{"id": f"m{k}", "question": f"Which river fits clue {k}?", "answer": "C",
             "choices": ["Rhine", "Danube", "Nile", "Volga", "Thames"],
             "context": [{"id": "P1", "text": FACTS[0]}, {"id": "P2", "text": FACTS[1]}]} for k in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def candidates(prompt):
    """The judge prompt's candidates {"A": text, "B": text}."""
    return dict(re.findall(r"^([AB]): (.+)$", prompt, re.MULTILINE))


def roles(seen, verdict=None, argument=None, question=None):
    """A scripted model: arguments quote FACTS[0] and an invented line (unique per agent and round);
    the judge picks by `verdict(req, candidates)` -> (letter, probability) or a reply string."""

    def fn(req):
        seen.append(req)
        if req.phase == "argue":
            if argument is not None:
                return argument(req)
            return (f"<thinking>plan of {req.agent} r{req.round}</thinking><argument>arg-{req.agent}-r{req.round} "
                    f"<quote>{FACTS[0].upper()}</quote> and <quote>the Nile is purple</quote></argument>")
        if req.phase == "question":
            if question is not None:
                return question(req)
            return f"<thinking>hmm</thinking><question>why-r{req.round}?</question>"
        picked = verdict(req, candidates(req.prompt)) if verdict else ("A", 0.8)
        if isinstance(picked, (str, Fault)):
            return picked
        letter, chance = picked
        return f"<thinking>weighing</thinking>\nAnswer: {letter}\nProbability: {chance}"

    return fn


def pick(text, chance=0.8):
    """A judge that picks the candidate reading `text`."""
    return lambda req, shown: (next(k for k, v in shown.items() if v == text), chance)
