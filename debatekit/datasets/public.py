"""Conversion of the public benchmarks (GSM8K, StrategyQA, CommonsenseQA with ECQA) into
debatekit datasets.

Each converter reads the raw file as distributed and returns debatekit rows: the question the
agents see, the gold answer in the form the answer extractors produce (an integer, "yes"/"no",
an option letter), the options as `choices`, and every gold annotation (reference solutions,
facts, decompositions, explanations) under `metadata`, which no protocol shows to agents.
StrategyQA's facts are also copied to `evidence` for protocols that hand agents evidence.
The source id is kept in the item id. Regenerate the shipped files with
`python -m debatekit.datasets.public RAW_FOLDER` (the folder of the raw files named below).
"""

from __future__ import annotations

import csv
import json
import re
import sys
from pathlib import Path

from debatekit._base.answer_kinds import LETTERS
from debatekit.datasets import DatasetError, datasets_dir, write_jsonl

RAW_FILES = {"gsm8k": "gsm8k_test.jsonl", "strategyqa": "strategyqa_dev.json", "commonsenseqa": "ecqa_test.csv"}


def gsm8k(path: Path) -> list[dict]:
    """GSM8K test: the integer after `####` is the answer; the text before it, the reference solution.

    Items have no source id, so the id is the 0-based line number (`gsm8k-test-0000`).
    """
    rows = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").split("\n")):
        if not line.strip():
            continue
        raw = json.loads(line)
        solution, sep, final = raw["answer"].rpartition("####")
        if not sep:
            raise DatasetError(f"{path}: line {number + 1} has no '####' final answer")
        rows.append({"id": f"gsm8k-test-{number:04d}", "question": raw["question"].strip(),
                     "answer": int(final.strip().replace(",", "")),
                     "metadata": {"solution": re.sub(r"<<[^>]*>>", "", solution).strip(), "source_line": number}})
    return rows


def strategyqa(path: Path) -> list[dict]:
    """StrategyQA dev: boolean answers as "yes"/"no"; facts and decomposition kept as gold annotations."""
    rows = []
    for raw in json.loads(Path(path).read_text(encoding="utf-8")):
        rows.append({"id": f"strategyqa-{raw['qid']}", "question": raw["question"].strip(),
                     "answer": "yes" if raw["answer"] else "no", "evidence": list(raw["facts"]),
                     "metadata": {"qid": raw["qid"], "term": raw.get("term"), "description": raw.get("description"),
                                  "facts": list(raw["facts"]), "decomposition": list(raw.get("decomposition", []))}})
    return rows


def commonsenseqa(path: Path) -> list[dict]:
    """CommonsenseQA test with ECQA explanations: five options, the answer is the letter of `q_ans`."""
    rows = []
    with open(path, encoding="utf-8", newline="") as f:
        for number, raw in enumerate(csv.DictReader(f), start=2):
            options = [raw[f"q_op{k}"].strip() for k in range(1, 6)]
            if raw["q_ans"].strip() not in options:
                raise DatasetError(f"{path}: row {number}: answer {raw['q_ans']!r} is not one of the options")
            rows.append({"id": f"csqa-{raw['q_no']}", "question": raw["q_text"].strip(), "choices": options,
                         "answer": LETTERS[options.index(raw["q_ans"].strip())],
                         "metadata": {"concept": raw["q_concept"], "answer_text": raw["q_ans"].strip(),
                                      "explanation_positive": raw["taskA_pos"], "explanation_negative": raw["taskA_neg"],
                                      "explanation": raw["taskB"]}})
    return rows


CONVERTERS = {"gsm8k": gsm8k, "strategyqa": strategyqa, "commonsenseqa": commonsenseqa}


def convert(raw_folder: Path, out_folder: Path | None = None) -> dict[str, int]:
    """Convert every raw benchmark file of `raw_folder` into `out_folder`; returns items per dataset."""
    out = out_folder or datasets_dir()
    counts = {}
    for name, convert_one in CONVERTERS.items():
        rows = convert_one(Path(raw_folder) / RAW_FILES[name])
        write_jsonl(rows, out / f"{name}.jsonl")
        counts[name] = len(rows)
    return counts


if __name__ == "__main__":
    print(convert(Path(sys.argv[1] if len(sys.argv) > 1 else "../shared/datasets")))
