"""A model's answers kept by content hash: ``answers.sqlite`` in the palace's folder.

What an optional LLM plugin (the ``llm`` closet extractor) was told costs time and money
to ask again, so the palace keeps it, keyed by a hash of what was asked, per owner and
per plugin (the ``namespace``): a re-mine, a re-filing or a rebuilt ledger asks nothing
again. It is the palace's :class:`~palace_retrievers.closets.AnswerCache`.

Why a file of its own and not a ledger table: the answers are derived data, like a vector
index. Losing the file costs only the questions again, so it stays out of the ledger's
schema steps (which are kept forever) and out of the writer's transaction (an extractor
runs in the thread that embeds the next batch while another files the one before), and
it works the same whichever ledger (SQLite or PostgreSQL) the palace has. The file is
opened on first use, so a palace whose plugins keep nothing never has one; it may be
deleted at any time. :meth:`Palace.forget <palace_retrievers.Palace.forget>` deletes an
owner's answers with the rest of the owner's data. A folder that cannot be written (a
read-only palace) leaves the cache empty and logs why, once: a plugin then asks again.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from palace_retrievers.errors import PalaceReadOnlyError

log = logging.getLogger(__name__)

#: The cache's file name in the palace's folder.
ANSWERS_FILE = "answers.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS answers (
    namespace TEXT NOT NULL,
    user_id TEXT NOT NULL,
    key TEXT NOT NULL,
    answer TEXT NOT NULL,
    at REAL NOT NULL,
    PRIMARY KEY (namespace, user_id, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS answers_user ON answers (user_id);
"""
_CHUNK = 500  # keys per SELECT: well under SQLite's limit of bound parameters


class Answers:
    """The palace's answer cache (see the module docstring); safe to share between threads.

    Args:
        path: The SQLite file (created on the first :meth:`put`).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._broken = False

    def _connect(self, *, create: bool) -> sqlite3.Connection | None:
        """The open connection; ``None`` when there is no file yet (and ``create`` is
        false) or it cannot be opened (logged once). Called with the lock held."""
        if self._db is not None or self._broken:
            return self._db
        if not create and not self.path.exists():
            return None
        try:
            db = sqlite3.connect(self.path, timeout=30.0, check_same_thread=False)
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(_SCHEMA)
        except sqlite3.Error as exc:
            log.warning("model answers are not kept: %s cannot be used (%s)", self.path, exc)
            self._broken = True
            return None
        self._db = db
        return db

    def get(self, namespace: str, user_id: str, keys: Sequence[str]) -> dict[str, str]:
        """The answers kept under those of ``keys`` that ``namespace`` holds for the owner
        (``""``: no owner)."""
        found: dict[str, str] = {}
        with self._lock:
            db = self._connect(create=False)
            if db is None:
                return found
            unique = list(dict.fromkeys(keys))
            try:
                for start in range(0, len(unique), _CHUNK):
                    chunk = unique[start : start + _CHUNK]
                    marks = ",".join("?" * len(chunk))
                    rows = db.execute(
                        "SELECT key, answer FROM answers WHERE namespace = ? AND user_id = ? "
                        f"AND key IN ({marks})",
                        (namespace, user_id, *chunk),
                    )
                    found.update(rows)
            except sqlite3.Error as exc:
                log.warning("model answers could not be read from %s: %s", self.path, exc)
        return found

    def put(self, namespace: str, user_id: str, answers: Mapping[str, str]) -> None:
        """Keep ``answers`` (key to answer) under ``namespace`` for the owner."""
        if not answers:
            return
        now = time.time()
        rows = [(namespace, user_id, key, answer, now) for key, answer in answers.items()]
        with self._lock:
            db = self._connect(create=True)
            if db is None:
                return
            try:
                with db:
                    db.executemany("INSERT OR REPLACE INTO answers VALUES (?, ?, ?, ?, ?)", rows)
            except sqlite3.Error as exc:
                log.warning("model answers could not be kept in %s: %s", self.path, exc)

    def forget(self, user_id: str) -> int:
        """Delete every answer kept for the owner ``user_id``; returns how many.

        Raises:
            PalaceReadOnlyError: the file exists and cannot be written.
        """
        with self._lock:
            db = self._connect(create=False)
            try:
                if db is None:
                    if self.path.exists():
                        raise sqlite3.OperationalError("it cannot be opened")
                    return 0
                with db:
                    deleted = db.execute("DELETE FROM answers WHERE user_id = ?", (user_id,))
                    return deleted.rowcount
            except sqlite3.Error as exc:
                raise PalaceReadOnlyError(
                    f"the model answers kept in {self.path} cannot be forgotten ({exc}); "
                    "make the file writable, or delete it (it is only a cache)"
                ) from exc

    def close(self) -> None:
        """Close the file (it is opened again when next used)."""
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
