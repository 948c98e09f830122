"""Answers of the question-answering protocols (society_of_mind, single, self_consistency).

An `AnswerSpec` fixes, for one item, what an answer is (`kind`: integer, number, text, yes/no
or an option letter of a multiple-choice item) and how the agent gives it (`format`):

- `json`: the reply is a JSON object `{reasoning, answer}` whose `reasoning` is a list of steps
  and whose `answer` is constrained by the schema (an integer, "yes"/"no", one of the item's
  letters). The steps are read back as one text, a step a line. A list, not one string: forced
  into a single string the embedded model wrote almost no working (1 of the first 20 arithmetic
  items right), left free it wrote a list of steps, and constrained to one 10 of 20
  (`python -m benchmarks json_constraint_probe`);
- `text`: the agent reasons in free text and ends with `Answer: X`; the answer is taken out of
  the text by the extractor of its kind (`debatekit.protocols.shared.extract`). A reply with no
  answer in it is a parse failure, as an invalid JSON reply is.

Both formats parse into an object with `reasoning` (in text mode, the whole reply) and
`answer`, so protocols read `turn.parsed.answer` either way. A protocol that also wants the
agent's confidence asks with `closing(confidence=True)` and parses with `confident_output`:
`confidence` is then a 0-1 float, or None when the reply states none that can be read (text:
a last line `Confidence: C`; json: a `confidence` field); a missing confidence is not a parse
failure, the protocol decides what it means. Multiple-choice options are
shown as `A) text` lines under the question, in every protocol and both formats.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from fractions import Fraction
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema, create_model

from debatekit._base.answer_kinds import ANSWER_TEXT, LETTERS
from debatekit.datasets.voting import normalize
from debatekit.models.reading import capped
from debatekit.protocols.shared import extract
from debatekit.protocols.shared.fields import as_probability

AnswerKind = Literal["auto", "integer", "number", "text", "yesno", "choice"]
AnswerFormat = Literal["text", "json"]
DEFAULT_FORMAT: AnswerFormat = "text"

REPLY_TOKENS = {"integer": 768, "number": 768, "choice": 512, "yesno": 1024, "text": 512}
"""The default reply limit (completion tokens) of a free-text answer, per answer kind, chosen so that
at most ~2% of the replies that end by themselves would be cut off (measured on the committed
100-item single-agent runs and their re-runs; see docs and `benchmarks/reply_lengths.py`). A run's
`max_tokens` overrides it."""

CONFIDENCE_TEXT = "a number from 0.0 to 1.0 saying how likely it is that your answer is right"


@dataclass(frozen=True)
class AnswerSpec:
    """What an answer to one item is and how it is asked for."""

    kind: str
    format: str = DEFAULT_FORMAT
    choices: tuple[str, ...] = ()

    @property
    def letters(self) -> tuple[str, ...]:
        return tuple(LETTERS[: len(self.choices)])

    @property
    def output(self) -> type[BaseModel]:
        """The model a reply parses into (schema-constrained JSON, or extracted from text)."""
        if self.format == "text":
            return _text_model(self.kind, self.choices)
        return _json_model(self.kind, self.letters)

    @property
    def confident_output(self) -> type[BaseModel]:
        """`output` with a `confidence` (0-1, None when the reply gives none that can be read)."""
        if self.format == "text":
            return _text_model(self.kind, self.choices, confidence=True)
        return _json_model(self.kind, self.letters, confidence=True)

    def system(self, persona: str | None = None) -> str:
        base = TEXT_SYSTEM if self.format == "text" else JSON_SYSTEM
        text = base.format(what=ANSWER_TEXT[self.kind][1])
        return text if not persona else f"{text}\n{persona}"

    def question(self, question: str) -> str:
        """The question with its options (`A) ...` lines) when the item is multiple choice."""
        options = "".join(f"\n{letter}) {text}" for letter, text in zip(self.letters, self.choices))
        return f"{question}{options}"

    def closing(self, confidence: bool = False) -> str:
        """The instruction that ends every prompt asking for an answer (and, with `confidence`, for
        the agent's confidence that it is right, which `confident_output` reads)."""
        what = ANSWER_TEXT[self.kind][1]
        if self.format == "text":
            if confidence:
                return (f"Give your reasoning, then end with a line `Answer: X`, where X is {what}. "
                        f"After it, write a last line `Confidence: C`, where C is {CONFIDENCE_TEXT}.")
            return f"Give your reasoning, then end with a last line `Answer: X`, where X is {what}."
        if confidence:
            return (f"Put your final answer ({what}) in the `answer` field and your confidence, "
                    f"{CONFIDENCE_TEXT}, in the `confidence` field.")
        return f"Put your final answer ({what}) in the `answer` field."

    def shown(self, parsed: Any) -> str:
        """How another agent's reply appears in a debate prompt: its own words in text mode."""
        if self.format == "text":
            return parsed.reasoning.strip()
        return f"{parsed.reasoning.strip()}\nAnswer: {parsed.answer}"


def spec_for(item: Any, kind: AnswerKind = "auto", format: AnswerFormat = DEFAULT_FORMAT) -> AnswerSpec:
    """The answer spec of an item; `auto` follows its choices and the type of its ground truth."""
    choices = tuple(getattr(item, "choices", None) or ())
    if kind == "auto":
        truth = getattr(item, "answer", None)
        if choices:
            kind = "choice"
        elif isinstance(truth, bool) or isinstance(truth, str) and normalize(truth) in ("yes", "no"):
            kind = "yesno"
        elif isinstance(truth, int):
            kind = "integer"
        else:
            kind = "number" if isinstance(truth, float) else "text"
    if kind == "choice" and not choices:
        raise ValueError(f"item {getattr(item, 'id', '?')!r} has no choices, so answer=choice cannot apply")
    truth = getattr(item, "answer", None)
    if truth is not None and not _can_equal(kind, truth):
        raise ValueError(f"item {getattr(item, 'id', '?')!r} has the truth {truth!r}, which no answer of kind "
                         f"{kind} can equal, so answer={kind} cannot apply")
    return AnswerSpec(kind=kind, format=format, choices=choices if kind == "choice" else ())


def _can_equal(kind: str, truth: Any) -> bool:
    """Whether an answer of `kind` can ever equal `truth` as the scorer compares them (`normalize`:
    a yes/no answer never equals a number, an integer answer never a word): every item would
    otherwise score wrong without a word said."""
    value = normalize(truth)
    if kind == "yesno":
        return value in ("yes", "no")
    if kind in ("integer", "number"):
        return isinstance(value, Fraction)
    return True


def question_prompt(spec: AnswerSpec, question: str) -> str:
    """First-round prompt: the question (with its options) and how to give the answer."""
    return f"{spec.question(question)}\n\n{spec.closing()}"


def first_messages(spec: AnswerSpec, question: str, persona: str | None = None) -> list[dict]:
    """System and user messages of a first-round answer."""
    return [{"role": "system", "content": spec.system(persona)},
            {"role": "user", "content": question_prompt(spec, question)}]


JSON_SYSTEM = ("You are a careful problem solver. Reply with a JSON object with the fields `reasoning` and "
               "`answer`. In `reasoning`, work step by step and write every intermediate result; `answer` is "
               "{what}.")
TEXT_SYSTEM = ("You are a careful problem solver. Work through the problem step by step in plain text, writing "
               "every intermediate result. Finish with one last line `Answer: X`, where X is {what}.")


def answer_type(kind: str, letters: tuple[str, ...], format: str = "json") -> Any:
    """The type an answer of `kind` parses into; in free text a number answer is what the extractor
    reads: a whole number, a decimal, or a fraction that is neither as text (`"122/15"`, compared
    exactly by `voting.answers_equal`)."""
    if kind in ("integer", "number") and format == "text":
        return int | float | str
    if kind == "choice":
        return Literal[letters]  # type: ignore[valid-type]
    if kind == "yesno":
        return Literal["yes", "no"]
    return {"integer": int, "number": float, "text": str}[kind]


def _joined(steps: Any) -> Any:
    """Steps (a list) as one text, a step a line; a string passes unchanged (a provider without
    constrained decoding, or a reply recorded before the schema asked for a list)."""
    return "\n".join(str(step).strip() for step in steps) if isinstance(steps, list) else steps


# the schema asks for a list of steps (constrained decoding writes one); protocols read one text
Reasoning = Annotated[str, BeforeValidator(_joined),
                      WithJsonSchema({"type": "array", "items": {"type": "string"},
                                      "description": "Your working, one step per entry, each with its intermediate result."})]

# the schema asks for a number in [0, 1] (constrained decoding writes one); validation reads it leniently
Confidence = Annotated[float | None, BeforeValidator(as_probability),
                       WithJsonSchema({"type": "number", "minimum": 0, "maximum": 1,
                                       "description": f"Your confidence: {CONFIDENCE_TEXT}."})]


def _require_confidence(schema: dict) -> None:
    schema["properties"]["confidence"].pop("default", None)
    schema["required"] = [*schema.get("required", []), "confidence"]


@functools.lru_cache(maxsize=64)
def _json_model(kind: str, letters: tuple[str, ...], confidence: bool = False) -> type[BaseModel]:
    description = f"The final answer: {ANSWER_TEXT[kind][0]}."
    fields: dict[str, Any] = {"reasoning": (Reasoning, ...),
                              "answer": (answer_type(kind, letters), Field(description=description))}
    if not confidence:
        return create_model(f"{kind.capitalize()}Answer", **fields)
    return create_model(f"{kind.capitalize()}ConfidentAnswer", __config__=ConfigDict(json_schema_extra=_require_confidence),
                        **fields, confidence=(Confidence, None))


@functools.lru_cache(maxsize=64)
def _text_model(kind: str, choices: tuple[str, ...], confidence: bool = False) -> type[BaseModel]:
    """A model the gateway fills from free text (`from_text`) instead of from JSON."""
    answer = answer_type(kind, tuple(LETTERS[: len(choices)]), "text")
    fields: dict[str, Any] = {"reasoning": (str, ...), "answer": (answer, ...)}
    if confidence:
        fields["confidence"] = (float | None, None)
    name = f"{kind.capitalize()}{'Confident' if confidence else ''}TextReply"
    model = create_model(name, **fields)

    def from_text(cls, text: str, finished: bool = True) -> BaseModel:
        found = extract.extract(kind, text, list(choices), marked_only=not finished, confident=confidence)
        if found is None:
            raise ValueError(f"no final answer ({ANSWER_TEXT[kind][0]}) found in the reply")
        reasoning = capped(text)  # as stored and shown to other agents: a huge reply is cut, as its text is
        if confidence:
            return cls(reasoning=reasoning, answer=found, confidence=extract.confidence(text))
        return cls(reasoning=reasoning, answer=found)

    def echoed(cls, text: str, shown: list[dict]) -> bool:
        return extract.echoed(kind, text, shown, list(choices))

    model.from_text = classmethod(from_text)
    model.echoed = classmethod(echoed)
    model.reads_unfinished = True  # a cut-off reply is read only where it states its answer
    model.default_reply_tokens = REPLY_TOKENS[kind]
    model.repair_prompt = ("Your previous reply did not state a final answer that could be read: {error}\n"
                           f"Reply again and end with a last line `Answer: X`, where X is {ANSWER_TEXT[kind][1]}.")
    return model
