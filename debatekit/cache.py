"""On-disk response cache, keyed by debatekit (litellm's own cache is unusable in 1.106.2).

One sqlite file in WAL mode, so several processes of a sweep can share it. A key is the
sha256 of the model, the messages, the sampling parameters and the output schema.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from pathlib import Path


def cache_key(model: str, messages: list[dict], params: dict, schema: dict | None) -> str:
    """Stable key of a request: anything that can change the reply is in it."""
    blob = json.dumps([model, messages, params, schema], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


class ResponseCache:
    """A persistent map from request keys to provider replies (text, usage, cost)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        # WAL + NORMAL: a commit no longer waits for fsync (it blocked the event loop ~5-40 ms per
        # stored reply); the file cannot be corrupted, a power cut may drop the last few replies.
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        self._db.commit()

    def get(self, key: str) -> dict | None:
        with self._lock:
            row = self._db.execute("SELECT value FROM replies WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def put(self, key: str, value: dict) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO replies VALUES (?, ?)", (key, json.dumps(value)))
            self._db.commit()

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM replies").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._db.close()
