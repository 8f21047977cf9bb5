"""The embedded ledger: one SQLite file per palace, in WAL mode, foreign keys on.

Writers take ``BEGIN IMMEDIATE`` transactions, so a reader sees a source's drawers all at
once or not at all. One connection is shared by the threads of a process under a lock.
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from palace_retrievers.closets import Closet
from palace_retrievers.embedder import Vectors
from palace_retrievers.errors import PalaceReadOnlyError, SchemaError, StorageFullError
from palace_retrievers.ids import split_source_key
from palace_retrievers.index import IndexEntry
from palace_retrievers.ledger import Ledger, LedgerStats, MinedRoot, SourceState, VectorTable
from palace_retrievers.ledger.schema import MIGRATIONS, SCHEMA_VERSION
from palace_retrievers.ledger.sql.dialects import SQLITE
from palace_retrievers.ledger.sql.filters import where_sql
from palace_retrievers.ledger.sql.graph import SQLGraphStore
from palace_retrievers.ledger.sqlite_memories import SQLiteMemoryStore
from palace_retrievers.records import Drawer, Filter

LEDGER_FILE = "ledger.sqlite3"

_DRAWER_COLUMNS = (
    "id, text, wing, room, source, chunk_index, line_start, line_end, source_mtime, "
    "normalize_version, filed_at, content_date, user_id, kind, metadata"
)
_WORD = re.compile(r"[^\W_]+")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")
_TABLES = {"drawers": "drawers", "closets": "closets", "memories": "memories"}
#: Per collection: (source column, kind column, which rows the vector index holds).
#: Only active memories are indexed; a memory that is superseded, archived or pending
#: leaves the index through the journal and is reached through the ledger.
_INDEXED = {
    "drawers": ("source", "kind", "1"),
    "closets": ("coalesce(source_key, '')", "'closet'", "1"),
    "memories": ("''", "kind", "status = 'active'"),
}
#: The full-text tables of each table with text: words, then trigrams (Chinese etc.).
_FULL_TEXT = (
    ("drawers", ("drawers_fts", "drawers_trigram")),
    ("memories", ("memories_fts", "memories_trigram")),
)
_TOKENIZERS = ("unicode61 remove_diacritics 2", "trigram")
_SOURCE_COLUMNS = (
    "wing, source_key, location, content_hash, mtime, normalize_version, drawer_count, root, plugin"
)


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.astimezone(UTC).isoformat()


def _when(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


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


def _fts_phrase(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


#: SQLite's page cache per connection, in KiB (SQLite's default is 2 MiB). A full-text
#: query ranks every drawer that holds any of its words and reads each one's row (its
#: owner, id and filter fields) to filter it: at 20,000 drawers that is thousands of
#: pages a query, and with the default cache they are read from the OS again every time
#: (measured, `benchmarks/latency.py`'s 200 generated questions over 20,000 drawers:
#: 24.4 ms a full-text query with 2 MiB, 13.3 ms with 64 MiB). The cache only grows as
#: pages are read, so a small palace never uses it all.
PAGE_CACHE_KIB = 64 * 1024


class SQLiteLedger(SQLiteMemoryStore, SQLGraphStore, Ledger):
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
            raise SchemaError(
                f"{self.path} was written by a newer palace-retrievers (schema {current}, "
                f"this one knows {SCHEMA_VERSION}); upgrade palace-retrievers to open it"
            )
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
            raise SchemaError(
                f"{self.path} was written by a newer palace-retrievers (schema {current}, "
                f"this one knows {SCHEMA_VERSION}); upgrade palace-retrievers to open it"
            )
        for version in range(current + 1, SCHEMA_VERSION + 1):
            with self._write() as db:
                if self.schema_version >= version:
                    continue  # another process migrated it while this one waited
                for statement in _statements(MIGRATIONS[version - 1]):
                    db.execute(statement)
                db.execute(
                    "INSERT INTO schema_version VALUES (?, ?)",
                    (version, _iso(datetime.now(UTC))),
                )
                if version == 1:
                    db.execute("INSERT INTO meta VALUES ('generation', '0')")

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

    # -- meta ---------------------------------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        rows = self._read("SELECT value FROM meta WHERE key = ?", (key,))
        return str(rows[0][0]) if rows else None

    def set_meta(self, key: str, value: str) -> None:
        with self._write() as db:
            db.execute(
                "INSERT INTO meta VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = ?",
                (key, value, value),
            )

    def generation(self) -> int:
        return int(self.get_meta("generation") or 0)

    # -- drawers ------------------------------------------------------------------------

    def _insert_drawers(
        self,
        db: sqlite3.Connection,
        drawers: Sequence[Drawer],
        vectors: Vectors,
        model: str,
        source_key: str | None,
    ) -> None:
        if len(drawers) != len(vectors):
            raise ValueError(f"{len(drawers)} drawers but {len(vectors)} vectors")
        rows = [
            (
                d.id,
                d.text,
                d.wing,
                d.room,
                d.source,
                source_key,
                d.chunk_index,
                d.line_start,
                d.line_end,
                d.source_mtime,
                d.normalize_version,
                _iso(d.filed_at),
                _iso(d.content_date),
                d.timestamp,
                d.user_id or "",
                d.kind,
                json.dumps(dict(d.metadata), ensure_ascii=False, sort_keys=True),
                np.asarray(v, dtype="<f4").tobytes(),
                model,
            )
            for d, v in zip(drawers, vectors, strict=True)
        ]
        db.executemany(
            "INSERT INTO drawers (id, text, wing, room, source, source_key, chunk_index, "
            "line_start, line_end, source_mtime, normalize_version, filed_at, content_date, "
            "ts, user_id, kind, metadata, embedding, embedding_model) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (id) DO UPDATE SET text = excluded.text, wing = excluded.wing, "
            "room = excluded.room, source = excluded.source, source_key = excluded.source_key, "
            "chunk_index = excluded.chunk_index, line_start = excluded.line_start, "
            "line_end = excluded.line_end, source_mtime = excluded.source_mtime, "
            "normalize_version = excluded.normalize_version, filed_at = excluded.filed_at, "
            "content_date = excluded.content_date, ts = excluded.ts, "
            "user_id = excluded.user_id, kind = excluded.kind, metadata = excluded.metadata, "
            "embedding = excluded.embedding, embedding_model = excluded.embedding_model",
            rows,
        )

    def upsert_drawers(self, drawers: Sequence[Drawer], vectors: Vectors, *, model: str) -> None:
        with self._write() as db:
            self._insert_drawers(db, drawers, vectors, model, None)

    @staticmethod
    def _drop_triples(db: sqlite3.Connection, drawer_ids: Sequence[str]) -> None:
        """Delete the graph's triples read from these drawers (being deleted with them)."""
        unique = list(dict.fromkeys(drawer_ids))
        for start in range(0, len(unique), 500):
            batch = unique[start : start + 500]
            marks = ",".join("?" * len(batch))
            db.execute(f"DELETE FROM triples WHERE source_drawer IN ({marks})", batch)

    @staticmethod
    def _drop_unkeyed_source(
        db: sqlite3.Connection, state: SourceState, keep: set[str]
    ) -> list[str]:
        """The drawers of the record an owned source had before keys named owners.

        Before, an owned source was recorded under its bare key; it is now recorded under
        one naming its owner (:func:`~palace_retrievers.ids.source_key`). The old record
        is forgotten when all of its drawers are this owner's (one shared with anyone
        else, or unowned, is left alone); its drawers are returned, to be deleted.
        """
        owner, bare = split_source_key(state.key)
        if owner is None:
            return []
        rows = db.execute(
            "SELECT id, user_id FROM drawers WHERE wing = ? AND source_key = ?",
            (state.wing, bare),
        ).fetchall()
        if not rows or any(user != owner for _, user in rows):
            return []
        db.execute("DELETE FROM sources WHERE wing = ? AND source_key = ?", (state.wing, bare))
        return [i for i, _ in rows if i not in keep]

    def _replace_source(
        self,
        db: sqlite3.Connection,
        state: SourceState,
        drawers: Sequence[Drawer],
        vectors: Vectors,
        model: str,
    ) -> list[str]:
        keep = {d.id for d in drawers}
        old = [
            row[0]
            for row in db.execute(
                "SELECT id FROM drawers WHERE wing = ? AND source_key = ?",
                (state.wing, state.key),
            )
        ]
        removed = [i for i in old if i not in keep]
        removed.extend(self._drop_unkeyed_source(db, state, keep))
        db.executemany("DELETE FROM drawers WHERE id = ?", [(i,) for i in removed])
        self._drop_triples(db, removed)
        db.execute(
            "INSERT INTO sources (wing, source_key, location, content_hash, mtime, "
            "normalize_version, mined_at, drawer_count, root, plugin) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (wing, source_key) DO UPDATE SET location = excluded.location, "
            "content_hash = excluded.content_hash, mtime = excluded.mtime, "
            "normalize_version = excluded.normalize_version, mined_at = excluded.mined_at, "
            "drawer_count = excluded.drawer_count, root = excluded.root, "
            "plugin = excluded.plugin",
            (
                state.wing,
                state.key,
                state.location,
                state.content_hash,
                state.mtime,
                state.normalize_version,
                _iso(datetime.now(UTC)),
                len(drawers),
                state.root,
                state.plugin,
            ),
        )
        self._insert_drawers(db, drawers, vectors, model, state.key)
        return removed

    def replace_source(
        self, state: SourceState, drawers: Sequence[Drawer], vectors: Vectors, *, model: str
    ) -> list[str]:
        with self._write() as db:
            return self._replace_source(db, state, drawers, vectors, model)

    def file_sources(
        self,
        sources: Sequence[tuple[SourceState, Sequence[Drawer]]],
        vectors: Vectors,
        closets: Sequence[Closet],
        closet_vectors: Vectors,
        *,
        model: str,
    ) -> list[str]:
        total = sum(len(drawers) for _, drawers in sources)
        if total != len(vectors):
            raise ValueError(f"{total} drawers but {len(vectors)} vectors")
        removed: list[str] = []
        filed: list[str] = []
        with self._write() as db:
            offset = 0
            for state, drawers in sources:
                part = vectors[offset : offset + len(drawers)]
                offset += len(drawers)
                removed.extend(self._replace_source(db, state, drawers, part, model))
                filed.extend(d.id for d in drawers)
            self._replace_closets(db, closets, closet_vectors, model, [*filed, *removed])
        return removed

    def source_state(self, wing: str, key: str) -> SourceState | None:
        rows = self._read(
            f"SELECT {_SOURCE_COLUMNS} FROM sources WHERE wing = ? AND source_key = ?",
            (wing, key),
        )
        return SourceState(*rows[0]) if rows else None

    def source_states(self, wing: str) -> dict[str, SourceState]:
        rows = self._read(f"SELECT {_SOURCE_COLUMNS} FROM sources WHERE wing = ?", (wing,))
        return {row[1]: SourceState(*row) for row in rows}

    def touch_source(self, state: SourceState) -> None:
        with self._write(bump=False) as db:
            db.execute(
                "UPDATE sources SET mtime = ?, location = ?, root = coalesce(?, root), "
                "plugin = coalesce(?, plugin) WHERE wing = ? AND source_key = ?",
                (state.mtime, state.location, state.root, state.plugin, state.wing, state.key),
            )

    def mined_roots(self) -> list[MinedRoot]:
        rows = self._read(
            "SELECT wing, root, plugin, count(*), coalesce(sum(drawer_count), 0) FROM sources "
            "WHERE root IS NOT NULL AND plugin IS NOT NULL "
            "GROUP BY wing, root, plugin ORDER BY root, wing, plugin"
        )
        return [MinedRoot(*row) for row in rows]

    def delete_sources(self, wing: str, keys: Sequence[str]) -> int:
        deleted = 0
        with self._write() as db:
            for key in dict.fromkeys(keys):
                ids = [
                    row[0]
                    for row in db.execute(
                        "DELETE FROM drawers WHERE wing = ? AND source_key = ? RETURNING id",
                        (wing, key),
                    )
                ]
                deleted += len(ids)
                self._drop_triples(db, ids)
                db.execute("DELETE FROM sources WHERE wing = ? AND source_key = ?", (wing, key))
            orphans = self._orphans(db)
            db.executemany("DELETE FROM closets WHERE id = ?", [(i,) for i in orphans])
        return deleted

    @staticmethod
    def _drawer(row: Sequence[Any]) -> Drawer:
        return Drawer(
            id=row[0],
            text=row[1],
            wing=row[2],
            room=row[3],
            source=row[4],
            chunk_index=row[5],
            line_start=row[6],
            line_end=row[7],
            source_mtime=row[8],
            normalize_version=row[9],
            filed_at=_when(row[10]) or datetime.now(UTC),
            content_date=_when(row[11]),
            user_id=row[12] or None,
            kind=row[13],
            metadata=json.loads(row[14]),
        )

    def get_drawers(self, ids: Sequence[str]) -> list[Drawer]:
        found: dict[str, Drawer] = {}
        unique = list(dict.fromkeys(ids))
        for start in range(0, len(unique), 500):
            batch = unique[start : start + 500]
            marks = ",".join("?" * len(batch))
            for row in self._read(
                f"SELECT {_DRAWER_COLUMNS} FROM drawers WHERE id IN ({marks})", batch
            ):
                found[row[0]] = self._drawer(row)
        return [found[i] for i in ids if i in found]

    def delete_drawers(self, ids: Sequence[str]) -> list[str]:
        deleted: list[str] = []
        with self._write() as db:
            for i in dict.fromkeys(ids):
                if db.execute("DELETE FROM drawers WHERE id = ?", (i,)).rowcount:
                    deleted.append(i)
            self._drop_triples(db, deleted)
        return deleted

    def drawer_ids(self, where: Filter | None = None) -> list[str]:
        condition, params = where_sql(where)
        return [r[0] for r in self._read(f"SELECT id FROM drawers WHERE {condition}", params)]

    def iter_drawers(self, *, batch_size: int = 256) -> Iterator[list[Drawer]]:
        last = 0
        while True:
            rows = self._read(
                f"SELECT rowid, {_DRAWER_COLUMNS} FROM drawers WHERE rowid > ? "
                "ORDER BY rowid LIMIT ?",
                (last, batch_size),
            )
            if not rows:
                return
            last = rows[-1][0]
            yield [self._drawer(row[1:]) for row in rows]

    def set_vectors(self, ids: Sequence[str], vectors: Vectors, *, model: str) -> None:
        with self._write() as db:
            db.executemany(
                "UPDATE drawers SET embedding = ?, embedding_model = ? WHERE id = ?",
                [
                    (np.asarray(v, dtype="<f4").tobytes(), model, i)
                    for i, v in zip(ids, vectors, strict=True)
                ],
            )

    # -- vectors ------------------------------------------------------------------------

    def _vector_rows(self, collection: str, after: int, limit: int) -> list[Any]:
        table = _TABLES[collection]
        source, kind, indexed = _INDEXED[collection]
        return self._read(
            f"SELECT rowid, id, embedding, wing, room, user_id, {kind}, ts, {source} "
            f"FROM {table} WHERE embedding IS NOT NULL AND {indexed} AND rowid > ? "
            "ORDER BY rowid LIMIT ?",
            (after, limit),
        )

    @staticmethod
    def _entries(rows: Sequence[Any]) -> list[IndexEntry]:
        return [
            IndexEntry(
                id=r[1],
                vector=np.frombuffer(r[2], dtype="<f4").astype(np.float32),
                wing=r[3],
                room=r[4],
                user_id=r[5],
                kind=r[6],
                timestamp=r[7],
                source=r[8],
            )
            for r in rows
        ]

    def iter_entries(self, collection: str, *, batch_size: int = 512) -> Iterator[list[IndexEntry]]:
        last = 0
        while rows := self._vector_rows(collection, last, batch_size):
            last = rows[-1][0]
            yield self._entries(rows)

    def index_entries(self, collection: str, ids: Sequence[str]) -> list[IndexEntry]:
        table = _TABLES[collection]
        source, kind, indexed = _INDEXED[collection]
        out: list[IndexEntry] = []
        unique = list(dict.fromkeys(ids))
        for start in range(0, len(unique), 500):
            batch = unique[start : start + 500]
            marks = ",".join("?" * len(batch))
            out.extend(
                self._entries(
                    self._read(
                        f"SELECT rowid, id, embedding, wing, room, user_id, {kind}, ts, {source} "
                        f"FROM {table} WHERE embedding IS NOT NULL AND {indexed} "
                        f"AND id IN ({marks}) "
                        "ORDER BY rowid",
                        batch,
                    )
                )
            )
        return out

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

    def count_vectors(self, collection: str) -> int:
        table = _TABLES[collection]
        indexed = _INDEXED[collection][2]
        ((count,),) = self._read(
            f"SELECT count(*) FROM {table} WHERE embedding IS NOT NULL AND {indexed}"
        )
        return int(count)

    def vector_table(self, collection: str) -> VectorTable:
        rows = self._vector_rows(collection, 0, -1)
        if rows:
            matrix = np.frombuffer(b"".join(r[2] for r in rows), dtype="<f4")
            matrix = matrix.reshape(len(rows), -1).astype(np.float32)
        else:
            matrix = np.zeros((0, 0), dtype=np.float32)
        return VectorTable(
            ids=[r[1] for r in rows],
            matrix=matrix,
            wing=np.array([r[3] for r in rows], dtype=np.str_),
            room=np.array([r[4] for r in rows], dtype=np.str_),
            user_id=np.array([r[5] for r in rows], dtype=np.str_),
            kind=np.array([r[6] for r in rows], dtype=np.str_),
            timestamp=np.array([r[7] for r in rows], dtype=np.float64),
        )

    # -- full text ----------------------------------------------------------------------

    def lexical_problem(self) -> str | None:
        names = {r[0] for r in self._read("SELECT name FROM sqlite_master")}
        for content, fts in _FULL_TEXT:
            for table in fts:
                if table not in names or f"{table}_docsize" not in names:
                    return f"the full-text table {table} is missing"
                ((indexed,),) = self._read(f"SELECT count(*) FROM {table}_docsize")
                ((rows,),) = self._read(f"SELECT count(*) FROM {content}")
                if indexed != rows:
                    return f"the full-text table {table} indexes {indexed} of {rows} {content}"
        return None

    def rebuild_lexical(self) -> None:
        with self._write(bump=False) as db:
            for content, fts in _FULL_TEXT:
                for table, tokenize in zip(fts, _TOKENIZERS, strict=True):
                    db.execute(
                        f"CREATE VIRTUAL TABLE IF NOT EXISTS {table} USING fts5 (text, "
                        f"content = '{content}', content_rowid = 'rowid', tokenize = '{tokenize}')"
                    )
                    db.execute(f"INSERT INTO {table} ({table}) VALUES ('rebuild')")

    def lexical(self, query: str, *, where: Filter, limit: int) -> list[tuple[str, float]]:
        words = _WORD.findall(query)
        latin = [w for w in words if not _CJK.search(w)]
        trigrams = [
            run[i : i + 3] for run in _CJK.findall(query) for i in range(max(len(run) - 2, 0))
        ]
        condition, params = where_sql(where, "d")
        scores: dict[str, float] = {}
        for table, terms in (("drawers_fts", latin), ("drawers_trigram", trigrams)):
            if not terms:
                continue
            match = " OR ".join(_fts_phrase(t) for t in dict.fromkeys(terms))
            rows = self._side_read(
                f"SELECT d.id, -bm25({table}) FROM {table} JOIN drawers d "
                f"ON d.rowid = {table}.rowid WHERE {table} MATCH ? AND {condition} "
                f"ORDER BY bm25({table}) LIMIT ?",
                [match, *params, limit],
            )
            for drawer_id, score in rows:
                scores[drawer_id] = scores.get(drawer_id, 0.0) + float(score)
        return sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:limit]

    # -- search support -----------------------------------------------------------------

    def drawer_vectors(self, ids: Sequence[str]) -> dict[str, npt.NDArray[np.float32]]:
        out = {}
        unique = list(dict.fromkeys(ids))
        for start in range(0, len(unique), 500):
            batch = unique[start : start + 500]
            marks = ",".join("?" * len(batch))
            for drawer_id, blob in self._read(
                f"SELECT id, embedding FROM drawers WHERE id IN ({marks}) "
                "AND embedding IS NOT NULL",
                batch,
            ):
                out[drawer_id] = np.frombuffer(blob, dtype="<f4").astype(np.float32)
        return out

    def source_drawers(self, *, wing: str, source: str, where: Filter) -> list[Drawer]:
        condition, params = where_sql(where)
        rows = self._read(
            f"SELECT {_DRAWER_COLUMNS} FROM drawers WHERE wing = ? AND source = ? "
            f"AND {condition} ORDER BY chunk_index, id",
            [wing, source, *params],
        )
        return [self._drawer(row) for row in rows]

    # -- closets ------------------------------------------------------------------------

    @staticmethod
    def _orphans(db: sqlite3.Connection) -> list[str]:
        return [
            row[0]
            for row in db.execute(
                "SELECT id FROM closets c WHERE NOT EXISTS "
                "(SELECT 1 FROM closet_drawers l WHERE l.closet_id = c.id)"
            )
        ]

    def replace_closets(
        self,
        closets: Sequence[Closet],
        vectors: Vectors,
        *,
        model: str,
        drawer_ids: Sequence[str],
    ) -> list[str]:
        with self._write() as db:
            return self._replace_closets(db, closets, vectors, model, drawer_ids)

    def _replace_closets(
        self,
        db: sqlite3.Connection,
        closets: Sequence[Closet],
        vectors: Vectors,
        model: str,
        drawer_ids: Sequence[str],
    ) -> list[str]:
        if len(closets) != len(vectors):
            raise ValueError(f"{len(closets)} closets but {len(vectors)} vectors")
        now = datetime.now(UTC)
        removed: set[str] = set()
        unique = list(dict.fromkeys(drawer_ids))
        for start in range(0, len(unique), 500):
            batch = unique[start : start + 500]
            marks = ",".join("?" * len(batch))
            removed.update(
                row[0]
                for row in db.execute(
                    f"SELECT DISTINCT closet_id FROM closet_drawers WHERE drawer_id IN ({marks})",
                    batch,
                )
            )
        removed.update(self._orphans(db))
        db.executemany("DELETE FROM closets WHERE id = ?", [(i,) for i in sorted(removed)])
        known = {
            row[0]
            for d in {i for c in closets for i in c.drawer_ids}
            for row in db.execute("SELECT id FROM drawers WHERE id = ?", (d,))
        }
        for closet, vector in zip(closets, vectors, strict=True):
            pointers = [i for i in closet.drawer_ids if i in known]
            if not pointers:
                continue
            db.execute(
                "INSERT INTO closets (id, line, wing, room, source_key, user_id, extractor, "
                "filed_at, ts, embedding, embedding_model) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET "
                "line = excluded.line, embedding = excluded.embedding, "
                "embedding_model = excluded.embedding_model",
                (
                    closet.id,
                    closet.line,
                    closet.wing,
                    closet.room,
                    closet.source,
                    closet.user_id or "",
                    closet.extractor,
                    _iso(now),
                    now.timestamp(),
                    np.asarray(vector, dtype="<f4").tobytes(),
                    model,
                ),
            )
            db.executemany(
                "INSERT OR IGNORE INTO closet_drawers VALUES (?, ?)",
                [(closet.id, i) for i in pointers],
            )
            removed.discard(closet.id)
        return sorted(removed)

    def prune_closets(self) -> list[str]:
        with self._write() as db:
            orphans = self._orphans(db)
            db.executemany("DELETE FROM closets WHERE id = ?", [(i,) for i in orphans])
        return orphans

    def closet_lines(self, ids: Sequence[str]) -> dict[str, str]:
        unique = list(dict.fromkeys(ids))
        out: dict[str, str] = {}
        for start in range(0, len(unique), 500):
            batch = unique[start : start + 500]
            marks = ",".join("?" * len(batch))
            rows = self._read(f"SELECT id, line FROM closets WHERE id IN ({marks})", batch)
            out.update((closet_id, line) for closet_id, line in rows)
        return out

    def closet_pointers(self, ids: Sequence[str]) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        unique = list(dict.fromkeys(ids))
        for start in range(0, len(unique), 500):
            batch = unique[start : start + 500]
            marks = ",".join("?" * len(batch))
            for closet_id, drawer_id in self._read(
                f"SELECT l.closet_id, l.drawer_id FROM closet_drawers l "
                f"JOIN drawers d ON d.id = l.drawer_id WHERE l.closet_id IN ({marks}) "
                "ORDER BY l.closet_id, d.chunk_index, d.id",
                batch,
            ):
                out.setdefault(closet_id, []).append(drawer_id)
        return out

    def iter_closets(self, *, batch_size: int = 256) -> Iterator[list[Closet]]:
        last = 0
        while rows := self._read(
            "SELECT rowid, id, line, wing, room, coalesce(source_key, ''), user_id, extractor "
            "FROM closets WHERE rowid > ? ORDER BY rowid LIMIT ?",
            (last, batch_size),
        ):
            last = rows[-1][0]
            pointers = self.closet_pointers([r[1] for r in rows])
            yield [
                Closet(
                    id=r[1],
                    line=r[2],
                    text=r[2].rsplit("|", 1)[0],
                    wing=r[3],
                    room=r[4],
                    source=r[5],
                    user_id=r[6] or None,
                    extractor=r[7],
                    drawer_ids=tuple(pointers.get(r[1], ())),
                )
                for r in rows
            ]

    def set_closet_vectors(self, ids: Sequence[str], vectors: Vectors, *, model: str) -> None:
        with self._write() as db:
            db.executemany(
                "UPDATE closets SET embedding = ?, embedding_model = ? WHERE id = ?",
                [
                    (np.asarray(v, dtype="<f4").tobytes(), model, i)
                    for i, v in zip(ids, vectors, strict=True)
                ],
            )

    # -- export -------------------------------------------------------------------------

    def owners_and_keys(self) -> tuple[list[str], dict[str, list[str]], dict[str, list[str]]]:
        owners = [
            row[0]
            for row in self._read(
                "SELECT user_id FROM drawers UNION SELECT user_id FROM memories "
                "UNION SELECT user_id FROM memory_history UNION SELECT user_id FROM triples "
                "ORDER BY 1"
            )
        ]
        orphans: dict[str, list[str]] = {}
        for owner, memory_id in self._read(
            "SELECT DISTINCT h.user_id, h.memory_id FROM memory_history h "
            "WHERE NOT EXISTS (SELECT 1 FROM memories m WHERE m.id = h.memory_id) "
            "ORDER BY 1, 2"
        ):
            orphans.setdefault(owner, []).append(memory_id)
        subjects: dict[str, list[str]] = {}
        for owner, key in self._read(
            "SELECT DISTINCT user_id, subject_key FROM triples ORDER BY 1, 2"
        ):
            subjects.setdefault(owner, []).append(key)
        return owners, orphans, subjects

    # -- status -------------------------------------------------------------------------

    def stats(self) -> LedgerStats:
        wings: dict[str, dict[str, int]] = {}
        for wing, room, count in self._read(
            "SELECT wing, room, count(*) FROM drawers GROUP BY wing, room ORDER BY wing, room"
        ):
            wings.setdefault(wing, {})[room] = count
        ((drawers, embedded),) = self._read("SELECT count(*), count(embedding) FROM drawers")
        ((sources,),) = self._read("SELECT count(*) FROM sources")
        ((closets,),) = self._read("SELECT count(*) FROM closets")
        return LedgerStats(drawers, sources, closets, embedded, wings, self.count_memories())

    def close(self) -> None:
        with self._lock, self._side_lock:
            for side in self._side_dbs:
                side.close()
            self._side_dbs.clear()
            self._db.close()


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
