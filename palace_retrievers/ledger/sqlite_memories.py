"""What the SQLite ledger does its own way with memories: full text and access counts.

:class:`SQLiteMemoryStore` is the SQL core's memory part
(:class:`~palace_retrievers.ledger.sql.memories.SQLMemoryStore`) with the two things
SQLite does differently: the full-text query over the FTS5 tables the schema's triggers
keep (words and trigrams), and :meth:`touch_memories`, which never waits long for
another connection's write.
"""

from __future__ import annotations

import logging
import re
import sqlite3
import threading
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from palace_retrievers.ledger import memory_rows
from palace_retrievers.ledger.sql.memories import SQLMemoryStore, statuses_sql

_WORD = re.compile(r"[^\W_]+")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")

log = logging.getLogger(__name__)

#: Seconds counting a memory access waits for the ledger (this process's lock, then
#: another connection's write) before it gives up on the count.
TOUCH_WAIT = 0.05


def _busy(exc: sqlite3.OperationalError) -> bool:
    """Whether SQLite gave up because another connection holds a lock."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "locked" in str(exc) or "busy" in str(exc)


def fts_terms(query: str) -> tuple[list[str], list[str]]:
    """The terms of ``query`` for the word table and for the trigram table."""
    words = _WORD.findall(query)
    latin = [w for w in words if not _CJK.search(w)]
    trigrams = [run[i : i + 3] for run in _CJK.findall(query) for i in range(max(len(run) - 2, 0))]
    return latin, trigrams


def fts_match(terms: Sequence[str]) -> str:
    """An FTS5 query matching any of ``terms`` (each one a phrase)."""
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in dict.fromkeys(terms))


class SQLiteMemoryStore(SQLMemoryStore):
    """The :class:`MemoryStore` part of the SQLite ledger."""

    if TYPE_CHECKING:
        # Provided by SQLiteLedger, the class this is mixed into.
        _db: sqlite3.Connection
        _lock: threading.RLock

    def touch_memories(self, ids: Sequence[str], *, at: datetime) -> None:
        """Count the accesses, unless that means waiting: a search calls this, and a
        search does not wait behind another thread's or process's write transaction
        (SQLite's busy timeout, 30 s) for a counter. It waits :data:`TOUCH_WAIT` at most
        (another search's read or count is over by then), then skips (logged at debug)."""
        if not ids:
            return
        if not self._lock.acquire(timeout=TOUCH_WAIT):
            log.debug("memory accesses not counted: another thread holds the ledger")
            return
        try:
            waits = self._db.execute("PRAGMA busy_timeout").fetchone()[0]
            self._db.execute(f"PRAGMA busy_timeout = {int(TOUCH_WAIT * 1000)}")
            try:
                with self._write(bump=False) as db:
                    db.executemany(
                        "UPDATE memories SET access_count = access_count + 1, "
                        "last_accessed = ? WHERE id = ?",
                        [(self.sql.stamp(at), i) for i in dict.fromkeys(ids)],
                    )
            except sqlite3.OperationalError as exc:
                if not _busy(exc):
                    raise
                log.debug("memory accesses not counted: the ledger is busy (%s)", exc)
            finally:
                self._db.execute(f"PRAGMA busy_timeout = {int(waits)}")
        finally:
            self._lock.release()

    def lexical_memories(
        self,
        query: str,
        *,
        user_id: str | None,
        statuses: Sequence[str] = ("active",),
        limit: int = 50,
    ) -> list[tuple[str, float]]:
        latin, trigrams = fts_terms(query)
        condition, params = statuses_sql(statuses, "m.status")
        scores: dict[str, float] = {}
        for table, terms in (("memories_fts", latin), ("memories_trigram", trigrams)):
            if not terms:
                continue
            rows = self._read(
                f"SELECT m.id, -bm25({table}) FROM {table} JOIN memories m "
                f"ON m.rowid = {table}.rowid WHERE {table} MATCH ? AND m.user_id = ? "
                f"AND {condition} ORDER BY bm25({table}) LIMIT ?",
                [fts_match(terms), memory_rows.owner(user_id), *params, limit],
            )
            for memory_id, score in rows:
                scores[memory_id] = scores.get(memory_id, 0.0) + float(score)
        return sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:limit]
