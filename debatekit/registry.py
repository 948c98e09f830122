"""Protocol registration and lookup: built-in protocols, installed plugins and protocol files.

A protocol is a factory decorated with `@protocol("name")`. Its keyword arguments are the
protocol's parameters (with defaults and type hints); it returns the async function that runs
one debate: `async def run(item, debate) -> Outcome`.

    @protocol("single")
    def single(temperature: float = 0.0) -> Solver:
        async def run(item, debate):
            ...
        return run

Three sources register protocols, and each spec remembers its own (`ProtocolSpec.source`, written
into run.json as provenance):

- built in: the modules of `debatekit.protocols`;
- installed packages: an entry point in the group `debatekit.protocols` (`pair =
  "mypkg.protocols:pair"` in the package's pyproject), loaded on first lookup; a plugin that fails
  to import is one warning line naming it;
- a file: `path/to/file.py:name` anywhere a protocol name is taken (`debatekit run`, grids,
  notebooks, `RunConfig.protocol`) imports that file and takes its protocol `name`.

A name registered twice from different sources is an error naming both.

Parameters are checked strictly: a boolean is no number (`--set rounds=true` fails), no number
is NaN or infinite, and a sampling temperature (`temperature`, `*_temperature`) lies in `TEMPERATURE`.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from debatekit._base.plugins import import_file_once, load_entry_points
from debatekit._base.validation import did_you_mean, first_error
from debatekit.datasets import Item
from debatekit.records.resume import describe_source

Solver = Callable[[Any, Any], Awaitable[Any]]
TEMPERATURE = (0.0, 2.0)
"""The sampling temperatures OpenAI-style providers accept."""


class ProtocolError(ValueError):
    """Unknown protocol or invalid protocol parameters."""


@dataclass
class Node:
    """How a protocol runs as one workflow-graph node (`debatekit.node`): state in, state out.

    Attributes:
        item: the item to debate, built from the state dict.
        result: the new state from the old one, the outcome and the debate (usage, log).
        params: protocol parameters the state carries (callbacks, say); explicit ones win.
    """

    item: Callable[[dict], BaseModel]
    result: Callable[[dict, Any, Any], dict]
    params: Callable[[dict], dict] = lambda state: {}


@dataclass(frozen=True)
class Views:
    """How a protocol shows its results in its own terms; a protocol without one gets the generic view.

    Attributes:
        run: `run(run_dir) -> str`, the extra lines `debatekit run` prints for a finished run
            folder (the protocol's own scores).
        debate: `debate(record, item_folder) -> str`, the text `debatekit show` prints for one
            finished debate.
        review: `review(item_folder) -> lines`, what a human reviewer reads of one escalated debate
            (`debatekit review --show`).
    """

    run: Callable[[Path], str] | None = None
    debate: Callable[[Any, Path | None], str] | None = None
    review: Callable[[Path], list[str]] | None = None


@dataclass(frozen=True)
class Role:
    """A protocol's part in sweep reports.

    Attributes:
        baseline: "single" (the one-agent reference the others are paired against), "equal_budget"
            (a non-debate baseline matched to debates at equal token budget), None (a debate).
        label: its name in sweep figure labels (default: the protocol's name).
    """

    baseline: Literal["single", "equal_budget"] | None = None
    label: str | None = None


@dataclass
class ProtocolSpec:
    name: str
    factory: Callable[..., Solver]
    item_model: type[BaseModel]
    description: str
    node: Node | None = None
    """Its form as a workflow-graph node, if it has one."""
    output: type[BaseModel] | None = None
    """The shape of `Outcome.output`, checked on every debate before it is written."""
    flags: dict[str, str | None] = field(default_factory=dict)
    """The parameter a CLI flag sets (`{"rounds": "max_rounds"}`; None: the flag does not apply);
    by default `--agents`/`--rounds` set the parameter of the same name."""
    views: Views = Views()
    """Its own views of a run, a debate and an escalated debate."""
    role: Role = Role()
    """Its part in sweep reports: a baseline or a debate, and its label."""
    paper: str | None = None
    """The paper or seed it implements, in a few words (`Du et al. 2023`, `seed 002`)."""
    stop_reasons: dict[str, str] = field(default_factory=dict)
    """Its own stop reasons (name -> meaning), beside the shared `engine.STOP_REASONS`; a debate
    that ends with a reason in neither fails with a ProtocolError."""
    shows_replies: bool = False
    """Whether its agents read each other's earlier replies through `Debate.shown`, where a fork's
    intervention can change them (`replace`, `hide`, `reorder`, `anonymise`); a fork of a protocol
    that does not refuses those."""
    source: dict[str, Any] = field(default_factory=lambda: {"kind": "builtin"})
    """Where it came from: `{"kind": "builtin", "module": ...}`, `{"kind": "module", "module": ...}` (a
    module your code imported), `{"kind": "package", "package": ..., "version": ..., "entry_point":
    ...}` or `{"kind": "file", "path": ..., "sha256": ...}`."""

    @property
    def label(self) -> str:
        """The short name sweep reports use for it."""
        return self.role.label or self.name

    def flag(self, name: str) -> str | None:
        """The parameter `--NAME N` sets for this protocol, or None."""
        return self.flags[name] if name in self.flags else name if name in self.params else None

    def map_flags(self, params: dict, **flags: Any) -> dict:
        """`params` plus each given generic value (`agents=N`, `rounds=N`) under this protocol's
        parameter for it (`spec.flag`); a None value, or a flag the protocol has no parameter for, is skipped.

        Raises:
            ValueError: a flag and `params` set the same parameter to different values.
        """
        mapped = {self.flag(name): (name, value) for name, value in flags.items() if value is not None}
        mapped.pop(None, None)
        for key, (name, value) in mapped.items():
            if key in params and params[key] != value:
                raise ValueError(f"--{name} {value} and --set {key}={params[key]} disagree; give {key} once")
        return {**params, **{k: v for k, (_, v) in mapped.items()}}

    def generic(self, params: dict) -> dict:
        """`params` with a generic `agents`/`rounds` the protocol has no parameter of that name for
        moved to the parameter its flag sets (a sweep grid's `rounds` means what `--rounds` means)."""
        given = dict(params)
        flags = {n: given.pop(n) for n in ("agents", "rounds") if n in given and not self.accepts(n) and self.flag(n)}
        return self.map_flags(given, **flags)

    def models_in(self, params: dict) -> list[str]:
        """The model strings `params` name: `models` and any `*_model`/`*_models` parameter (a
        string, a list of them, or agent name -> model)."""
        return [m for name, value in params.items() if names_models(name) for m in model_strings(value)]

    def accepts(self, name: str) -> bool:
        """A parameter name this protocol takes."""
        return name in self.params

    @property
    def params(self) -> dict[str, inspect.Parameter]:
        return dict(inspect.signature(self.factory).parameters)

    def defaults(self) -> dict[str, Any]:
        return {k: p.default for k, p in self.params.items()}

    def validate(self, params: dict[str, Any]) -> dict[str, Any]:
        """Parameters checked against the factory signature: unknown names and wrong types fail."""
        unknown = sorted(set(params) - set(self.params))
        if unknown:
            raise ProtocolError(f"protocol {self.name!r} has no parameter {', '.join(map(repr, unknown))}; "
                                f"parameters: {', '.join(self.params)}{did_you_mean(unknown[0], self.params)}")
        try:
            checked = self.params_model()(**params).model_dump()
        except ValidationError as exc:
            field, message = first_error(exc)
            raise ProtocolError(f"protocol {self.name!r}, parameter {field!r}: {message}") from exc
        low, high = TEMPERATURE
        for name, given in params.items():
            value = checked[name]
            if isinstance(given, bool) and isinstance(value, (int, float)) and not isinstance(value, bool):
                raise ProtocolError(f"protocol {self.name!r}, parameter {name!r}: got the boolean "
                                    f"{str(given).lower()}, but it is not a yes/no parameter")  # pydantic made it 1
            if (name == "temperature" or name.endswith("_temperature")) and isinstance(value, (int, float)) \
                    and not low <= value <= high:
                raise ProtocolError(f"protocol {self.name!r}, parameter {name!r}: a temperature must be "
                                    f"{low:g} to {high:g}, got {value!r}")
        return checked

    def params_model(self) -> type[BaseModel]:
        """The pydantic model its parameters are validated with (types and constraints from the signature)."""
        hints = inspect.get_annotations(self.factory, eval_str=True)
        fields = {k: (hints.get(k, Any), p.default) for k, p in self.params.items()}
        return create_model(f"{self.name}_params", __config__=ConfigDict(extra="forbid", allow_inf_nan=False),
                            **fields)

    def build(self, params: dict[str, Any]) -> Solver:
        """The solver for `params`; each debate's output is checked against `output` (when the
        protocol has one) and its stop reason against the declared ones."""
        solver = self.factory(**self.validate(params))

        async def checked(item, debate):
            outcome = await solver(item, debate)
            self.check_output(outcome.output)
            self.check_stop(debate.stop_reason)
            return outcome

        return checked

    def check_stop(self, reason: str | None) -> None:
        """Raise ProtocolError for a stop reason neither `engine.STOP_REASONS` nor this protocol declares."""
        from debatekit.engine.stopping import STOP_REASONS

        if reason is not None and reason not in STOP_REASONS and reason not in self.stop_reasons:
            raise ProtocolError(f"protocol {self.name!r} ended a debate with the undeclared stop reason {reason!r}; "
                                f"declare it in @protocol(stop_reasons=...)")

    def check_output(self, output: dict) -> None:
        """Raise ProtocolError naming the first field of `output` that does not fit the output model
        (a protocol without one accepts any output)."""
        if self.output is None:
            return
        try:
            self.output.model_validate(output)
        except ValidationError as exc:
            field, message = first_error(exc)
            raise ProtocolError(f"protocol {self.name!r} returned an output that does not fit its schema, "
                                f"field {field!r}: {message}") from exc


_protocols: dict[str, ProtocolSpec] = {}


def names_models(parameter: str) -> bool:
    """Whether a protocol parameter names models: `models`, or any `*_model`/`*_models`."""
    return parameter == "models" or parameter.endswith(("_model", "_models"))


def model_strings(value) -> list[str]:
    """The model strings in a model parameter's value: a string, a list of them, or agent name -> model."""
    values = value.values() if isinstance(value, dict) else value if isinstance(value, list) else [value]
    return [v for v in values if isinstance(v, str)]


def protocol(name: str, item: type[BaseModel] = Item, *, output: type[BaseModel] | None = None,
             node: Node | None = None, flags: dict[str, str | None] | None = None, views: Views = Views(),
             role: Role = Role(), stop_reasons: dict[str, str] | None = None, paper: str | None = None,
             shows_replies: bool = False):
    """Register a protocol factory under `name`.

    Args:
        name: the name runs, grids and `debatekit run PROTOCOL` use.
        item: the model its dataset rows must fit.
        output: the pydantic model of its `Outcome.output`, checked on every debate and listed by
            `debatekit protocols --schema NAME`.
        node: lets `debatekit.node` run it over a workflow state.
        flags: which parameter `--agents` and `--rounds` set.
        views: its own views of a finished run, of one debate and of an escalated debate.
        role: its part in sweep reports (a baseline or a debate) and its label in sweep figures.
        stop_reasons: its own stop reasons (name -> meaning) beside the shared `engine.STOP_REASONS`.
        paper: the paper or seed it implements, in a few words (the first column of
            `debatekit protocols`; its module docstring says the rest).
        shows_replies: its agents read each other's earlier replies through `Debate.shown`, so that a
            fork's intervention can change what they read.

    Shared parameter names: `agents` (the agents' names), `models` (agent name -> model),
    `judge_model` (the model of the judging or arbitrating agent), `rounds` (see `flags`).
    """

    def register(factory):
        doc = inspect.getdoc(factory) or ""
        module = factory.__module__
        source = _loading or {"kind": "builtin" if module.startswith("debatekit.") else "module", "module": module}
        known = _protocols.get(name)
        if known is not None and _origin(known.source) != _origin(source):
            raise ProtocolError(f"protocol {name!r} from {describe(source)} clashes with the one from "
                                f"{describe(known.source)}; rename one of them")
        _protocols[name] = ProtocolSpec(
            name=name, factory=factory, item_model=item, description=doc.splitlines()[0] if doc else "",
            node=node, output=output, flags=flags or {}, views=views, role=role,
            stop_reasons=stop_reasons or {}, source=dict(source), paper=paper, shows_replies=shows_replies)
        return factory

    return register


ENTRY_POINTS = "debatekit.protocols"
_loading: dict[str, Any] | None = None  # the source of the module being imported, while it registers
_loaded: set[str] = set()  # "builtin", "plugins", and each protocol file's path


def describe(source: dict[str, Any]) -> str:
    """A source in a few words: `built in (debatekit.protocols.baselines)`, `package mypkg 1.0`, `file P`."""
    return describe_source(source)


def _origin(source: dict[str, Any]) -> tuple:
    """What makes two registrations the same source (a module imported twice registers again)."""
    return source["kind"], source.get("module") or source.get("package") or source.get("path")


BUILTIN = tuple(f"debatekit.protocols.{name}" for name in (
    "arbitration", "baselines", "chateval", "cross_critique", "dynamics", "judge_refine",
    "judged_debate", "mad", "patch_debate", "reconcile", "society_of_mind"))
"""The built-in protocols' modules, loaded by name on first lookup as plugins are (each registers
its protocols when imported), so that the registry imports nothing above it."""


def _load_builtin() -> None:
    if "builtin" in _loaded:
        return
    for module in BUILTIN:
        importlib.import_module(module)
    _loaded.add("builtin")


def _load_plugins() -> None:
    """Import every installed package's `debatekit.protocols` entry points, once; a failure is one warning line."""
    if "plugins" in _loaded:
        return
    _loaded.add("plugins")
    load_entry_points(ENTRY_POINTS, _set_loading, _plugin_warning)


def _plugin_warning(name: str, source: dict, exc: Exception) -> str:
    if isinstance(exc, ProtocolError):
        return f"plugin {name!r} ({describe(source)}) not loaded: {exc}"
    return f"plugin {name!r} ({describe(source)}) failed to import: {type(exc).__name__}: {exc}"


def _load_all() -> None:
    _load_builtin()
    _load_plugins()


def is_file_reference(name: str) -> bool:
    """Whether a protocol name points into a file: `path/to/file.py:name`."""
    path, colon, _ = name.rpartition(":")
    return bool(colon) and path.endswith(".py")


def _set_loading(source: dict | None) -> None:
    global _loading
    _loading = source


def _load_file(reference: str) -> ProtocolSpec:
    """Import the file of `path.py:name` (once per file and content) and return its protocol `name`."""
    path, wanted = import_file_once(reference, _loaded, "protocol", ProtocolError, _set_loading)
    found = _protocols.get(wanted)
    if found is None or found.source.get("path") != str(path):
        there = sorted(n for n, spec in _protocols.items() if spec.source.get("path") == str(path))
        raise ProtocolError(f"protocol file {path} registers no protocol {wanted!r}; it registers "
                            f"{', '.join(map(repr, there)) if there else 'none'}{did_you_mean(wanted, there)}")
    return found


def views_of(name: str) -> Views:
    """Protocol `name`'s own views (`ProtocolSpec.views`); none for a protocol that is not registered
    (the protocol of an old run, say)."""
    spec = find(name)
    return spec.views if spec is not None else Views()


def get(name: str) -> ProtocolSpec:
    """The protocol `name`: built in, from an installed plugin, or `path/to/file.py:name`."""
    _load_all()
    if is_file_reference(name):
        return _load_file(name)
    if name not in _protocols:
        raise ProtocolError(f"unknown protocol {name!r}; available: {', '.join(sorted(_protocols))} "
                            f"(or path/to/file.py:NAME){did_you_mean(name, _protocols)}")
    return _protocols[name]


def find(name: str) -> ProtocolSpec | None:
    """The registered protocol `name`, or None (a protocol of an old run no longer registered, say)."""
    try:
        return get(name)
    except ProtocolError:
        return None


def available() -> dict[str, ProtocolSpec]:
    _load_all()
    return dict(sorted(_protocols.items()))
