"""Speculative decoding on the local engine: guessing several tokens ahead and checking them at once.

llama.cpp can propose a run of next tokens cheaply and have the model verify them in one batch:
it samples each position from the model as usual and keeps a guess only where it matches, so in
principle the replies are drawn from the model's own distribution (at temperature 0 they are the
same, up to the last bits of a batch's arithmetic). The guesses come
from an n-gram lookup in the text so far (no second model: a debate's revise prompts hold the other
agents' reasoning, which a revision restates) or from a smaller draft model.

It pays only where guesses are accepted and verifying a batch of them costs little more than
one token. On CPU cores the batch is real work: measured on 2 cores (`python -m benchmarks
speculation`, `docs/local-engine.md#speculative-decoding`), llama.cpp's `ngram_simple` had 41 to
60% of its guesses accepted in revise rounds, yet a debate's calls went 0.88x, 1.02x and 0.95x as
fast as without at 1, 4 and 32 slots (answer rounds slower at every count). So it is off unless
`DEBATEKIT_LOCAL_SPECULATION` says otherwise:

- `off` (default);
- `ngram_simple`, `ngram_mod`, `ngram_map_k`: llama.cpp's n-gram lookups of those names;
- `draft:NAME`: a draft model, a known local model name or a path to a .gguf file.

llama.cpp sets speculation for the whole engine, not per request, so an engine cannot switch it
on only for revise rounds. Measure on the machine before turning it on.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from debatekit.models.errors import LocalModelError

NGRAMS = ("ngram_simple", "ngram_mod", "ngram_map_k")


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
    raise LocalModelError(f"DEBATEKIT_LOCAL_SPECULATION must be off, {', '.join(NGRAMS)} or draft:MODEL, "
                          f"got {text!r}")


def speculation() -> Speculation:
    """The engine's speculation from $DEBATEKIT_LOCAL_SPECULATION (default off)."""
    return parse(os.environ.get("DEBATEKIT_LOCAL_SPECULATION", "").strip() or "off")
