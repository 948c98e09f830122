"""Datasets: JSONL files of items, validated row by row; the arithmetic task generator.

A dataset is a shipped name (a file `datasets/NAME.jsonl` in the repository, listed by
`debatekit datasets`) or the path of any JSONL file. Each line is one JSON object validated
against the protocol's item model (by default `Item`); a row that does not fit raises a
`DatasetError` naming the file, the line and the field. So does a truth no answer could ever
equal (NaN or infinite; a multiple-choice answer that is not one of its option letters), which
would otherwise be counted as a wrong answer on every run; `"answer": null` means no truth.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from debatekit._base.answer_kinds import LETTERS
from debatekit._base.validation import first_error
from debatekit.records.schemas import DatasetInfo
from debatekit.records.trace import item_folder_name


NOT_NUMBERS = {"nan", "+nan", "-nan", "inf", "+inf", "-inf", "infinity", "+infinity", "-infinity"}
"""Truths written as text that no answer can equal."""


class DatasetError(ValueError):
    """A dataset cannot be used; the message names the file, line and field."""


class Item(BaseModel):
    """One question of a dataset (the common fields; protocols may extend this model)."""

    model_config = ConfigDict(extra="forbid")

    id: str
    """Unique id within the dataset."""
    question: str
    """The question put to the agents."""
    answer: Any = None
    """Ground truth, if the task has one (an int for arithmetic, "yes"/"no", an option letter)."""
    choices: list[str] = []
    """Option texts of a multiple-choice question; the answer is a letter (A for the first)."""
    evidence: list[str] = []
    """Passages a protocol may hand its agents as evidence (question-answering protocols do not)."""
    metadata: dict[str, Any] = {}
    """Anything else the researcher wants to carry along (not shown to agents)."""


def datasets_dir() -> Path:
    """Folder of shipped datasets: $DEBATEKIT_DATASETS, else the checkout's `datasets/` (an
    editable install), else the copy a wheel installs as `debatekit/_datasets`."""
    if os.environ.get("DEBATEKIT_DATASETS"):
        return Path(os.environ["DEBATEKIT_DATASETS"])
    here = Path(__file__).resolve().parent.parent  # debatekit/
    checkout = here.parent / "datasets"
    return checkout if checkout.is_dir() else here / "_datasets"


def available() -> list[str]:
    """Names of the shipped datasets."""
    folder = datasets_dir()
    return sorted(p.stem for p in folder.glob("*.jsonl")) if folder.is_dir() else []


def catalog() -> dict[str, dict]:
    """Answer type, license and source of each shipped dataset (`catalog.json` beside them)."""
    path = datasets_dir() / "catalog.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def resolve(name_or_path: str) -> Path:
    """Path of a dataset given its shipped name or a file path."""
    return locate(name_or_path, ".jsonl", "dataset", available())


def locate(name_or_path: str, suffix: str, what: str, shipped_names: list[str]) -> Path:
    """A file given by its path or by the name of a shipped `datasets/NAME{suffix}`.

    Raises:
        DatasetError: a path that is not a file, or a name that is not shipped (naming `what`
            and the `shipped_names`).
    """
    path = Path(name_or_path).expanduser()
    if path.suffix == suffix or path.exists():
        if not path.is_file():
            raise DatasetError(f"{what} file not found: {path}")
        return path
    shipped = datasets_dir() / f"{name_or_path}{suffix}"
    if shipped.is_file():
        return shipped
    raise DatasetError(f"unknown {what} {name_or_path!r}; shipped: {', '.join(shipped_names) or 'none'}; "
                       f"or give the path of a {suffix} file")


def load(name_or_path: str, item_model: type[BaseModel] = Item, limit: int | None = None
         ) -> tuple[list[BaseModel], DatasetInfo]:
    """Load and validate a dataset.

    Args:
        name_or_path: shipped dataset name or JSONL path.
        item_model: pydantic model every row must fit.
        limit: keep only the first N items.

    Returns:
        The items and a `DatasetInfo` (name, path, sha256 of the file, item count).

    Raises:
        DatasetError: unreadable file, non-UTF-8 bytes, bad JSON, a row nested too deeply, a row
            that does not fit the item model, duplicate ids, or no items.
    """
    path = resolve(name_or_path)
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise DatasetError(f"{path}: line {line} is not valid UTF-8 (byte {exc.start})") from exc
    items, seen, folders = [], {}, {}
    for number, line in enumerate(text.split("\n"), start=1):  # not splitlines: U+2028 and U+0085 are text in JSON
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{path}: line {number} is not valid JSON ({exc.msg})") from exc
        except RecursionError:  # thousands of nested brackets: one line, not a traceback
            raise DatasetError(f"{path}: line {number} is nested too deeply to read") from None
        if not isinstance(row, dict):
            raise DatasetError(f"{path}: line {number} must be a JSON object, got {type(row).__name__}")
        _check_encodable(row, path, number)
        try:
            item = item_model.model_validate(row)
        except ValidationError as exc:
            field, message = first_error(exc, default="row")
            raise DatasetError(f"{path}: line {number}, field {field!r}: {message}") from exc
        _check_scorable(item, path, number)
        item_id = getattr(item, "id")
        if item_id in seen:
            raise DatasetError(f"{path}: line {number}: duplicate id {item_id!r} (first on line {seen[item_id]})")
        seen[item_id] = number
        folder = item_folder_name(item_id)
        if folder in folders:
            raise DatasetError(f"{path}: lines {folders[folder][0]} and {number}: ids {folders[folder][1]!r} and "
                               f"{item_id!r} would share the item folder {folder!r}; rename one")
        folders[folder] = (number, item_id)
        items.append(item)
    if not items:
        raise DatasetError(f"{path}: the dataset has no items")
    info = DatasetInfo(name=path.stem, path=str(path), sha256=hashlib.sha256(raw).hexdigest(), items=len(items))
    return items[:limit] if limit else items, info


def _check_encodable(row: dict, path: Path, number: int) -> None:
    """A lone surrogate (`"\\ud800"` is valid JSON, not text) fails at load, not in the middle of a run."""
    for field, value in row.items():
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError as exc:
            raise DatasetError(f"{path}: line {number}, field {field!r}: contains a lone surrogate "
                               f"({exc.object[exc.start:exc.end]!a}), which is not text") from exc


def _check_scorable(item: BaseModel, path: Path, number: int) -> None:
    """Refuse a row that cannot be scored as written, naming the line and field (no truth at all,
    None, is fine): a truth no answer can equal (NaN or infinite; on a question/answer row, a list,
    an object or a text that reads as NaN), more choices than there are option letters (the prompt
    would show A-J and drop the rest), a truth that is not one of the option letters.
    A protocol's own item model (the structured seed datasets) keeps its own fields and checks."""
    truth, choices = getattr(item, "answer", None), getattr(item, "choices", None) or []
    where = f"{path}: line {number}"
    if isinstance(truth, float) and not math.isfinite(truth):
        raise DatasetError(f"{where}, field 'answer': {truth} can never be scored; give a number, or null for no truth")
    for field in ("id", "question"):  # an agent asked nothing, or items no one can tell apart
        value = getattr(item, field, None)
        if isinstance(value, str) and not value.strip():
            raise DatasetError(f"{where}, field {field!r}: it is empty")
    if isinstance(truth, str) and not truth.strip():
        raise DatasetError(f"{where}, field 'answer': an empty text can never be scored; give the answer, or null "
                           "for no truth")
    if type(item) is Item:
        if isinstance(truth, (list, dict)):
            raise DatasetError(f"{where}, field 'answer': a {type(truth).__name__} can never be scored; give one "
                               "number, text or option letter, or null for no truth")
        if isinstance(truth, str) and truth.strip().lower() in NOT_NUMBERS:
            raise DatasetError(f"{where}, field 'answer': {truth!r} can never be scored; give a number, or null "
                               "for no truth")
    if len(choices) > len(LETTERS):
        raise DatasetError(f"{where}, field 'choices': {len(choices)} choices, but options are lettered "
                           f"{LETTERS[0]}-{LETTERS[-1]} (at most {len(LETTERS)}); split or shorten the list")
    letters = LETTERS[: len(choices)]
    if truth is not None and choices and not (isinstance(truth, str) and truth.strip().upper() in letters):
        raise DatasetError(f"{path}: line {number}, field 'answer': {truth!r} is not the letter of one of its "
                           f"{len(choices)} choices ({letters[0]}-{letters[-1]})")


def arithmetic(n: int = 100, seed: int = 0) -> list[dict]:
    """The arithmetic task of Du et al. (2023): `a+b*c+d-e*f`, six integers in [0, 30)."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        a, b, c, d, e, f = (rng.randrange(30) for _ in range(6))
        expression = f"{a}+{b}*{c}+{d}-{e}*{f}"
        rows.append({"id": f"arith-{i:03d}", "question": f"What is the result of {expression}?",
                     "answer": a + b * c + d - e * f, "metadata": {"expression": expression}})
    return rows


def write_jsonl(rows: list[dict], path: Path) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


if __name__ == "__main__":  # regenerate the shipped arithmetic dataset
    write_jsonl(arithmetic(100, seed=0), datasets_dir() / "arithmetic.jsonl")
