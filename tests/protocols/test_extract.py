"""The free-text answer extractors on tables of replies as models write them.

`MODEL_REPLIES` holds replies of the embedded model (qwen2.5-coder-1.5b-instruct) copied verbatim
from the committed runs `results/examples/*-single-text/events.jsonl`; `data/embedded_replies.jsonl`
holds more, each with its source line and the answer read by hand: multiple choice (from
`results/examples/lit-commonsenseqa`, with the item's options; a marker-less reply such as
"Therefore, the correct answer is A) action." followed by more prose included), and integers
(from the README's arithmetic runs as committed at `1be12a2`, and `gsm8k-single-text`; debate
revisions that echo the prompt included), and yes/no (all 30 replies of
`strategyqa-single-text`, two of them cut off with no answer). Four choice replies (`note`) conclude one option in prose and write another on their
`Answer:` line; the line is the reply's answer, as the README's extraction rule says, and the rows
pin that rule down. Two integer replies (`note`) have no answer a reader can name (one copies
the prompt, one is cut off); their rows pin what the rule reads. `NUMERIC_CHOICE` is not copied
from runs: its replies were written for these tests, to options that are amounts, measures or
expressions, where an option is read by its value as well as by its text.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from debatekit.protocols.shared.extract import extract, labelled

INTEGER = [
    ("Answer: 18", 18),
    ("She sells 9 eggs and makes 9 * 2 = $18.\nAnswer: $18", 18),
    ("Total = 1,250 + 250 = 1,500\nAnswer: 1,500", 1500),
    ("The answer is 42.", 42),
    ("So the final answer is $3,000.", 3000),
    ("Step 1: 3 + 4 = 7\nStep 2: 7 * 2 = 14\nAnswer: 14 dollars", 14),
    ("**Answer:** 70000", 70000),
    ("Answer: -15", -15),
    ("3*4=12, 5*6=30; 1+12=13, 13+2=15, 15-30=-15\nAnswer: -15", -15),
    ("He runs 3 sprints 3 times a week, 60 meters each: 3*3*60 = 540 meters.", 540),
    ("Answer: 20.00", 20),
    ("Answer: 2.5", 2.5),
    ("Final answer: 64", 64),
    ("The answer is: 5", 5),
    ("Answer = 460", 460),
    ("We need 10 - 4 = 6 more.\n\nAnswer: 6\n\nThis is because 10 minus 4 is 6.", 6),
    ("The total cost is $\\boxed{260}$.", 260),
    ("answer: 1000000", 1000000),
    ("Answer: The farm has 35 animals.", 35),
    ("Answer: 12 (the number of hours)", 12),
    ("The answer is 7 apples, since 12 - 5 = 7.\nAnswer: 7", 7),
    ("To answer this we add 2 and 3 to get 5.", 5),
    ("Janet has 16 eggs. 16 - 3 - 4 = 9. 9 * $2 = $18.", 18),
    ("The result is 1,234,567.", 1234567),
    ("Answer:\n45", 45),
    ("I cannot determine the answer from the information given.", None),
    ("Answer: unknown", None),
    ("", None),
    ("Each box holds 24. 24 * 5 = 120 in total.\nAnswer: 120 cookies.", 120),
    ("Answer: 0", 0),
    # a `*` is a multiplication sign as often as markdown: 13*1 is not 131; and the last number of
    # arithmetic left unworked is no answer (not 1)
    ("The question was: What is the result of 27+12*24+28-13*1?", None),
    # a reply that ends by echoing the prompt's instruction: its placeholder `Answer: X` is no answer,
    # and the reply's \boxed{} is read before its last number
    ("343 - 13 = 320\n\nSo the result is \\(\\boxed{320}\\).\n\nThe question was: What is the result of "
     "27+12*24+28-13*1?\n\nGive your reasoning, then end with a last line `Answer: X`, where X is the number "
     "alone, without units.", 320),
    ("Answer: 12\n\nGive your reasoning, then end with a last line `Answer: X`, where X is the number alone.", 12),
    # a reply cut off in a numbered list: the list item's number is not an answer
    ("11. Cost of the eleventh glass = $5\n12. Cost of the twelfth glass = 0.60 * $5 = $3\n13. Cost of the", 3),
    ("Steps:\n1. Add the two.\n2. Multiply.", None),
]

YESNO = [
    ("Answer: yes", "yes"),
    ("Answer: No", "no"),
    ("The answer is no.", "no"),
    ("**Answer:** Yes", "yes"),
    ("Answer: yes, because the Albany in New York is larger.", "yes"),
    ("Answer: no - it never happened.", "no"),
    ("Answer: True", "yes"),
    ("Answer: False", "no"),
    ("Final answer: NO", "no"),
    ("So the answer is yes.", "yes"),
    ("Yes, it could: the facts agree.\nAnswer: yes", "yes"),
    ("No fish can live there... but some do.\nAnswer: yes", "yes"),
    ("Is it possible? No. The numbers do not add up, so no.", "no"),
    ("At first I thought yes, but the population is smaller, so no.", "no"),
    ("Step 1: Albany GA has 75,000 people.\nStep 2: Albany NY has 100,000.\nTherefore, no.", "no"),
    ("The answer: yes", "yes"),
    ("answer:no", "no"),
    ("Answer:\nYes", "yes"),
    ("It is not known for sure.", None),
    ("Answer: maybe", None),
    ("", None),
    ("Nobody knows. Yesterday it rained.", None),
    ("The answer is yes; there is no doubt.", "yes"),
    ("Answer: Yes.\n\nExplanation: no one disputes it.", "yes"),
    ("I would say yes.", "yes"),
    ("Hmm, no.", "no"),
    ("**No.** The Great Wall is not visible from the Moon.", "no"),
    ("Yes! Answer: no", "no"),
    ("The answer is No, since the dates do not overlap.", "no"),
    ("Answer: **yes**", "yes"),
    ("So it could not.\nAnswer: no\n\nThen end with a last line `Answer: X`, where X is yes or no.", "no"),
    ("The answer is \\boxed{No}.\nEnd with `Answer: X`, where X is yes or no.", "no"),
]

CHOICES = ["greedy", "worry", "have knowledge", "take charge", "boss"]
CHOICE = [
    ("Answer: C", "C"),
    ("Answer: (C)", "C"),
    ("Answer: C) have knowledge", "C"),
    ("Answer: C. have knowledge", "C"),
    ("The answer is C.", "C"),
    ("**Answer:** E", "E"),
    ("Answer: option B", "B"),
    ("Answer: have knowledge", "C"),
    ("Answer: Have Knowledge", "C"),
    ("Answer: take charge", "D"),
    ("Answer: boss", "E"),
    ("answer: c)", "C"),
    ("Answer: a boss", "E"),
    ("Final answer: D", "D"),
    ("The correct option is (D) take charge.", "D"),
    ("I pick option A because greedy people want more.", "A"),
    ("A) greedy is wrong, B) worry is wrong, so C) have knowledge.", "C"),
    ("They would look for people who have knowledge.", "C"),
    ("Answer: C\n\nA) greedy is not it.", "C"),
    ("Answer: F", None),
    ("Answer: none of these", None),
    ("", None),
    ("A project leader wants results.", None),
    ("Answer: (E) boss", "E"),
    ("Answer:\nB", "B"),
    ("The answer is: have knowledge", "C"),
    ("Answer: E.", "E"),
    ("Answer: D - take charge", "D"),
    ("The best fit is (B).", "B"),
    ("Answer: b) worry", "B"),
    ("Therefore, the answer is: A\n\nThe question was: ...\nA) greedy\nE) boss\n\nGive your reasoning, then "
     "end with a last line `Answer: X`, where X is the letter of one option.", "A"),
]

# Options that are amounts, measures or expressions, and replies written for these tests in the forms
# models use: reasoning whose numbers include wrong options, then an answer line, a box or a last line.
# They are read by text (currency, units, radicals, percents, signs) or by value (`78.2` is `$78.20`,
# `0.75` is `3/4`), and left unread (None) where the answer names two options, or a value two share.
PRICES = ["$61", "$65", "$67.40", "$70", "$78.20"]  # the price before a 22% discount took it to $61
TWINS = ["$61", "$67.4", "$67.40", "$70", "$78.20"]  # two options of one value
LENGTHS = ["8 cm", "10 cm", "12 cm", "14 cm"]
RADICALS = ["5(√3 + 1)", "5√3", "10", "2√2", "√2"]
PERCENTS = ["15%", "20%", "25%", "30%"]
SIGNED = ["-3", "-1", "1", "3"]
NUMERIC_CHOICE = [
    (PRICES, "The original price of the item is $78.20.", "E"),
    (PRICES, "Answer: $78.20", "E"),
    (PRICES, "Answer: 78.2", "E"),
    (PRICES, "Therefore the answer is \\boxed{78.2}", "E"),
    (PRICES, "The sale price is $61, which is 78% of the original price p.\n0.78p = 61, so p = 61 / 0.78 = 78.205...\n"
             "Checking: 0.78 × 78.20 = 60.996, which rounds to $61.\n\nAnswer: $78.20", "E"),
    (PRICES, "Let p be the original price.\n0.78p = 61\np = 61 / 0.78\np = 78.2", "E"),  # a value on the last line
    (PRICES, "At first glance 61 + 9 = 70, but the 22% is taken from the original price,\n"
             "so 61 is 78% of it: 61 / 0.78 = 78.2.\n**Final answer:** 78.20 dollars", "E"),
    (PRICES, "The discount is 22%, so the price was $61 / 0.78.\n(A price of $70 would be a discount of only 13%.)\n"
             "So the original price was $78.20.", "E"),
    (PRICES, "61 / 0.78 = 78.2\nAnswer: (E) $78.20", "E"),  # a letter is read first
    (PRICES, "Answer: E) 78.2", "E"),
    (PRICES, "Answer: $67.4", "C"),  # $67.40 with one decimal
    (PRICES, "Answer: 78.2000001", "E"),  # equal within REL_TOL
    (PRICES, "Answer: $78.205", None),  # not within it, and `$78.20` is not read inside `$78.205`
    (PRICES, "It depends on whether the tax was added before the discount.\nAnswer: $61 or $65", None),
    (PRICES, "Both could be right.\nAnswer: A or B", None),
    (PRICES, "Answer: (A) $61 or (B) $65", None),
    (PRICES, "The price went up by 17.20.\nAnswer: $78.20, up from $61", None),  # two options in digits
    (TWINS, "67.4 × 1 = 67.4\nAnswer: $67.40", None),
    (TWINS, "Answer: 67.4", None),
    (TWINS, "Answer: E", "E"),
    (["$1,200", "$1,250", "$12,500", "$125"], "Each of the 5 payments is $250, so 5 × 250 = 1250.\nAnswer: 1250", "B"),
    (["$1,200", "$1,250", "$12,500", "$125"], "5 × $250 = $1,250 in total.\nAnswer: $1,250.", "B"),
    (["€40", "€45", "€50"], "Nine tickets at €5 each cost 9 × 5 = 45.\nAnswer: 45 euros", "B"),
    (LENGTHS, "The legs are 6 cm and 8 cm.\nBy Pythagoras, c² = 36 + 64 = 100, so c = 10.\nAnswer: 10 cm", "B"),
    (LENGTHS, "The perimeter is 2 × (2 + 4) = 12.\nAnswer: 12", "C"),
    (LENGTHS, "A square with a perimeter of 48 cm.\nSide = 48 / 4 = 12\n\nAnswer: 12cm", "C"),
    (["12 cm", "12 m", "120 cm", "1.2 m"], "Answer: 12", None),  # 12 what?
    (["12 cm", "12 m", "120 cm", "1.2 m"], "So the rope is 12 metres long.\nAnswer: 12 m", "B"),
    (RADICALS, "By the law of sines, x = 10 sin 75° / sin 45°.\nsin 75° = (√6 + √2)/4 and sin 45° = √2/2,\n"
               "so x = 5(√6 + √2)/√2 = 5(√3 + 1).\nAnswer: 5(√3+1)", "A"),
    (RADICALS, "The diagonal of a square of side 2 is $2\\sqrt{2}$.\n\n"
               "Therefore the answer is $\\boxed{2\\sqrt{2}}$", "D"),
    (RADICALS, "The side is 1, so the diagonal is √(1 + 1).\nAnswer: √2", "E"),
    (RADICALS, "The height is 10 sin 60° = 10 · √3/2.\nAnswer: 5\\sqrt{3}", "B"),
    (["1/4", "1/2", "3/4", "1"], "Three of the four marbles are red, so P(red) = 3/4 = 0.75.\nAnswer: 0.75", "C"),
    (["0.25", "0.5", "0.75", "1"], "P = 3 / 4\n\nAnswer: \\frac{3}{4}", "C"),
    (["0.25", "0.5", "0.75", "1"], "One of the four outcomes fails.\nAnswer: 3/4", "C"),
    (["1/2", "0.5", "2", "3/4"], "Half of them: 1/2.\nAnswer: 0.5", None),  # 0.5 and 1/2 are one value
    (["1/2", "0.5", "2", "3/4"], "Answer: 1/2", None),
    (PERCENTS, "The discount is 15 out of 60, so 15/60 = 0.25.\nAnswer: 25%", "C"),
    (PERCENTS, "15 / 60 = 0.25, a quarter.\nAnswer: 25", "C"),
    (PERCENTS, "15 / 60 = 0.25\nAnswer: 0.25", None),  # a percent is not converted
    (PERCENTS, "The rate went from 20% to 25%.\nThe rise is 25 - 20 = 5 points, or 5 / 20 of the old rate.\n"
               "So it is 25%.", "C"),
    (SIGNED, "Solving 2x + 6 = 0 gives 2x = -6.\nDividing by 2: x = -3.\nAnswer: -3", "A"),
    (SIGNED, "x + 4 = 1\nAnswer: x = −3", "A"),
    (SIGNED, "3 - 6 = -3 is the other root, but x must be positive, so x = 3.\nAnswer: 3", "D"),
    (SIGNED, "Plugging in, (−3)² + 2(−3) − 3 = 0, so x = −3.", "A"),
    # word options keep the longest mention, unless two are named as alternatives
    (["rio de janeiro", "new york", "town", "germany", "hotel"], "Answer: the town known for disco is Rio de Janeiro",
     "A"),
    (CHOICES, "Answer: have knowledge and take charge", None),
]

# Replies of the embedded model, verbatim from results/examples/<dataset>-single-text/events.jsonl;
# the expected answer is the one a reader takes from the reply.
MODEL_REPLIES = [
    ("integer", None, 'To determine the total number of bolts of fiber needed for the robe, we need to follow these steps:\n\n1. **Calculate the amount of white fiber needed:**\n   The problem states that the robe takes half as much white fiber as blue fiber. Since the robe takes 2 bolts of blue fiber, we can calculate the amount of white fiber as follows:\n   \\[\n   \\text{White fiber} = \\frac{1}{2} \\times 2 = 1 \\text{ bolt}\n   \\]\n\n2. **Calculate the total number of bolts of fiber needed:**\n   Now, we add the number of bolts of blue fiber to the number of bolts of white fiber to find the total number of bolts:\n   \\[\n   \\text{Total bolts} = 2 + 1 = 3\n   \\]\n\nTherefore, the total number of bolts of fiber needed is \\(\\boxed{3}\\).',  # gsm8k-test-0001
     3),
    ("integer", None, 'To determine the total number of meters James runs in a week, we need to follow these steps:\n\n1. Calculate the distance James runs in one sprint.\n2. Determine the distance James runs in one week by multiplying the distance of one sprint by the number of sprints he runs each week.\n3. Calculate the distance James runs in one week by multiplying the distance of one sprint by the number of sprints he runs each week.\n\nStep 1: Distance in one sprint\nJames runs 60 meters each sprint.\n\nStep 2: Distance in one week\nJames runs 3 sprints each week. Therefore, the distance he runs in one week is:\n\\[ 60 \\text{ meters/sprint} \\times 3 \\text{ sprints/week} = 180 \\text{ meters/week} \\]\n\nStep 3: Distance in one week\nWe have already calculated that James runs 180 meters in one week.\n\nTherefore, the total number of meters James runs in a week is \\(\\boxed{180}\\).',  # gsm8k-test-0003
     180),
]


EMBEDDED = [json.loads(line) for line in (Path(__file__).parent / "data" / "embedded_replies.jsonl").open()]


@pytest.mark.parametrize("row", EMBEDDED, ids=[r["source"].split("/")[-2] + ":" + r["source"].rsplit(":", 1)[1]
                                         for r in EMBEDDED])
def test_extractors_on_embedded_replies_collected_from_runs(row):
    assert extract(row["kind"], row["reply"], row["choices"]) == row["expected"]


@pytest.mark.parametrize("kind", ["choice", "integer", "yesno"])
def test_the_collected_replies_cover_each_answer_type_collected(kind):
    assert sum(r["kind"] == kind for r in EMBEDDED) >= 30


@pytest.mark.parametrize("kind, choices, reply, expected", MODEL_REPLIES)
def test_extractors_on_the_embedded_models_replies(kind, choices, reply, expected):
    assert extract(kind, reply, choices) == expected


@pytest.mark.parametrize("reply, expected", INTEGER)
def test_integer_extractor(reply, expected):
    assert extract("integer", reply) == expected


@pytest.mark.parametrize("reply, expected", YESNO)
def test_yes_no_extractor(reply, expected):
    assert extract("yesno", reply) == expected


@pytest.mark.parametrize("reply, expected", CHOICE)
def test_choice_extractor(reply, expected):
    assert extract("choice", reply, CHOICES) == expected


@pytest.mark.parametrize("choices, reply, expected", NUMERIC_CHOICE)
def test_choice_extractor_on_options_that_are_numbers_or_expressions(choices, reply, expected):
    assert extract("choice", reply, choices) == expected


def test_a_reply_cut_off_is_read_only_where_it_states_its_answer():
    cut = "11. Cost of the eleventh glass = $5\n12. Cost of the twelfth glass = 0.60 * $5 = $3\n13. Cost of the"
    assert extract("integer", cut) == 3 and extract("integer", cut, marked_only=True) is None
    assert extract("integer", "So far 60.\nAnswer: 64\n\nCheck: 6", marked_only=True) == 64
    assert extract("choice", "Both $61 and", PRICES, marked_only=True) is None


def test_tables_have_at_least_30_replies_per_answer_type():
    assert min(len(INTEGER), len(YESNO), len(CHOICE)) >= 30 and MODEL_REPLIES


@pytest.mark.parametrize("reply, expected", [
    ("The capital is Paris.\nAnswer: Paris", "Paris"),
    ("Answer: \\boxed{Lyon}.", "Lyon"),
    ("So it is \\boxed{Nice}", "Nice"),
    ("Paris, surely.\n\nFinal answer is Marseille.", "Marseille"),
    ("Just a line\nand the last one.", "and the last one"),
    ("I think so.\nAnswer: ", None),  # a marker with nothing after it gives no answer, not the text "Answer:"
    ("Paris, I think.\n**Final answer:**", None),
    ("Answer:\nParis", "Paris"),
])
def test_text_extractor(reply, expected):
    assert extract("text", reply) == expected


@pytest.mark.parametrize("reply, label, expected", [
    ("Preference: yes\nSide: negative\nAnswer: B", "side", "negative"),
    ("**Confidence:** 0.8.", "confidence", "0.8"),
    ("Confidence: 0.2\nsome more\nconfidence: 0.9", "Confidence", "0.9"),  # the last one counts
    ("Supported Side: Affirmative", "side", "Affirmative"),
    ("- `Preference`: no", "preference", "no"),
    ("I have no confidence in this.", "confidence", None),  # a word, not a labelled line
    ("Answer: C", "confidence", None),
])
def test_labelled_lines(reply, label, expected):
    assert labelled(reply, label) == expected


@pytest.mark.parametrize("reply, expected", [
    ("so B\nAnswer: B\nConfidence: 0.8", 0.8),
    ("Answer: B\n**Confidence level:** 85%", 0.85),
    ("Answer: B\nconfidence = 1", 1.0),
    ("Answer: B\nConfidence: 90", 0.9),           # a bare number above 1 is a percent
    ("Confidence: 0.2\nthen more\nConfidence: 0.7\nAnswer: B", 0.7),  # the last one stated
    ("Answer: B\nConfidence: high", None),
    ("Answer: B\nConfidence: 250", None),         # out of range: not a confidence
    ("Answer: B", None),
])
def test_confidence_extractor(reply, expected):
    from debatekit.protocols.shared.extract import confidence

    assert confidence(reply) == expected


# Replies of the embedded model asked for an answer and a confidence (reconcile on GSM8K), copied
# verbatim from the study's first reconcile run, answers and confidences read by hand. Each states
# its confidence in words of its own after its answer, and read without `confident` each gave its
# confidence (1.0, 0.33, the 0 of 0.0) as its answer. `note`: what the rule reads
# where a reader by hand would read otherwise, or why a number is not read.
CONFIDENT = [json.loads(line) for line in (Path(__file__).parent / "data" / "confident_replies.jsonl").open()]


@pytest.mark.parametrize("row", CONFIDENT, ids=[r["source"].split(":")[1].split()[0] for r in CONFIDENT])
def test_a_reply_asked_for_a_confidence_is_read_beside_it(row):
    from debatekit.protocols.shared.extract import confidence

    assert extract(row["kind"], row["reply"], confident=True) == row["answer"]
    assert confidence(row["reply"]) == row["confidence"]


def test_without_reading_beside_the_confidence_those_replies_answer_their_confidence():
    misread = [extract(r["kind"], r["reply"]) for r in CONFIDENT]
    assert all(a in (0, 1, 0.33) or a == r["answer"] for a, r in zip(misread, CONFIDENT))
    # all but one: `Answer: 600 Confidence: 0.0` is read as the number its answer line opens with
    assert [r["answer"] for a, r in zip(misread, CONFIDENT) if a == r["answer"]] == [600]


@pytest.mark.parametrize("reply, expected", [
    ("So 4 + 5 = 9.\n\nThe confidence is 1.0.", 9),                       # a paragraph of its own
    ("Total: 12.\nAnswer: 12\nConfidence: 0.9", 12),                        # the asked-for form
    ("Total: 12.\nConfidence: 0.9\nAnswer: 12", 12),                        # an answer line after it is kept
    ("Answer: 12 (confidence 0.95)", 12),                                   # the line up to the mention
    ("So 7 apples.\nI am confident that the answer is 7.", 7),
    ("I am confident that the answer is \\boxed{3}.", 3),                 # nothing outside it: the whole reply
    ("It is 40.\n\nHow confident am I? \\boxed{0.8}", 40),
    ("The answer is 260, with a confidence of 85%.", 260),                  # a percent as written
    ("There is 1 apple left.\nAnswer: 1\nConfidence: 1.0", 1),               # an answer that is a confidence's number
    # a number read outside confidence talk stays, even where a mention of confidence comes first
    ("First, 3+4=7; I'm confident of that. Then 7*2=14, so the answer is 14.\nConfidence: 0.9", 14),
    ("Agent 2 said 360 with a confidence of 0.7, but 160 + 80 + 20 = 260, so the answer is 260.\nConfidence: 0.9", 260),
    ("I'm confident.\r\n\r\nThen 3 + 4 = 7, so the answer is 7.\r\nConfidence: 1.0", 7),
])
def test_reading_beside_the_confidence(reply, expected):
    assert extract("integer", reply, confident=True) == expected


@pytest.mark.parametrize("kind, reply, expected", [
    ("choice", "One agent chose (B) with confidence 0.6, but 6*3 = 18, so the answer is (C).\nConfidence: 0.9", "C"),
    ("yesno", "Agent 1 said no with confidence 0.6. But bats fly, so the answer is yes.\nConfidence: 0.9", "yes"),
])
def test_an_answer_that_is_no_number_is_read_as_before(kind, reply, expected):
    assert extract(kind, reply, ["A", "B", "C"], confident=True) == extract(kind, reply, ["A", "B", "C"]) == expected


def test_beside_confidence_keeps_other_paragraphs_and_answer_lines_whole():
    from debatekit.protocols.shared.extract import beside_confidence

    reply = "Step: 3 + 4 = 7.\n\nMy confidence is high: 1.0\n**Answer: 7**, confidence 1.0\nso 1.0\n\nDone."
    assert beside_confidence(reply) == "Step: 3 + 4 = 7.\n\nMy \n**Answer: 7**, \n\nDone."


@pytest.mark.parametrize("reply, expected", [
    ("Hence, the confidence of our answer is \\(1.0\\).", 1.0),
    ("this answer is very likely to be correct, with a high confidence score of 0.9.", 0.9),
    ("the answer is \\( \\boxed{18} \\), and the confidence is \\( \\boxed{0.75} \\).", 0.75),
    ("I have a confidence level of 95% in it.", 0.95),
    ("My confidence that the answer is 12 is high.", None),  # 12 is no 0-1 number and no percent
    ("The confidence in step 2 is 1.0.", None),               # a digit between: another sentence's number
    ("The confidence is high. It is 1.0 km away.", None),     # a sentence's end between
    ("The confidence in this answer is 3.33.\nConfidence: 0.4", 0.4),
    ("My confidence in the value of 0.25 as the discount is high.", None),  # 0.25 is what it is sure of
    ("a confidence interval of 0.5 to 0.9", None),
])
def test_a_confidence_stated_in_the_models_own_words(reply, expected):
    from debatekit.protocols.shared.extract import confidence

    assert confidence(reply) == expected


# A marker whose words after it name no answer ("so the answer is correct") does not hide an
# earlier one that does. The first reply is the 0.5B judge's, verbatim, in the weak-judge sweep's
# blind_judge run (item strategyqa-c91eafafed5a8f80bb5a), read as no verdict before this rule.
JUDGE_REPLY = ("Answer: B\nProbability: 0.5\nExplanation: Miami is indeed a city on the American West Coast. "
               "It is located in the western part of the United States, specifically in the Atlantic Ocean. "
               "The Atlantic Ocean is a major feature of the United States, and Miami is a significant part of "
               "it. Therefore, the answer is correct.")


@pytest.mark.parametrize("kind, choices, reply, expected", [
    ("choice", ["no", "yes"], JUDGE_REPLY, "B"),
    ("integer", None, "The answer is 42.\nCheck: 40 + 2 = 42 and 42 - 2 = 40, so the answer is right.", 42),
    ("yesno", None, "Answer: no\nI am sure the answer is right.", "no"),
    ("choice", CHOICES, "Answer: C\nThe answer is clear.\nAnswer: E", "E"),  # the last one that names one
    ("integer", None, "The answer is unclear to me.", None),  # no marker names one, and no number at all
])
def test_an_earlier_marker_is_read_when_the_last_names_no_answer(kind, choices, reply, expected):
    assert extract(kind, reply, choices) == expected


def test_the_judges_verdict_is_read_past_a_closing_explanation():
    from debatekit.protocols.judged_debate.judging import verdict_model

    verdict = verdict_model(("no", "yes"), "text").from_text(JUDGE_REPLY)
    assert verdict.answer == "B" and verdict.probability == 0.5


def test_scripted_schema_states_a_confidence_only_when_asked():
    from debatekit.models.scripted import Request, respond
    from debatekit.protocols.shared.answers import AnswerSpec

    spec = AnswerSpec("yesno", "text")
    asked = respond("schema", Request(model="schema", messages=[{"role": "user", "content": spec.closing(True)}]))
    plain = respond("schema", Request(model="schema", messages=[{"role": "user", "content": spec.closing()}]))
    assert spec.confident_output.from_text(asked).confidence is not None
    assert "Confidence" not in plain and spec.output.from_text(plain).answer in ("yes", "no")


# Replies of the embedded model from the GSM8K study, copied verbatim, answers read by hand. `set
# against`: the reply ends on a number it sets against its answer ("35 hours, not 45 hours as they
# claimed"), which was read as the answer (`recorded`). `judged`: the reply judges another's answer
# ("The general public's answer is correct."), a marker that states no answer; item 6's reply read
# 20 from that sentence before its `\boxed{260}`, and item 34's must keep its box (23) although an
# earlier "the other agent's answer:" is then the last marker that states something.
STUDY_REPLIES = [json.loads(line) for line in (Path(__file__).parent / "data" / "judged_or_set_against.jsonl").open()]


@pytest.mark.parametrize("row", STUDY_REPLIES, ids=[r["source"].split("/")[3] + ":" + r["source"].split(":")[1].split()[0]
                                                    for r in STUDY_REPLIES])
def test_a_number_set_against_the_answer_and_a_judging_marker_are_not_the_answer(row):
    assert extract(row["kind"], row["reply"]) == row["answer"]


def test_without_the_two_rules_those_replies_read_as_recorded(monkeypatch):
    from debatekit.protocols.shared.extract import markers, numeric

    never = re.compile(r"(?!)(x)")  # matches nothing; one group, as NEGATED's substitution needs
    for reader, rule in ((numeric, "NEGATED"), (numeric, "SET_AGAINST"), (markers, "JUDGED")):
        monkeypatch.setattr(reader, rule, never)
    read = [extract(r["kind"], r["reply"]) for r in STUDY_REPLIES]
    assert sum(r["recorded"] != r["answer"] for r in STUDY_REPLIES) == len(STUDY_REPLIES) - 1  # item 34: a control
    # the four whose marker's first sentence opens with the answer ("Answer: 70 ..., not 30") are read by
    # that rule alone; the others read as recorded
    assert [a == r["answer"] != r["recorded"] for a, r in zip(read, STUDY_REPLIES)].count(True) == 4
    assert all(a in (r["recorded"], r["answer"]) for a, r in zip(read, STUDY_REPLIES))


@pytest.mark.parametrize("kind, choices, reply, expected", [
    ("integer", None, "So she pays 12 dollars, not 15 dollars.", 12),
    ("integer", None, "Answer: 40, and not 45", 40),
    ("number", None, "The speed is 7.5 km/h, not 8.", 7.5),
    ("integer", None, "He did not 3 times check; in total he ran 24 laps.", 24),  # "not" after no number: as before
    ("integer", None, "Your answer is wrong: 12 is too low.\nAnswer: 18", 18),
    ("integer", None, "Agent 2's answer is incorrect. The total is 18.", 18),  # no other marker: the whole reply
    ("integer", None, "The answer is 18, which is correct.", 18),
    ("integer", None, "The answer is right: 42.\nCheck: 42 / 6 = 7", 42),  # a verdict with its number
    ("number", None, "The answer is accurate to the nearest dollar: $42.\nThat is 6 * 7.", 42),
    ("integer", None, "Your answer is correct, 18.\nCheck: 3 + 15 = 18, yes; 2 bags left over.", 18),
    ("integer", None, "Answer: 35. The other agent got 45, not 35.", 35),  # a marker's own number first
    ("integer", None, "The total is 18 (not 12).", 18),
    ("integer", None, "So it is 3, not 4 or 5.", 3),
    ("choice", ["left", "right", "up"], "The answer is: right", "B"),  # an option named like a verdict
    ("yesno", None, "The other agent's answer is correct, so yes.", "yes"),
])
def test_set_against_and_judged_by_hand(kind, choices, reply, expected):
    assert extract(kind, reply, choices) == expected


@pytest.mark.parametrize("reply, choices, expected", [
    ("Answer: 2,5", ["2", "5", "25"], None),  # a decimal comma or a list names no option by value
    ("Answer: 1,2500", ["1", "2500", "1,250"], None), ("Answer: 1,250", ["$1,250", "$125", "$250"], "A"),
    ("Answer: 0,125", ["125", "0.125", "12"], None),
])
def test_a_number_joined_by_a_comma_that_sets_off_no_thousands_names_no_option(reply, choices, expected):
    assert extract("choice", reply, choices) == expected


@pytest.mark.parametrize("kind, truth, fits", [
    ("yesno", 330, False), ("yesno", "yes", True), ("yesno", True, True), ("yesno", "maybe", False),
    ("integer", "Paris", False), ("integer", 18, True), ("number", "1,250", True), ("number", 2.5, True),
    ("integer", True, False), ("text", 18, True), ("number", "3/4", True), ("yesno", "false", True),
    ("yesno", " True ", True),
])
def test_an_answer_kind_that_can_never_equal_the_truth_is_refused(kind, truth, fits):
    """`--set answer=yesno` on integer truths would score every item wrong without a word."""
    from types import SimpleNamespace

    from debatekit.protocols.shared.answers import spec_for

    item = SimpleNamespace(id="q1", answer=truth, choices=[])
    if fits:
        assert spec_for(item, kind).kind == kind
    else:
        with pytest.raises(ValueError, match=f"has the truth {truth!r}, which no answer of kind {kind} can equal"):
            spec_for(item, kind)


@pytest.mark.parametrize("truth", [True, "yes", "No", "false", " TRUE "])
def test_a_truth_value_written_as_a_word_asks_for_yes_or_no(truth):
    """A dataset's `"false"` is a yes/no truth, as its `false` is: asked as text, `No.` would score wrong."""
    from types import SimpleNamespace

    from debatekit.datasets.voting import answers_equal
    from debatekit.protocols.shared.answers import spec_for

    assert spec_for(SimpleNamespace(id="q1", answer=truth, choices=[])).kind == "yesno"
    said = extract("yesno", "It cannot be.\nAnswer: no")
    assert answers_equal(said, truth) is (str(truth).strip().lower() in ("no", "false"))


def test_a_truth_that_is_no_text_or_number_is_asked_as_text_not_compared_to_yes():
    from types import SimpleNamespace

    import numpy as np

    from debatekit.protocols.shared.answers import spec_for

    assert spec_for(SimpleNamespace(id="q1", answer=np.array([1, 2]), choices=[])).kind == "text"
