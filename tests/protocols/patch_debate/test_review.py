"""Stage-2 corrections: validator, ATE review, ATSA review, in that order."""

from debatekit.protocols.patch_debate.review import apply_reviews
from debatekit.protocols.patch_debate.types import AspectTuple

TEXT = "Great, another forty-minute wait for a lukewarm burger and fries."


def base():
    return [AspectTuple(term="wait", polarity="positive", confidence=0.6, span=(28, 32)),
            AspectTuple(term="burger", polarity="neutral", confidence=0.5, span=(48, 54)),
            AspectTuple(term="Great", polarity="positive", confidence=0.5, span=(0, 5))]


def test_reviews_apply_in_order_with_a_log_line_each():
    tuples, log = apply_reviews(
        base(), TEXT,
        corrections=[{"type": "FLIP_POLARITY", "aspect_ref": "wait", "value": ""},      # flips positive -> negative
                     {"type": "DROP_ASPECT", "aspect_ref": "Great"}],
        aspect_review=[{"action": "add", "aspect_ref": "fries"}, {"action": "add", "aspect_ref": "dessert"},
                       {"action": "revise_span", "aspect_ref": "burger", "value": "lukewarm burger"}],
        sentiment_review=[{"action": "flip_polarity", "aspect_ref": "lukewarm burger", "polarity": "negative",
                           "confidence": 0.8},
                          {"action": "maintain", "aspect_ref": "wait", "polarity": "positive", "confidence": 0.9},
                          {"action": "add", "aspect_ref": "fries", "polarity": "negative", "confidence": 0.7},
                          {"action": "drop", "aspect_ref": "coffee", "polarity": "neutral", "confidence": 0.5}])
    assert [(t.term, t.polarity, t.confidence, t.source) for t in tuples] == [
        ("wait", "negative", 0.9, "atsa_review"),            # validator flipped it; maintain kept negative
        ("lukewarm burger", "negative", 0.8, "atsa_review"),
        ("fries", "neutral", 0.5, "ate_review")]            # ATSA's add of a present term is rejected
    assert tuples[1].span == (39, 54)
    assert log == [
        "validator: FLIP_POLARITY 'wait' -> applied", "validator: DROP_ASPECT 'Great' -> applied",
        "ate_review: revise_span 'burger' -> applied",
        "ate_review: add 'fries' -> applied", "ate_review: add 'dessert' -> rejected (not_in_sentence)",
        "atsa_review: flip_polarity 'lukewarm burger' -> applied", "atsa_review: maintain 'wait' -> applied",
        "atsa_review: drop 'coffee' -> rejected (unknown_aspect_ref)",
        "atsa_review: add 'fries' -> rejected (already_present)"]


def test_nothing_to_review_keeps_the_base():
    tuples, log = apply_reviews(base(), TEXT)
    assert tuples == base() and log == []
