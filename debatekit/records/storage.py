"""Writing files so that a killed run or a full disk loses nothing, and reading back what is whole.

A JSON file is replaced atomically (a temporary file, then a rename), or, on a disk too full for
the copy, marked in its own bytes. A JSONL line is appended in one write, whole or not at all; a
torn or corrupt line is skipped when read. A file rewritten is on disk before its name points at it.
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import json
import os
import tempfile
from pathlib import Path
from typing import Iterator

from pydantic import BaseModel


class TraceWriteError(OSError):
    """Writing the run folder failed (disk full, file too large): the run stops, it is no item's fault."""


def as_write_error(exc: BaseException) -> TraceWriteError | None:
    """A full disk or file size limit hit by any write of a run (a per-item file, say), as a TraceWriteError."""
    if isinstance(exc, TraceWriteError):
        return exc
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT):
        return TraceWriteError(f"cannot write {exc.filename or 'the run folder'}: {exc.strerror}")
    return None


def write_json_atomic(path: Path, data: BaseModel | dict) -> None:
    """Write JSON to `path` so that readers see the old or the new file, never half of one."""
    text = data.model_dump_json(indent=2) if isinstance(data, BaseModel) else json.dumps(data, indent=2, default=str)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:  # a full disk: no half-written temporary file is left beside the file
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def mark_in_place(path: Path, changes: dict) -> None:
    """Change a few fields of the JSON file `path` by rewriting it compactly over its own bytes, for
    a disk too full for `write_json_atomic`'s new copy: an indented file holds its compact form with
    room to spare, so no new block is needed.

    Raises:
        OSError: the file cannot be read or written, or its compact form would be longer.
    """
    old = path.read_bytes()
    new = json.dumps({**json.loads(old), **changes}, separators=(",", ":"), default=str).encode("utf-8")
    if len(new) > len(old):
        raise OSError(errno.ENOSPC, "no room to mark the file in place", str(path))
    fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW)
    try:
        os.pwrite(fd, new, 0)
        os.ftruncate(fd, len(new))
        os.fsync(fd)
    finally:
        os.close(fd)


def read_jsonl(path: Path) -> Iterator[dict]:
    """Complete JSON lines of a file; a torn or corrupt line (from a kill) is skipped."""
    return (row for _, row in read_jsonl_numbered(path))


def read_jsonl_numbered(path: Path) -> Iterator[tuple[int, dict]]:
    """(line number, row) of each complete JSON line of a file, as `read_jsonl`."""
    if not path.exists():
        return
    with open(path, encoding="utf-8", errors="replace") as f:
        yield from parsed(f)


def parsed(lines) -> Iterator[tuple[int, dict]]:
    """(line number, row) of each complete line that holds a JSON object; a torn line, garbage or a
    JSON value that is not an object (`[1, 2]`, `42`) is skipped."""
    for number, line in enumerate(lines, start=1):
        if not line.endswith("\n"):
            continue
        try:
            row = json.loads(line)
        except (json.JSONDecodeError, RecursionError):
            continue
        if isinstance(row, dict):
            yield number, row


def replace_file(path: Path, lines) -> None:
    """Replace `path` with `lines` atomically and durably (on disk before the name points at it, so
    that a file removed next is never the only copy); a `.gz` path is gzipped, byte for byte the
    same for the same lines (no time stamp in the header, so a repack changes nothing git sees).
    A write that fails (a full disk) leaves `path` as it was and no temporary file behind."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as raw:
            if path.suffix == ".gz":
                with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9, mtime=0) as f:
                    for line in lines:
                        f.write(line.encode("utf-8", "surrogateescape"))
            else:
                raw.writelines(line.encode("utf-8", "surrogateescape") for line in lines)
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


def write_line(fd: int, data: bytes, path: Path) -> None:
    """Append `data` whole or not at all: a short write (file size limit, full disk) is cut back."""
    size = os.fstat(fd).st_size
    try:
        written = os.write(fd, data)
    except OSError as exc:
        raise TraceWriteError(f"cannot write {path}: {exc.strerror}") from exc
    if written < len(data):
        os.ftruncate(fd, size)
        raise TraceWriteError(f"cannot write {path}: the disk is full or the file size limit was reached")


def ends_torn(fd: int) -> bool:
    size = os.fstat(fd).st_size
    return size > 0 and os.pread(fd, 1, size - 1) != b"\n"
