"""The exact value of an answer written as arithmetic, without `eval`.

    value("3/4")                    # Fraction(3, 4)
    value("\\frac{122}{15}")        # Fraction(122, 15), not 15
    value("18 - 6 = 12 apples")     # 12: the last side of an equation
    value("42 (computed in 3 steps)", first=True)  # 42: the expression the text opens with
    value("2W - 15")                # raises Unknowns: an expression in an unknown is no number

A small recursive-descent parser over numbers (`2.5e6`, `.5`, `1,250`), `+ - * / ^` and
parentheses, computed in `Fraction`s so that a fraction compares exactly with a whole number. The
text is read as the sum, product or power it spells; where it goes on in words, the arithmetic
read so far is the answer and the words are set aside (`15 apples`, `25, which is 5 squared`).
A power's exponent is bounded (`POWER_LIMIT`) so that a reply cannot ask for a number of a
million digits.
"""

from __future__ import annotations

import re
from fractions import Fraction

POWER_LIMIT = 64
"""The largest exponent (`2^64`, `1e64`) read; a larger one is no answer."""
TOKEN = re.compile(r"\s*(?:(?P<number>(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d{1,3}(?!\d))?)|(?P<op>[-+*/^()=])"
                   r"|(?P<word>[^\W\d_]+)|(?P<other>\S))")
_FRAC = re.compile(r"\\[dt]?frac\s*(?=\{)")
_TEX = [(re.compile(r"\\(?:times|cdot)|[×·]"), "*"), (re.compile(r"\\div|÷"), "/"), (re.compile(r"[−–](?=\s*[\d.(])"), "-"),
        (re.compile(r"\\(?:left|right|[,!;: ])|\\?\$|\\%"), " "), (re.compile(r"\\text\{([^{}]*)\}"), r" \1 "),
        (re.compile(r"(?<=\d),(?=\d{3}(?!\d))"), "")]
OPERATORS = ("+", "-", "*", "/", "^")
VARIABLE = re.compile(r"[^\W\d_]{1,2}")
"""A word that may be an unknown: one or two letters (`x`, `W`, `xy`); `a`, `A` and `I` are words."""


class Unreadable(ValueError):
    """The arithmetic read has no value: a division by zero, a power past `POWER_LIMIT`."""


class Unknowns(Unreadable):
    """The text is arithmetic in an unknown (`2W - 15`, `x + 3`): it states no number."""


def value(text: str, first: bool = False, formula: bool = False) -> Fraction | None:
    """The value of the arithmetic in `text`: the last expression it writes, or with `first` the one it
    opens with (after words such as "The total is"); None if it writes none. With `formula` (a box's
    content) any word joined to the arithmetic by an operator is an unknown (`Original length - 8`); in
    prose only a one- or two-letter word is (`x + 3`; `18 - Janet makes ...` is 18).

    Raises:
        Unknowns: the expression read is written in an unknown.
        Unreadable: it divides by zero or raises to a power past `POWER_LIMIT`.
    """
    tokens = _tokens(plain(text))
    starts = [i for i, t in enumerate(tokens) if _starts(tokens, i)]
    found = None
    for start in starts:
        if found is not None and start < found[1]:
            continue  # inside the expression already read
        read = _Reader(tokens, start, formula).equation()
        if read is None:
            continue
        found = read
        if first:
            break
    return None if found is None else found[0]


def plain(text: str) -> str:
    """`text` with LaTeX arithmetic written plainly: `\\frac{a}{b}` as `((a)/(b))`, `\\times` as `*`,
    `−` as `-`, `$`, `\\,` and `\\left(` set aside, thousands commas dropped."""
    text = _fractions(text)
    for pattern, replacement in _TEX:
        text = pattern.sub(replacement, text)
    return text.replace("{", "(").replace("}", ")")


def _fractions(text: str) -> str:
    out, at = [], 0
    for match in _FRAC.finditer(text):
        if match.start() < at:
            continue
        top, after_top = braced(text, match.end())
        bottom, end = braced(text, after_top) if top is not None else (None, 0)
        if bottom is None:
            continue
        out += [text[at:match.start()], f"(({_fractions(top)})/({_fractions(bottom)}))"]
        at = end
    return "".join(out) + text[at:]


def braced(text: str, at: int) -> tuple[str | None, int]:
    """The content of the `{...}` group at `at` (spaces before it allowed) and where it ends."""
    while at < len(text) and text[at] == " ":
        at += 1
    if at >= len(text) or text[at] != "{":
        return None, at
    depth = 0
    for i in range(at, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[at + 1:i], i + 1
    return None, at


def _tokens(text: str) -> list[tuple[str, str, bool]]:
    """(kind, text, whether a space came before it) of each token."""
    out = []
    for match in TOKEN.finditer(text):
        kind = match.lastgroup or "other"
        out.append((kind, match.group(kind), match.group(0)[:1].isspace()))
    return out


def _starts(tokens, i: int) -> bool:
    """Whether an expression may start at token i: a number, or a sign or `(` before one."""
    kind, text, _ = tokens[i]
    if kind == "number":
        return True
    nxt = tokens[i + 1] if i + 1 < len(tokens) else ("", "", False)
    return kind == "op" and text in ("-", "+", "(") and (nxt[0] == "number" or nxt[0] == "op" and nxt[1] in ("-", "("))


class _Reader:
    """Reads one expression (an equation's sides) from a token list."""

    def __init__(self, tokens, at: int, formula: bool = False):
        self.tokens, self.at, self.formula = tokens, at, formula

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
        """Raise `Unknowns` when the expression read from `start` is written in an unknown: a short word
        joined to it by an operator (`x + 3`, `2 * W`) or to one of its numbers with no space (`2W - 15`)."""
        tokens, end = self.tokens, self.at
        glued = end < len(tokens) and tokens[end][0] == "word" and not tokens[end][2] and self._variable(tokens[end][1])
        if glued and end + 1 < len(tokens) and tokens[end + 1][0] == "op" and tokens[end + 1][1] in (*OPERATORS, "="):
            raise Unknowns(tokens[end][1])
        if end + 1 < len(tokens) and tokens[end][0] == "op" and tokens[end][1] in OPERATORS \
                and tokens[end + 1][0] == "word" and self._variable(tokens[end + 1][1]):
            raise Unknowns(tokens[end + 1][1])
        joint = start if tokens[start][1] in ("-", "+") else start - 1  # `x + 3`: the sign read, or one before
        if joint >= 1 and tokens[joint][0] == "op" and tokens[joint][1] in OPERATORS \
                and tokens[joint - 1][0] == "word" and self._variable(tokens[joint - 1][1]):
            raise Unknowns(tokens[joint - 1][1])

    def sum(self) -> Fraction | None:
        total = self.product()
        while total is not None and (sign := self._operator("+-")):
            term = self.product()
            if term is None:
                self.at -= 1
                break
            total = total + term if sign == "+" else total - term
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
            total = total * factor if op == "*" else total / factor
        return total

    def signed(self) -> Fraction | None:
        if sign := self._operator("-+"):
            inner = self.signed()
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
            return base ** int(exponent)
        return base

    def atom(self) -> Fraction | None:
        if self._peek("number"):
            text = self.tokens[self.at][1]
            self.at += 1
            _, _, exponent = text.lower().partition("e")
            if exponent and abs(int(exponent)) > POWER_LIMIT:
                raise Unreadable(f"a power of {int(exponent)} is not read")
            return Fraction(text)
        if self._peek("op", "("):
            mark = self.at
            self.at += 1
            inner = self.sum()
            if inner is not None and self._peek("op", ")"):
                self.at += 1
                return inner
            self.at = mark
        return None

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

