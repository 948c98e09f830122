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
  period are ignored ("$1,250." is 1250); an integral value is returned as an int. A number with
  more than one reading is none, in a marker's line as in a reply read whole (`expression.alone`):
  `1,5`, `12 000 dollars`, a range (`5-10`), a time (`3:30`), a date, a quantity in two units, or
  the last number of arithmetic left unworked (`20-8`: not 8); where the last marker's line has only
  such a number, a box after it is read. A `*` counts as a space, not as nothing (`13*1` is two
  numbers, not 131), and without a marker the
  number of a numbered list item (`13. Cost of ...` at a line's start) is not an answer. A
  number set against the one before it in its clause ("35 hours, not 45 hours") is none either,
  and a marker that judges an answer ("the general public's answer is correct.") states none.
- yesno: after a marker, the first of yes / no / true / false (`not true` is no, `not false` yes);
  without one, the last "yes", or "no" standing alone, of the reply (`no copyright` is a
  determiner; `which is not true` judges a claim). Both named (`yes or no`, `true/false`, `yes and
  no`) is neither, and a `no` of `no doubt`, `no longer` and the like is no answer.
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

`copied_answer` tells whether the line an answer is read from was copied from the prompt, and
`echoed` whether the answer was copied with nothing of the reply's own to back it (the call event's `echo`).

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

from debatekit.protocols.shared.extract.confidences import (beside_confidence, confidence, labelled, probability,
                                                            stated_confidences)
from debatekit.protocols.shared.extract.markers import MARKER, boxes, model_text
from debatekit.protocols.shared.extract.numeric import as_answer
from debatekit.protocols.shared.extract.reply import ECHO_MIN_CHARS, copied_answer, echoed, extract

__all__ = ["ECHO_MIN_CHARS", "MARKER", "as_answer", "beside_confidence", "boxes", "confidence", "copied_answer", "echoed",
           "extract", "labelled", "model_text", "probability", "stated_confidences"]
