"""A model as a value, resolved once from its string, and the caller a call is made for.

    model = resolve("openai/gpt-4o-mini")     # or resolve(None): the default model
    model.kind.call_timeout                   # 120.0: the kind's policy (`kinds.ModelKind`)
    await gateway.complete(model, messages, caller=Caller("agent1", "answer", round=1))

A model string is parsed here and nowhere else: the run's configuration and the protocols name
models as strings, the engine resolves each into a `Model` where it is named, and the gateway, the
providers and the runner read its `kind` rather than the string's prefix. Who asks (agent, phase,
round, item, run seed) travels as a `Caller` argument to the gateway, which hands it to the
providers that answer by it (a scripted model) and to the gateways that look replies up by it
(`recorded`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from debatekit.models.kinds import ModelKind, default_model, policy


@dataclass(frozen=True)
class Model:
    """A model string resolved once.

    Attributes:
        name: the model string as given and as traced (`openai/gpt-4o-mini`, `local/NAME`).
        kind: its kind's policy (timeouts, cost, concurrency, credentials).
    """

    name: str
    kind: ModelKind

    @property
    def provider(self) -> str:
        """The provider prefix (`openai` of `openai/gpt-4o-mini`; the whole name when it has none)."""
        return self.name.split("/", 1)[0]

    @property
    def short(self) -> str:
        """The name after the provider prefix (`qwen2.5-coder-1.5b-instruct` of `local/qwen2.5-...`)."""
        return self.name.partition("/")[2]

    @property
    def local(self) -> bool:
        """Whether the embedded engine serves it."""
        return self.kind.name == "local"

    def __str__(self) -> str:
        return self.name


def resolve(model: str | Model | None) -> Model:
    """The `Model` of a model string; None: the default model ($DEBATEKIT_MODEL, else the embedded
    one), the one place that default is chosen. A `Model` is returned as it is."""
    if isinstance(model, Model):
        return model
    if model is not None and not model.strip():
        raise ValueError(f"the model string {model!r} names no model: give one, or leave it out for the default "
                         f"({default_model()})")
    name = model or default_model()
    return Model(name, policy(name))


@dataclass(frozen=True)
class Caller:
    """Who a call is made for: the agent, the phase and round, the item, the sample and the run seed."""

    agent: str | None = None
    phase: str | None = None
    round: int | None = None
    item_id: str | None = None
    sample: int = 0
    seed: int | None = None

    def as_dict(self) -> dict:
        """The caller as a plain dict (what a scripted model's `Request.call` holds)."""
        return asdict(self)
