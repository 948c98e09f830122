"""Import paths from before the package was grouped by concept (0.1), kept working with a
DeprecationWarning that names the new path: `import debatekit.gateway` gives the very module
`debatekit.models.gateway`, so code and monkeypatches written for the old path still act on it."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import types
import warnings

MOVED = {
    "gateway": "models.gateway", "providers": "models.providers", "provider_errors": "models.errors",
    "model_kinds": "models.kinds", "local": "models.local", "shared_engine": "models.shared_engine",
    "prefix_cache": "models.prefix_cache", "cores": "models.cores", "repetition": "models.repetition",
    "scripted": "models.scripted", "cache": "models.cache", "credentials": "models.credentials",
    "budget": "models.budget",
    "schemas": "records.schemas", "trace": "records.trace", "transcript": "records.transcript",
    "review": "records.review",
    "public_datasets": "datasets.public", "answer_kinds": "_base.answer_kinds",
    "signals": "_base.signals", "extras": "_base.extras",
    "paired": "analysis.paired", "plots": "analysis.plots", "widgets": "analysis.widgets",
    "decompose": "analysis.decompose", "power": "analysis.power", "study": "analysis.study",
    "report": "sweep.report", "nodes": "protocols.nodes", "commands": "cli",
    "protocols.answers": "protocols.shared.answers", "protocols.extract": "protocols.shared.extract",
    "protocols.fields": "protocols.shared.fields", "protocols.topology": "protocols.shared.topology",
    **{f"commands.{name}": f"cli.{name}"
       for name in ("compare", "new", "report", "review", "serve", "show", "study", "sweep")},
}
"""Old module (under `debatekit.`) -> where it lives now."""
SPLIT = {"metrics": ("datasets.voting", "analysis.intervals")}
"""Old modules whose functions went to several new ones."""


class _Aliases(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        prefix, _, rest = fullname.partition(".")
        if prefix == "debatekit" and (rest in MOVED or rest in SPLIT):
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec):
        rest = spec.name.partition(".")[2]
        new = [f"debatekit.{m}" for m in SPLIT.get(rest, (MOVED.get(rest),))]
        warnings.warn(f"{spec.name} moved to {' and '.join(new)}; the old path will be removed",
                      DeprecationWarning, stacklevel=2)
        if len(new) == 1:
            return importlib.import_module(new[0])
        merged = types.ModuleType(spec.name)
        for name in new:
            module = importlib.import_module(name)
            merged.__dict__.update({k: v for k, v in vars(module).items() if not k.startswith("__")})
        return merged

    def exec_module(self, module):
        pass  # the module was imported under its new name already


def install() -> None:
    """Let the old paths import (once per process)."""
    if not any(isinstance(f, _Aliases) for f in sys.meta_path):
        sys.meta_path.insert(0, _Aliases())  # before an editable install's finder, which knows the old files
