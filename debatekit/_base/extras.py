"""Optional dependencies: a command that needs an extra that is not installed says which one, in one line."""

from __future__ import annotations

import importlib
from types import ModuleType


class MissingExtra(ValueError):
    """An optional dependency is not installed; the message names the pip extra that brings it."""


def need(module: str, extra: str, what: str) -> ModuleType:
    """Import `module`, or fail naming the extra to install.

    Args:
        module: the module to import, e.g. "papermill".
        extra: the debatekit extra that installs it, e.g. "notebooks".
        what: what needs it, e.g. "debatekit sweep".

    Raises:
        MissingExtra: `module` cannot be imported.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtra(f"{what} needs {module.split('.')[0]}, which is not installed: "
                           f"pip install 'debatekit[{extra}]'") from exc
