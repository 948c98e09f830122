"""Reading a choice: the option a reply names by its letter, its text or its value, never guessed
between two; and the lines that decline to answer at all."""

from __future__ import annotations

import math
import re
from functools import lru_cache

from debatekit._base.answer_kinds import GROUPED_BY_COMMAS, LETTERS
from debatekit.protocols.shared.extract.markers import Unread

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
REL_TOL, ABS_TOL = 1e-6, 1e-9  # a stated number names an option of this value (relative, or absolute near 0)
_AMOUNT = r"(-?)[$€£]?((?:" + GROUPED_BY_COMMAS + r"|\d+)(?:\.\d+)?|\.\d+)(?:\s*/\s*(\d+(?:\.\d+)?))?"
AMOUNT = re.compile(r"(?<![\w.,/√^-])" + _AMOUNT + r"(?!\s*[√(^]|e[-+]?\d|,?\d)")  # stated: `-$1,250.5`, `3/4`
"""A number a reply states; one joined to another by a comma that sets off no thousands (`2,5`: a
decimal comma or a list) states none."""
OPTION_VALUE = re.compile(r"[$€£]?\s*" + _AMOUNT + r"\s*(%|[^\W\d_]+)?")  # an option that is a number
JOINED = re.compile(r"[\s$]*(?:,|/|&|or|and)[\s$]*")  # between two options named as alternatives


def declines_at_end(text: str) -> bool:
    """Whether the reply's last three lines decline to answer ("there is no way to determine ...",
    "none of them fit. Therefore, the correct answer is: / Answer: X")."""
    lines = [line for line in text.strip().split("\n") if line.strip()]
    return DECLINE.search("\n".join(lines[-3:])) is not None


def read_choice(segment: str, marked: bool, choices: list[str]) -> str | None:
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


def declines(line: str, choices: list[str], numbers: bool = False) -> bool:
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
    """Raises `Unread` if a letter answer goes on to join another letter (`A or B`, `(A) $61 or (B) $65`)."""
    rest = rest.lstrip(").: ")
    own = _pattern(choices[LETTERS.index(letter)]).match(rest.lower())  # the letter's option text
    letters = LETTERS[: len(choices)]
    other = re.match(rf"[\s$]*(?i:or|and|/|&)\s*(?i:option\s+)?"
                     rf"(?:\(([{letters}{letters.lower()}])\)|([{letters}])\b(?![-'’]))",
                     rest[own.end() if own else 0:])
    if other and (other.group(1) or other.group(2)).upper() != letter:
        raise Unread


def _named(segment: str, choices: list[str], last: bool, values: bool = True) -> str | None:
    """The option `segment` names: its last mention, or (`last` False) its longest then earliest one;
    `Unread` when that is two options or joined to another's, or (not `last`) two are named, one in digits."""
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
        raise Unread
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
    """A pattern that finds `option` in lower-cased text, as the package's docstring says."""
    text = plain_math(option).lower().strip()
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
    match = OPTION_VALUE.fullmatch(plain_math(option).lower().strip().rstrip("."))
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


def plain_math(text: str) -> str:
    """Math as plain text: `\\sqrt{3}` as `√3`, `\\frac{1}{2}` as `1/2`, `\\$` as `$`, `−` as `-`, `’` as `'`."""
    text = re.sub(r"\\sqrt\{(\w+)\}", r"√\1", text.replace("−", "-").replace("’", "'"))
    text = re.sub(r"\\sqrt\{([^{}]*)\}", r"√(\1)", text)
    text = re.sub(r"\\d?frac\{([\w.]+)\}\{([\w.]+)\}", r"\1/\2", text)
    return re.sub(r"\\text\{([^{}]*)\}|\\([$%])", lambda m: m.group(1) or m.group(2), text)
