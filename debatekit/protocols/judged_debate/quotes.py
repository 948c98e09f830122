"""Quotes checked in code (Khan et al. 2024): `check_quotes` marks every `<quote>` of an argument
`<v_quote>` (found in the evidence after the official normalisation) or `<u_quote>`; `truncate`
cuts an argument to its word cap."""

from __future__ import annotations

import re
import string
from dataclasses import dataclass


QUOTE = re.compile(r"<quote>(.*?)</quote>")  # one line, as in the official checker
PUNCTUATION = str.maketrans("", "", string.punctuation)


def normalize(text: str) -> str:
    """Straight quotes and apostrophes, ASCII punctuation removed, lower case, spaces collapsed."""
    text = text.replace("\u201c", '"').replace("\u201d", '"').replace("\u2018", "'").replace("\u2019", "'")
    return " ".join(text.translate(PUNCTUATION).lower().split())


@dataclass
class Checked:
    """An argument with its quotes marked, and the quotes found (verified) and not found."""

    text: str
    verified: list[str]
    unverified: list[str]


def check_quotes(argument: str, evidence: str) -> Checked:
    """Mark each `<quote>` of `argument` as `<v_quote>` or `<u_quote>` against `evidence`.

    Tags a model wrote itself (`<v_quote>`, `<u_quote>`) are first turned back into `<quote>`, so
    no argument can certify its own quotes.
    """
    for tag in ("v_quote", "u_quote"):
        argument = argument.replace(f"<{tag}>", "<quote>").replace(f"</{tag}>", "</quote>")
    source = normalize(evidence)
    verified, unverified = [], []

    def mark(match: re.Match) -> str:
        quote = match.group(1)
        found = normalize(quote) in source
        (verified if found else unverified).append(quote)
        tag = "v_quote" if found else "u_quote"
        return f"<{tag}>{quote}</{tag}>"

    return Checked(QUOTE.sub(mark, argument), verified, unverified)


def truncate(argument: str, max_words: int) -> str:
    """At most `max_words` space-separated words, an open quote closed, `... <TRUNCATED>` when cut."""
    words = argument.split(" ")
    if len(words) <= max_words:
        return argument
    kept = " ".join(words[:max_words])
    for tag in ("quote", "v_quote", "u_quote"):
        if f"<{tag}>" in kept and f"</{tag}>" not in kept.split(f"<{tag}>")[-1]:
            kept += f"</{tag}>"
    return f"{kept}... <TRUNCATED>"
