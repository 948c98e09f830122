import json

import pytest

from debatekit import datasets
from debatekit.datasets import DatasetError, arithmetic, load


def write(tmp_path, text, name="d.jsonl", mode="w"):
    path = tmp_path / name
    path.write_bytes(text) if isinstance(text, bytes) else path.write_text(text)
    return path


def test_arithmetic_generator_has_exact_integer_truth():
    rows = arithmetic(50, seed=3)
    assert len({r["id"] for r in rows}) == 50
    for r in rows:
        a, rest = r["metadata"]["expression"].split("+", 1)
        terms = r["metadata"]["expression"].replace("-", "+-").split("+")
        total = sum(int(t.split("*")[0]) * int(t.split("*")[1]) if "*" in t else int(t) for t in terms)
        assert r["answer"] == total and isinstance(r["answer"], int)
    assert arithmetic(5, seed=3) == rows[:5]


def test_shipped_arithmetic_dataset_is_the_seeded_generator_output():
    items, info = load("arithmetic")
    assert info.items == 100 and [i.model_dump(exclude={"choices", "evidence"}) for i in items] == arithmetic(100, seed=0)


@pytest.mark.parametrize("text, message", [
    ('{"id": "a", "question": "q"}\nnot json\n', "line 2 is not valid JSON"),
    ('{"id": "a"}\n', "line 1, field 'question': Field required"),
    ('{"id": "a", "question": "q", "colour": 1}\n', "line 1, field 'colour': Extra inputs"),
    ('{"id": "a", "question": "q"}\n{"id": "a", "question": "r"}\n', "line 2: duplicate id 'a'"),
    ('[1, 2]\n', "line 1 must be a JSON object"),
    ('\n\n', "has no items"),
])
def test_bad_rows_name_the_line_and_field(tmp_path, text, message):
    with pytest.raises(DatasetError, match=message):
        load(str(write(tmp_path, text)))


def test_non_utf8_file_names_the_line(tmp_path):
    path = write(tmp_path, b'{"id": "a", "question": "q"}\n{"id": "b", "question": "\xff"}\n')
    with pytest.raises(DatasetError, match="line 2 is not valid UTF-8"):
        load(str(path))


def test_unknown_dataset_lists_shipped_ones():
    with pytest.raises(DatasetError, match="unknown dataset 'nope'.*arithmetic"):
        load("nope")


def test_limit_and_info(tmp_path):
    path = write(tmp_path, "".join(json.dumps({"id": str(i), "question": "q"}) + "\n" for i in range(5)))
    items, info = load(str(path), limit=2)
    assert [i.id for i in items] == ["0", "1"] and info.items == 5
    assert "arithmetic" in datasets.available()


@pytest.mark.parametrize("row, message", [
    ({"id": "q1", "question": "Which?", "choices": [f"option {k}" for k in range(12)], "answer": "K"},
     "line 1, field 'choices': 12 choices, but options are lettered A-J (at most 10)"),
    ({"id": "q1", "question": "Which?", "choices": [f"option {k}" for k in range(11)], "answer": "A"},
     "line 1, field 'choices': 11 choices"),
    ({"id": "q1", "question": "List them.", "answer": [1, 2]}, "line 1, field 'answer': a list can never be scored"),
    ({"id": "q1", "question": "Describe.", "answer": {"x": 1}}, "line 1, field 'answer': a dict can never be scored"),
    ({"id": "q1", "question": "How much?", "answer": "NaN"}, "line 1, field 'answer': 'NaN' can never be scored"),
    ({"id": "q1", "question": "How much?", "answer": " -Infinity"}, "field 'answer': ' -Infinity' can never be scored"),
    ({"id": "q1", "question": "How much?", "answer": " "}, "line 1, field 'answer': an empty text can never be scored"),
    ({"id": "q1", "question": "  ", "answer": 3}, "line 1, field 'question': it is empty"),
    ({"id": " ", "question": "How much?", "answer": 3}, "line 1, field 'id': it is empty"),
])
def test_rows_that_cannot_be_scored_are_refused_at_load(tmp_path, capsys, row, message):
    from debatekit.cli.app import main

    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps(row) + "\n")
    with pytest.raises(DatasetError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load(str(path))
    assert main(["run", "single", "--dataset", str(path), "--model", "scripted/schema", "--out",
                 str(tmp_path / "r"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and str(path) in err and message in err


def test_ten_choices_and_a_text_truth_that_only_contains_nan_still_load(tmp_path):
    path = tmp_path / "d.jsonl"
    rows = [{"id": "q1", "question": "Which?", "choices": [f"option {k}" for k in range(10)], "answer": "J"},
            {"id": "q2", "question": "Spell it.", "answer": "nanometre"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    items, _ = load(str(path))
    assert [i.answer for i in items] == ["J", "nanometre"]


def test_a_line_separator_inside_a_question_is_text_not_a_new_row(tmp_path):
    path = tmp_path / "d.jsonl"
    rows = [{"id": "q1", "question": "first part\u2028second part", "answer": 1},
            {"id": "q2", "question": "next\u0085line\u2029end", "answer": 2}]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    items, info = load(str(path))
    assert [i.question for i in items] == ["first part\u2028second part", "next\u0085line\u2029end"] and info.items == 2
