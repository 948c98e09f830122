"""What judged debate, consultancy and the blind judge share (Khan et al. 2024).

- `Setup`: an item's two candidates (the right answer and a distractor), which one sits at
  position A (drawn from the run seed per item) and the hidden evidence; `EvidenceItem` refuses
  at load a row that cannot give them.
- Quotes: `check_quotes` marks every `<quote>` of an argument `<v_quote>` (found in the evidence
  after the official normalisation) or `<u_quote>`; `truncate` cuts an argument to its word cap.
- Replies: `argument_model`, `question_model`, `verdict_model` parse free text (tags, `Answer:` and
  `Probability:` lines) or JSON.
- `judge`: the judge reads the record twice, as run and with the positions swapped (as the
  official `core/judge.py` does), and `decide` turns the verdicts into one answer.
"""

from __future__ import annotations

import functools
import re
import string
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model, model_validator
from pydantic.json_schema import SkipJsonSchema
from pydantic_core import PydanticCustomError

from debatekit._base.answer_kinds import LETTERS
from debatekit.datasets import Item
from debatekit.engine import derive_seed
from debatekit.protocols.judged_debate import prompts as P
from debatekit.protocols.shared import extract
from debatekit.protocols.shared.fields import Probability
from debatekit.registry import ProtocolError

CandidateKind = Literal["auto", "yesno", "choice"]
NAMES = ("Debater A", "Debater B")


# --- items, candidates and sides -------------------------------------------------------------

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
    if isinstance(truth, bool):
        return "yes" if truth else "no"
    word = str(truth).strip().lower()
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


# --- quotes ---------------------------------------------------------------------------------

QUOTE = re.compile(r"<quote>(.*?)</quote>")  # one line, as in the official checker
PUNCTUATION = str.maketrans("", "", string.punctuation)


def normalize(text: str) -> str:
    """Straight quotes and apostrophes, ASCII punctuation removed, lower case, spaces collapsed."""
    text = text.replace("\u201c", '"').replace("\u201d", '"').replace("\u2018", "'").replace("\u2019", "'")
    return " ".join(text.translate(PUNCTUATION).lower().split())


@dataclass
class Checked:
    """An argument with its quotes marked, and the quotes found (verified) and not found."""

    text: str
    verified: list[str]
    unverified: list[str]


def check_quotes(argument: str, evidence: str) -> Checked:
    """Mark each `<quote>` of `argument` as `<v_quote>` or `<u_quote>` against `evidence`.

    Tags a model wrote itself (`<v_quote>`, `<u_quote>`) are first turned back into `<quote>`, so
    no argument can certify its own quotes.
    """
    for tag in ("v_quote", "u_quote"):
        argument = argument.replace(f"<{tag}>", "<quote>").replace(f"</{tag}>", "</quote>")
    source = normalize(evidence)
    verified, unverified = [], []

    def mark(match: re.Match) -> str:
        quote = match.group(1)
        found = normalize(quote) in source
        (verified if found else unverified).append(quote)
        tag = "v_quote" if found else "u_quote"
        return f"<{tag}>{quote}</{tag}>"

    return Checked(QUOTE.sub(mark, argument), verified, unverified)


def truncate(argument: str, max_words: int) -> str:
    """At most `max_words` space-separated words, an open quote closed, `... <TRUNCATED>` when cut."""
    words = argument.split(" ")
    if len(words) <= max_words:
        return argument
    kept = " ".join(words[:max_words])
    for tag in ("quote", "v_quote", "u_quote"):
        if f"<{tag}>" in kept and f"</{tag}>" not in kept.split(f"<{tag}>")[-1]:
            kept += f"</{tag}>"
    return f"{kept}... <TRUNCATED>"


def render(rounds: list[dict[str, str | None]], speakers: list[tuple[str, str]]) -> str:
    """The transcript: `Round i:` blocks listing, in `speakers` order (key, shown name), what each said."""
    blocks = []
    for number, said in enumerate(rounds, start=1):
        lines = [f"Round {number}:"] + [f'{name}: """{said[key]}"""' for key, name in speakers if said.get(key)]
        blocks.append("\n\n".join(lines))
    return "\n\n---\n\n".join(blocks)


def advocate_messages(system: str, question: str, mine: str, theirs: str, body: str,
                      other_tag: str = "opponent_answer") -> list[dict]:
    """A debater's or consultant's call: the role, its position (confirmed), then evidence and request."""
    return [{"role": "system", "content": system},
            {"role": "user", "content": P.POSITIONS.format(question=question, mine=mine, theirs=theirs,
                                                           other_tag=other_tag)},
            {"role": "assistant", "content": P.CONFIRM.format(question=question, mine=mine, theirs=theirs)},
            {"role": "user", "content": body}]


def advocate_system(template: str, word_limit: int, answer_format: str, **fields: str) -> str:
    """A debater's or consultant's role, with the reply shape of the answer format and the quote rules."""
    output = P.TEXT_OUTPUT if answer_format == "text" else P.JSON_OUTPUT
    return template.format(word_limit=word_limit, output=output, quote_rules=P.QUOTE_RULES, **fields)


def advocate_turn(evidence: str, kind: str, transcript: str, request: str, steps: str, word_limit: int,
                  answer_format: str) -> str:
    """The last message of an argument call: the evidence, the record so far, the request and the steps."""
    where, what = ((" in <thinking></thinking> tags", "your argument in <argument></argument> tags")
                   if answer_format == "text" else (" in the `thinking` field", "your argument in the `argument` field"))
    block = P.TRANSCRIPT.format(kind=kind, transcript=transcript) if transcript else ""
    return P.TURN.format(evidence=evidence, transcript=block, request=request, where=where, steps=steps,
                         what=what, word_limit=word_limit)


# --- replies --------------------------------------------------------------------------------

def _tagged(text: str, tag: str) -> str:
    """The text of the first `<tag>` section (to its end tag or the reply's end); failing that, what
    follows `</thinking>`."""
    if f"<{tag}>" in text:
        return text.split(f"<{tag}>", 1)[1].split(f"</{tag}>", 1)[0].strip()
    if "</thinking>" in text and (rest := text.split("</thinking>", 1)[1].strip()):
        return rest
    raise ValueError(f"no <{tag}></{tag}> section in the reply")


@functools.lru_cache(maxsize=64)
def argument_model(defends: str, answer_format: str) -> type[BaseModel]:
    """An argument reply: private `thinking`, the `argument` the judge reads, and the answer it defends."""
    model = create_model("Argument", thinking=(str, ...), argument=(str, Field(min_length=1)),
                         answer=(Literal[defends], defends))  # type: ignore[valid-type]
    if answer_format == "text":
        model.from_text = classmethod(lambda cls, text: cls(thinking=text, argument=_tagged(text, "argument")))
        model.repair_prompt = P.ARGUMENT_REPAIR
    return model


@functools.lru_cache(maxsize=4)
def question_model(answer_format: str) -> type[BaseModel]:
    """A questioning judge's reply: private `thinking` and the `question` the consultant reads."""
    model = create_model("JudgeQuestion", thinking=(str, ...), question=(str, Field(min_length=1)))
    if answer_format == "text":
        model.from_text = classmethod(lambda cls, text: cls(thinking=text, question=_tagged(text, "question")))
        model.repair_prompt = P.QUESTION_REPAIR
    return model


class Verdict(BaseModel):
    """A judge's decision: its reasoning, the letter it picks, and how likely that pick is right."""

    # The pick is the verdict. A probability below 0.5 for the chosen answer (the embedded model
    # writes `Probability: 0` beside a clear `Answer: B`), or none at all, states no usable
    # confidence: the reading counts as undecided (0.5) and what the judge wrote is kept in `stated`.
    # (A comment, not the docstring: the docstring is the JSON schema's description the judge reads.)
    thinking: str
    answer: Literal["A", "B"]
    probability: Probability
    stated: SkipJsonSchema[float | None] = None

    @model_validator(mode="after")
    def _undecided_below_half(self) -> "Verdict":
        if "stated" not in self.model_fields_set:  # JSON: the number it wrote is the one read
            self.stated = self.probability
        if self.probability < 0.5:
            self.probability = 0.5
        return self


@functools.lru_cache(maxsize=64)
def verdict_model(shown: tuple[str, str], answer_format: str) -> type[BaseModel]:
    """The judge's reply model for candidates shown as A and B (text replies also match their wording)."""
    if answer_format == "json":
        return Verdict

    class TextVerdict(Verdict):
        repair_prompt: ClassVar[str] = P.VERDICT_REPAIR

        @classmethod
        def from_text(cls, text: str) -> Verdict:
            # the verdict must be stated (an `Answer:` line), not guessed from prose ("no idea" is not "no")
            letter = extract.extract("choice", text, list(shown)) if extract.MARKER.search(text) else None
            if letter not in ("A", "B"):
                raise ValueError("no `Answer: A` or `Answer: B` line in the reply")
            chance = extract.probability(text)
            return cls(thinking=text, answer=letter, probability=0.5 if chance is None else chance, stated=chance)

    return TextVerdict


def verdict_request(answer_format: str) -> tuple[str, str]:
    """The judge's (thinking instruction, verdict instruction) for the answer format."""
    return (P.THINK_TEXT, P.VERDICT_TEXT) if answer_format == "text" else (P.THINK_JSON, P.VERDICT_JSON)


def judge_prompt(intro: str, kind: str, whose: str, question: str, shown: tuple[str, str], transcript: str,
                 answer_format: str, who: str = "") -> str:
    """The final judge's message: its role (`intro`), the quote rules, the question with the candidates
    as shown (A, B), the transcript of the `kind` ("debate", "consultancy") and the verdict request."""
    closing, verdict = verdict_request(answer_format)
    return P.JUDGE.format(intro=intro, quotes=P.JUDGE_QUOTES, question=question, a=shown[0], b=shown[1], who=who,
                          kind=kind, transcript=transcript, closing=closing, whose=whose, verdict=verdict)


# --- the judge ------------------------------------------------------------------------------

class Judgement(BaseModel):
    """One reading of the record by the judge."""

    order: Literal["as_run", "swapped"]
    letter: Literal["A", "B"]
    """The letter picked, in this reading's order."""
    answer: Any
    """The candidate it stands for, as the item's answer."""
    probability: float
    """The probability this reading gives its pick: the judge's, or 0.5 when it stated none in [0.5, 1]."""
    stated_probability: float | None = None
    """What the judge wrote as its probability (None: nothing readable)."""
    correct: bool


class JudgedOutput(BaseModel):
    """What every judged protocol reports for one item."""

    candidates: dict[str, str]
    """{"A": ..., "B": ...} as run."""
    correct_position: Literal["A", "B"]
    judgements: list[Judgement]
    p_correct: float | None
    """The judge's probability on the right answer, averaged over its readings."""
    order_accuracy: float | None
    """The share of readings that picked the right answer (the paper's accuracy, both orders averaged)."""


async def judge(debate, setup: Setup, prompt: Callable[[bool], str], *, model: str | None, temperature: float,
                answer_format: str, both_orders: bool, protocol: str) -> list[Judgement]:
    """The judge's verdicts: on the record as run and, with `both_orders`, with A and B swapped.

    `prompt(swapped)` is the judge's message for one order. Readings whose call failed are left
    out; when every reading failed on an unreadable reply, the debate fails (a ProtocolError),
    so that a judge who gave no verdict is never scored as a wrong answer.
    """
    orders = [False, True] if both_orders else [False]
    turns = await debate.gather(
        debate.ask("judge", [{"role": "user", "content": prompt(swapped)}],
                   verdict_model(setup.shown(swapped), answer_format),
                   phase="judge_swapped" if swapped else "judge", temperature=temperature, model=model)
        for swapped in orders)
    out = []
    for swapped, turn in zip(orders, turns):
        if turn.ok:
            position = LETTERS.index(turn.parsed.answer) ^ int(swapped)
            out.append(Judgement(order="swapped" if swapped else "as_run", letter=turn.parsed.answer,
                                 answer=setup.values[position], probability=turn.parsed.probability,
                                 stated_probability=turn.parsed.stated, correct=position == setup.correct))
    if not out and all(t.completion.error_kind == "parse" for t in turns):
        raise ProtocolError(f"{protocol}: the judge gave no readable verdict ({turns[0].error})")
    return out


def decide(setup: Setup, judgements: list[Judgement]) -> tuple[Any, dict]:
    """The final answer (the candidate with the higher mean probability; a tie goes to the first
    reading's pick) and the shared output fields."""
    output = {"candidates": dict(zip("AB", setup.candidates)), "correct_position": "AB"[setup.correct],
              "judgements": [j.model_dump() for j in judgements], "p_correct": None, "order_accuracy": None}
    if not judgements:
        return None, output
    on_correct = [j.probability if j.correct else 1 - j.probability for j in judgements]
    p_correct = sum(on_correct) / len(on_correct)
    wrong_value = setup.values[1 - setup.correct]
    final = setup.values[setup.correct] if p_correct > 0.5 else wrong_value if p_correct < 0.5 else judgements[0].answer
    output.update(p_correct=round(p_correct, 4),
                  order_accuracy=sum(j.correct for j in judgements) / len(judgements))
    return final, output



def order_report(path) -> str:
    """Over a run: the judge's accuracy per reading (both orders pooled, the paper's measure) and its
    mean probability on the right answer."""
    from debatekit.records.trace import RunFolder

    outputs = [d.output for d in RunFolder(path).debates() if d.answered and d.output.get("judgements")]
    readings = [j for o in outputs for j in o["judgements"]]
    if not readings:
        return ""
    right = sum(j["correct"] for j in readings)
    mean_p = sum(o["p_correct"] for o in outputs) / len(outputs)
    return (f"judge accuracy over its readings (both orders pooled): {right / len(readings):.2f} "
            f"({right}/{len(readings)}); mean probability on the right answer {mean_p:.2f}")
