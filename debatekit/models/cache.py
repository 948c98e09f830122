"""On-disk response cache, keyed by debatekit (litellm's own cache is unusable in 1.106.2).

One sqlite file in WAL mode, so several processes of a sweep can share it. A key is the
sha256 of what was asked (the model, the messages, the sampling parameters and the output schema:
`request_key`) and of what answers it (the endpoint, the options, the model file: `served_key`).

Each call event keeps, per reply, its key and usage (`reply_record`), so that a resume on a machine
whose cache lost them (another machine, a deleted cache) puts the replies of the debates a stop cut
off back in (`replies_in`, `ResponseCache.restore`) instead of asking the model again.

A damaged file (truncated, overwritten) is found when the cache opens: it is moved aside as
`responses.sqlite.corrupt-<time>` with one warning and the run goes on with an empty cache. A
read that fails later is a miss and a write that fails is skipped (one warning each), and so is a
row that does not read back as a reply (`CachedReply`: a list, a number, a text that is not a
string, edited in by hand or by another tool): the cache only saves calls, it never fails a debate.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import sys
import threading
import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from debatekit._base.validation import first_error


class CacheError(ValueError):
    """The cache folder cannot be used (not creatable, not writable); the message names it."""


def prompt_hash(messages: list[dict]) -> str:
    """A short hash of what a call was asked, recorded in its event (`CallEvent.prompt_hash`)."""
    return hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()[:16]


def request_key(model: str, messages: list[dict], params: dict, schema: dict | None) -> str:
    """What a call asked: the model's name, the messages, the sampling parameters and the output
    schema. Recorded with each reply (`reply_record`), it is how a replay finds a reply."""
    blob = json.dumps([model, messages, params, schema], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


def served_key(request: str, served_by: dict | None) -> str:
    """The response cache's key: what was asked (`request_key`) and what answers it (`served_by`: the
    endpoint, the options and the model file, `Gateway.served_by`), so that two servers serving one
    model name, or a model file replaced in place, never share replies. Its version ("v2") keeps it
    apart from the request-only keys of caches written before; a reply recorded with one of those
    is put back under this key by `replies_in`."""
    blob = json.dumps(["v2", request, served_by or {}], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def cache_key(model: str, messages: list[dict], params: dict, schema: dict | None,
              served_by: dict | None = None) -> str:
    """The response cache's key of a call (`served_key` of its `request_key`)."""
    return served_key(request_key(model, messages, params, schema), served_by)


def reply_record(key: str, reply: dict, request: str | None = None) -> dict:
    """What a call event keeps of one reply to restore it later: its cache key, what was asked
    (`request_key`), the length of its text (the event holds the text itself, cut to a maximum) and
    the rest of the reply."""
    return {"key": key, **({"request": request} if request else {}), "chars": len(reply["text"]),
            **{k: v for k, v in reply.items() if k != "text"}}


def asked(record: dict) -> str | None:
    """The `request_key` of a recorded reply: its own, or, recorded before replies kept it, its cache
    key, which was then the request key."""
    return record.get("request") or record.get("key")


def replies_in(event: dict, served_by=None) -> list[tuple[str, dict]]:
    """The (key, reply) pairs a call event can give back to a response cache, in the order asked.

    A call's replies are its repaired ones (`repairs`, each with its text) and then the last
    (`text`); one whose text the event holds cut short, or that does not read as a reply, is left out.
    With `served_by` (a function of the event's model, `Gateway.served_by`), each is keyed for the
    endpoint that serves that model now, so that a reply recorded under an older key is found.
    """
    texts = [repair.get("text") for repair in event.get("repairs") or []] + [event.get("text")]
    pairs = []
    for record, text in zip(event.get("replies") or [], texts):
        if not isinstance(record, dict) or not isinstance(text, str) or record.get("chars") != len(text):
            continue
        reply = {k: v for k, v in record.items() if k not in ("key", "request", "chars")} | {"text": text}
        try:
            CachedReply.model_validate(reply)
        except ValidationError:
            continue
        key = record.get("key")
        if served_by is not None and asked(record):
            key = served_key(asked(record), served_by(event.get("model")))
        if key:
            pairs.append((key, reply))
    return pairs


class CachedReply(BaseModel):
    """The shape a cached reply must have to be used (the reply dict the gateway stores); other keys pass."""

    model_config = ConfigDict(strict=True, extra="allow")
    text: str
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    prompt_seconds: float = 0.0
    generation_seconds: float = 0.0
    cost: float | None = None


class ResponseCache:
    """A persistent map from request keys to provider replies (text, usage, cost)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CacheError(f"cache folder {self.path.parent} cannot be created: {exc.strerror} "
                             "(set DEBATEKIT_CACHE_DIR, or use --no-cache)") from exc
        self._lock = threading.Lock()
        self._warned: set[str] = set()
        try:
            self._db = self._open()
        except sqlite3.OperationalError as exc:  # locked, read-only, cannot open: not damage
            raise CacheError(f"cache {self.path} cannot be opened: {exc} "
                             "(set DEBATEKIT_CACHE_DIR, or use --no-cache)") from exc
        except sqlite3.DatabaseError as exc:  # "file is not a database", "disk image is malformed"
            aside = self._move_aside()
            why = " ".join(str(exc).split())[:200]
            print(f"debatekit: warning: the response cache {self.path} is damaged ({why}); moved to {aside.name}, "
                  "starting an empty cache", file=sys.stderr)
            self._db = self._open()

    def _open(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            # WAL + NORMAL: a commit no longer waits for fsync (it blocked the event loop ~5-40 ms per
            # stored reply); the file cannot be corrupted, a power cut may drop the last few replies.
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            db.commit()
            (status,) = db.execute("PRAGMA quick_check(1)").fetchone()
            if status != "ok":
                raise sqlite3.DatabaseError(status)
        except BaseException:
            db.close()
            raise
        return db

    def _move_aside(self) -> Path:
        aside = self.path.with_name(f"{self.path.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}")
        self.path.replace(aside)
        for suffix in ("-wal", "-shm"):
            self.path.with_name(self.path.name + suffix).unlink(missing_ok=True)
        return aside

    def _warn_once(self, what: str, why: str, outcome: str = "going on without it") -> None:
        if what not in self._warned:
            self._warned.add(what)
            print(f"debatekit: warning: response cache {self.path}: {what} failed ({why}); {outcome}", file=sys.stderr)

    def get(self, key: str) -> dict | None:
        """The cached reply of `key`, or None: also when the cache cannot be read, or the row is no reply (a miss)."""
        try:
            with self._lock:
                row = self._db.execute("SELECT value FROM replies WHERE key = ?", (key,)).fetchone()
        except sqlite3.Error as exc:
            self._warn_once("a read", str(exc))
            return None
        if row is None:
            return None
        try:
            value = json.loads(row[0])
            CachedReply.model_validate(value)
        except ValidationError as exc:
            field, message = first_error(exc, default="row")
            self._warn_once("reading a row as a reply", f"field {field!r}: {message}", "asking the model again")
            return None
        except (ValueError, TypeError) as exc:  # not JSON, or not text
            self._warn_once("reading a row as a reply", str(exc), "asking the model again")
            return None
        return value

    def put(self, key: str, value: dict) -> None:
        """Store a reply; a failed write (damaged file, full disk) is skipped."""
        try:
            with self._lock:
                self._db.execute("INSERT OR REPLACE INTO replies VALUES (?, ?)", (key, json.dumps(value)))
                self._db.commit()
        except sqlite3.Error as exc:
            self._warn_once("a write", str(exc))

    def restore(self, pairs) -> int:
        """Put back (key, reply) pairs (`replies_in`) the cache does not hold; returns how many."""
        restored = 0
        for key, reply in pairs:
            if self.get(key) is None:
                self.put(key, reply)
                restored += 1
        return restored

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM replies").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._db.close()
