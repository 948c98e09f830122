"""Speculative decoding on the local engine: guessing several tokens ahead and checking them at once.

llama.cpp can propose a run of next tokens cheaply and have the model verify them in one batch:
a token the model would have produced itself is kept, so every position is still sampled from the
model's own distribution (at temperature 0 the reply is the same, up to the arithmetic of a batch
that differs by the last bits; at any temperature the distribution is the model's). The guesses come
from an n-gram lookup in the text so far (no second model: a debate's revise prompts hold the other
agents' reasoning, which a revision restates) or from a smaller draft model.

It pays only where guesses are accepted and verifying a batch costs little more than one token:
on a CPU a batch of guessed tokens is real work, and with many slots decoding at once the CPU has
no idle capacity left to spend on guesses. `DEBATEKIT_LOCAL_SPECULATION` chooses:

- `auto` (default): `DEFAULT_BY_SLOTS`, the measured winner for the engine's slot count
  (`python -m benchmarks local_engine --speculation`, `docs/local-engine.md#speculative-decoding`);
- `off`;
- `ngram_simple`, `ngram_mod`, `ngram_map_k`: llama.cpp's n-gram lookups of those names;
- `draft:NAME`: a draft model, a known local model name or a path to a .gguf file.

llama.cpp sets speculation for the whole engine, not per request, so an engine cannot switch it
on only for revise rounds.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from debatekit.models.errors import LocalModelError

NGRAMS = ("ngram_simple", "ngram_mod", "ngram_map_k")
# the measured winner per slot count (the highest count at or below the engine's applies)
DEFAULT_BY_SLOTS: dict[int, str] = {1: "off"}


@dataclass(frozen=True)
class Speculation:
    """What the engine guesses ahead with: `kind` "off", one of `NGRAMS`, or "draft" with `draft`
    (a local model name or .gguf path)."""

    kind: str = "off"
    draft: str | None = None

    def __str__(self) -> str:
        return f"draft:{self.draft}" if self.kind == "draft" else self.kind

    def apply(self, params, draft_path: str | None = None) -> None:
        """Set this choice on an `xllamacpp.CommonParams`; `draft_path`: the draft model's file."""
        if self.kind == "off":
            return
        import xllamacpp

        kind = "DRAFT_SIMPLE" if self.kind == "draft" else self.kind.upper()
        params.speculative.types = [getattr(xllamacpp.common_speculative_type, f"COMMON_SPECULATIVE_TYPE_{kind}")]
        if self.kind == "draft":
            params.speculative.draft.mparams.path = draft_path
            params.speculative.draft.cpuparams.n_threads = params.cpuparams.n_threads
            params.speculative.draft.cpuparams_batch.n_threads = params.cpuparams_batch.n_threads


def parse(text: str) -> Speculation:
    """`off`, an n-gram kind or `draft:NAME` as a `Speculation`.

    Raises:
        LocalModelError: anything else, named with the values allowed.
    """
    value = text.strip()
    lowered = value.lower()
    if lowered == "off":
        return Speculation()
    if lowered in NGRAMS:
        return Speculation(lowered)
    if lowered.startswith("draft:") and value[6:].strip():
        return Speculation("draft", value[6:].strip())
    raise LocalModelError(f"DEBATEKIT_LOCAL_SPECULATION must be auto, off, {', '.join(NGRAMS)} or draft:MODEL, "
                          f"got {text!r}")


def default(slots: int) -> Speculation:
    """The measured default for an engine of `slots` parallel sequences (`DEFAULT_BY_SLOTS`)."""
    fitting = [n for n in DEFAULT_BY_SLOTS if n <= slots]
    return parse(DEFAULT_BY_SLOTS[max(fitting)] if fitting else "off")


def speculation(slots: int) -> Speculation:
    """The engine's speculation from $DEBATEKIT_LOCAL_SPECULATION (default `auto`: `default(slots)`)."""
    value = os.environ.get("DEBATEKIT_LOCAL_SPECULATION", "").strip() or "auto"
    return default(slots) if value.lower() == "auto" else parse(value)
