"""The shipped public benchmarks (GSM8K, StrategyQA, CommonsenseQA): conversion, loading, listing."""

from __future__ import annotations

import csv
import json

import pytest

from debatekit import datasets
from debatekit.cli.app import main
from debatekit.datasets import DatasetError, public as public_datasets


@pytest.mark.parametrize("name, count", [("gsm8k", 1319), ("strategyqa", 229), ("commonsenseqa", 2194)])
def test_shipped_benchmark_loads_whole_with_typed_answers(name, count):
    items, info = datasets.load(name)
    assert info.items == count and len({i.id for i in items}) == count
    for item in items:
        if name == "gsm8k":
            assert type(item.answer) is int and item.metadata["solution"] and not item.choices
        elif name == "strategyqa":
            assert item.answer in ("yes", "no") and item.evidence == item.metadata["facts"]
        else:
            assert len(item.choices) == 5 and item.answer in "ABCDE"
            assert item.choices["ABCDE".index(item.answer)] == item.metadata["answer_text"]


def test_shipped_items_keep_their_source_ids_and_gold_answers():
    gsm, _ = datasets.load("gsm8k", limit=1)
    assert (gsm[0].id, gsm[0].answer) == ("gsm8k-test-0000", 18)
    assert "<<" not in gsm[0].metadata["solution"]
    qa = {i.id: i for i in datasets.load("strategyqa")[0]}
    assert qa["strategyqa-e0044a7b4d146d611e73"].answer == "no"
    cs = {i.id: i for i in datasets.load("commonsenseqa")[0]}
    first = cs["csqa-26f7c29d5acb341f79610f7c040412a4"]
    assert first.answer == "C" and first.choices[2] == "have knowledge"


def test_converters_read_the_raw_formats(tmp_path):
    (tmp_path / "gsm8k_test.jsonl").write_text(
        json.dumps({"question": " Q1 ", "answer": "a <<2*3=6>>6 then\n#### 1,234"}) + "\n\n"
        + json.dumps({"question": "Q2", "answer": "x\n#### -5"}) + "\n", encoding="utf-8")
    (tmp_path / "strategyqa_dev.json").write_text(json.dumps(
        [{"qid": "q1", "question": "Is it?", "answer": True, "facts": ["f1", "f2"], "decomposition": ["d"]}]))
    with open(tmp_path / "ecqa_test.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["", "q_no", "q_concept", "q_text", *[f"q_op{k}" for k in range(1, 6)], "q_ans",
                         "taskA_pos", "taskA_neg", "taskB"])
        writer.writerow(["0", "abc", "c", "Where?", "a", "b, or c", "d", "e", "f", "b, or c", "line1\nline2, x", "n", "b"])
    assert public_datasets.convert(tmp_path, tmp_path) == {"gsm8k": 2, "strategyqa": 1, "commonsenseqa": 1}
    gsm = [json.loads(line) for line in (tmp_path / "gsm8k.jsonl").read_text().splitlines()]
    assert [(r["id"], r["question"], r["answer"]) for r in gsm] == [("gsm8k-test-0000", "Q1", 1234),
                                                                   ("gsm8k-test-0002", "Q2", -5)]
    assert gsm[0]["metadata"]["solution"] == "a 6 then"
    (sqa,) = datasets.load(str(tmp_path / "strategyqa.jsonl"))[0]
    assert (sqa.id, sqa.answer, sqa.evidence, sqa.metadata["decomposition"]) == ("strategyqa-q1", "yes", ["f1", "f2"], ["d"])
    (cs,) = datasets.load(str(tmp_path / "commonsenseqa.jsonl"))[0]
    assert (cs.answer, cs.choices[1], cs.metadata["explanation_positive"]) == ("B", "b, or c", "line1\nline2, x")


def test_converters_name_the_row_that_breaks(tmp_path):
    path = tmp_path / "gsm8k_test.jsonl"
    path.write_text(json.dumps({"question": "Q", "answer": "no final"}) + "\n")
    with pytest.raises(DatasetError, match="line 1 has no '####'"):
        public_datasets.gsm8k(path)
    path = tmp_path / "ecqa_test.csv"
    path.write_text(",q_no,q_concept,q_text,q_op1,q_op2,q_op3,q_op4,q_op5,q_ans,taskA_pos,taskA_neg,taskB\n"
                    "0,id,c,Q,a,b,c,d,e,zebra,p,n,b\n")
    with pytest.raises(DatasetError, match="row 2: answer 'zebra' is not one of the options"):
        public_datasets.commonsenseqa(path)


def test_datasets_command_lists_size_answer_type_and_license(capsys):
    assert main(["datasets"]) == 0
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    assert rows["gsm8k"].split()[1:4] == ["1319", "integer", "MIT"]
    assert rows["strategyqa"].split()[1:4] == ["229", "yes/no", "MIT"]
    assert rows["commonsenseqa"].split()[1:3] == ["2194", "choice"] and "CDLA-Sharing-1.0" in rows["commonsenseqa"]
    assert rows["arithmetic"].split()[1:3] == ["100", "integer"]
