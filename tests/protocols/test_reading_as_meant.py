"""Replies read as their authors meant them: answers written as arithmetic, declines, quotes of
other agents, cut-off replies and echoes of the prompt.

The first rows of each table are the readings found wrong in the committed study (fractions read
as their denominator, `Answer: 42 (computed in 3 steps)` read as 3, "none of them ... Answer: X"
read as an option, a marker inside another agent's quoted words); the others are written for
these tests, to the same rules.
"""

from __future__ import annotations

import json
from fractions import Fraction

import pytest

from debatekit.analysis import load_runs, round_metrics, summarize
from debatekit.datasets.voting import answers_equal
from debatekit.models import scripted
from debatekit.protocols.shared import expression
from debatekit.protocols.shared.extract import as_answer, copied_answer, echoed, extract
from debatekit.records.schemas import DebateRecord, RunConfig, Usage
from debatekit.runner import run

# --- arithmetic, exactly -----------------------------------------------------------------------

@pytest.mark.parametrize("text, first, expected", [
    ("3/4", False, Fraction(3, 4)),
    ("\\frac{122}{15}", False, Fraction(122, 15)),
    ("\\dfrac{1}{\\frac{2}{3}}", False, Fraction(3, 2)),
    ("-\\frac{1}{2}", False, Fraction(-1, 2)),
    ("18 - 6 = 12 apples", False, 12),
    ("(3 + 4) \\times 2", False, 14),
    ("2^10", False, 1024),
    ("2.5e6", False, 2_500_000),
    ("7.5e-1", False, Fraction(3, 4)),
    ("−5", False, -5),
    ("3 - -2", False, 5),
    ("$1,250.", False, 1250),
    ("42 (computed in 3 steps)", True, 42),
    ("25, which is 5 squared", True, 25),
    ("after 3 days, she has 15 left", False, 15),
    ("W = 15", False, 15),
    ("18 - Janet makes it", True, 18),  # a dash before a name is no subtraction of an unknown
    ("no number here", False, None),
])
def test_arithmetic_is_read_exactly(text, first, expected):
    assert expression.value(text, first=first) == expected


@pytest.mark.parametrize("text, formula", [
    ("2W - 15", False), ("x + 3", False), ("4 * n", False), ("Original length - 8", True), ("F - 40", True),
    ("1/0", False), ("2^1000", False), ("1e999", False),
])
def test_an_expression_in_an_unknown_or_past_the_limits_has_no_value(text, formula):
    with pytest.raises(expression.Unreadable):
        expression.value(text, formula=formula)


def test_a_word_joined_by_an_operator_is_an_unknown_only_in_a_formula():
    assert expression.value("Original length - 8") == -8  # prose: "length - 8" is a dash and a number
    with pytest.raises(expression.Unknowns):
        expression.value("Original length - 8", formula=True)


def test_an_exact_number_is_stored_as_the_answer_it_is():
    assert [as_answer(Fraction(v)) for v in ("15", "3/4", "122/15", "-1/3")] == [15, 0.75, "122/15", "-1/3"]
    assert isinstance(as_answer(Fraction(15)), int)


# --- numbers as marked ----------------------------------------------------------------------------

@pytest.mark.parametrize("reply, expected", [
    # the study's misreadings
    ("Therefore, the number of boxes is \\(\\boxed{\\frac{122}{15}}\\).", "122/15"),
    ("So the answer is \\(\\boxed{\\frac{34}{17}}\\).", 2),
    ("The total is \\boxed{2W - 15}.", None),
    ("Answer: 42 (computed in 3 steps)", 42),
    ("The answer is 25, which is 5 squared", 25),
    ("Answer: 2.5e6", 2_500_000),
    ("Answer: 3/4", 0.75),
    ("Answer: −5", -5),
    ("Therefore, there is no way to determine how much Christina will spend: she needs 1/7 of a bag.", None),
    # others like them
    ("Answer: 1000000001", 1000000001),
    ("Answer: \\boxed{-\\frac{7}{2}}", -3.5),
    ("Answer: 12 + 8 = 20", 20),
    ("Answer: 1,234 (rounded to the nearest dollar)", 1234),
    ("Answer: approximately 7.5", 7.5),
    ("3. **Answer:**\n - He runs the 400-meter hurdles in \\( \\boxed{39.6} \\) seconds.", 39.6),
    ("Since F is not given:\n\\[ \\boxed{F - 40} \\]", None),
    ("The answer cannot be determined.\n\\boxed{\\text{Not enough information}}", None),
    ("Answer: x + 3", None),
    ("So she has 2/3 of the pie.\nAnswer: \\frac{2}{3}", "2/3"),
    ("Step: 9 * 2 = 18.\nAnswer: 18", 18),
])
def test_a_marked_number_is_read_as_the_expression_it_is(reply, expected):
    assert extract("integer", reply) == expected


# A hostile reading of the first version of these rules: each reads as a person reads it.
@pytest.mark.parametrize("reply, expected", [
    ("Answer: 9 * 2 = 18", 18), ("\\boxed{9 * 2}", 18), ("Answer: (3 + 4) * 2 = 14", 14), ("**Answer:** **18**", 18),
    ("Answer:\n- 18", 18), ("Answer:\n1. 18", 18), ("Answer: 1) $18", 18), ("Answer: - 18", 18),
    ("the answer is \\boxed{600}. The confidence in this answer is high: there are no unknowns.", 600),
    ("Answer: 5 x 4 = 20", 20), ("Answer: 9 eggs x $2 = $18", 18), ("Answer: 3 weeks = 21 days", 21),
    ("Answer: 1/3 of 90 = 30", 30), ("Answer: 30% of 200 = 60", 60), ("Answer: 2 each, so 8", 8),
    ("Answer: 5m - 2m = 3m", 3), ("Answer: 60km/h", 60), ("Answer: $5/hr", 5),
    ("Answer: The temperature is -3 degrees", -3), ("Answer: it is -5", -5),
    ("\\boxed{1{,}250}", 1250), ("Answer: 1\\,250", 1250), ("Answer: 3\\frac{1}{2}", 3.5),
    # thousands set apart by spaces: plain ones only where the answer is that number alone
    ("Answer: 1 000", 1000), ("Answer: $12 000 000.", 12000000), ("\\boxed{1\u202f000}", 1000),
    ("The total is 12\u00a0000\u00a0000 dollars.", 12000000), ("Answer: 2 3", 2), ("Answer: 1\\,250", 1250),
    # in other words, plain-spaced groups may be one number or several: no number, never 12 or 0
    ("Answer: 12 000 dollars", None), ("So she pays 12 000", None), ("Answer: 2 100 gram bags", None),
    # a comma between digits that sets off no thousands is a decimal comma or a list: no number
    ("Answer: 1,5", None), ("It weighs 1,5.", None), ("Answer: (3,4)", None), ("Answer: 10,20,300", None),
    ("The years 1990,2000 show a rise.", None), ("\\boxed{(1,2)}", None), ("Answer: 1,250.50", 1250.5),
    ("The primes 2,3,5 sum to 10.", 10), ("Answer: 3, 4", 3), ("Answer: the pairs (1,2) give a total of 7", 7),
    ("Answer: 0,125", None), ("Answer: 1234,567", None), ("Answer: 2{,}5", None), ("\\boxed{1{,}000}", 1000),
    # the line states its answer before the ambiguous number: it is read
    ("Answer: 7 (= 3,5 × 2)", 7), ("Answer: 150 minutes, which makes 2,5 hours", 150),
    # a range, a time, a ratio or a date is no one number; nor is the last number of arithmetic left unworked
    ("Answer: 5-10", None), ("Answer: 5 – 10 hours", None), ("Answer: 3-4 days", None), ("Answer: $5-$10", None),
    ("Answer: 5 to 10", None), ("So it takes 5-10 minutes", None), ("Answer: 5—10", None),
    ("Answer: 20%-25%", None), ("The discount is 20%-25%.", None), ("The answer is 25% to 30%.", None),
    ("The total is 4 x 3", None), ("\\( 9 \\times 2 \\)", None), ("48 \\div 2", None),
    ("\\frac{3}{4} of the pie", None), ("The area is 120 ft^2.", None),
    ("Answer: 3:30", None), ("Answer: 2:1 ratio", None), ("The meeting ends at 10:30", None),
    ("Answer: 2023-10-05", None), ("Answer: 12/25/2023", None), ("She had 20-8 left", None), ("I get 3/4", None),
    ("Answer: \\frac{3}{2,5}", None), ("\\boxed{\\frac{3}{2,5}}", None),
    ("Answer: 20-8", 12), ("Answer: 10 - 5", 5), ("Answer: 5 - 10 = -5", -5), ("Answer: 3/4", 0.75),
    ("Answer: 12 (from 5-10)", 12), ("Step 2: 10 apples", 10), ("Answer: Step 3: 18", 18),
    # ... but a change is no range, a restatement no second answer, a label's dash no arithmetic
    ("Her score went from 80 to 92.", 92), ("The price increased by $20 to $120.", 120),
    ("Answer: The price rises from $20 to $25", 25), ("So she rounds 4.5 to 5.", 5), ("Answer: 1/2 or 0.5", 0.5),
    ("Answer: 60 or 1 hour", 60), ("The answer is $18 or 18 dollars.", 18), ("Answer: 5 or 6", 5),
    ("Answer: 16-3-4", 9), ("\\boxed{48/2/2}", 12), ("Answer: 5/1/24", None),
    ("Step 3 - 18", 18), ("Day 1 - 5 apples, Day 2 - 7 apples", 7),
    # a mixed number is one number; a box states the answer a time in the marker's line leaves unread
    ("Answer: 3 1/2 hours", 3.5), ("\\boxed{3 1/2}", 3.5), ("Answer: 3 1/2.", 3.5),
    ("The answer is: she leaves at 3:30 PM.\n\\boxed{150}", 150), ("\\boxed{12}\nFinal answer: 1,5", None),
    ("\\boxed{12}\nWait. Final answer: 5-10 minutes", None),
    # a sentence's period ends a range or a date as well; an em dash set apart is punctuation
    ("Answer: 5-10.", None), ("Answer: 5 - 10.", None), ("The answer is 2023-10-05.", None),
    ("Answer: 12/25/2023.", None), ("Answer: 18 — 9 eggs sold at $2 each", 18), ("Answer: 42 — 6 groups of 7", 42),
    ("Answer: 1 000/2", None), ("Answer: 10 000/4", None),
    # a quantity in two units is neither of its numbers; one unit and other words are no such quantity
    ("Answer: 1 hour 30 minutes", None), ("It takes 1 hour and 30 minutes.", None), ("Answer: 5 feet 6 inches", None),
    ("Answer: 3 dollars and 50 cents", None), ("Answer: 3 apples and 5 oranges", 3), ("Answer: 2 hours, 3 more", 2),
    ("Answer: 1.5 hours (90 minutes)", 1.5), ("She works 5 days a week, 8 hours a day, so 40 hours.", 40),
    ("Answer: 2 hours, 30 minutes", None), ("Answer: 1h 30m", None), ("Answer: 9 dollars, 50 cents", None),
    ("\\boxed{160 \\text{ miles and } 300 \\text{ miles}}", None), ("They drove 160 miles and 300 miles", None),
    ("So after 3 weeks 21 plants will grow.", 21), ("Answer: In 2 years 50 trees", 50), ("Answer: 40 hours 5 days a week", 40),
    ("Answer: 12 dollars and 2 apples", 12), ("Answer: 3 days and 2 nights", 3), ("Answer: 24 months 2 years", 24),
    # a box before an ambiguous last marker, or one left open, is no answer; rounding is no range
    ("\\boxed{12}\nFinal answer: 3:30 PM\nSo \\boxed{", None), ("Answer: 3.33 to 2 decimal places", 3.33),
    ("Answer: 20-5-10", 5), ("Answer: 05-10-2023", None), ("Answer: \u2212$5", -5),
    ("The answer is $\\left(\\frac{3}{4}\\right)$.", 0.75), ("\\boxed{\\left(\\frac{1}{2}\\right)}", 0.5),
    # a full-width comma is a comma
    ("Answer: 1\uff0c250", 1250), ("Answer: 1\uff0c5", None),
    # an en dash set apart by spaces may be a range's or punctuation: no number; joined, it is a minus
    ("Answer: 18 \u2013 9 eggs at $2 each", None), ("Answer: 5 \u2013 10", None), ("Answer: \u20135", -5),
    ("Answer: 20\u20138", 12), ("Answer: 10 \u2013 5 = 5", 5),
    ("The total is 18.\nThere is no other way to compute it.", 18),
    ("Neither the ducks nor the muffins change this.\nShe makes $18.", 18),
    ("> Note: eggs cost $2\nSo 9 eggs give 18.\nAnswer: 18\n(assuming all 9 sell)", 18),
])
def test_numbers_as_a_person_reads_them(reply, expected):
    assert extract("integer", reply) == expected


@pytest.mark.parametrize("reply, expected", [
    ("Answer: Yes or no? No.", "no"), ("Answer: yes/no", None), ("Answer: Yes and no", None),
    ("Answer: I cannot say yes or no", None), ("Answer: True or false: false", "no"),
    ("Answer: It is not yes, it is no", "no"), ("Answer: Not true", "no"), ("Answer: not false", "yes"),
    ("Answer: No doubt, yes", "yes"), ("Answer: yes and no one disagrees", "yes"), ("Answer: Yes, but no longer", "yes"), ("Answer: No, it is not true", "no"),
    # in prose, a `no` before a word is a determiner and `not true` judges a claim: neither answers
    ("There is no evidence.", None), ("The other side says so, which is not true.", None), ("So, no.", "no"),
    ("Yes it can, since it is large.", "yes"), ("I think the answer would be no", "no"),
    ("There was no need for a license, so yes", "yes"),
])
def test_yes_no_as_a_person_reads_it(reply, expected):
    assert extract("yesno", reply) == expected


@pytest.mark.parametrize("reply, expected", [
    ("Answer: library, since neither bank nor mall lends books", "B"),
    ("Answer: library, because you can't tell a bank to lend books", "B"),
    ("Answer: No doubt, library", "B"), ("Answer: Not surprisingly, the library", "B"),
    ("Answer: B\n\nThe answer is not A, because banks don't lend books.", "B"),
    ("Answer: B\nWhy this answer: neither a bank nor a mall lends books.", "B"),
    ("So the answer is \\boxed{B}.\nThe confidence in this answer is high; there are no unknowns.", "B"),
    ("Books are kept in a library. Neither bank nor mall keeps books.\nlibrary", "B"),
    ("Answer: not bank", None), ("Answer: not A", None), ("Answer: None", None), ("Answer: B, not A", "B"),
])
def test_options_as_a_person_reads_them(reply, expected):
    assert extract("choice", reply, ["bank", "library", "department store", "mall", "new york"]) == expected


@pytest.mark.parametrize("reply", [
    "Answer: " + "(" * 200 + "5" + ")" * 200, "\\boxed{" + "\\frac{1}{" * 100 + "2" + "}" * 100 + "}",
    "Answer: " + "2^" * 500 + "2", "Answer: 18 " + "+" * 2000, "Answer: " + "-" * 1000 + " 18",
    "Answer: " + "9" * 5000 + "^64", "Answer: " + " × ".join(["2^64"] * 300), "\\boxed{" * 5000,
    "Answer: " + "\\frac{" * 3000, "Answer: " + "9" * 5000,
])
def test_a_reply_built_to_break_the_parser_is_unreadable_not_an_exception(reply):
    found = extract("integer", reply)
    assert found is None or len(str(found)) <= 1_000  # no RecursionError, no 4,300-digit ValueError, no huge int


def test_a_fraction_compares_exactly_with_a_whole_truth():
    assert not answers_equal(extract("integer", "\\boxed{\\frac{122}{15}}"), 15)
    assert answers_equal(extract("integer", "\\boxed{\\frac{34}{17}}"), 2)
    assert answers_equal(extract("number", "Answer: 3/4"), Fraction(3, 4))


# --- declines and negations -----------------------------------------------------------------------

FRUIT = ["apple", "red", "green", "blue", "none of the above"]


@pytest.mark.parametrize("reply, expected", [
    ("After analyzing all the options, none of them correctly explain it.\n\nTherefore, the correct answer is:\n"
     "Answer: X", None),
    ("Answer: not red", None),
    ("Answer: not B", None),
    ("Answer: neither red nor blue", None),
    ("None of the options fit.\nAnswer: None", None),
    ("Answer: red, not green", "B"),
    ("It is not green. It must be red.", "B"),
    ("Answer: none of the above", "E"),  # an option whose own text declines is named
    ("The correct answer is A) apple.\n\nTherefore, the answer is: X", "A"),  # a placeholder names nothing
])
def test_a_reply_that_declines_or_negates_names_no_option(reply, expected):
    assert extract("choice", reply, FRUIT) == expected


# --- quoted words -----------------------------------------------------------------------------------

def test_a_marker_inside_another_agents_quoted_words_is_not_the_replys():
    # the study's cut-off revisions: each quoted another agent's conclusion and ran out of tokens
    reply = ('1. **Reply of another agent**:\n   - "Given the analysis, the correct answer is E) open mouth."\n'
             '2. **My reasoning**:\n   - "A) Prepare: this is related to cooking, but')
    choices = ["prepare", "clean", "wash", "grow", "open mouth"]
    assert extract("choice", reply, choices, marked_only=True) is None
    assert extract("choice", reply + '"\nI agree with it.\nAnswer: E', choices) == "E"  # its own marker
    # a short quote is the reply's own answer; a `>` line is no quote (models set their answer so)
    assert extract("choice", 'So my final line is "Answer: B"', choices) == "B"
    assert extract("choice", "> Agent 2: the answer is A.\n\nI disagree.\n\nAnswer: B", choices) == "B"
    assert extract("choice", "> **Answer: B**", choices) == "B"


# --- options that read the same ------------------------------------------------------------------

def test_options_that_read_the_same_are_one_answer():
    studio = ["building", "studio", "home", "library", "Studio "]  # CommonsenseQA offers `studio` twice
    assert extract("choice", "Answer: E", studio) == "B"
    assert extract("choice", "Answer: studio", studio) == "B"
    accents = ["cafe\u0301", "café", "Å", "\u212b"]  # NFD and NFC, the angstrom sign and the letter
    assert [extract("choice", f"Answer: {letter}", accents) for letter in "ABCD"] == ["A", "A", "C", "C"]


def test_a_run_scores_the_duplicate_option_as_the_truth(tmp_path, model_from):
    rows = [{"id": "s1", "question": "Where does a painter work?", "choices": ["building", "studio", "home", "studio"],
             "answer": "D"}]
    data = tmp_path / "dup.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    model = model_from(lambda req: "It is a studio.\nAnswer: B")
    result = run(RunConfig(protocol="single", dataset=str(data), model=model, params={"answer_format": "text"}),
                 tmp_path / "run", progress=False)
    assert result.debates[0].correct is True


# --- cut-offs and echoes in the call events ---------------------------------------------------------

def debate_of_two_rounds(tmp_path, dataset, model):
    """society_of_mind on one item, two rounds, free text: the run and its call events."""
    result = run(RunConfig(protocol="society_of_mind", dataset=str(dataset), limit=1, model=model,
                           params={"rounds": 2, "stop_on_agreement": False, "answer_format": "text"}),
                 tmp_path / "run", progress=False)
    return result, [json.loads(line) for line in (tmp_path / "run" / "events.jsonl").read_text().splitlines()]


def test_every_cut_off_reply_is_counted_in_its_event_the_run_and_the_rounds(tmp_path, arithmetic_file, model_from):
    def fn(req):
        if req.agent == "agent1":  # cut off, but its answer line came before the cut: it reads
            return scripted.CutOff("The total is 10.\nAnswer: 10\nLet me check this once more by adding")
        if req.agent == "agent2" and req.round == 2:  # cut off before any answer: a parse failure, repaired
            return scripted.CutOff("Let me think about the") if "limit" not in req.prompt else "Answer: 10"
        return "10\nAnswer: 10"

    result, events = debate_of_two_rounds(tmp_path, arithmetic_file, model_from(fn))
    cut = {(e["agent"], e["round"]): (e["cut_off"], e["faults"]) for e in events}
    assert cut[("agent1", 1)] == (1, []) and cut[("agent1", 2)] == (1, [])  # read, and still counted
    assert cut[("agent2", 2)] == (1, ["parse", "cut_off"])  # its repaired reply ended by itself
    assert cut[("agent3", 1)] == (0, [])
    usage = result.debates[0].usage
    assert (usage.cut_off, usage.cut_off_unread) == (3, 1)
    assert (result.summary.cut_off, result.summary.cut_off_unread) == (3, 1)
    metrics = round_metrics(load_runs([tmp_path / "run"])).set_index("round")
    assert list(metrics["cut_off"]) == [1, 2] and list(metrics["cut_off_unread"]) == [0, 1]


AGENT1 = ("Janet has 16 eggs and eats 3, so 13 are left.\nShe bakes with 4, leaving 9 to sell for $2 each.\n"
          "Answer: 18")


def test_an_answer_copied_from_the_prompt_with_nothing_of_its_own_is_an_echo():
    shown = [{"role": "user", "content": "Question?"}, {"role": "assistant", "content": "My own earlier reply."},
             {"role": "user", "content": f"Other agents said:\n--- reply ---\n{AGENT1}\n\nAnswer again."}]
    assert echoed("integer", AGENT1, shown)  # copied whole
    assert echoed("integer", f"I agree with the other agent.\n\n{AGENT1}", shown)  # nothing of its own answers
    assert not echoed("integer", f"{AGENT1[:-10]}\nSo I get 18 too: 9 * 2 = 18.\nAnswer: 18", shown)
    assert not echoed("integer", "9 eggs at $2 make 18.\nAnswer: 18", shown)  # `Answer: 18` alone is no copy
    assert not echoed("integer", "My own earlier reply.\nAnswer: 18", shown[:2])  # its own reply is its own


def test_an_answer_line_copied_beside_reasoning_of_its_own_is_a_copy_but_no_echo():
    shown = [{"role": "user", "content": f"Other agents said:\n--- reply ---\n{AGENT1}\n\nAnswer again."}]
    mine = "I count 16 - 3 - 4 = 9 eggs, sold at $3 each: 27."
    reply = f"{mine}\n\n{AGENT1}"  # its own working ends at 27; the answer read is the copied 18
    assert extract("integer", reply) == 18 and copied_answer(reply, shown) == mine
    assert not echoed("integer", reply, shown)
    assert copied_answer(f"{mine}\nAnswer: 27", shown) is None
    assert copied_answer(f"{mine}\nAnswer: 18", shown) is None  # `Answer: 18` alone is too short to tell a copy


def test_echoes_are_flagged_in_the_events_and_their_rate_shown_by_round(tmp_path, arithmetic_file, model_from):
    def fn(req):
        if req.round == 1:
            return AGENT1 if req.agent == "agent1" else f"I count {req.agent}: 18.\nAnswer: 18"
        if req.agent == "agent2":  # copies agent1's reply
            return AGENT1
        return "Nine eggs sell for $2 each: 18.\nAnswer: 18"

    result, events = debate_of_two_rounds(tmp_path, arithmetic_file, model_from(fn))
    assert {(e["agent"], e["round"]) for e in events if e["echo"]} == {("agent2", 2)}
    assert result.debates[0].rounds[1].answers["agent2"] == 18  # an echoed answer is still the agent's
    assert result.debates[0].usage.echoes == 1
    metrics = round_metrics(load_runs([tmp_path / "run"])).set_index("round")
    assert list(metrics["echo_rate"]) == [0, pytest.approx(1 / 3)]


def test_a_record_written_before_every_cut_off_was_counted_says_it_does_not_know():
    fields = {"run_id": "r", "item_id": "a", "protocol": "single", "status": "ok"}
    old = DebateRecord.model_validate({**fields, "debate_id": "a", "usage": {"calls": 3, "parse_failures": 2,
                                                                             "cut_off": 2}})
    assert (old.usage.cut_off, old.usage.cut_off_unread) == (None, 2)
    new = DebateRecord(**fields, debate_id="b", usage=Usage(cut_off=1))
    assert DebateRecord.model_validate_json(new.model_dump_json()).usage == Usage(cut_off=1)  # written today: kept
    debates = [old, new]
    assert summarize(debates)["cut_off"] is None and summarize(debates)["cut_off_unread"] == 2
