"""An exclusive lock on a file, held between processes of one machine (`fcntl.flock`)."""

from __future__ import annotations

import fcntl
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


@contextmanager
def exclusive(path: Path | str) -> Iterator[None]:
    """Hold an exclusive lock on `path` (created if missing) until the block ends; other processes
    asking for it wait."""
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
