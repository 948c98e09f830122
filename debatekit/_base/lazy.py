"""A package's public names, imported from its modules on first use (so `import debatekit.x` stays fast)."""

from __future__ import annotations

import importlib
import sys
from typing import Callable


def exports(package: str, where: dict[str, str]) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """`__getattr__` and `__dir__` for `package`, whose public name N lives in module `where[N]`.

    A name is imported when first read and then kept in the package, so later reads are plain
    attribute reads. A name that is not listed falls through to Python's own rules (a submodule
    of the package is still imported by `from package import submodule`). A name must not be
    one of the package's modules, which it would hide.
    """
    def __getattr__(name: str) -> object:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(where) | set(vars(sys.modules[package])))

    return __getattr__, __dir__
