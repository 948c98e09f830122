"""Interventions: what a fork changes in a debate from its fork round on, and how they are registered.

An intervention is an `Intervention` made by a small factory registered by name, as a protocol is:

    @intervention("truth_from")
    def truth_from(agent: str) -> Intervention:
        \"\"\"The others read the item's correct answer as `agent`'s reply.\"\"\"

        def show(ctx, viewer, replies):
            return [Shown(agent, f"Answer: {ctx.truth}", ctx.truth) if r.author == agent else r for r in replies]

        return Intervention(show=show, agents=(agent,))

Calling the factory gives the `Intervention`, with its name, parameters and source filled in for
run.json. Three hooks, each optional, are consulted from the fork round on: `show(ctx, viewer,
replies)` returns what `viewer` reads of the earlier replies (`engine.Shown`: author, text, answer);
`instruction(ctx, agent)` returns a text added to the agent's system message; `model(ctx, agent)`
returns another model for the agent's calls. `ctx` is a `Context`: the item, its truth and wrong
answer, the round, the parent's record of the debate.

Interventions come from three places, as protocols do: the built-ins (`builtin`), a module your code
imported, an installed package's entry point in the group `debatekit.interventions`, or a file named
`path/to/file.py:name` wherever an intervention name is taken (`debatekit fork --intervention`).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import importlib.util
import inspect
import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from pydantic import ValidationError, validate_call

from debatekit._base.plugins import import_file_once, load_entry_points
from debatekit._base.validation import first_error
from debatekit.engine import Ask, Debate, Shown
from debatekit.records.schemas import DebateRecord
from debatekit.registry import is_file_reference

BUILTIN = "debatekit.sweep.forks.builtin"
ENTRY_POINTS = "debatekit.interventions"


class InterventionError(ValueError):
    """An unknown intervention, parameters it does not take, or a factory that returns no Intervention."""


@dataclass(frozen=True)
class Context:
    """What an intervention knows of the debate it changes, in the round being asked."""

    item: Any
    """The item debated."""
    seed: int
    """The run seed of this debate."""
    round: int
    """The round being asked."""
    at_round: int
    """The fork round: the first round asked of a model."""
    truth: Any
    """The item's correct answer (None for an item without one)."""
    wrong: Any
    """The wrong answer chosen for the item (`wrong_answer`); None where there is none."""
    parent: DebateRecord | None
    """The parent run's record of this debate."""
    pool: dict[str, Shown] = field(default_factory=dict)
    """Every agent's latest reply as the protocol shows it, by author (in `show`; empty elsewhere)."""


ShowHook = Callable[[Context, str, list[Shown]], list[Shown]]
AgentHook = Callable[[Context, str], str | None]


@dataclass(frozen=True)
class Intervention:
    """One change to a debate, applied from the fork round on (see the module)."""

    show: ShowHook | None = None
    """`show(ctx, viewer, replies)`: what `viewer` reads of the earlier replies, in order."""
    instruction: AgentHook | None = None
    """`instruction(ctx, agent)`: a text added to the agent's system message, or None."""
    model: AgentHook | None = None
    """`model(ctx, agent)`: the model the agent's calls go to, or None (the fork's)."""
    agents: tuple[str, ...] = ()
    """The agents it names; a fork checks that each is an agent of the parent run."""
    models: tuple[str, ...] = ()
    """The models it sends calls to; a fork checks each and readies a local one before it starts."""
    needs: tuple[str, ...] = ()
    """What it needs of every item: "wrong" (a wrong answer), "truth" (a correct one); a fork checks."""
    name: str | None = None
    """The name it is registered under (filled in when its factory is called)."""
    params: dict[str, Any] = field(default_factory=dict)
    """The parameters its factory was called with, defaults included."""
    source: dict[str, Any] = field(default_factory=dict)
    """Where its code came from: built in, a module, a package, or a file with its sha256."""

    def describe(self) -> dict[str, Any]:
        """The intervention as data, as run.json's `parent.intervention` keeps it."""
        return {"name": self.name, "params": self.params, "source": self.source}


@dataclass
class Registered:
    """A registered intervention: `build(**params)` makes it."""

    name: str
    build: Callable[..., Intervention]
    source: dict[str, Any]
    description: str


_registered: dict[str, Registered] = {}
_loading: dict[str, Any] | None = None  # the source of the file or package being imported, while it registers
_loaded: set[str] = set()


def intervention(name: str):
    """Register an intervention factory under `name`; its keyword arguments are the intervention's
    parameters, checked against their type hints when it is called."""

    def register(factory):
        module = factory.__module__
        source = _loading or {"kind": "builtin" if module.startswith("debatekit.") else "module", "module": module}
        known = _registered.get(name)
        if known is not None and not _same_code(known.source, source):
            raise InterventionError(f"intervention {name!r} from {source} clashes with the one from {known.source}; "
                                    "rename one of them")
        checked = validate_call(factory)

        @functools.wraps(factory)
        def build(*args, **kwargs) -> Intervention:
            try:
                made = checked(*args, **kwargs)
            except ValidationError as exc:
                where, message = first_error(exc)
                raise InterventionError(f"intervention {name!r}, parameter {where!r}: {message}") from exc
            if not isinstance(made, Intervention):
                raise InterventionError(f"intervention {name!r} returned {type(made).__name__}, not an Intervention")
            given = _signature_params(factory, args, kwargs)
            return dataclasses.replace(made, name=name, params=given, source=dict(source))

        doc = (factory.__doc__ or "").strip().splitlines()
        _registered[name] = Registered(name, build, dict(source), doc[0] if doc else "")
        return build

    return register


def make(name: str, params: dict[str, Any] | None = None) -> Intervention:
    """The intervention `name` (built in, from a plugin, or `path/to/file.py:name`) with `params`."""
    return get(name).build(**(params or {}))


def get(name: str) -> Registered:
    """The registered intervention `name`."""
    _load()
    if is_file_reference(name):
        return _load_file(name)
    if name not in _registered:
        raise InterventionError(f"unknown intervention {name!r}; available: {', '.join(sorted(_registered))} "
                                "(or path/to/file.py:NAME)")
    return _registered[name]


def available() -> dict[str, Registered]:
    _load()
    return dict(sorted(_registered.items()))


class Applied:
    """An intervention as the engine consults it in each debate of a fork (`Debate.intervention`):
    from `at_round` on, it shows what `show` makes of the replies, adds `instruction`, sends the call
    to `model` (or to the fork's `model` when the intervention names none), and notes each change
    on the debate. `plans` maps (item id, seed) to (parent record, wrong answer)."""

    def __init__(self, intervention: Intervention | None, at_round: int, model: str | None,
                 plans: dict[tuple[str, int], tuple[DebateRecord | None, Any]], resample: int | None = None):
        self.intervention = intervention or Intervention()
        self.at_round, self.model, self.plans, self.resample = at_round, model, plans, resample

    @property
    def models(self) -> list[str]:
        """The models the fork asks besides the run's: its `model`, and those the intervention swaps in."""
        return [m for m in (self.model, *self.intervention.models) if m]

    def context(self, debate: Debate, round: int, pool: dict[str, Shown] | None = None) -> Context:
        item = debate.item
        parent, wrong = self.plans.get((str(item.id), debate.seed), (None, None))
        return Context(item=item, seed=debate.seed, round=round, at_round=self.at_round,
                       truth=getattr(item, "answer", None), wrong=wrong, parent=parent, pool=dict(pool or {}))

    def shown(self, debate: Debate, viewer: str, round: int, replies: list[Shown],
              pool: dict[str, Shown]) -> list[Shown]:
        hook = self.intervention.show
        if hook is None or round < self.at_round:
            return replies
        after = list(hook(self.context(debate, round, pool), viewer, list(replies)))
        if _seen(after) != _seen(replies):
            debate.note(viewer, round, {
                "intervention": self.intervention.name, "read": [[s.author, s.answer] for s in after],
                "instead_of": [[s.author, s.answer] for s in replies],
                "replaced": [s.author for s in after if _seen([s])[0] not in _seen(replies)]})
        return after

    def asked(self, debate: Debate, ask: Ask) -> Ask:
        if ask.round is None or ask.round < self.at_round:
            return ask
        ctx, hooks = self.context(debate, ask.round), self.intervention
        model = hooks.model(ctx, ask.agent) if hooks.model else None
        text = hooks.instruction(ctx, ask.agent) if hooks.instruction else None
        if model:
            debate.note(ask.agent, ask.round, {"intervention": hooks.name, "model": model})
        if text:
            debate.note(ask.agent, ask.round, {"intervention": hooks.name, "instruction": text})
        model = model or self.model
        if not model and not text and self.resample is None:
            return ask
        options = {**ask.options, **({"model": model} if model else {}),
                   **({} if self.resample is None else {"resample": self.resample})}
        messages = with_instruction(ask.messages, text) if text else ask.messages
        return debate.ask(ask.agent, messages, ask.output, phase=ask.phase, round=ask.round, **options)


def with_instruction(messages: list[dict], text: str) -> list[dict]:
    """`messages` with `text` added to the end of the first system message (a new one if there is none)."""
    out = [dict(m) for m in messages]
    first = next((m for m in out if m.get("role") == "system"), None)
    if first is None:
        return [{"role": "system", "content": text}, *out]
    first["content"] = f"{first.get('content', '')}\n\n{text}"
    return out


def scrub(text: str, names: set[str], label: str = "another agent") -> str:
    """`text` with each of `names` (whole words, any case) replaced by `label`; a name of letters then
    digits also as replies write it apart (`agent3`: `Agent 3`, `agent_3`, `agent-3`)."""
    for name in sorted(names, key=len, reverse=True):
        split = re.fullmatch(r"([^\W\d_]+)(\d+)", name)
        pattern = rf"{re.escape(split[1])}[\s_-]?{split[2]}" if split else re.escape(name)
        text = re.sub(rf"\b{pattern}\b", label, text, flags=re.IGNORECASE)
    return text


def _seen(replies: list[Shown]) -> list[tuple]:
    return [(s.author, s.text, json.dumps(s.answer, default=str)) for s in replies]


def _signature_params(factory, args: tuple, kwargs: dict) -> dict[str, Any]:
    """The parameters a factory was called with, defaults included, as JSON data."""
    bound = inspect.signature(factory).bind(*args, **kwargs)
    bound.apply_defaults()
    return json.loads(json.dumps(dict(bound.arguments), default=repr))


def _origin(source: dict[str, Any]) -> tuple:
    return source["kind"], source.get("module") or source.get("package") or source.get("path")


def _same_code(known: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether registering `new` under a taken name replaces the same intervention: the same module,
    package or file (edited since, and loaded again), or a copy of the same file elsewhere (another
    checkout of a study; the path last loaded is the one recorded)."""
    return _origin(known) == _origin(new) or known["kind"] == new["kind"] == "file" and known["sha256"] == new["sha256"]


def _load() -> None:
    """Register the built-ins and every installed package's interventions, once; a plugin that
    fails to import is one warning line."""
    if "builtin" not in _loaded:
        importlib.import_module(BUILTIN)  # by name, as the protocol registry loads its built-ins
        _loaded.add("builtin")
    if "plugins" in _loaded:
        return
    _loaded.add("plugins")
    load_entry_points(ENTRY_POINTS, _set_loading, lambda name, source, exc: (
        f"intervention plugin {name!r} failed to load: {type(exc).__name__}: {exc}"))


def _set_loading(source: dict | None) -> None:
    global _loading
    _loading = source


def _load_file(reference: str) -> Registered:
    """Import the file of `path.py:name` (once per content) and return its intervention `name`."""
    path, wanted = import_file_once(reference, _loaded, "intervention", InterventionError, _set_loading)
    found = _registered.get(wanted)
    if found is not None and found.source.get("path") != str(path) and found.source.get("kind") == "file":
        # a copy of this file elsewhere was loaded since, and registered the name with its path: this
        # file is imported again, so that what it makes records where it came from
        path, wanted = import_file_once(reference, _loaded, "intervention", InterventionError, _set_loading,
                                        again=True)
        found = _registered.get(wanted)
    if found is None or found.source.get("path") != str(path):
        raise InterventionError(f"intervention file {path} registers no intervention {wanted!r}")
    return found
