"""Loop detection: periodic tails are loops, replies that finished by themselves are not."""

import json
from pathlib import Path

import pytest

from debatekit.models import repetition
from debatekit.models.repetition import MIN_CHARS, LoopWatch, loop_start, trimmed

EXAMPLES = Path(__file__).resolve().parents[2] / "results" / "examples"
HEALTHY = ("arithmetic-single-text", "gsm8k-single-text", "commonsenseqa-single-text", "strategyqa-single-text")


def test_a_sentence_repeated_to_the_limit_is_a_loop_that_starts_at_its_first_copy():
    head = "Let me work through it.\nThe total is 3 apples.\n"
    text = head + "x = 2y + 1, so y = (x - 1) / 2. " * 20
    assert loop_start(text) == len(head)
    assert trimmed(text, len(head)) == head + "x = 2y + 1, so y = (x - 1) / 2. " * 2


def test_a_loop_that_stops_mid_copy_is_found_from_its_phase():
    text = "Intro line.\n" + ("Step: add 5 to both sides.\n" * 15)[:-7]
    start = loop_start(text)
    assert start is not None and start <= len("Intro line.\n") + 1


@pytest.mark.parametrize("text", [
    "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, "
    "31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58",
    "| a | b |\n|---|---|\n| 1 | 2 |\n" * 3 + "Answer: 4",
    "Totals:\n" + "-" * 120 + "\nAnswer: 4",  # a rule line is shorter than MIN_CHARS
    "yes " * 3 + "Answer: yes",
])
def test_text_that_is_not_periodic_at_its_end_is_not_a_loop(text):
    assert loop_start(text) is None


def test_a_short_span_needs_enough_copies_to_cover_min_chars():
    unit = "ab c"  # 4 characters: a loop only once MIN_CHARS of it are there
    assert loop_start("x" + unit * (MIN_CHARS // 4 - 1)) is None
    assert loop_start("x" + unit * (MIN_CHARS // 4 + 1)) is not None


def test_the_watch_fires_while_streaming_and_stays_fired():
    watch, fired_at = LoopWatch(), None
    pieces = ["Working. "] + ["The answer keeps being 12. "] * 40
    for n, piece in enumerate(pieces):
        if watch.feed(piece):
            fired_at = n
            break
    assert fired_at is not None and fired_at < 20  # long before the 40 copies a limit would allow
    assert watch.feed("more") and len("Working") <= watch.start <= len("Working. ")  # ". " ends both


def test_no_reply_of_the_committed_runs_that_finished_by_itself_is_a_loop():
    """The calibration the thresholds rest on: every finished reply of the 100-item runs passes."""
    checked = 0
    for name in HEALTHY:
        for line in (EXAMPLES / name / "events.jsonl").read_text().splitlines():
            event = json.loads(line)
            if event["completion_tokens"] < 512 and not event["faults"]:
                checked += 1
                assert loop_start(event["text"]) is None, event["item_id"]
    assert checked > 350


def test_thresholds_are_sane():
    assert repetition.MIN_PERIOD >= 2 and repetition.MIN_REPEATS >= 3 and MIN_CHARS >= 100
