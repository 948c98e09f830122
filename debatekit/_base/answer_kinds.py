"""The kinds of answer an item can have, in the words every layer shares: the option letters
of a multiple-choice item and how each kind of answer is named in prompts.

It sits below the protocols so that the scripted test model can answer a prompt in the same
terms the protocols ask in (`protocols.answers` builds the prompts from `ANSWER_TEXT`), and how a
number is written (`numerals`), which a reply's reader and the answers' comparison share.
"""

import re
import unicodedata

LETTERS = "ABCDEFGHIJ"
"""The letters of a multiple-choice item's options, in order (up to ten options)."""


def option_text(option: str) -> str:
    """An option's text as a reader compares it: NFKC, case-folded, spaces collapsed (`Café` written
    with a combining accent, `café` and ` CAFÉ ` are one; the angstrom sign is `Å`)."""
    return " ".join(unicodedata.normalize("NFKC", option).casefold().split())


def first_of_same(letter, choices) -> str:
    """The first option letter whose text is the same as `letter`'s (`option_text`): options that read
    the same are one answer (CommonsenseQA offers `studio` as both B and E on one item), so an
    answer of E there is B's. Anything that is not one of the options' letters is returned as is."""
    key = letter.strip().upper() if isinstance(letter, str) else None
    if not choices or not key or key not in LETTERS[: len(choices)]:
        return letter
    same = option_text(choices[LETTERS.index(key)])
    return next(LETTERS[i] for i, option in enumerate(choices) if option_text(option) == same)

ANSWER_TEXT = {
    "integer": ("a whole number", "the number alone, without units"),
    "number": ("a number", "the number alone, without units"),
    "text": ("a few words", "a few words"),
    "yesno": ('"yes" or "no"', "yes or no"),
    "choice": ("the letter of one option", "the letter of one option"),
}
"""Answer kind -> (how a JSON schema describes the answer, what X is in a last line `Answer: X`)."""

TRUTH_WORDS = {"true": "yes", "false": "no"}
"""A truth value written as a word, as the yes/no answer it is: in a reply (`Answer: True`) and in a
dataset's truth (`"false"`) alike."""


SPACED = re.compile(r"(?<![\d.,])\d{1,3}(?:[\u00a0\u202f\u2009]\d{3})+(?!\d)")
"""A number in groups of three set apart by a no-break or thin space (`1\u202f000`): one number."""
ALONE = re.compile(r"\s*-?[$€£]?\s*\d{1,3}(?: \d{3})+(?:\.\d+)?\s*[.%]?\s*")
"""A text that is only a number in groups of three set apart by plain spaces (`1 000`, `$12 000 000.`):
one number. Among other words they may part one number or several (`2 100 gram bags`), and the
readers read neither."""
GROUPED_BY_COMMAS = r"[1-9]\d{0,2}(?:,\d{3})+"
"""The digits of a number whose commas set off thousands, as a pattern to build on (the choice reader's amounts)."""
THOUSANDS = re.compile(r"(?<![\d.,])" + GROUPED_BY_COMMAS + r"(?!\d|,\d)")
"""A number whose commas set off thousands (`1,250`, `12,345,678`: a first group of one to three
digits, not 0, then groups of three); any other comma between digits (`1,5`, `0,125`, `1234,567`,
`1,00,000`, `(3,4)`) may be a decimal comma or a list, which no reader can tell apart."""
FULL_WIDTH_COMMA = re.compile(r"(?<=\d)\uff0c(?=\d)")


def numerals(text: str) -> str:
    """`text` with its thousands separators dropped: commas (`1,250`), no-break and thin spaces
    (`1\u202f000`), and plain spaces when the text is only that number (`1 000`). A comma between
    digits that sets off no thousands is left as it is: `1,5` may be 1.5 or the list 1, 5. A full-width
    comma between digits (`1，250`) is a comma."""
    text = FULL_WIDTH_COMMA.sub(",", text)
    if ALONE.fullmatch(text):
        text = re.sub(r"(?<=\d) (?=\d)", "", text)
    text = SPACED.sub(lambda match: re.sub(r"\s", "", match.group()), text)
    return THOUSANDS.sub(lambda match: match.group().replace(",", ""), text)
