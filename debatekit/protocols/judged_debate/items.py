"""The items judged protocols take and what an item gives them (Khan et al. 2024): `EvidenceItem`
refuses at load a row that cannot be debated; `setup_for` draws an item's two candidates (the right
answer and a distractor), which sits at position A (from the run seed), and its hidden evidence."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, model_validator
from pydantic_core import PydanticCustomError

from debatekit._base.answer_kinds import LETTERS
from debatekit.datasets import Item
from debatekit.datasets.voting import normalize
from debatekit.engine import derive_seed
from debatekit.registry import ProtocolError

CandidateKind = Literal["auto", "yesno", "choice"]


class Passage(BaseModel):
    """A context passage (`legal_conflicts` style); only its text is shown to the debaters."""

    model_config = ConfigDict(extra="ignore")
    text: str


class EvidenceItem(Item):
    """An `Item` whose hidden evidence is its `evidence` list and/or `context` passages; a row with
    no evidence or no second candidate is refused when the dataset loads, naming the item."""

    context: list[Passage] = []

    @model_validator(mode="before")
    @classmethod
    def _usable(cls, row: Any) -> Any:
        if isinstance(row, dict):
            problem = row_problem(row.get("id"), row.get("evidence") or row.get("context"), row.get("answer"),
                                  row.get("choices") or [])
            if problem:
                raise PydanticCustomError("judged_item", problem)
        return row


def row_problem(item_id: Any, evidence: Any, truth: Any, choices: list, kind: str = "auto") -> str | None:
    """Why an item cannot be debated here (no evidence, no right answer, no second candidate), or None."""
    if not evidence:
        return (f"item {item_id!r} has no evidence (an `evidence` list or `context` passages) to hand the "
                "debaters")
    if truth is None:
        return f"item {item_id!r} has no answer, so no side can be given the right one"
    if kind in ("auto", "choice") and choices:
        if len(choices) < 2 or not (isinstance(truth, str) and truth.strip().upper() in LETTERS[: len(choices)]):
            return (f"item {item_id!r} needs at least two choices and an option letter as answer, got "
                    f"{len(choices)} choices and answer {truth!r}")
        return None
    if kind == "choice":
        return f"item {item_id!r} has no choices, so answer=choice cannot apply"
    if _yes_no(truth) is None:
        return (f"item {item_id!r} has no second candidate: give it choices (multiple choice) or a yes/no "
                f"answer, got answer {truth!r}")
    return None


def _yes_no(truth: Any) -> str | None:
    """A yes/no truth as "yes" or "no" (`True`, `"Yes"`, `"false"`), else None."""
    word = normalize(truth)
    return word if word in ("yes", "no") else None


@dataclass(frozen=True)
class Setup:
    """One item's two candidates in position order (A, B) as run, and its hidden evidence."""

    candidates: tuple[str, str]
    """The answers as the agents read them (an option's text, yes, no)."""
    values: tuple[Any, Any]
    """Each candidate as the item's answer (an option letter, "yes"/"no"): what is scored."""
    correct: int
    """The position (0: A, 1: B) of the right answer."""
    evidence: str

    def shown(self, swapped: bool) -> tuple[str, str]:
        """The candidates in the judge's order: as run, or B first."""
        return self.candidates[::-1] if swapped else self.candidates


def setup_for(item: Any, seed: int, kind: CandidateKind = "auto", protocol: str = "judged_debate") -> Setup:
    """The candidates, positions and evidence of `item` for run seed `seed`.

    A multiple-choice item gives its right option and one other option drawn from the seed; a
    yes/no item gives yes and no. Whether the right answer sits at A is drawn per item from the seed.

    Raises:
        ProtocolError: the item has no evidence, no right answer or no second candidate.
    """
    texts = [*getattr(item, "evidence", []), *(p.text for p in getattr(item, "context", []))]
    if problem := row_problem(item.id, texts, item.answer, list(item.choices), kind):
        raise ProtocolError(f"{protocol}: {problem}")
    if item.choices and kind != "yesno":
        right = LETTERS.index(item.answer.strip().upper())
        others = [i for i in range(len(item.choices)) if i != right]
        wrong = others[derive_seed(seed, item.id, "distractor") % len(others)]
        pair = [(item.choices[right], LETTERS[right]), (item.choices[wrong], LETTERS[wrong])]
    else:
        truth = _yes_no(item.answer)
        other = "no" if truth == "yes" else "yes"
        pair = [(truth, truth), (other, other)]
    correct = derive_seed(seed, item.id, "sides") % 2
    if correct == 1:
        pair.reverse()
    return Setup(candidates=(pair[0][0], pair[1][0]), values=(pair[0][1], pair[1][1]), correct=correct,
                 evidence="\n".join(texts))
