"""Run folders: `run.json`, `events.jsonl`, `debates.jsonl`, written so a killed run loses nothing.

`run.json` is replaced atomically (write to a temporary file, then rename). The two JSONL
files are appended one whole line per `write` on an O_APPEND descriptor, so a line is either
there or not; a torn last line from a kill is ignored when reading. `--resume` reads
`debates.jsonl` and skips the items that finished.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

from pydantic import BaseModel

from debatekit.schemas import DebateRecord, RunRecord

RUN_FILE, EVENTS_FILE, DEBATES_FILE = "run.json", "events.jsonl", "debates.jsonl"


class RunFolderError(ValueError):
    """A run folder cannot be created or resumed; the message says why."""


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def git_commit(cwd: Path | None = None) -> str | None:
    """The commit of the debatekit checkout, if it is a git checkout."""
    where = cwd or Path(__file__).resolve().parent
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def write_json_atomic(path: Path, data: BaseModel | dict) -> None:
    """Write JSON to `path` so that readers see the old or the new file, never half of one."""
    text = data.model_dump_json(indent=2) if isinstance(data, BaseModel) else json.dumps(data, indent=2, default=str)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def read_jsonl(path: Path) -> Iterator[dict]:
    """Complete JSON lines of a file; a torn or corrupt line (from a kill) is skipped."""
    if not path.exists():
        return
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if not line.endswith("\n"):
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                continue


def _ends_torn(fd: int) -> bool:
    size = os.fstat(fd).st_size
    return size > 0 and os.pread(fd, 1, size - 1) != b"\n"


class RunFolder:
    """One run's folder on disk."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        self._fds: dict[str, int] = {}

    @property
    def exists(self) -> bool:
        return (self.path / RUN_FILE).exists()

    def read_run(self) -> RunRecord:
        try:
            return RunRecord.model_validate_json((self.path / RUN_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise RunFolderError(f"{self.path / RUN_FILE} cannot be read: {exc}") from exc

    def write_run(self, record: RunRecord) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        write_json_atomic(self.path / RUN_FILE, record)

    def append(self, name: str, record: BaseModel) -> None:
        """Append one record as one line (a single write on an O_APPEND descriptor)."""
        if name not in self._fds:
            self.path.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path / name, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
            if _ends_torn(fd):  # a killed run left half a line: end it so the next line stands alone
                os.write(fd, b"\n")
            self._fds[name] = fd
        os.write(self._fds[name], (record.model_dump_json() + "\n").encode("utf-8"))

    def debates(self) -> list[DebateRecord]:
        """Finished debates, the last record per item (a resumed item supersedes its failure)."""
        latest: dict[str, DebateRecord] = {}
        for row in read_jsonl(self.path / DEBATES_FILE):
            record = DebateRecord.model_validate(row)
            latest[record.item_id] = record
        return list(latest.values())

    def events(self) -> list[dict]:
        return list(read_jsonl(self.path / EVENTS_FILE))

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
