"""Protocol registration and lookup.

A protocol is a factory decorated with `@protocol("name")`. Its keyword arguments are the
protocol's parameters (with defaults and type hints); it returns the async function that runs
one debate: `async def run(item, debate) -> Outcome`.

    @protocol("single")
    def single(temperature: float = 0.0) -> Solver:
        async def run(item, debate):
            ...
        return run
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from debatekit.datasets import Item
from debatekit.schemas import first_error

Solver = Callable[[Any, Any], Awaitable[Any]]


class ProtocolError(ValueError):
    """Unknown protocol or invalid protocol parameters."""


@dataclass
class ProtocolSpec:
    name: str
    factory: Callable[..., Solver]
    item_model: type[BaseModel]
    description: str
    report: Callable[[Any], str] | None = None
    """Extra lines `debatekit run` prints for a finished run folder (the protocol's own scores)."""

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
                                f"parameters: {', '.join(self.params)}")
        hints = inspect.get_annotations(self.factory, eval_str=True)
        fields = {k: (hints.get(k, Any), p.default) for k, p in self.params.items()}
        model = create_model(f"{self.name}_params", __config__=ConfigDict(extra="forbid"), **fields)
        try:
            return model(**params).model_dump()
        except ValidationError as exc:
            field, message = first_error(exc)
            raise ProtocolError(f"protocol {self.name!r}, parameter {field!r}: {message}") from exc

    def build(self, params: dict[str, Any]) -> Solver:
        return self.factory(**self.validate(params))


_protocols: dict[str, ProtocolSpec] = {}


def protocol(name: str, item: type[BaseModel] = Item, report: Callable[[Any], str] | None = None):
    """Register a protocol factory under `name`; `item` is the model its dataset rows must fit;
    `report(run_dir) -> str` (optional) summarizes a finished run in the protocol's own terms."""

    def register(factory):
        doc = inspect.getdoc(factory) or ""
        _protocols[name] = ProtocolSpec(name, factory, item, doc.splitlines()[0] if doc else "", report)
        return factory

    return register


def _load_builtin() -> None:
    import debatekit.protocols as package

    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{module.name}")


def get(name: str) -> ProtocolSpec:
    """The registered protocol `name`."""
    _load_builtin()
    if name not in _protocols:
        raise ProtocolError(f"unknown protocol {name!r}; available: {', '.join(sorted(_protocols))}")
    return _protocols[name]


def available() -> dict[str, ProtocolSpec]:
    _load_builtin()
    return dict(sorted(_protocols.items()))
