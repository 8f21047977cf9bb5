"""The embedded ledger: one SQLite file per palace, in WAL mode, foreign keys on.

Writers take ``BEGIN IMMEDIATE`` transactions, so a reader sees a source's drawers all at
once or not at all. One connection is shared by the threads of a process under a lock.

Its queries are the SQL core's (:mod:`palace_retrievers.ledger.sql`) in the SQLite
dialect; this module keeps what is SQLite's own: the connection, transactions and
migrations, a read-only ledger, the FTS5 full-text search, the vector-index journal and
counting a memory's access without waiting.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from palace_retrievers.errors import PalaceReadOnlyError, SchemaError, StorageFullError
from palace_retrievers.ledger.sql.ddl import Pairs, newer
from palace_retrievers.ledger.sql.full_text import added_up, apart, pairs, trigrams
from palace_retrievers.ledger.sql.ledger import SQLLedger
from palace_retrievers.ledger.sql.tables import FULL_TEXT_TABLES, SCHEMA
from palace_retrievers.ledger.sqlite.dialect import SQLITE, cut_pairs
from palace_retrievers.ledger.sqlite.schema import (
    FULL_TEXT,
    MIGRATIONS,
    PAIRS,
    SCHEMA_VERSION,
    fts_table,
)

LEDGER_FILE = "ledger.sqlite3"

log = logging.getLogger(__name__)


def _disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` is SQLite's SQLITE_FULL ("database or disk is full")."""
    if not isinstance(exc, sqlite3.Error):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    full = code is not None and code & 0xFF == sqlite3.SQLITE_FULL
    return full or "database or disk is full" in str(exc)


def _read_only(exc: BaseException) -> bool:
    """Whether ``exc`` is SQLite's SQLITE_READONLY, or its failing to open a WAL file's
    ``-shm`` beside it (SQLITE_CANTOPEN) in a folder it cannot write."""
    if not isinstance(exc, sqlite3.Error):
        return False
    code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
    return code in (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN) or (
        "readonly database" in str(exc)
    )


#: Seconds counting a memory access waits for the ledger (this process's lock, then
#: another connection's write) before it gives up on the count.
TOUCH_WAIT = 0.05


def _busy(exc: sqlite3.OperationalError) -> bool:
    """Whether SQLite gave up because another connection holds a lock."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "locked" in str(exc) or "busy" in str(exc)


#: The version of the cutting into pairs (:func:`~.dialect.cut_pairs`) that wrote the
#: ``pairs`` columns, in the ``meta`` row ``lexical_version``: where it differs, the
#: full-text repair (:meth:`SQLiteLedger.rebuild_lexical`) cuts them again.
PAIRS_VERSION = 1
#: The schema step that brought the ``pairs`` columns: migrating to it cuts the pairs of
#: the rows already there.
PAIRS_STEP = min(part.since for part in SCHEMA if isinstance(part, Pairs))

#: Each FTS5 table of a table with text, by its ending, with its tokenizer and column.
_FTS_TABLES = (*((end, tokenize, "text") for end, tokenize in FULL_TEXT), (*PAIRS, "pairs"))


def fts_terms(query: str) -> tuple[list[str], list[str], list[str]]:
    """The terms of ``query`` for the word, trigram and pair tables: its words (those
    written against a Chinese, Japanese or Korean run taken apart from it) for the word
    table, which holds them where they stand alone, and for the pair table, which holds
    them where they are written against a run (see :func:`~.dialect.cut_pairs`)."""
    alone, against = apart(query)
    words = alone + against
    return words, trigrams(query), pairs(query) + words


def fts_match(terms: Sequence[str]) -> str:
    """An FTS5 query matching any of ``terms`` (each one a phrase)."""
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in dict.fromkeys(terms))


#: SQLite's page cache per connection, in KiB (SQLite's default is 2 MiB). A full-text
#: query ranks every drawer that holds any of its words and reads each one's row (its
#: owner, id and filter fields) to filter it: at 20,000 drawers that is thousands of
#: pages a query, and with the default cache they are read from the OS again every time
#: (measured, `benchmarks/latency.py`'s 200 generated questions over 20,000 drawers:
#: 24.4 ms a full-text query with 2 MiB, 13.3 ms with 64 MiB). The cache only grows as
#: pages are read, so a small palace never uses it all.
PAGE_CACHE_KIB = 64 * 1024


class SQLiteLedger(SQLLedger):
    """The ledger in ``<palace_dir>/ledger.sqlite3``.

    Args:
        path: The SQLite file; created (and migrated) when missing.

    Raises:
        SchemaError: the file is not a ledger, or was written by a newer version.
    """

    sql = SQLITE

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.RLock()
        # Per thread, a connection of its own for the full-text query (see _side_read),
        # kept with its thread: the connection of a thread that has ended gets closed.
        self._side = threading.local()
        self._side_dbs: dict[sqlite3.Connection, threading.Thread] = {}
        self._side_lock = threading.Lock()
        #: How every connection opens the file: its name, and for a read-only ledger
        #: (see _open_read_only) a ``file:`` URI that says so.
        self._target = str(path)
        self._uri = False
        #: True when the ledger's file or folder cannot be written: reads work, and a
        #: write is a PalaceReadOnlyError.
        self.read_only = False
        db = None
        try:
            self._db = db = self._connect()
            self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute("PRAGMA foreign_keys = ON")
            self._db.execute("PRAGMA synchronous = NORMAL")
            self._db.execute(f"PRAGMA cache_size = -{PAGE_CACHE_KIB}")
            self._migrate()
        except sqlite3.DatabaseError as exc:
            if db is not None:
                db.close()
            if not (_read_only(exc) and path.is_file()):
                raise SchemaError(f"{path} is not a palace ledger ({exc})") from None
            self._open_read_only()

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(
            self._target,
            timeout=30.0,
            isolation_level=None,
            check_same_thread=False,
            uri=self._uri,
        )

    def _open_read_only(self) -> None:
        """Open a ledger that cannot be written (read-only file, folder or mount).

        SQLite opens a WAL ledger read-only when its ``-shm`` file is there or can be
        made; in a read-only folder without one, the file is opened ``immutable`` (it
        cannot change while no one can write it), unless a ``-wal`` file holds changes
        that only a writer can replay.

        Raises:
            PalaceReadOnlyError: it cannot be read either, or needs a migration.
            SchemaError: it is not a ledger, or was written by a newer version.
        """
        base = f"{self.path.resolve().as_uri()}?mode=ro"
        wal = self.path.with_name(self.path.name + "-wal")
        unreplayed = wal.exists() and wal.stat().st_size > 0
        attempts = [base] if unreplayed else [base, f"{base}&immutable=1"]
        self._uri = True
        self.read_only = True
        failure: sqlite3.DatabaseError | None = None
        for target in attempts:
            self._target = target
            db = None
            try:
                db = self._connect()
                db.execute(f"PRAGMA cache_size = -{PAGE_CACHE_KIB}")
                db.execute("SELECT count(*) FROM sqlite_master").fetchone()
            except sqlite3.DatabaseError as exc:
                if db is not None:
                    db.close()
                failure = exc
                continue
            self._db = db
            break
        else:
            raise PalaceReadOnlyError(
                f"{self.path} cannot be written, nor opened to be read ({failure}); make "
                "it and its folder readable and writable, or copy the palace somewhere they are"
            )
        try:
            current = self.schema_version
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise SchemaError(f"{self.path} is not a palace ledger ({exc})") from None
        if current > SCHEMA_VERSION:
            self._db.close()
            raise newer(str(self.path), current, SCHEMA_VERSION)
        if current < SCHEMA_VERSION:
            self._db.close()
            raise PalaceReadOnlyError(
                f"{self.path} is read-only and was written by an older palace-retrievers "
                f"(schema {current}): open it once where it can be written to update it"
            )

    # -- schema -------------------------------------------------------------------------

    def _migrate(self) -> None:
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS schema_version "
            "(version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)"
        )
        current = self.schema_version
        if current > SCHEMA_VERSION:
            raise newer(str(self.path), current, SCHEMA_VERSION)
        for version in range(current + 1, SCHEMA_VERSION + 1):
            with self._write() as db:
                if self.schema_version >= version:
                    continue  # another process migrated it while this one waited
                for statement in _statements(MIGRATIONS[version - 1]):
                    db.execute(statement)
                if version == PAIRS_STEP:
                    _cut_pairs(db)  # the rows of before, in the step's transaction
                db.execute(
                    "INSERT INTO schema_version VALUES (?, ?)",
                    (version, SQLITE.filed(datetime.now(UTC))),
                )

    @property
    def schema_version(self) -> int:
        row = self._db.execute("SELECT max(version) FROM schema_version").fetchone()
        return int(row[0] or 0)

    @contextmanager
    def _write(self, *, bump: bool = True) -> Iterator[sqlite3.Connection]:
        """A write transaction that bumps the generation; rolled back on any error."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
                if bump and self.schema_version >= 1:
                    self._db.execute(
                        "UPDATE meta SET value = CAST(value AS INTEGER) + 1 "
                        "WHERE key = 'generation'"
                    )
                self._db.execute("COMMIT")
            except BaseException as exc:
                if self._db.in_transaction:  # SQLite may have rolled back already (disk full)
                    self._db.execute("ROLLBACK")
                if _read_only(exc):
                    raise PalaceReadOnlyError(
                        f"the palace is read-only: {self.path} cannot be written ({exc}); "
                        "nothing was changed"
                    ) from exc
                if _disk_full(exc):
                    raise StorageFullError(
                        f"the disk is full: {self.path} could not be written ({exc}); the "
                        "change was rolled back whole and what was written before is kept; "
                        "free some space and try again"
                    ) from exc
                raise

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        with self._lock:
            return self._db.execute(sql, params).fetchall()

    def _side_read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """A read on the calling thread's own connection, beside the ledger's other reads.

        A search asks the full-text query in a worker thread while the query is embedded
        and then runs its vector stage, which reads the ledger too: on the shared
        connection (one statement at a time, behind ``_lock``) those reads would wait for
        the full-text query. In WAL mode readers do not block each other, so this one
        gets a connection per thread; it sees what is committed, as any reader does.
        The connections of threads that have ended are closed the next time a thread
        opens one (or when the ledger closes), so threads that come and go leave none
        piling up.
        """
        db: sqlite3.Connection | None = getattr(self._side, "db", None)
        if db is None:
            db = self._connect()
            db.execute(f"PRAGMA cache_size = -{PAGE_CACHE_KIB}")
            with self._side_lock:
                for side, thread in list(self._side_dbs.items()):
                    if not thread.is_alive():
                        side.close()  # its thread has ended: no one else uses it
                        del self._side_dbs[side]
                self._side_dbs[db] = threading.current_thread()
            self._side.db = db
        return db.execute(sql, params).fetchall()

    # -- the vector-index journal -------------------------------------------------------

    def pending_index(self, collection: str, *, limit: int = 1024) -> list[str]:
        rows = self._read(
            "SELECT id FROM index_pending WHERE collection = ? ORDER BY id LIMIT ?",
            (collection, limit),
        )
        return [r[0] for r in rows]

    def clear_pending(self, collection: str, ids: Sequence[str] | None = None) -> None:
        with self._write(bump=False) as db:
            if ids is None:
                db.execute("DELETE FROM index_pending WHERE collection = ?", (collection,))
            else:
                db.executemany(
                    "DELETE FROM index_pending WHERE collection = ? AND id = ?",
                    [(collection, i) for i in ids],
                )

    # -- full text ----------------------------------------------------------------------

    def lexical_problem(self) -> str | None:
        names = {r[0] for r in self._read("SELECT name FROM sqlite_master")}
        for content in FULL_TEXT_TABLES:
            for table in (f"{content}_{end}" for end, _, _ in _FTS_TABLES):
                if table not in names or f"{table}_docsize" not in names:
                    return f"the full-text table {table} is missing"
                ((indexed,),) = self._read(f"SELECT count(*) FROM {table}_docsize")
                ((rows,),) = self._read(f"SELECT count(*) FROM {content}")
                if indexed != rows:
                    return f"the full-text table {table} indexes {indexed} of {rows} {content}"
        version = self._read("SELECT value FROM meta WHERE key = 'lexical_version'")
        if version != [(str(PAIRS_VERSION),)]:
            found = version[0][0] if version else "none"
            return f"the character pairs were cut by version {found} (this one is {PAIRS_VERSION})"
        return None

    def rebuild_lexical(self) -> None:
        """Cut the character pairs again where they differ and rebuild every FTS5 table;
        the generation is left alone."""
        with self._write(bump=False) as db:
            _cut_pairs(db)
            for content in FULL_TEXT_TABLES:
                for end, tokenize, column in _FTS_TABLES:
                    db.execute(fts_table(content, end, tokenize, if_missing=True, column=column))
                    table = f"{content}_{end}"
                    db.execute(f"INSERT INTO {table} ({table}) VALUES ('rebuild')")

    def _full_text(
        self, table: str, query: str, condition: str, params: list[Any], limit: int
    ) -> list[tuple[str, float]]:
        """The FTS5 word, trigram and pair tables of ``table``, their bm25 scores added
        up. The drawers' are read on the calling thread's own connection (see
        _side_read)."""
        read = self._side_read if table == "drawers" else self._read
        tables = (f"{table}_{end}" for end, _, _ in _FTS_TABLES)
        searches = zip(tables, fts_terms(query), strict=True)
        return added_up(
            (
                read(
                    f"SELECT d.id, -bm25({fts}) FROM {fts} JOIN {table} d "
                    f"ON d.rowid = {fts}.rowid WHERE {fts} MATCH ? AND {condition} "
                    f"ORDER BY bm25({fts}) LIMIT ?",
                    [fts_match(terms), *params, limit],
                )
                for fts, terms in searches
                if terms
            ),
            limit,
        )

    # -- memories -----------------------------------------------------------------------

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

    def close(self) -> None:
        with self._lock, self._side_lock:
            for side in self._side_dbs:
                side.close()
            self._side_dbs.clear()
            self._db.close()


def _cut_pairs(db: sqlite3.Connection, batch_size: int = 1000) -> None:
    """Write each drawer's and memory's ``pairs`` cell where it is not what
    :data:`PAIRS_VERSION` cuts (the triggers keep the pair tables), and that version in
    ``meta``. An update of a drawer journals it for the vector index, as any does."""
    for content in FULL_TEXT_TABLES:
        last = 0
        while rows := db.execute(
            f"SELECT rowid, text, pairs FROM {content} WHERE rowid > ? ORDER BY rowid LIMIT ?",
            (last, batch_size),
        ).fetchall():
            last = rows[-1][0]
            cut = ((cut_pairs(text), rowid, was) for rowid, text, was in rows)
            db.executemany(
                f"UPDATE {content} SET pairs = ? WHERE rowid = ?",
                [(now, rowid) for now, rowid, was in cut if now != was],
            )
    db.execute(
        "INSERT INTO meta VALUES ('lexical_version', ?) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (str(PAIRS_VERSION),),
    )


def _statements(script: str) -> Iterator[str]:
    """Split a migration into statements (``sqlite3.complete_statement`` knows triggers)."""
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            if buffer.strip():
                yield buffer.strip()
            buffer = ""
    if buffer.strip():
        yield buffer.strip()
