"""The kinds of answer an item can have, in the words every layer shares: the option letters
of a multiple-choice item and how each kind of answer is named in prompts.

It sits below the protocols so that the scripted test model can answer a prompt in the same
terms the protocols ask in (`protocols.answers` builds the prompts from `ANSWER_TEXT`).
"""

LETTERS = "ABCDEFGHIJ"
"""The letters of a multiple-choice item's options, in order (up to ten options)."""

ANSWER_TEXT = {
    "integer": ("a whole number", "the number alone, without units"),
    "number": ("a number", "the number alone, without units"),
    "text": ("a few words", "a few words"),
    "yesno": ('"yes" or "no"', "yes or no"),
    "choice": ("the letter of one option", "the letter of one option"),
}
"""Answer kind -> (how a JSON schema describes the answer, what X is in a last line `Answer: X`)."""
