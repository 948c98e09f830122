"""Importing a user's Python file named as `path/to/file.py:NAME`, once per path and content: how
protocol files and intervention files are loaded."""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from pathlib import Path
from typing import Callable


def import_file_once(reference: str, loaded: set[str], what: str, error: type[Exception],
                     loading: Callable[[dict | None], None], again: bool = False) -> tuple[Path, str]:
    """Import the file of `reference` (`path.py:NAME`) unless this content of it was imported before.

    Args:
        reference: `path.py:NAME`.
        loaded: the `path@sha256` keys imported so far (updated).
        what: what the file holds, for messages ("protocol", "intervention").
        error: the exception to raise, with one line naming the file.
        loading: called with the file's source (`kind`, `path`, `sha256`) before its import, so that
            what it registers records where it came from, and with None after.
        again: import it even if this content was imported before from this path, so that what it
            registers is registered again from here (a copy elsewhere took the name since).

    Returns:
        The file's resolved path and NAME.
    """
    path_text, _, wanted = reference.rpartition(":")
    path = Path(path_text).expanduser().resolve()
    if not path.is_file():
        raise error(f"{what} file {path_text!r} does not exist (in {reference!r})")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    key = f"{path}@{digest}"
    if again or key not in loaded:
        loading({"kind": "file", "path": str(path), "sha256": digest})
        module_name = f"debatekit_{what}_{digest[:12]}"
        try:
            spec = importlib.util.spec_from_file_location(module_name, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[module_name] = module
            spec.loader.exec_module(module)
        except error:
            raise
        except Exception as exc:  # noqa: BLE001 - named, one line
            raise error(f"{what} file {path} failed to import: {type(exc).__name__}: {exc}") from exc
        finally:
            loading(None)
        loaded.add(key)
    return path, wanted


def load_entry_points(group: str, loading: Callable[[dict | None], None],
                      warning: Callable[[str, dict, Exception], str]) -> None:
    """Import every installed package's entry points of `group`; one that fails prints one warning
    line (`warning(name, source, exc)`) and the others still load. `loading` is called with each
    package's source (`kind`, `package`, `version`, `entry_point`) before its import and None after."""
    from importlib.metadata import entry_points

    for point in entry_points(group=group):
        dist = getattr(point, "dist", None)
        source = {"kind": "package", "package": getattr(dist, "name", None) or point.module,
                  "version": getattr(dist, "version", None), "entry_point": f"{point.name} = {point.value}"}
        loading(source)
        try:
            point.load()
        except Exception as exc:  # noqa: BLE001 - a broken plugin must not break the command
            print(f"debatekit: warning: {warning(point.name, source, exc)}", file=sys.stderr)
        finally:
            loading(None)
