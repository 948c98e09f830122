"""The explorer, driven through its traits (no browser)."""

from debatekit.analysis.widgets import Explorer, expand_paths
from tests.sweep_helpers import make_sweep


def explorer(tmp_path):
    out = make_sweep(tmp_path)
    runs = [p for p in expand_paths([out]) if "agents3-rounds2" in p.name]
    return Explorer.from_paths(runs)


def test_explorer_follows_item_and_round(tmp_path):
    e = explorer(tmp_path)
    assert e.item_picker.options == ("q1", "q2", "q3", "q4") and e.item_picker.value == "q1"
    assert e.round_slider.max == 2 and e.round_slider.value == 1
    html = e.detail.value
    assert "round 1 of 2" in html and "agent2 thinks" in html and "&#10007;" in html  # agent2 wrong in round 1
    item = e.figures["item"]
    assert [t.name for t in item.data] == ["agent1", "agent2", "agent3", "truth 10"]
    assert list(item.data[1].y) == [11, 10]
    assert item.layout.shapes[0].x0 == 1

    e.round_slider.value = 2
    assert "round 2 of 2" in e.detail.value and "&#10007;" not in e.detail.value
    assert e.figures["item"].layout.shapes[0].x0 == 2
    assert e.figures["trajectory"].layout.shapes[0].x0 == 2

    e.item_picker.value = "q3"  # all agree in round 1: the debate stops there
    assert e.round_slider.max == 1 and e.round_slider.value == 1
    assert "truth <b>30</b>" in e.detail.value and "agreement" in e.detail.value
    assert "verdict" in e.detail.value


def test_explorer_switches_runs(tmp_path):
    out = make_sweep(tmp_path)
    e = Explorer.from_paths([out])  # a sweep folder: every point is a run
    labels = [label for label, _ in e.run_picker.options]
    assert len(labels) == 6 and any(label.startswith("single") for label in labels)
    single = next(value for label, value in e.run_picker.options if label.startswith("single"))
    e.run_picker.value = single
    assert e.round_slider.max == 1 and [t.name for t in e.figures["item"].data][0] == "agent1"
    trajectory = e.figures["trajectory"]
    assert {t.name for t in trajectory.data if t.mode == "lines+markers"} == {"agent1", "majority"}


def test_explorer_transcript_follows_the_round(tmp_path):
    e = explorer(tmp_path)
    first = e.transcript.value
    assert first.count("<b>agent") == 3 and "Other agents have answered" not in first
    assert "agent2 thinks" in first and "answer: 11" in first  # agent2's reply and its answer, round 1
    e.round_slider.value = 2
    second = e.transcript.value
    assert second.count("<b>agent") == 3 and "Other agents have answered" in second
    assert "answer: 11" not in second
