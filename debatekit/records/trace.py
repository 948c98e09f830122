"""Run folders: `run.json`, `events.jsonl`, `debates.jsonl`, written so a killed run loses nothing.

`run.json` is replaced atomically (write to a temporary file, then rename). The two JSONL
files are appended one whole line per `write` on an O_APPEND descriptor, so a line is either
there or not; a torn last line from a kill is ignored when reading. `--resume` reads
`debates.jsonl` and skips the items that finished.

A finished run's calls can be packed (`RunFolder.pack`, `debatekit pack`): `events.jsonl` is
gzipped into `events.jsonl.gz`, which a study folder commits at a fraction of the size (the
trace of 900 debate calls, every prompt included, is megabytes of repeated text). Readers take
the packed calls first, then any plain `events.jsonl` a later resume appended.

A folder has one writer at a time: a run holds an `flock` on its `.lock` file from start to end,
and a second run on the same folder fails naming the first one's process. The system drops the
lock when its holder dies, so a killed run never blocks `--resume`. Readers take no lock.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import gzip
import hashlib
import json
import os
import subprocess
import time
import zlib
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterator, NamedTuple

from pydantic import BaseModel, ValidationError

from debatekit._base.files import LinkRefused, open_nofollow
from debatekit._base.validation import first_error
from debatekit.records.schemas import DebateRecord, RunRecord
from debatekit.records.storage import (TraceWriteError, ends_torn, mark_in_place, parsed, read_jsonl,
                                       read_jsonl_numbered, replace_file, write_json_atomic, write_line)

RUN_FILE, EVENTS_FILE, DEBATES_FILE = "run.json", "events.jsonl", "debates.jsonl"
PACKED_EVENTS_FILE = EVENTS_FILE + ".gz"
LOCK_FILE = ".lock"


class RunFolderError(ValueError):
    """A run folder cannot be created or resumed; the message says why."""


def run_folders(path: Path | str) -> list[Path]:
    """The run folders at `path`: itself if it is one, else the runs one level under it (a sweep's or
    a study's points; runs deeper down are not looked for), a sweep's in the order of its grid
    (`sweep.json`), any other by name after them.

    Raises:
        ValueError: `path` is not a folder, or neither it nor a folder one level under it holds a run.json.
    """
    path = Path(path)
    if not path.is_dir():
        raise ValueError(f"{path} is not a folder: name a run folder, or a sweep or study folder")
    if (path / RUN_FILE).exists():
        return [path]
    found = [run.parent for run in path.glob(f"*/{RUN_FILE}")]
    if not found:
        raise ValueError(f"{path} holds no run ({RUN_FILE}), neither itself nor in a folder under it")
    try:
        points = [p["id"] for p in json.loads((path / "sweep.json").read_text(encoding="utf-8"))["points"]]
    except (OSError, ValueError, KeyError, TypeError):
        points = []
    order = {point: i for i, point in enumerate(points)}
    return sorted(found, key=lambda run: (order.get(run.name, len(order)), run.name))


def item_folder_name(item_id: str) -> str:
    """The folder of an item under `items/`: the id itself when it is a safe file name, else a safe
    slug plus a short hash of the id, so that two ids never share a folder and none leaves `items/`."""
    slug = "".join(c if c.isalnum() or c in "-_." else "_" for c in item_id)[:80]
    if slug == item_id and slug.strip("."):
        return slug
    return f"{slug.strip('.') or 'item'}-{hashlib.sha256(item_id.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"


def inside(run_dir: Path | str, relative: str, source: str) -> Path:
    """`run_dir / relative` resolved, for a path read from one of the run folder's own files (`source`).

    Raises:
        RunFolderError: the path leads out of the run folder (`..`, an absolute path, a link).
    """
    root = Path(run_dir).resolve()
    path = (root / relative).resolve()
    if not path.is_relative_to(root):
        raise RunFolderError(f"{source}: the path {relative!r} leads out of the run folder {run_dir}")
    return path


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


def _lines_of(path: Path, errors: str = "surrogateescape") -> Iterator[str]:
    """The lines of a plain or (by its `.gz` name) gzipped text file; undecodable bytes are kept
    as they are (for a rewrite) or, with `errors="replace"`, replaced (for reading)."""
    if path.suffix != ".gz":
        with open(path, encoding="utf-8", errors=errors) as f:
            yield from f
        return
    try:
        with gzip.open(path, "rt", encoding="utf-8", errors=errors) as f:
            yield from f
    except FileNotFoundError:
        raise
    except (OSError, EOFError, zlib.error) as exc:
        raise RunFolderError(f"{path} cannot be read ({exc}): restore it from git or from a copy of the run") from exc


def _event_files(folder: Path) -> list[Path]:
    """A run's call events, in order: the packed file, then the plain one (appended after a pack)."""
    return [path for path in (folder / PACKED_EVENTS_FILE, folder / EVENTS_FILE) if path.exists()]


class Packed(NamedTuple):
    """What `RunFolder.pack` did: the events' bytes before and after, and the lines no reader reads
    among those it packed now: kept (`unread`: garbled, or cut by a kill and ended by a resume) and
    left out (`torn`: cut by a kill, the file's last)."""

    before: int
    after: int
    unread: int = 0
    torn: int = 0

    def damage(self) -> str:
        """The lines no reader reads, in words ("" for none)."""
        said = [f"{self.unread} garbled line(s) kept as they were" if self.unread else "",
                f"{self.torn} torn line(s) left out" if self.torn else ""]
        return "; ".join(part for part in said if part)


def _event_lines(folder: Path, errors: str = "surrogateescape") -> Iterator[str]:
    """The lines of a run's call events, packed ones first. A plain line the packed file already
    holds is skipped: a pack stopped between writing the packed file and removing the plain one
    leaves both, and no call may count twice (two calls never make the same line: each has its
    debate, its time stamp and its reply)."""
    files = _event_files(folder)
    if len(files) < 2:
        yield from (line for path in files for line in _lines_of(path, errors))
        return
    packed = set()
    for line in _lines_of(files[0], errors):
        packed.add(line)
        yield line
    yield from _not_packed(files[1], packed, errors)


def _not_packed(plain: Path, packed: set[str], errors: str = "surrogateescape") -> Iterator[str]:
    """The lines of the plain events file that the packed file does not hold already."""
    return (line for line in _lines_of(plain, errors) if line not in packed)


class RunFolder:
    """One run's folder on disk."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        self._fds: dict[str, int] = {}
        self._lock: int | None = None

    @property
    def exists(self) -> bool:
        return (self.path / RUN_FILE).exists()

    def read_run(self) -> RunRecord:
        path = self.path / RUN_FILE
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, ValueError) as exc:
            raise RunFolderError(f"{path} cannot be read: {exc}") from exc
        try:
            row = json.loads(text)
        except (json.JSONDecodeError, RecursionError) as exc:
            what = "empty" if not text.strip() else f"not JSON ({exc}; cut off?)"
            raise RunFolderError(f"{path} cannot be read: it is {what}; restore it from git or a copy") from exc
        try:
            return RunRecord.model_validate(row)
        except ValidationError as exc:
            field, message = first_error(exc, default="the record")
            raise RunFolderError(f"{path} cannot be read: field {field!r}: {message}") from exc

    def write_run(self, record: RunRecord) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        write_json_atomic(self.path / RUN_FILE, record)

    def mark_run(self, status: str, reason: str | None, finished: str | None) -> None:
        """Say in run.json how the run ended when the disk has no room for a new run.json
        (`mark_in_place`); its summary stays as it was last written."""
        mark_in_place(self.path / RUN_FILE, {"status": status, "reason": reason, "finished": finished})

    def create(self) -> None:
        """Make the folder, failing with a one-line reason (before anything is written in it).

        Raises:
            RunFolderError: the path is a file, or the folder cannot be made there.
        """
        if self.path.exists() and not self.path.is_dir():
            raise RunFolderError(f"run folder {self.path} is an existing file, not a folder")
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RunFolderError(f"cannot create run folder {self.path}: {exc.strerror}") from exc

    def lock(self) -> None:
        """Hold the folder as its only writer until `close` (the folder must exist).

        Raises:
            RunFolderError: another process holds it; the message gives that process's id.
        """
        if self._lock is not None:
            return
        self.refuse_links()
        try:
            fd = open_nofollow(self.path / LOCK_FILE, os.O_RDWR | os.O_CREAT)
        except LinkRefused as exc:
            raise RunFolderError(str(exc)) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = ""
            for _ in range(20):  # a writer that took the lock this instant writes its pid a moment later
                holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
                if holder:
                    break
                time.sleep(0.01)
            holder = holder or "unknown"
            os.close(fd)
            raise RunFolderError(f"run folder {self.path} is in use by process {holder} (another debatekit run "
                                 "writes there); wait for it to end, or use another --out") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        self._lock = fd

    def refuse_links(self) -> None:
        """Refuse a folder holding a symbolic link (a file or folder of it), before anything is
        written there: a write would follow it out of the folder.

        Raises:
            RunFolderError: the first link found, named.
        """
        for root, dirs, files in os.walk(self.path):
            for name in [*dirs, *files]:
                if os.path.islink(os.path.join(root, name)):
                    raise RunFolderError(str(LinkRefused(os.path.join(root, name))))

    def append(self, name: str, record: BaseModel) -> None:
        """Append one record as one line (a single write on an O_APPEND descriptor)."""
        if name not in self._fds:
            self.path.mkdir(parents=True, exist_ok=True)
            try:
                fd = open_nofollow(self.path / name, os.O_RDWR | os.O_APPEND | os.O_CREAT)
            except LinkRefused as exc:  # an OSError stops a run as a failed write does: interrupted, resumable
                raise TraceWriteError(errno.ELOOP, str(exc), str(self.path / name)) from None
            if ends_torn(fd):  # a killed run left half a line: end it so the next line stands alone
                os.write(fd, b"\n")
            self._fds[name] = fd
        write_line(self._fds[name], (record.model_dump_json() + "\n").encode("utf-8"), self.path / name)

    def debates(self) -> list[DebateRecord]:
        """Finished debates, the last record per item and seed (a resumed item supersedes its failure).

        Raises:
            RunFolderError: a line that is not a debate record, named by file and line.
        """
        latest: dict[tuple, DebateRecord] = {}
        path = self.path / DEBATES_FILE
        for number, row in read_jsonl_numbered(path):
            try:
                record = DebateRecord.model_validate(row)
            except ValidationError as exc:
                field, message = first_error(exc, default="row")
                raise RunFolderError(f"{path}: line {number}, field {field!r}: {message}") from exc
            if record.seed is not None:  # supersedes a record written before seeds were recorded
                latest.pop((record.item_id, None), None)
            latest[record.item_id, record.seed] = record
        return list(latest.values())

    def recorded_debate_ids(self) -> set[str]:
        """The debate ids of every debate record, superseded ones too: a debate not among them never finished."""
        return {row.get("debate_id") for row in read_jsonl(self.path / DEBATES_FILE)}

    def prune_unfinished(self) -> list[dict]:
        """Drop the events of debates that never finished (cut off by a stop), before a resume
        re-runs their items, so that every call is counted once. Returns the dropped events that
        still read as JSON objects (a torn or garbled line is dropped too, and not returned)."""
        finished = {row.get("debate_id") for row in self._drop_unreadable_debates()}
        dropped = []
        for path in _event_files(self.path):
            lines = list(_lines_of(path))
            rows = dict(parsed(lines))
            kept = [line for number, line in enumerate(lines, start=1)
                    if number in rows and rows[number].get("debate_id") in finished]
            dropped += [row for row in rows.values() if row.get("debate_id") not in finished]
            if len(kept) < len(lines):
                replace_file(path, kept)
        return dropped

    def clear(self) -> None:
        """Remove the run's record (run.json, debates, call events) for a run to start again in the
        folder; the caller holds that nothing in it is worth keeping."""
        for path in (self.path / RUN_FILE, self.path / DEBATES_FILE, *_event_files(self.path)):
            path.unlink(missing_ok=True)

    def _drop_unreadable_debates(self) -> list[dict]:
        """Remove the lines of the debates file that no reader takes (a half line a kill left at its
        end, garbage): a resume appends after them, and a line of garbage in the middle of the file
        breaks other readers of it (pandas, jq). The debate it may have been runs again. Returns the
        rows kept, superseded records too."""
        path = self.path / DEBATES_FILE
        if not path.exists():
            return []
        lines = list(_lines_of(path))
        rows = dict(parsed(lines))
        if len(rows) < len(lines):
            replace_file(path, [lines[number - 1] for number in rows])
        return list(rows.values())

    def events(self) -> list[dict]:
        """Every call event of the run, packed ones first (read again if a pack removed the plain
        file meanwhile: readers take no lock)."""
        try:
            return [row for _, row in parsed(_event_lines(self.path, errors="replace"))]
        except FileNotFoundError:
            return [row for _, row in parsed(_event_lines(self.path, errors="replace"))]

    def event_lines(self) -> list[tuple[str, dict]]:
        """Each call event as its line and its row, in the order of `events` (a rewrite that leaves
        an event as it was keeps its line byte for byte)."""
        lines = list(_event_lines(self.path, errors="replace"))
        return [(lines[number - 1], row) for number, row in parsed(lines)]

    def pack(self) -> Packed:
        """Gzip the run's call events into `events.jsonl.gz` (with any packed before), holding the
        folder's lock so that no run writes meanwhile. A line no reader reads is counted: a garbled
        one is kept as it was (packing changes no record); a torn last line (a write cut by a kill,
        whose call a resume makes again) is left out, unless a resume has ended it already, which
        makes it a garbled line.

        Raises:
            RunFolderError: a run writes in the folder now (its process named).
        """
        if not (self.path / EVENTS_FILE).exists():
            after = sum(path.stat().st_size for path in _event_files(self.path))
            return Packed(after, after)
        with self._held():  # the files as they are once no run can write
            before = sum(path.stat().st_size for path in _event_files(self.path))
            packed_file = self.path / PACKED_EVENTS_FILE
            packed = list(_lines_of(packed_file)) if packed_file.exists() else []
            plain = list(_not_packed(self.path / EVENTS_FILE, set(packed)))  # a stopped pack left some in both
            new = [line for line in plain if line.endswith("\n")]
            unread = len(new) - sum(1 for _ in parsed(new))  # those packed before were counted then
            replace_file(packed_file, [*packed, *new])
            (self.path / EVENTS_FILE).unlink()
        return Packed(before, sum(path.stat().st_size for path in _event_files(self.path)), unread,
                      len(plain) - len(new))

    def rewrite(self, debates: Callable[[dict], BaseModel | None], events: Callable[[dict], dict | None]) -> None:
        """Change records in place, holding the folder's lock: each debate record for which
        `debates(row)` gives a new one, and each call event for which `events(row)` does (packed or
        not, where it is); every other line stays byte for byte (`debatekit.sweep.rescore` with write).

        Raises:
            RunFolderError: a run writes in the folder now (its process named).
        """
        with self._held():
            for path, change in [*((p, events) for p in _event_files(self.path)),
                                 (self.path / DEBATES_FILE, debates)]:
                lines, changed = [], False
                for line in _lines_of(path):
                    try:
                        new = change(json.loads(line))
                    except (json.JSONDecodeError, TypeError, AttributeError):  # torn or not an object: as it is
                        new = None
                    if new is not None:
                        changed = True
                        line = (new.model_dump_json() if isinstance(new, BaseModel)
                                else json.dumps(new, ensure_ascii=False, separators=(",", ":"))) + "\n"
                    lines.append(line)
                if changed:
                    replace_file(path, lines)

    @contextlib.contextmanager
    def _held(self) -> Iterator[None]:
        """The folder's lock for the block: taken if this folder does not hold it, given back after."""
        took = self._lock is None
        self.lock()
        try:
            yield
        finally:
            if took:
                self._unlock()

    def close(self) -> None:
        """Close the open files and give up the lock, if this folder holds it."""
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
        self._unlock()

    def _unlock(self) -> None:
        if self._lock is not None:
            os.close(self._lock)  # closing the descriptor releases the flock
            self._lock = None
