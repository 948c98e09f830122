"""Final-answer extractors for free-text replies, one per answer kind.

Every extractor first looks for the reply's last answer marker (`Answer:`, `answer is`,
`final answer`, markdown emphasis ignored) and reads what follows it. A marker followed by the
placeholder `X` is the prompt's own instruction echoed back (`end with a last line `Answer: X`,
where X is ...`) and is not an answer. When there is no marker, or nothing usable after it, the
reply's last `\boxed{...}` is read, and only then the whole reply. It returns None when it finds
no answer (the caller counts that as a parse failure).

- integer / number: the last number of the segment; `$`, thousands commas and a trailing
  period are ignored ("$1,250." is 1250); an integral value is returned as an int. A `*`
  counts as a space, not as nothing (`13*1` is two numbers, not 131), and without a marker the
  number of a numbered list item (`13. Cost of ...` at a line's start) is not an answer.
- yesno: after a marker, the first of yes / no / true / false; without one, the last
  standalone "yes" or "no" of the reply.
- choice: after a marker, an option letter standing alone ("C", "(C)", "C)", "C.", "option C")
  or else the text of one option (the longest that appears); without a marker, the last letter
  written as "(C)" / "option C" / "C)", else the option text that appears last.
- text: the segment after the marker (its first line), else the last non-empty line; a
  `\boxed{...}` in it is read as its content.

`confidence` reads a stated confidence (`Confidence: 0.8`, `confidence level: 85%`) the same
way: the last such line of the reply.
"""

from __future__ import annotations

import re
from typing import Any

from debatekit.answer_kinds import LETTERS
from debatekit.protocols.fields import as_probability

MARKER = re.compile(r"\banswer\s*(?:is\b|:|=)\s*:?(?!\s*X(?:`|,\s*where\b))", re.IGNORECASE)
BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
LIST_ITEM = re.compile(r"^[ \t]*\d+[.)][ \t]+(?=\D)", re.MULTILINE)
NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
YES_NO = re.compile(r"\b(yes|no|true|false)\b", re.IGNORECASE)
CONFIDENCE = re.compile(r"\bconfidence(?:\s+level)?\s*(?:is\b|:|=)\s*:?\s*(-?\d+(?:\.\d+)?\s*%?)", re.IGNORECASE)


def extract(kind: str, text: str, choices: list[str] | None = None) -> Any:
    """The final answer of `kind` in a free-text reply, or None if there is none."""
    clean = text.replace("*", " ").replace("\\(", " ").replace("\\)", " ")
    finder = {"integer": _number, "number": _number, "yesno": _yes_no, "text": _text,
              "choice": lambda segment, marked: _choice(segment, marked, choices or [])}[kind]
    boxed = BOXED.findall(clean)
    for segment in (_after_marker(clean), boxed[-1] if boxed else None):
        found = finder(segment, True) if segment is not None else None
        if found is not None:
            return found
    return finder(clean.replace("\\boxed", " "), False)


def confidence(text: str) -> float | None:
    """The confidence (0-1) a free-text reply states last, or None if it states none that can be read
    (a percent is read as one; see `fields.as_probability`)."""
    return _last_probability(CONFIDENCE, text)


def _last_probability(pattern: re.Pattern, text: str) -> float | None:
    found = pattern.findall(text.replace("*", ""))
    return as_probability(found[-1]) if found else None


def _after_marker(text: str) -> str | None:
    matches = list(MARKER.finditer(text))
    return text[matches[-1].end():] if matches else None


def _number(segment: str, marked: bool) -> int | float | None:
    plain = re.sub(r"(?<=\d),(?=\d{3}\b)", "", segment.replace("$", ""))
    if marked:
        plain = plain.strip().split("\n")[0]
    else:
        plain = LIST_ITEM.sub(" ", plain)
    numbers = NUMBER.findall(plain)
    if not numbers:
        return None
    value = float(numbers[-1])
    return int(value) if value.is_integer() else value


def _yes_no(segment: str, marked: bool) -> str | None:
    words = [w.lower() for w in YES_NO.findall(segment)]
    if not words:
        return None
    word = words[0] if marked else next((w for w in reversed(words) if w in ("yes", "no")), None)
    return {"true": "yes", "false": "no"}.get(word, word) if word else None


def _choice(segment: str, marked: bool, choices: list[str]) -> str | None:
    letters = LETTERS[: len(choices)]
    if not letters:
        return None
    if marked:
        head = segment.strip()
        letter = re.match(rf"(?:option\s+)?\(?([{letters}])\b(?![-'’])", head, re.IGNORECASE)
        if letter and (letter.group(1).isupper() or head[: 2].lower() in (f"{letter.group(1)})", f"({letter.group(1)}")):
            return letter.group(1).upper()
        return _option_text(head.split("\n")[0], choices, first=True)
    written = re.findall(rf"(?:\(([{letters}])\)|\boption\s+([{letters}])\b|(?:^|\s)([{letters}])\))", segment)
    if written:
        return next(g for g in written[-1] if g).upper()
    return _option_text(segment, choices, first=False)


def _option_text(segment: str, choices: list[str], first: bool) -> str | None:
    lowered = segment.lower()
    found = []
    for index, option in enumerate(choices):
        for match in re.finditer(rf"\b{re.escape(option.lower())}\b", lowered):
            found.append((match.start(), -len(option), index))
    if not found:
        return None
    pick = min(found, key=lambda f: (f[1], f[0])) if first else max(found, key=lambda f: (f[0], -f[1]))
    return LETTERS[pick[2]]


def _text(segment: str, marked: bool) -> str | None:
    segment = BOXED.sub(r"\1", segment)  # `Answer: \boxed{Paris}` answers Paris
    lines = [line.strip() for line in segment.strip().split("\n") if line.strip()]
    if not lines:
        return None
    return (lines[0] if marked else lines[-1]).strip(" .") or None


def labelled(text: str, label: str) -> str | None:
    """The value of the reply's last `Label: value` line, or None; case and markdown emphasis are
    ignored, and so are a few words before the label (`Supported side: negative`, `Final answer: B`).

    For the extra last lines a role gives besides its answer (`Preference: yes`, `Confidence: 0.8`).
    """
    pattern = re.compile(rf"^[^:\n]{{0,40}}?\b{re.escape(label)}\s*:[ \t]*(.*?)\s*$", re.IGNORECASE | re.MULTILINE)
    found = pattern.findall(text.replace("*", "").replace("`", ""))
    return found[-1].strip(" .") if found else None
PROBABILITY = re.compile(r"\b(?:probability|confidence)\s*(?:is\b|:|=)\s*:?\s*((?:\d+(?:\.\d+)?|\.\d+)\s*%?)",
                         re.IGNORECASE)


def probability(text: str) -> float | None:
    """The last `Probability: P` (or `Confidence: P`) of a free-text reply as a 0-1 number, or None
    (read as `confidence` reads its line: `fields.as_probability`)."""
    return _last_probability(PROBABILITY, text)
