"""What a reply says beside its answer: the confidence or probability it states, in a line of its
own or in words, and its `Label: value` lines."""

from __future__ import annotations

import re

from debatekit.protocols.shared.extract.markers import BOXED, model_text
from debatekit.protocols.shared.extract.numeric import NUMBER
from debatekit.protocols.shared.fields import as_probability

CONFIDENCE = re.compile(r"\bconfidence(?:\s+level)?\s*(?:is\b|:|=)\s*:?\s*(-?\d+(?:\.\d+)?\s*%?)", re.IGNORECASE)
# a confidence in the model's own words, from the same `\bconfidence` as CONFIDENCE: the number right after
# `confidence (level|score) of`, or after an `is`, `:` or `=` later in its sentence with no number between
_PROBABILITY = r"(\d+(?:\.\d+)?\s*%?)"
WORDED_CONFIDENCE = re.compile(r"\bconfidence(?:\s+(?:level|score))?\s+of\s+" + _PROBABILITY + "|"
                               r"\bconfidence\b[^\d.\n]{0,60}?(?:\bis\b|:|=)\s*:?\s*" + _PROBABILITY, re.IGNORECASE)
CONFIDENCE_TALK = re.compile(r"\bconfiden(?:ce|t|tly)\b", re.IGNORECASE)
ANSWER_LINE = re.compile(r"^\W*(?:final\s+)?answer\s*:", re.IGNORECASE)  # `Answer: X`, `**Final answer:** X`
PARAGRAPHS = re.compile(r"(\r?\n[ \t]*\r?\n)")
PERCENT = re.compile(r"(\d+(?:\.\d+)?)\s*%")


def confidence(text: str) -> float | None:
    """The confidence (0-1) a free-text reply states last, or None if it states none that can be read
    (a percent is read as one; see `fields.as_probability`). A `Confidence: C` line is read as
    `probability` reads its line; a confidence in words ("the confidence of our answer is 0.9") only
    when it is a 0-1 number or a percent, since such a sentence may name other numbers."""
    clean = _unwrapped(model_text(text)[0])
    stated = [(m.start(), as_probability(m.group(1))) for m in CONFIDENCE.finditer(clean)]
    worded = [(m.start(), as_probability(value)) for m in WORDED_CONFIDENCE.finditer(clean)
              for value in [m.group(1) or m.group(2)] if value.rstrip().endswith("%") or float(value) <= 1]
    found = dict(worded) | dict(stated)  # both match from the same word: at one mention, the line's reading
    return found[max(found)] if found else None


def stated_confidences(text: str) -> set[float]:
    """The numbers a reply's confidence talk (`beside_confidence` sets it aside) names that could be a
    confidence: those from 0 to 1, and percents as written (`85%`: 85)."""
    talk = _unwrapped("\n".join(talk for _, talk, _ in _split_talk(text)))
    return {float(n) for n in NUMBER.findall(talk) if 0 <= float(n) <= 1} | {float(n) for n in PERCENT.findall(talk)}


def beside_confidence(text: str) -> str:
    """`text` without what it says about its own confidence: each paragraph from its first mention of
    confidence (or of being confident) on, except the lines there that state the answer
    (`Answer: X`), each up to its own mention."""
    return "".join(head + "".join("\n" + line for line in answers) for head, _, answers in _split_talk(text))


def _unwrapped(text: str) -> str:
    """`text` with boxes, LaTeX math delimiters and emphasis taken off its numbers (`\\(\\boxed{0.9}\\)`: 0.9)."""
    return re.sub(r"\\[()\[\]]|\*", " ", BOXED.sub(r" \1 ", text))


def _split_talk(text: str) -> list[tuple[str, str, list[str]]]:
    """Each paragraph (blank-line separators included) as (its text up to its first mention of confidence,
    the rest but its answer lines, its answer lines each up to its own mention)."""
    pieces = []
    for part in PARAGRAPHS.split(text):
        mention = CONFIDENCE_TALK.search(part)
        if mention is None:
            pieces.append((part, "", []))
            continue
        lines = part[mention.start():].split("\n")
        talk = "\n".join(line for line in lines if not ANSWER_LINE.match(line))
        answers = [CONFIDENCE_TALK.split(line)[0] for line in lines if ANSWER_LINE.match(line)]
        pieces.append((part[:mention.start()], talk, answers))
    return pieces


def _last_probability(pattern: re.Pattern, text: str) -> float | None:
    found = pattern.findall(model_text(text)[0].replace("*", ""))
    return as_probability(found[-1]) if found else None


def labelled(text: str, label: str) -> str | None:
    """The value of the reply's last `Label: value` line, or None; case and markdown emphasis are
    ignored, and so are a few words before the label (`Supported side: negative`, `Final answer: B`).

    For the extra last lines a role gives besides its answer (`Preference: yes`, `Confidence: 0.8`).
    """
    pattern = re.compile(rf"^[^:\n]{{0,40}}?\b{re.escape(label)}\s*:[ \t]*(.*?)\s*$", re.IGNORECASE | re.MULTILINE)
    found = pattern.findall(model_text(text)[0].replace("*", "").replace("`", ""))
    return found[-1].strip(" .") if found else None
PROBABILITY = re.compile(r"\b(?:probability|confidence)\s*(?:is\b|:|=)\s*:?\s*((?:\d+(?:\.\d+)?|\.\d+)\s*%?)",
                         re.IGNORECASE)


def probability(text: str) -> float | None:
    """The last `Probability: P` (or `Confidence: P`) of a free-text reply as a 0-1 number, or None
    (read as `confidence` reads its line: `fields.as_probability`)."""
    return _last_probability(PROBABILITY, text)
