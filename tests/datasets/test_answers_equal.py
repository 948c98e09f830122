"""Answers compare as the numbers they are: whole numbers and fractions exactly, decimals within a
stated tolerance, text case-insensitively."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest

from debatekit.datasets.voting import DECIMAL_TOL, answers_equal, majority
from debatekit.records.schemas import RunConfig
from debatekit.runner import run
from tests.conftest import answer


@pytest.mark.parametrize("a, b, same", [
    (1000000001, 1000000000, False),  # once equal within a relative 1e-9
    ("1000000001", 1000000000.0, False),
    (10**400, 10**400 + 1, False),  # beyond any float: no overflow, no rounding
    (10**400, str(10**400), True),
    (Fraction(34, 17), 2, True),
    (Fraction(122, 15), 15, False),
    ("3/4", 0.75, True),
    (2.5, "2.50", True),
    (0.1 + 0.2, 0.3, True),  # decimals within DECIMAL_TOL
    (3, 3 + 2 * float(DECIMAL_TOL), False),
    ("1,000", 1000, True),
    ("1,5", 15, False), ("1,5", 1.5, False),  # a decimal comma or a list: no number, not 15
    ("1 000", 1000, True), ("12\u202f000", 12000, True),  # thousands set apart by spaces
    ("1,2,3", 123, False), ("10,20,300", 1020300, False), ("1,00,000", 100000, False),  # lists, or lakhs
    ("0,125", 125, False), ("1234,567", 1234567, False),  # no thousands: a first group of 0 or of four digits
    (True, "Yes", True),
    ("false", "no", True), ("False", False, True), ("true", "no", False),  # a truth value written as a word
    ("nan", "NaN", True),  # text, not a number
    (float("nan"), float("nan"), False),
])
def test_numbers_compare_as_what_they_are(a, b, same):
    assert answers_equal(a, b) is same and answers_equal(b, a) is same


def test_a_majority_counts_one_number_written_two_ways_once():
    assert majority([2.0, "2", 3]) == 2.0 and majority([1000000001, 1000000000, 1000000000]) == 1000000000


def test_an_answer_one_off_a_ten_digit_truth_is_scored_wrong(tmp_path, model_from):
    data = tmp_path / "big.jsonl"
    data.write_text(json.dumps({"id": "q1", "question": "What is 999999999 + 2?", "answer": 1000000001}) + "\n")
    model = model_from(lambda req: answer(1000000000))
    (debate,) = run(RunConfig(protocol="single", dataset=str(data), model=model, params={"answer_format": "json"}),
                    tmp_path / "r", progress=False).debates
    assert debate.final_answer == 1000000000 and debate.correct is False and debate.score == 0.0
