"""Writing in a run or sweep folder without following a symbolic link out of it.

Run and sweep folders are committed and shared, and git stores symbolic links: a `debates.jsonl`
that links to `~/.bashrc`, or a `.lock` that links to any file, must not make debatekit append to
or truncate that file. Every file debatekit writes there is opened with `O_NOFOLLOW` (or checked
first, where a library opens it) and a link is refused in one line naming it.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path


class LinkRefused(ValueError):
    """A file debatekit was to write is a symbolic link; the message names it."""

    def __init__(self, path: Path | str):
        super().__init__(f"{path} is a symbolic link: debatekit writes no file through a link in a run or sweep "
                         "folder; replace it with a plain file")


def refuse_link(path: Path | str) -> Path:
    """`path`, unless it is a symbolic link (for a file a library opens itself).

    Raises:
        LinkRefused: it is one.
    """
    if Path(path).is_symlink():
        raise LinkRefused(path)
    return Path(path)


def open_nofollow(path: Path | str, flags: int, mode: int = 0o644) -> int:
    """`os.open` that refuses a symbolic link (`O_NOFOLLOW`).

    Raises:
        LinkRefused: `path` is a link.
    """
    try:
        return os.open(path, flags | os.O_NOFOLLOW, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise LinkRefused(path) from None
        raise


def write_text(path: Path | str, text: str) -> None:
    """Write `text` (UTF-8) to `path`, truncating it, never through a link (`open_nofollow`)."""
    fd = open_nofollow(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)


def write_bytes(path: Path | str, data: bytes) -> None:
    fd = open_nofollow(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
