"""Patching: every op, and every rejection reason, table-driven."""

import pytest

from debatekit.protocols.patch_debate.patching import apply_patch
from debatekit.protocols.patch_debate.types import AspectTuple, ProposedEdit, history_line

TEXT = "The pasta was great but the staff were rude and the waiter forgot us."


def tuples():
    return [AspectTuple(term="pasta", polarity="positive", confidence=0.9, span=(4, 9)),
            AspectTuple(term="staff", polarity="positive", confidence=0.4, span=(29, 34)),
            AspectTuple(term="waiter", polarity="negative", confidence=0.6, span=(53, 59))]


def edit(op, ref, value="", polarity=None, confidence=None):
    return {"op": op, "target": {"aspect_ref": ref, "polarity": polarity}, "value": value, "confidence": confidence}


def state(result):
    return [(t.term, t.polarity) for t in result.tuples]


CASES = [
    ("set_polarity", [edit("set_polarity", "staff", "negative", confidence=0.8)],
     [("pasta", "positive"), ("staff", "negative"), ("waiter", "negative")], ["applied"]),
    ("set_polarity from target polarity", [edit("set_polarity", "staff", polarity="negative")],
     [("pasta", "positive"), ("staff", "negative"), ("waiter", "negative")], ["applied"]),
    ("set_aspect_ref renames and re-locates", [edit("set_aspect_ref", "pasta", "The pasta")],
     [("The pasta", "positive"), ("staff", "positive"), ("waiter", "negative")], ["applied"]),
    ("merge_tuples keeps the destination", [edit("merge_tuples", "waiter", "staff")],
     [("pasta", "positive"), ("staff", "positive")], ["applied"]),
    ("drop_tuple", [edit("drop_tuple", "waiter")], [("pasta", "positive"), ("staff", "positive")], ["applied"]),
    ("confirm_tuple changes nothing", [edit("confirm_tuple", "pasta", polarity="positive")],
     [("pasta", "positive"), ("staff", "positive"), ("waiter", "negative")], ["applied"]),
    ("refs match case, article and punctuation insensitively", [edit("drop_tuple", "The Waiter.")],
     [("pasta", "positive"), ("staff", "positive")], ["applied"]),
]

REJECTIONS = [
    ("invalid op", [edit("flip", "pasta")], ["invalid_op"]),
    ("unknown aspect_ref", [edit("drop_tuple", "dessert")], ["unknown_aspect_ref"]),
    ("empty aspect_ref", [edit("drop_tuple", "")], ["unknown_aspect_ref"]),
    ("unknown merge destination", [edit("merge_tuples", "staff", "manager")], ["unknown_aspect_ref"]),
    ("merge into itself", [edit("merge_tuples", "staff", "staff")], ["invalid_value"]),
    ("bad polarity", [edit("set_polarity", "staff", "awful")], ["invalid_value"]),
    ("set_aspect_ref without a term", [edit("set_aspect_ref", "staff", "")], ["invalid_value"]),
    ("conflicting polarities", [edit("set_polarity", "staff", "negative"), edit("set_polarity", "staff", "neutral")],
     ["conflict", "conflict"]),
    ("drop with another edit", [edit("drop_tuple", "staff"), edit("set_polarity", "staff", "negative")],
     ["conflict", "conflict"]),
    ("set against confirm", [edit("confirm_tuple", "staff"), edit("set_polarity", "staff", "negative")],
     ["conflict", "conflict"]),
    ("different new terms", [edit("set_aspect_ref", "staff", "the staff"), edit("set_aspect_ref", "staff", "rude")],
     ["conflict", "conflict"]),
    ("duplicate", [edit("drop_tuple", "staff"), edit("drop_tuple", "Staff")], [None, "duplicate"]),
]


@pytest.mark.parametrize("name, edits, after, statuses", CASES, ids=[c[0] for c in CASES])
def test_each_op_applies(name, edits, after, statuses):
    result = apply_patch(tuples(), edits, text=TEXT)
    assert state(result) == after
    assert [e.status for e in result.log] == statuses


@pytest.mark.parametrize("name, edits, reasons", REJECTIONS, ids=[r[0] for r in REJECTIONS])
def test_each_rejection_is_logged_with_its_reason(name, edits, reasons):
    result = apply_patch(tuples(), edits, text=TEXT)
    assert [e.reason for e in result.log] == reasons
    assert len(result.log) == len(edits)
    if all(reasons):  # nothing applied: the tuples are unchanged
        assert state(result) == state(apply_patch(tuples(), []))


def test_applied_edits_record_source_confidence_and_span():
    result = apply_patch(tuples(), [edit("set_polarity", "staff", "negative", confidence=0.8),
                                    edit("set_aspect_ref", "pasta", "The pasta")], text=TEXT, source="debate")
    staff = result.tuples[1]
    assert (staff.polarity, staff.confidence, staff.source) == ("negative", 0.8, "debate")
    assert result.tuples[0].span == (0, 9)


def test_a_conflict_on_one_tuple_does_not_block_others_and_input_is_not_modified():
    before = tuples()
    result = apply_patch(before, [edit("set_polarity", "staff", "negative"), edit("set_polarity", "staff", "neutral"),
                                  edit("drop_tuple", "waiter")], agents=["epm", "tan", "cj"])
    assert state(result) == [("pasta", "positive"), ("staff", "positive")]
    assert [(e.agent, e.status) for e in result.log] == [("epm", "rejected"), ("tan", "rejected"), ("cj", "applied")]
    assert result.applied == 1 and result.rejected == 2 and result.reasons() == {"conflict": 2}
    assert len(before) == 3


def test_an_edit_on_a_tuple_merged_away_earlier_is_rejected_at_apply_time():
    result = apply_patch(tuples(), [edit("merge_tuples", "waiter", "staff"), edit("merge_tuples", "pasta", "waiter")])
    assert [e.reason for e in result.log] == [None, "unknown_aspect_ref"]
    assert "not found" in result.log[1].detail


def test_the_same_input_gives_the_same_result():
    edits = [edit("set_polarity", "staff", "negative"), edit("drop_tuple", "dessert"), edit("merge_tuples", "waiter", "staff")]
    assert apply_patch(tuples(), edits) == apply_patch(tuples(), edits)


def test_history_line_has_the_seed_format():
    e = ProposedEdit.model_validate({"op": "set_polarity", "target": {"aspect_ref": "staff"}, "value": "negative",
                                     "evidence": "were rude"})
    assert history_line("epm", e) == 'epm: set_polarity target=staff value=negative evidence="were rude"'
    e = ProposedEdit.model_validate({"op": "drop_tuple", "target": {"aspect_ref": "us", "polarity": "neutral"}})
    assert history_line("tan", e) == "tan: drop_tuple target=us/neutral value=- evidence=-"
