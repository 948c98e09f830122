"""The exact value of an answer written as arithmetic, without `eval`.

    value("3/4")                    # Fraction(3, 4)
    value("\\frac{122}{15}")        # Fraction(122, 15), not 15
    value("18 - 6 = 12 apples")     # 12: the last side of an equation
    value("42 (computed in 3 steps)", first=True)  # 42: the expression the text opens with
    value("2W - 15")                # raises Unknowns: an expression in an unknown is no number

A small recursive-descent parser over numbers (`2.5e6`, `.5`, `1,250`, `1{,}250`), `+ - * / ^`
(`×`, `\\times`, `\\cdot`, `x` between two numbers, `÷`), parentheses and LaTeX fractions (a whole
number before one is a mixed number: `3\\frac{1}{2}` is 7/2), computed in `Fraction`s so that a
fraction compares exactly with a whole number. The text is read as the sum, product or power it
spells; where it goes on in words, the arithmetic read so far is the answer and the words are set
aside (`15 apples`, `25, which is 5 squared`). A unit joined to its number (`5m`, `60km/h`) is a
unit, not an unknown. Bounds keep a reply from costing more than it is worth: an exponent past
`POWER_LIMIT`, a number past `MAX_DIGITS` digits, nesting deeper than `MAX_DEPTH` and text past
`MAX_CHARS` characters are unreadable, never an exception other than `Unreadable`.
"""

from __future__ import annotations

import re
from fractions import Fraction

from debatekit._base.answer_kinds import numerals

POWER_LIMIT = 64
"""The largest exponent (`2^64`, `1e64`) read; a larger one is no answer."""
MAX_DIGITS = 1_000
"""The most digits a number read, or a value computed, may have (numerator and denominator): a
400-digit answer is read exactly; a value far past what JSON and Python print (4,300 digits) is not."""
MAX_DEPTH = 32
"""The deepest nesting of parentheses, fractions and signs read."""
MAX_CHARS = 2_000
"""The longest text read as one answer; a longer one is unreadable."""
TOKEN = re.compile(r"\s*(?:(?P<number>(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d{1,3}(?!\d))?)|(?P<op>[-+*/^()=])"
                   r"|(?P<word>[^\W\d_]+)|(?P<other>\S))")
_FRAC = re.compile(r"\\[dt]?frac\s*\{")
MIXED = re.compile(r"(?<![\d.,/])(\d+)[ \t]+(?!\d{3}/)(\d+)/(\d+)(?![\d/]|\.\d)")
"""A mixed number written plainly (`3 1/2`): 7/2, as `3\\frac{1}{2}` is (`1 000/2` is no mixed number)."""
MINUS = re.compile(r"−(?=\s*\$?[\d.(])|–(?=\$?[\d.(])|(?<=\d)—(?=\d)")
"""A minus sign before a number, an en dash joined to the number after it (`–5`, `5–10`) and an em
dash between two digits (`5—10`), as `-`. An en dash set apart by spaces may be a range's or
punctuation (`5 – 10`, `18 – 9 eggs sold`), which `TIED_AFTER` leaves unread; an em dash so set
apart is punctuation (`18 — 9 eggs sold` is 18)."""
_TEX = [(re.compile(r"(?<=\d)\{,\}(?=\d)"), ","),  # 1{,}250 and 2{,}5: a comma (`numerals` tells which)
        (re.compile(r"(?<=\d)(?:\\,|\\ )(?=\d)"), "\u2009"),  # 1\,250: a thin space
        (re.compile(r"\\(?:times|cdot)|[×·]|(?<=\d)\s*x\s*(?=[\d$(])"), "*"), (re.compile(r"\\div|÷"), "/"),
        (MINUS, "-"), (MIXED, r"(\1+\2/\3)"),
        (re.compile(r"\\(?:left|right|[,!;: ])|\\?\$|\\%"), " "), (re.compile(r"\\text\{([^{}]*)\}"), r" \1 ")]
OPERATORS = ("+", "-", "*", "/", "^")
VARIABLE = re.compile(r"[^\W\d_]")
"""A word that may be an unknown: one letter (`x`, `W`); `a`, `A` and `I` are words."""


class Unreadable(ValueError):
    """The arithmetic read has no value: a division by zero, a number or nesting past the bounds."""


class Ambiguous(Unreadable):
    """The number read has more than one reading with what is written around it (`alone`): a decimal
    comma or a list (`1,5`), a time (`3:30`), a range (`5-10`), a date, digits in groups (`12 000`)."""


class Unknowns(Unreadable):
    """The text is arithmetic in an unknown (`2W - 15`, `x + 3`): it states no number."""


def value(text: str, first: bool = False, formula: bool = False) -> Fraction | None:
    """The value of the arithmetic in `text`: the last expression it writes, or with `first` the one it
    opens with (after words such as "The total is"); None if it writes none. With `formula` (a box's
    content) any word joined to the arithmetic by an operator is an unknown (`Original length - 8`); in
    prose only a one-letter word is (`x + 3`; `18 - Janet makes ...` is 18).

    Raises:
        Unknowns: the expression read is written in an unknown.
        Unreadable: it divides by zero, or passes a bound (`POWER_LIMIT`, `MAX_DIGITS`, `MAX_DEPTH`,
            `MAX_CHARS`).
    """
    if len(text) > MAX_CHARS:
        raise Unreadable(f"an answer of {len(text):,} characters is not read")
    text = plain(text)
    tokens = _tokens(text)
    starts = [i for i, t in enumerate(tokens) if _starts(tokens, i)]
    found = None
    try:
        for start in starts:
            if found is not None and start < found[1]:
                continue  # inside the expression already read
            read = _Reader(tokens, start, formula).equation()
            if read is None:
                continue
            found, found_at = read, start
            if first:
                break
    except RecursionError as exc:  # a bound missed: still no exception but `Unreadable`
        raise Unreadable("nested too deep") from exc
    if found is None:
        return None
    alone(text, tokens[found_at][3], tokens[found[1] - 1][4])
    return found[0]


def alone(text: str, start: int, end: int) -> None:
    """Raise `Ambiguous` when the number or arithmetic read at `text[start:end]` has more than one reading
    with what is written around it: joined to another number by a comma that sets off no thousands
    (`1,5`, `(3,4)`; thousands were joined already) or by a colon (`3:30`, `1:2`); one group of a number
    set apart by plain spaces (`12 000 dollars`; `numerals` joins one that stands alone); a range (`5-10`,
    `5 to 10`) or a date (`2023-10-05`, `12/25/2023`); one part of a quantity in two units (`1 hour
    30 minutes`, `_two_units`); arithmetic the reader stopped inside (`\\frac{3}{2,5}` read up to its 3), or, for a
    number read alone, after (`20-8`, `4 x 3`: not 8 or 3)."""
    span, before, after = text[start:end], text[:start], text[end:]
    if span[:1].isdigit() and TIED_BEFORE.search(before) or TIED_AFTER.match(after):
        raise Ambiguous(f"{span!r} joined to another number: a decimal comma, a time, a range or arithmetic")
    if _two_units(before, span, after):
        raise Ambiguous(f"{span!r} is one part of a quantity in two units")
    if (re.fullmatch(r"\d{3}", span) and re.search(r"(?<![\d.,])\d{1,3}[ \t]+\Z", before)
            or re.fullmatch(r"\d{1,3}", span) and re.match(r"[ \t]+\d{3}(?!\d|\.\d)", after)):
        raise Ambiguous("digits in groups of three apart by spaces: one number or several")
    span = span.rstrip(".")  # `5-10.`: a sentence's end
    if (range_ := RANGE.fullmatch(span)) and Fraction(range_[1]) < Fraction(range_[2]) or DATE.fullmatch(span):
        raise Ambiguous(f"{span!r} is a range or a date, not a difference")


TIED_BEFORE = re.compile(r"(?:\d%?[,:-]|\d%?[ \t]*(?:[–+/×÷x]|\\(?:times|cdot|div))[ \t]*|\^[ \t]*|\}[ \t]*\{)\Z")
"""What joins a number to the one before it: a comma, colon or dash with no space (`1,5`, `3:30`,
`20-8`), another operator (`3/4`, `4 x 3`, `9 \\times 2`), an exponent's `^` (`120 ft^2`), a LaTeX
fraction's braces (`\\frac{3}{4}`). A dash set apart by spaces is taken as a separator (`Step 3 - 18`
is 18), so a reply read whole that ends `20 - 8` gives 8."""
TIED_AFTER = re.compile(r"%?(?:[,:]\.?\d|[ \t]*[-–+*/^×÷][ \t]*\$?[\d(.]|[ \t]+to[ \t]+\$?[\d.](?![\d.]*[ \t]+(?:decimal|significant|places?)\b))")
"""What joins a number to the one after it: a comma or colon with no space, an operator the reader
did not take (`\\frac{3}{2,5}` read up to its 3), a range's dash or `to` (`20%-25%`, `5 to 10`; not
`3.33 to 2 decimal places`). A
number restated after `or` (`1/2 or 0.5`, `60 or 1 hour`) leaves the first as read."""
UNIT_PAIRS = [(r"hours?|hrs?|h", r"minutes?|mins?|m"), (r"minutes?|mins?", r"seconds?|secs?|s"),
              (r"days?", r"hours?|hrs?"), (r"weeks?", r"days?"), (r"years?", r"months?"),
              (r"feet|foot|ft", r"inch(?:es)?|in"), (r"(?:kilo)?met(?:er|re)s?|km|m", r"(?:centi)?met(?:er|re)s?|cm|m"),
              (r"dollars?", r"cents?"), (r"pounds?|lbs?", r"ounces?|oz")]
"""A unit and the smaller one a quantity goes on in (`1 hour 30 minutes`, `5 feet and 6 inches`)."""
UNIT_AFTER = re.compile(r"[ \t]*([^\W\d_]+)(,?(?:[ \t]+and)?)[ \t]+\d+(?:\.\d+)?[ \t]*([^\W\d_]+)\b")
UNIT_BEFORE = re.compile(r"\d[ \t]*([^\W\d_]+)(,?(?:[ \t]+and)?)[ \t]+\Z")
WORD = re.compile(r"[ \t]*([^\W\d_]+)\b")


def _two_units(before: str, span: str, after: str) -> bool:
    """Whether the number at `span` is one part of a quantity in a unit and a smaller one (`1 hour 30
    minutes`, `9 dollars, 50 cents`, `1h 30m`), or one of two quantities of one unit (`160 miles and
    300 miles`): neither number alone is the answer. Two unrelated units (`3 weeks 21 plants`, `40
    hours 5 days a week`) are no such quantity."""
    if (pair := UNIT_AFTER.match(after)) and _compound(*pair.groups()):  # `1 hour 30 minutes` read at its 1
        return True
    return bool(span[:1].isdigit() and (pair := UNIT_BEFORE.search(before)) and (word := WORD.match(after))
                and _compound(pair[1], pair[2], word[1]))  # read at its 30


def _compound(first: str, join: str, second: str) -> bool:
    """Whether `first`, `join`, a number and `second` make one quantity (`UNIT_PAIRS`) or two of one unit
    joined by `and`."""
    return (first == second and join.strip() == "and"
            or any(re.fullmatch(big, first) and re.fullmatch(small, second) for big, small in UNIT_PAIRS))


RANGE = re.compile(r"(\d+(?:\.\d+)?)[ \t]*-[ \t]*(\d+(?:\.\d+)?)")
"""A smaller number, a dash, a larger one (`5-10`, `5 – 10`): a range; as a difference it is
negative, which an answer writes as `-5`."""
DATE = re.compile(r"\d{4}([-/])\d{1,2}\1\d{1,2}|\d{1,2}-\d{1,2}-\d{4}|\d{1,2}/\d{1,2}/(?:\d{4}|\d{2})")
"""Three numbers joined by dashes or slashes in a date's shape (`2023-10-05`, `05-10-2023`,
`12/25/2023`, `5/1/24`); `16-3-4`, `20-5-10` and `48/2/2` are arithmetic."""


def plain(text: str) -> str:
    """`text` with LaTeX arithmetic written plainly: `\\frac{a}{b}` as `((a)/(b))` (after a whole number,
    added to it; so is a plain mixed number, `3 1/2`), `\\times` and `x` between numbers as `*`, a
    minus or dash as `-` (`MINUS`), `$`, `\\,` and `\\left(` set aside, numbers written plainly (`numerals`)."""
    text = _fractions(text)
    for pattern, replacement in _TEX:
        text = pattern.sub(replacement, text)
    return numerals(text).replace("{", "(").replace("}", ")")


def closing_braces(text: str) -> dict[int, int]:
    """For each `{` of `text` that is closed, where its `}` is: one pass, whatever the nesting."""
    closes, open_at = {}, []
    for i, char in enumerate(text):
        if char == "{":
            open_at.append(i)
        elif char == "}" and open_at:
            closes[open_at.pop()] = i
    return closes


def braced(text: str, at: int, closes: dict[int, int] | None = None) -> tuple[str | None, int]:
    """The content of the `{...}` group at `at` (spaces before it allowed) and where it ends."""
    while at < len(text) and text[at] == " ":
        at += 1
    if at >= len(text) or text[at] != "{":
        return None, at
    end = (closing_braces(text) if closes is None else closes).get(at)
    return (None, at) if end is None else (text[at + 1:end], end + 1)


def _fractions(text: str) -> str:
    """`\\frac{a}{b}` as `((a)/(b))`, and `3\\frac{1}{2}` as `(3+((1)/(2)))`, nested ones too."""
    if text.count("\\") and len(_FRAC.findall(text)) > MAX_DEPTH:
        raise Unreadable("too many fractions")
    closes = closing_braces(text)

    def rewrite(start: int, stop: int, depth: int) -> str:
        if depth > MAX_DEPTH:
            raise Unreadable("fractions nested too deep")
        out, at = [], start
        for match in _FRAC.finditer(text, start, stop):
            if match.start() < at:
                continue
            top_open = match.end() - 1
            top_close = closes.get(top_open)
            bottom_open = top_close + 1 if top_close is not None else None
            while bottom_open is not None and bottom_open < stop and text[bottom_open] == " ":
                bottom_open += 1
            bottom_close = closes.get(bottom_open) if bottom_open is not None and bottom_open < stop else None
            if bottom_close is None or bottom_close >= stop:
                continue
            top = rewrite(top_open + 1, top_close, depth + 1)
            bottom = rewrite(bottom_open + 1, bottom_close, depth + 1)
            before = text[at:match.start()]
            whole = re.search(r"(?<![\d.])(\d+)\s*$", before)  # a mixed number: 3\frac{1}{2}
            if whole:
                out += [before[:whole.start()], f"({whole.group(1)}+(({top})/({bottom})))"]
            else:
                out += [before, f"(({top})/({bottom}))"]
            at = bottom_close + 1
        return "".join(out) + text[at:stop]

    return rewrite(0, len(text), 0)


def _tokens(text: str) -> list[tuple[str, str, bool, int, int]]:
    """(kind, text, whether a space came before it, where it starts and ends) of each token."""
    out = []
    for match in TOKEN.finditer(text):
        kind = match.lastgroup or "other"
        out.append((kind, match.group(kind), match.group(0)[:1].isspace(), match.start(kind), match.end(kind)))
    return out


def _starts(tokens, i: int) -> bool:
    """Whether an expression may start at token i: a number, or a sign or `(` before one."""
    kind, text = tokens[i][:2]
    if kind == "number":
        return True
    nxt = tokens[i + 1] if i + 1 < len(tokens) else ("", "", False)
    return kind == "op" and text in ("-", "+", "(") and (nxt[0] == "number" or nxt[0] == "op" and nxt[1] in ("-", "("))


class _Reader:
    """Reads one expression (an equation's sides) from a token list."""

    def __init__(self, tokens, at: int, formula: bool = False):
        self.tokens, self.at, self.formula, self.depth = tokens, at, formula, 0

    def equation(self) -> tuple[Fraction, int] | None:
        """The value of the last side of `a = b = c` that reads, and where reading ended."""
        start = self.at
        found = self.sum()
        if found is None:
            return None
        self._unknown_after(start)
        end = self.at
        while self._peek("op", "="):
            self.at += 1
            while self._peek("other"):  # `= $15` (a currency sign set aside already), `= ~15`
                self.at += 1
            side_start = self.at
            side = self.sum()
            if side is None:
                break
            self._unknown_after(side_start)
            found, end = side, self.at
        self.at = end
        return found, end

    def _unknown_after(self, start: int) -> None:
        """Raise `Unknowns` when the expression read from `start` is written in an unknown: a one-letter
        word joined to it by an operator (`x + 3`, `2 * W`; in a formula any word) or one joined to a
        number and then an operator (`2W - 15`). A unit joined to its number (`5m`, `60km/h`) is none."""
        tokens, end = self.tokens, self.at
        glued = end < len(tokens) and tokens[end][0] == "word" and not tokens[end][2] and self._variable(tokens[end][1])
        if glued and end + 1 < len(tokens) and tokens[end + 1][0] == "op" and tokens[end + 1][1] in ("+", "-", "*", "^"):
            raise Unknowns(tokens[end][1])
        if end + 1 < len(tokens) and tokens[end][0] == "op" and tokens[end][1] in OPERATORS \
                and tokens[end + 1][0] == "word" and self._variable(tokens[end + 1][1]):
            raise Unknowns(tokens[end + 1][1])
        joint = start if tokens[start][1] in ("-", "+") else start - 1  # `x + 3`: the sign read, or one before
        if joint >= 1 and tokens[joint][0] == "op" and tokens[joint][1] in OPERATORS \
                and tokens[joint - 1][0] == "word" and self._variable(tokens[joint - 1][1]) \
                and not (joint == start and tokens[joint][2] and not tokens[joint + 1][2]):  # `is -3`: a sign
            raise Unknowns(tokens[joint - 1][1])

    def sum(self) -> Fraction | None:
        total = self.product()
        while total is not None and (sign := self._operator("+-")):
            term = self.product()
            if term is None:
                self.at -= 1
                break
            total = _bounded(total + term if sign == "+" else total - term)
        return total

    def product(self) -> Fraction | None:
        total = self.signed()
        while total is not None and (op := self._operator("*/")):
            factor = self.signed()
            if factor is None:
                self.at -= 1
                break
            if op == "/" and factor == 0:
                raise Unreadable("division by zero")
            total = _bounded(total * factor if op == "*" else total / factor)
        return total

    def signed(self) -> Fraction | None:
        if sign := self._operator("-+"):
            self._deeper()
            inner = self.signed()
            self.depth -= 1
            if inner is None:
                self.at -= 1
                return None
            return -inner if sign == "-" else inner
        return self.power()

    def power(self) -> Fraction | None:
        base = self.atom()
        if base is not None and self._operator("^"):
            mark = self.at
            exponent = self.signed()
            if exponent is None:
                self.at = mark - 1
                return base
            if exponent.denominator != 1 or abs(exponent) > POWER_LIMIT or (base == 0 and exponent < 0):
                raise Unreadable(f"a power of {exponent} is not read")
            return _bounded(base ** int(exponent))
        return base

    def atom(self) -> Fraction | None:
        if self._peek("number"):
            text = self.tokens[self.at][1]
            self.at += 1
            digits, _, exponent = text.lower().partition("e")
            if len(digits) > MAX_DIGITS:
                raise Unreadable(f"a number of {len(digits)} digits is not read")
            if exponent and abs(int(exponent)) > POWER_LIMIT:
                raise Unreadable(f"a power of {int(exponent)} is not read")
            return Fraction(text)
        if self._peek("op", "("):
            mark = self.at
            self.at += 1
            self._deeper()
            inner = self.sum()
            self.depth -= 1
            if inner is not None and self._peek("op", ")"):
                self.at += 1
                return inner
            self.at = mark
        return None

    def _deeper(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise Unreadable("nested too deep")

    def _variable(self, word: str) -> bool:
        return self.formula or bool(VARIABLE.fullmatch(word)) and word not in ("a", "A", "I")

    def _peek(self, kind: str, text: str | None = None) -> bool:
        if self.at >= len(self.tokens):
            return False
        token = self.tokens[self.at]
        return token[0] == kind and (text is None or token[1] == text)

    def _operator(self, ops: str) -> str | None:
        if self._peek("op") and self.tokens[self.at][1] in ops:
            self.at += 1
            return self.tokens[self.at - 1][1]
        return None


def _bounded(value: Fraction) -> Fraction:
    """`value`, or `Unreadable` when it has more than `MAX_DIGITS` digits (a product of many powers)."""
    if max(abs(value.numerator), value.denominator).bit_length() > MAX_DIGITS * 3.33:
        raise Unreadable("a number too large to be an answer")
    return value
