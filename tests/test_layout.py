"""The package's structure: layers that only import downward, no import cycle, the public
names at the top, and the old import paths kept working with a deprecation warning."""

import ast
import functools
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from debatekit import registry

PACKAGE = Path(__file__).resolve().parent.parent / "debatekit"
LAYERS = ["_base", "models", "records", "datasets", "engine", "registry", "protocols", "analysis", "runner",
          "sweep", "cli"]
"""From the bottom up: a module may import its own layer and the layers below, never one above."""


@functools.cache
def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def imports(path: Path, name: str) -> set[str]:
    """Every debatekit module `path` imports, at the top or inside a function."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("debatekit.")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 \
                and node.module.startswith("debatekit"):
            known = modules()
            for alias in node.names:
                target = f"{node.module}.{alias.name}"
                out.add(target if target in known else node.module)
    return {m for m in out if m != "debatekit"}


def layer(module: str) -> int:
    return LAYERS.index(module.split(".")[1])


def test_every_module_has_a_layer():
    loose = [m for m in modules() if m != "debatekit" and m.split(".")[1] not in LAYERS]
    assert loose == []


def test_imports_only_go_down():
    upward = []
    for name, path in modules().items():
        if name == "debatekit":
            continue  # the facade re-exports from every layer, lazily
        for target in imports(path, name):
            if layer(target) > layer(name):
                upward.append(f"{name} -> {target}")
    assert upward == []


def test_no_import_cycle():
    graph = {name: {t for t in imports(path, name) if t in modules()} for name, path in modules().items()}
    state: dict[str, int] = {}

    def visit(node, trail):
        state[node] = 1
        for nxt in graph.get(node, ()):
            if state.get(nxt) == 1:
                raise AssertionError("import cycle: " + " -> ".join(trail[trail.index(nxt):] + [nxt]))
            if nxt not in state:
                visit(nxt, trail + [nxt])
        state[node] = 2

    for name in graph:
        if name not in state:
            visit(name, [name])


def test_top_level_is_short():
    entries = [p.name for p in PACKAGE.iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()]
    assert len(entries) <= 12, sorted(entries)


def test_the_names_every_user_needs_import_from_the_top():
    from debatekit import Debate, RunConfig, protocol, run

    assert run.__module__ == "debatekit.runner" and RunConfig.__module__ == "debatekit.records.schemas"
    assert protocol is registry.protocol and Debate.__module__ == "debatekit.engine"


def test_import_debatekit_loads_no_layer():
    code = "import sys, debatekit; print(sorted(m for m in sys.modules if m.startswith('debatekit.')))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "['debatekit._base', 'debatekit._base.lazy']"


def test_no_old_import_path_is_kept():
    """0.x keeps no aliases of moved modules: the old path is simply not there."""
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("debatekit.gateway")
    assert not (Path(registry.__file__).parent / "_base" / "moved.py").exists()


def test_every_builtin_protocol_module_is_listed():
    folder = PACKAGE / "protocols"
    present = {p.stem if p.is_file() else p.name for p in folder.iterdir()
               if (p.suffix == ".py" or (p / "__init__.py").exists()) and p.stem not in ("__init__", "shared", "nodes")}
    assert {m.rsplit(".", 1)[1] for m in registry.BUILTIN} == present


@pytest.mark.parametrize("package", ["debatekit.models", "debatekit.records", "debatekit.datasets",
                                     "debatekit.analysis", "debatekit"])
def test_a_package_exports_names_that_import_and_hide_no_module(package):
    module = importlib.import_module(package)
    folder = Path(module.__file__).parent
    for name in module.__all__:
        assert not (folder / f"{name}.py").exists() and not (folder / name).is_dir(), name
        assert getattr(module, name) is not None
