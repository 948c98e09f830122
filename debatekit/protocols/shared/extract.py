"""Final-answer extractors for free-text replies, one per answer kind.

Every extractor first looks for the reply's last answer marker (`Answer:`, `answer is`,
`final answer`, markdown emphasis ignored) and reads what follows it. A marker followed by the
placeholder `X` is the prompt's own instruction echoed back (`end with a last line `Answer: X`,
where X is ...`) and is not an answer. When there is no marker, or nothing usable after it, the
reply's last `\\boxed{...}` is read, then what follows each earlier marker, the latest first, up to
the next marker (`Answer: B` then a closing "so the answer is correct": B), and only then the whole
reply. It returns None when it finds no answer (the caller counts that as a parse failure).

A marker or box inside a quoted sentence (in double quotes, 40 characters or more, on one line) is
another agent's, not the reply's, and is not read. A marker's line that opens by declining ("None",
"none of them", "cannot be determined", "not enough information", `not red`) is no answer, and no
earlier marker is read; so is a reply read whole whose last three lines decline. The prompt's
placeholder alone (`Answer: X`) names nothing, so an earlier marker is read.

- integer / number: the first sentence of a marker's line (after a list bullet), or a box, is read as
  the arithmetic it writes (`debatekit.protocols.shared.expression`, exact): a box in it first, then
  the last side of an equation (`9 eggs x $2 = $18`: 18), what follows words that conclude (`2
  each, so 8`: 8), the expression it opens with (`42 (computed in 3 steps)`: 42; `25, which is 5
  squared`: 25; `\\frac{122}{15}`: "122/15"; `−5`: -5), else, after words, its last (`Janet makes
  $18 every day`: 18); an expression in an unknown (`2W - 15`, in a box any word joined by an
  operator) is no answer, a unit is none (`60km/h`). A `*` between numbers is a multiplication. A
  whole number is returned as an int, a decimal as a float, another fraction as its text
  ("122/15", `as_answer`).
  A reply read whole: the last number; `$`, thousands commas and a trailing
  period are ignored ("$1,250." is 1250); an integral value is returned as an int. A `*`
  counts as a space, not as nothing (`13*1` is two numbers, not 131), and without a marker the
  number of a numbered list item (`13. Cost of ...` at a line's start) is not an answer. A
  number set against the one before it in its clause ("35 hours, not 45 hours") is none either,
  and a marker that judges an answer ("the general public's answer is correct.") states none.
- yesno: after a marker, the first of yes / no / true / false; without one, the last
  standalone "yes" or "no" of the reply.
- choice: options that read the same (NFKC, case-folded, spaces collapsed) are one answer, the
  first of them (`answer_kinds.first_of_same`). After a marker (its first line) or in a box, an
  option letter standing alone ("C",
  "(C)", "C)", "C.", "option C"), else the option named there, the longest mention first, then
  the earliest. Without either: the last letter written as "(C)" / "option C" / "C)", else the
  last option named on the reply's last line, else the last option text anywhere in the reply.
  * By text: case, LaTeX (`\\sqrt{3}` is `√3`, `\\frac{1}{2}` is `1/2`), spaces around symbols
    (`5(√3+1)` is `5(√3 + 1)`) and an option's final period are ignored. A letter edge needs a
    non-word neighbour; a digit or symbol edge must not run on into a number or an expression
    (`$78.20` is not in `$78.205`, `3` not in `-3`, `3.5`, `1/3` or `1,300`, `√2` not in `2√2`).
    A match inside a longer option's match (`bottle` in `this bottle will not fit`) is that one.
  * By value, only after a marker, in a box or on the last line (reasoning is full of numbers
    that are no answer): an option that is a number once `$ € £`, thousands commas and a
    trailing `%` or unit word are set aside (`$78.20`, `12 cm`, `25%`, `1/2`, `-3`) is named by
    a decimal, integer or fraction of equal value (`78.2` names `$78.20`, `1/2` names `0.5`),
    within `REL_TOL` (relative, 1e-6) or `ABS_TOL` (absolute, 1e-9, near zero). A percent is
    the number before its sign, never converted: `25%` and `25` name `25%`, `0.25` does not.
  * Never guessed (None): a mention that is two options (`0.5` with options `0.5` and `1/2`;
    `$67.40` with `$67.4`, same value and unit; `12` with `12 cm` and `12 m`) or that is joined
    to another option's by `or`, `and`, `/`, `&` or a comma (`Answer: $61 or $65`, `A or B`),
    and a marked line naming two options, one in digits (`Answer: 78.2, up from $61`). Word
    options keep the longest mention (`Answer: the town for disco is Rio de Janeiro`: Rio).
- text: the segment after the marker (its first line), else the last non-empty line; a
  `\\boxed{...}` in it is read as its content.

`echoed` tells whether an answer was copied from the prompt (the call event's `echo`).

debatekit's own marker at the end of a reply too long to keep (`reading.TRUNCATED`, which names the
character limit) is never read: it is taken out, and the reply, whose end is lost, is read as one
cut off at the token limit (only where it states its answer, `marked_only`).

`confidence` reads a stated confidence (`Confidence: 0.8`, `confidence level: 85%`) the same way:
the last such line of the reply; in words of the model's own, a confidence later in the sentence of
its mention ("the confidence of our answer is \\(1.0\\)", "a confidence score of 0.9",
`WORDED_CONFIDENCE`) is read too when it is a 0-1 number or a percent.

A reply asked for an answer and a confidence (`confident`) whose answer, as read above, is a number
it also states as its confidence (`stated_confidences`) is read again beside its confidence: in the
reply without what it says about its confidence (`beside_confidence`), and if nothing is found
there it has no answer to read. The embedded model often states its confidence in words of its own
after its answer ("Hence, the confidence of our answer is \\(1.0\\)", a `\\boxed{1.0}` under "how
confident"), which the extractors read as the answer: 14 of reconcile's first 38 GSM8K answers were
0, 1 or a fraction so read.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from functools import lru_cache
from typing import Any

from debatekit._base.answer_kinds import LETTERS, first_of_same
from debatekit.models.reading import TRUNCATED
from debatekit.protocols.shared import expression
from debatekit.protocols.shared.fields import as_probability

MARKER = re.compile(r"\banswer\s*(?:is\b|:|=)\s*:?(?!\s*X(?:`|,\s*where\b))", re.IGNORECASE)
JUDGED = re.compile(r"\s*(?:not\s+|also\s+)?(?:in)?(?:correct|right|wrong|valid|accurate|flawed)\b(?!\s*[:=])"
                    r"(?![^\n.;]*\d)", re.IGNORECASE)
"""What follows a marker that judges an answer instead of stating one: `answer is correct.`, with no
number in the rest of its clause (`Your answer is correct, 18.` and `The answer is right: 42` state one)."""
BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
BOX = re.compile(r"\\boxed\s*\{")
QUOTED = re.compile(r'"[^"\n]{40,}"|“[^”\n]{40,}”')
"""Words a reply quotes (another agent's sentence, the prompt's), in double quotes on one line: a marker or box
there is not the reply's own. A short quote (`my final line is "Answer: B"`) is the reply's own answer."""
ASIDE = re.compile(r"\([^()]*[^\W\d_]{2}[^()]*\)")
"""A parenthetical remark in words after an answer (`42 (computed in 3 steps)`): no part of it."""
DECLINE = re.compile(
    r"\b(?:none\s+of\s+(?:them|these|those|the\s+(?:above|options?|choices?|answers?|given))\b"
    r"|neither\s+(?:of\s+(?:them|these|those|the)|option|answer|choice)\b"
    r"|not\s+(?:listed|given|provided|included|present)\s+(?:as|among|in)\b"
    r"|not\s+(?:any|one)\s+of\s+the\s+(?:\w+\s+)?(?:options|choices|answers)\b|not\s+(?:in|among)\s+the\s+(?:\w+\s+)?(?:options|choices)\b"
    r"|no\s+(?:(?:correct|valid|right|single|definitive|clear|possible|numerical|numeric|such)\s+)?(?:answer|option|choice|solution)s?\b"
    r"|(?:can\s*not|can't|cannot|unable\s+to|impossible\s+to|not\s+possible\s+to)\s+(?:be\s+)?(?:determined?|answer(?:ed)?|tell|know|decided?|say)\b"
    r"|no\s+way\s+to\s+(?:determine|know|tell|answer|say|find)\b|(?:not\s+enough|insufficient)\s+(?:information|info|data)\b"
    r"|indeterminate\b|undetermined\b|undefined\b|unknown\b|not\s+(?:applicable|determinable)\b|n/a\b)", re.IGNORECASE)
"""Words that decline to answer ("none of them", "no way to determine", "cannot be determined")."""
NEGATED_MENTION = re.compile(r"\b(?:not|neither|nor)\s+(?:the\s+|an?\s+)?(?:option\s+)?\(?\Z", re.IGNORECASE)
"""What comes right before an option the reply rules out (`not green`, `not the option (C)`, `neither a bank`)."""
NEGATION = re.compile(r"[\W_]*(?:not|neither|nor)\s+(?:the\s+)?(?:option\s+)?(?:\(?(?-i:[A-J])\)?)?[\W_]*", re.IGNORECASE)
"""A marker's line that is only a negation before its option (`not red`, `not B`): the reply rules it out."""
OPENS_DECLINING = re.compile(r"[\W_]*(?:none(?!\s+other\s+than)|nothing|n/?a|no\s+answer)\b", re.IGNORECASE)
"""A marker's line that opens with a word of no answer (`Answer: None`); in a reply's last lines, such a word
alone declines nothing ("none of the other agents is right")."""
DECLINES_BY = 12
"""A decline opens a marker's line when it starts within this many characters, before any number or option."""
BULLET = re.compile(r"[ \t]*(?:[-–•][ \t]+|\d{1,2}[.)][ \t]+(?=[$€£(−-]*\d))")
"""A list bullet or item number opening a marker's line (`- 18`, `1. 18`): no part of the answer."""
CONCLUDES = re.compile(r"[,;]?\s+(?:so|thus|therefore|hence|which\s+(?:gives|makes)|for\s+a\s+total\s+of|"
                       r"giving|making|totall?ing)\b[:\s]*", re.IGNORECASE)
"""Words that lead from working to its result in one line (`2 each, so 8`): the result is read."""
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
"""Where a sentence ends and the next begins: a marker's answer is in its first."""
MULTIPLIED = re.compile(r"(?<=[\d)])\s*\*\s*(?=[\d(])")
"""A `*` between two numbers: a multiplication, not markdown emphasis."""
LIST_ITEM = re.compile(r"^[ \t]*\d+[.)][ \t]+(?=\D)", re.MULTILINE)
NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_NOT = r"(?:,?\s+|\s*\()(?:and\s+)?not\s+(?:the\s+)?"
_NUM = r"-?\d+(?:\.\d+)?"
NEGATED = re.compile(r"(?<=\d)([^\d\n.;]{0,40}?)" + _NOT + _NUM + r"(?:\s*(?:,|or|nor|and)\s*" + _NUM + r")*\)?")
"""Numbers set against the one before them in its clause ("35 hours, not 45 hours", "18 (not 12)",
"3, not 4 or 5"): none is an answer."""
SET_AGAINST = re.compile(r"\s*(" + _NUM + r")[^\d\n.;]{0,40}?" + _NOT + r"\d")
"""A marker's answer set against another number right away ("the answer is $37.50, not $20")."""
YES_NO = re.compile(r"\b(yes|no|true|false)\b", re.IGNORECASE)
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
REL_TOL, ABS_TOL = 1e-6, 1e-9  # a stated number names an option of this value (relative, or absolute near 0)
_AMOUNT = r"(-?)[$€£]?(\d+(?:,\d{3})*(?:\.\d+)?|\.\d+)(?:\s*/\s*(\d+(?:\.\d+)?))?"
AMOUNT = re.compile(r"(?<![\w.,/√^-])" + _AMOUNT + r"(?!\s*[√(^]|e[-+]?\d)")  # stated: `-$1,250.5`, `3/4`
OPTION_VALUE = re.compile(r"[$€£]?\s*" + _AMOUNT + r"\s*(%|[^\W\d_]+)?")  # an option that is a number
JOINED = re.compile(r"[\s$]*(?:,|/|&|or|and)[\s$]*")  # between two options named as alternatives
_CUT = re.escape(TRUNCATED).replace(re.escape("{more}"), r"\d+").replace(re.escape("{limit}"), r"\d+")
TRUNCATION, TRUNCATED_END = re.compile(_CUT), re.compile(_CUT + r"\s*\Z")  # debatekit's words, not the model's


class _Unread(Exception):
    """The reply names two options where it should name one: it has no answer to read."""


def extract(kind: str, text: str, choices: list[str] | None = None, marked_only: bool = False,
            confident: bool = False) -> Any:
    """The final answer of `kind` in a free-text reply, or None if there is none; with `marked_only`
    (a reply cut off before its end) only a marker's segment or a box is read, never the whole reply;
    with `confident` (the reply was asked for a confidence too), a number it would read that the
    reply states as its confidence is looked for again beside the confidence (`beside_confidence`)."""
    text, cut = model_text(text)
    marked_only = marked_only or cut
    if confident:
        found = extract(kind, text, choices, marked_only)
        if isinstance(found, (int, float)) and found in stated_confidences(text):
            return extract(kind, beside_confidence(text), choices, marked_only)
        return found
    numbers = kind in ("integer", "number")
    clean = MULTIPLIED.sub(" × ", text) if numbers else text  # `9 * 2 = 18` is arithmetic, `**18**` emphasis
    clean = clean.replace("*", " ").replace("\\(", " ").replace("\\)", " ")
    if kind == "choice":
        clean = _plain_math(clean)
    finder = {"integer": _number, "number": _number, "yesno": _yes_no, "text": _text,
              "choice": lambda segment, marked: _choice(segment, marked, choices or [])}[kind]
    quoted = _quoted(clean)
    boxed = boxes(clean, quoted)
    if numbers:  # a box is read as the formula it is: its words are unknowns
        boxed = [f"\\boxed{{{content}}}" for content in boxed]
    last, *earlier = _after_markers(clean, judged=numbers, quoted=quoted) or [None]
    try:
        for k, segment in enumerate((last, boxed[-1] if boxed else None, *earlier)):
            if segment is None:
                continue
            if kind in ("integer", "number", "choice") and _declines(_first_line(segment), choices or [], numbers):
                return None  # the reply's latest statement of its answer declines: it has none
            found = finder(segment, True)
            if found is not None:
                return first_of_same(found, choices) if kind == "choice" else found
        if marked_only or kind in ("integer", "number", "choice") and _declines_at_end(clean):
            return None
        found = finder(clean.replace("\\boxed", " "), False)
        return first_of_same(found, choices) if kind == "choice" else found
    except _Unread:
        return None


def boxes(text: str, quoted: list[tuple[int, int]] | None = None) -> list[str]:
    """The content of each `\\boxed{...}` of `text` outside its quoted spans, nested braces included
    (`\\boxed{\\frac{122}{15}}`: `\\frac{122}{15}`)."""
    quoted = _quoted(text) if quoted is None else quoted
    closes = expression.closing_braces(text) if "\\boxed" in text else {}
    found = []
    for match in BOX.finditer(text):
        content, _ = expression.braced(text, match.end() - 1, closes)
        if content is not None and not _inside(match.start(), quoted):
            found.append(content)
    return found


def _first_line(segment: str) -> str:
    return segment.strip().split("\n")[0]


def _quoted(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in QUOTED.finditer(text)]


def _inside(at: int, spans: list[tuple[int, int]]) -> bool:
    return any(start < at < end for start, end in spans)


def _declines_at_end(text: str) -> bool:
    """Whether the reply's last three lines decline to answer ("there is no way to determine ...",
    "none of them fit. Therefore, the correct answer is: / Answer: X")."""
    lines = [line for line in text.strip().split("\n") if line.strip()]
    return DECLINE.search("\n".join(lines[-3:])) is not None


ECHO_MIN_CHARS = 20
"""Lines shorter than this (`Answer: E`, `A) prepare`) are too common to tell a copy from the agent's own words."""


def echoed(kind: str, text: str, shown: list[dict], choices: list[str] | None = None) -> bool:
    """Whether a reply's answer is an echo: the line it is read from (the last marker's, else the last
    box's) sits in a block of lines copied verbatim from the messages the agent was `shown` (at least
    one of them `ECHO_MIN_CHARS` long), and the reply without that block gives no answer, read as any
    reply is: the agent took its answer from what it was shown and said nothing of its own to back it."""
    text = model_text(text)[0]
    prompt = {line.strip() for m in shown if m.get("role") != "assistant" and isinstance(m.get("content"), str)
              for line in m["content"].split("\n")}  # its own earlier reply is its own
    lines = text.split("\n")
    at = _answer_line(text)
    if at is None or lines[at].strip() not in prompt:
        return False
    block = {at}
    for step in (-1, 1):  # the copied lines around the answer line, blank lines included
        k = at + step
        while 0 <= k < len(lines) and (not lines[k].strip() or lines[k].strip() in prompt):
            block.add(k)
            k += step
    if max(len(lines[k].strip()) for k in block) < ECHO_MIN_CHARS:
        return False
    own = "\n".join(line for k, line in enumerate(lines) if k not in block)
    return extract(kind, own, choices) is None


def _answer_line(text: str) -> int | None:
    """The index of the line an answer is read from first: the last marker's outside quotes, else the last box's."""
    clean = text.replace("*", " ")
    quoted = _quoted(clean)
    marks = [m.start() for m in MARKER.finditer(clean) if not _inside(m.start(), quoted)]
    marks = marks or [m.start() for m in BOX.finditer(clean) if not _inside(m.start(), quoted)]
    return clean.count("\n", 0, marks[-1]) if marks else None


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


def model_text(text: str) -> tuple[str, bool]:
    """`text` without debatekit's truncation markers, and whether it ends with one (its end was cut)."""
    return TRUNCATION.sub("", text), TRUNCATED_END.search(text) is not None


def _last_probability(pattern: re.Pattern, text: str) -> float | None:
    found = pattern.findall(model_text(text)[0].replace("*", ""))
    return as_probability(found[-1]) if found else None


def _after_markers(text: str, judged: bool = False, quoted: list[tuple[int, int]] = ()) -> list[str | None]:
    """What follows each answer marker, the last first: the last one's to the end of the text, an
    earlier one's up to the next marker. A marker inside a `quoted` span (another agent's words the
    reply repeats in quotes) is not the reply's. With `judged` (a number is asked for), None for a
    marker that judges an answer ("the general public's answer is correct. ... Seattle has 20 sheep"):
    it states none (an option may be called "right", so a choice keeps it)."""
    matches = [m for m in MARKER.finditer(text) if not _inside(m.start(), quoted)]
    ends = [m.start() for m in matches[1:]] + [len(text)]
    return [None if judged and JUDGED.match(text, m.end()) else text[m.end():end]
            for m, end in zip(reversed(matches), reversed(ends))]


def _number(segment: str, marked: bool) -> int | float | str | None:
    if marked:
        return _marked_number(segment.strip().split("\n")[0])
    plain = re.sub(r"(?<=\d),(?=\d{3}\b)", "", segment.replace("$", "").replace("−", "-"))
    plain = NEGATED.sub(r"\1", LIST_ITEM.sub(" ", plain))
    numbers = NUMBER.findall(plain)
    if not numbers:
        return None
    if "." not in numbers[-1]:  # a whole number exactly, however long (a float rounds it past 2**53)
        return int(numbers[-1])
    value = float(numbers[-1])
    return int(value) if value.is_integer() else value


def _marked_number(line: str) -> int | float | str | None:
    """The number a marker's line (or a box) states: after a list bullet, a box in the line first; the
    last side of an equation (`9 eggs x $2 = $18`: 18), else what follows words that conclude (`2
    each, so 8`: 8), else the arithmetic the line opens with (`42 (computed in 3 steps)`: 42, `25,
    which is 5 squared`: 25, `\\frac{122}{15}`), else, after words, the last it writes (`Janet makes
    $18 every day`), a number set against another dropped (`35 hours, not 45`); `_Unread` when it
    writes an expression in an unknown (`2W - 15`) or one past the parser's bounds."""
    line = line[bullet.end():] if (bullet := BULLET.match(line)) else line
    line = SENTENCE_END.split(line, maxsplit=1)[0]  # `35. The other agent got 45, not 35.`: its first sentence
    formula = bool(inner := boxes(line))
    if formula:  # `Gerald runs the 400-meter hurdles in \\boxed{39.6} seconds`: the box
        line = inner[-1]
    line = NEGATED.sub(r"\1", ASIDE.sub(" ", line))
    try:
        for part in _results(line):
            opens = re.match(r"[\s:=~≈$]*(?:(?:approximately|about|around|roughly|exactly)\s+)?[\s$]*"
                             r"(?:[-+−]?\s*[(.\d]|\\[dt]?frac)", part)
            found = expression.value(part, first=opens is not None, formula=formula)
            if found is not None:
                return as_answer(found)
        return None
    except expression.Unreadable as exc:
        raise _Unread from exc


def _results(line: str) -> list[str]:
    """Where a marker's line states its result, the likeliest first: after its last `=`, after the last
    words that conclude, then the whole line."""
    parts = []
    if "=" in line:
        parts.append(line.rsplit("=", 1)[1])
    if conclusion := list(CONCLUDES.finditer(line)):
        parts.append(line[conclusion[-1].end():])
    return [*parts, line]


def as_answer(value: Fraction) -> int | float | str:
    """An exact number as an answer is stored: a whole number as an int, a decimal as the float it
    writes (`0.75`), another fraction as text (`"122/15"`; `voting.normalize` reads it exactly)."""
    if value.denominator == 1:
        return int(value)
    decimal = float(value)
    return decimal if Fraction(repr(decimal)) == value else f"{value.numerator}/{value.denominator}"


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
        line = segment.strip().split("\n")[0]
        letter = re.match(rf"(?:option\s+)?\(?([{letters}])\b(?![-'’])", line, re.IGNORECASE)
        if letter and (letter.group(1).isupper() or line[: 2].lower() in (f"{letter.group(1)})", f"({letter.group(1)}")):
            _alone(letter.group(1).upper(), line[letter.end():], choices)
            return letter.group(1).upper()
        return _named(line, choices, last=False)
    written = re.findall(rf"(?:\(([{letters}])\)|\boption\s+([{letters}])\b|(?:^|\s)([{letters}])\))", segment)
    if written:
        return next(g for g in written[-1] if g).upper()
    last_line = segment.strip().split("\n")[-1]
    return _named(last_line, choices, last=True) or _named(segment, choices, last=True, values=False)


def _declines(line: str, choices: list[str], numbers: bool = False) -> bool:
    """Whether a marker's line declines to answer: it opens with words that say none fits (`none of
    them`, `cannot be determined`, `there is not enough information`), before any number or option it
    names, or it is only a negation of one option (`not red`, `not B`). An option whose own text says
    so (`none of the above`) is named, not declined; `library, since neither bank nor mall lends books`
    names library."""
    lowered = line.lower()
    mentions = [m.start() for option in choices for m in [_pattern(option).search(lowered)] if m]
    digit = re.search(r"\d", lowered) if numbers else None
    first = min([*mentions, digit.start() if digit else len(lowered)])
    declined = DECLINE.search(lowered) or OPENS_DECLINING.match(lowered)
    if declined and declined.start() < min(first, DECLINES_BY) and not _only_options(line, choices):
        return True
    if not choices:
        return False
    head = line[:first] if mentions else line  # as written: `not B` is a letter, `neither a bank` is not
    return NEGATION.fullmatch(head) is not None and not _only_options(line, choices)


def _only_options(line: str, choices: list[str]) -> bool:
    """Whether `line` is one option's text and nothing else (an option such as `none of the above`)."""
    text = line.strip(" .:").lower()
    return any(_pattern(option).fullmatch(text) for option in choices)


def _alone(letter: str, rest: str, choices: list[str]) -> None:
    """Raises `_Unread` if a letter answer goes on to join another letter (`A or B`, `(A) $61 or (B) $65`)."""
    rest = rest.lstrip(").: ")
    own = _pattern(choices[LETTERS.index(letter)]).match(rest.lower())  # the letter's option text
    letters = LETTERS[: len(choices)]
    other = re.match(rf"[\s$]*(?i:or|and|/|&)\s*(?i:option\s+)?"
                     rf"(?:\(([{letters}{letters.lower()}])\)|([{letters}])\b(?![-'’]))",
                     rest[own.end() if own else 0:])
    if other and (other.group(1) or other.group(2)).upper() != letter:
        raise _Unread


def _named(segment: str, choices: list[str], last: bool, values: bool = True) -> str | None:
    """The option `segment` names: its last mention, or (`last` False) its longest then earliest one;
    `_Unread` when that is two options or joined to another's, or (not `last`) two are named, one in digits."""
    lowered = segment.lower()
    found = _mentions(lowered, choices, values)
    found = [f for f in found if not NEGATED_MENTION.search(lowered, 0, f[0])]  # `red, not green`: not green
    if not found:
        return None
    k = max(range(len(found)), key=lambda i: (found[i][0], found[i][1]) if last else
            (found[i][1] - found[i][0], -found[i][0]))
    start, end, options = found[k]
    gaps = [(found[k - 1][2], lowered[found[k - 1][1]:start])] if k else []
    gaps += [(found[k + 1][2], lowered[end:found[k + 1][0]])] if k + 1 < len(found) else []
    named = set().union(*(f[2] for f in found))
    if (len(options) > 1 or any(other != options and JOINED.fullmatch(gap) for other, gap in gaps)
            or not last and len(named) > 1 and any(re.search(r"\d", choices[i]) for i in named)):
        raise _Unread
    return LETTERS[min(options)]


def _mentions(lowered: str, choices: list[str], values: bool) -> list[tuple[int, int, set[int]]]:
    """Where `lowered` names options, in order: (start, end, the options named there)."""
    worth = [_option_value(option) for option in choices]
    spans = [(m.start(), m.end(), i) for i, option in enumerate(choices) for m in _pattern(option).finditer(lowered)]
    found = [(start, end, {j for j in range(len(choices)) if j == i or _same(worth[i], worth[j])})
             for start, end, i in spans  # a match inside a longer option's match is that option's
             if not any(a <= start and end <= b and b - a > end - start for a, b, _ in spans)]
    for match in AMOUNT.finditer(lowered) if values else ():
        said = _amount(*match.groups())
        named = {i for i, value in enumerate(worth) if value and said is not None and _equal(value[0], said)}
        if named and not any(a < match.end() and match.start() < b for a, b, _ in spans):
            found.append((match.start(), match.end(), named))
    return sorted(found, key=lambda f: (f[0], -f[1]))


@lru_cache(maxsize=256)
def _pattern(option: str) -> re.Pattern:
    """A pattern that finds `option` in lower-cased text, as the module docstring says."""
    text = _plain_math(option).lower().strip()
    text = text[:-1].rstrip() if text.endswith(".") and not text.endswith("..") else text
    tokens = list(re.finditer(r"[^\W\d_]+|\d+|\S", text))
    if not tokens:
        return re.compile(r"(?!)")
    kind = [("word" if t.group()[0].isalpha() else "digit" if t.group()[0].isdigit() else
             "joint" if t.group() in ".,'’_-" else "symbol") for t in tokens]
    pattern = re.escape(tokens[0].group())
    for i in range(1, len(tokens)):
        loose = "symbol" in kind[i - 1: i + 1] or {kind[i - 1], kind[i]} == {"word", "digit"}
        spaced = tokens[i].start() > tokens[i - 1].end()
        pattern += (r"\s*" if loose else r"\s+" if spaced else "") + re.escape(tokens[i].group())
    # a digit or symbol edge must not go on into a number or expression (`$78.20` in `$78.205`, `3` in `-3`)
    left = r"(?<!\w)" + ("" if kind[0] == "word" else r"(?<![.\-√^/])(?<!\d,)")
    right = r"(?!\w)" + ("" if kind[-1] == "word" else r"(?![.,/]\d|[√(^])")
    return re.compile(left + pattern + right)


def _option_value(option: str) -> tuple[float, str] | None:
    """The value and unit (`%`, `cm`, or "") of an option that is a number, else None."""
    match = OPTION_VALUE.fullmatch(_plain_math(option).lower().strip().rstrip("."))
    value = _amount(*match.groups()[:3]) if match else None
    return None if value is None else (value, match.group(4) or "")


def _amount(sign: str, number: str, denominator: str | None) -> float | None:
    under = float(denominator) if denominator else 1.0  # a fraction over 0 is no number
    return (-1 if sign else 1) * float(number.replace(",", "")) / under if under else None


def _equal(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=ABS_TOL)


def _same(a: tuple[float, str] | None, b: tuple[float, str] | None) -> bool:
    """Whether two options are one answer: the same value in the same unit (`$67.40`, `$67.4`)."""
    return a is not None and b is not None and a[1] == b[1] and _equal(a[0], b[0])


def _plain_math(text: str) -> str:
    """Math as plain text: `\\sqrt{3}` as `√3`, `\\frac{1}{2}` as `1/2`, `\\$` as `$`, `−` as `-`, `’` as `'`."""
    text = re.sub(r"\\sqrt\{(\w+)\}", r"√\1", text.replace("−", "-").replace("’", "'"))
    text = re.sub(r"\\sqrt\{([^{}]*)\}", r"√(\1)", text)
    text = re.sub(r"\\d?frac\{([\w.]+)\}\{([\w.]+)\}", r"\1/\2", text)
    return re.sub(r"\\text\{([^{}]*)\}|\\([$%])", lambda m: m.group(1) or m.group(2), text)


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
    found = pattern.findall(model_text(text)[0].replace("*", "").replace("`", ""))
    return found[-1].strip(" .") if found else None
PROBABILITY = re.compile(r"\b(?:probability|confidence)\s*(?:is\b|:|=)\s*:?\s*((?:\d+(?:\.\d+)?|\.\d+)\s*%?)",
                         re.IGNORECASE)


def probability(text: str) -> float | None:
    """The last `Probability: P` (or `Confidence: P`) of a free-text reply as a 0-1 number, or None
    (read as `confidence` reads its line: `fields.as_probability`)."""
    return _last_probability(PROBABILITY, text)
