"""The PostgreSQL ledger: the palace's system of record in a PostgreSQL schema.

``ledger = "postgres"`` in ``palace.toml`` (with ``[ledgers.postgres] url = ...``; see
:mod:`palace_retrievers.ledger.postgres_connection` for every option) keeps the drawers,
closets, sources, memories with their history, and the knowledge graph in PostgreSQL,
so that several processes on several machines share one palace with transactions. The
SQLite ledger stays the embedded default; both pass the one conformance suite,
:class:`palace_plugins.testing.LedgerTests`.

Where the vector index lives: a palace on this ledger is best paired with

- ``backend = "pgvector"`` pointed at the same database (``[backends.pgvector] url``,
  and the same ``namespace`` on every machine): its ``vector(n)`` tables sit beside the
  ledger's schema, and since the index journal is the ledger's, any writer brings the
  shared index up to date; or
- ``backend = "sqlite"``: the exact scan reads the ledger's own vectors, so it is always
  current on every machine.

An embedded index (``chroma``) is per machine: it sees another machine's writes only
after a ``palace reindex`` there. PostgreSQL text cannot hold the NUL character: the
ledger stores it as U+FFFD in texts (a drawer's, a memory's, a closet line), the one
change it makes to a verbatim text.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from palace_retrievers.closets import Closet
from palace_retrievers.embedder import Vectors
from palace_retrievers.ids import split_source_key
from palace_retrievers.index import IndexEntry
from palace_retrievers.ledger import Ledger, LedgerStats, MinedRoot, SourceState, VectorTable
from palace_retrievers.ledger import postgres_text as fts
from palace_retrievers.ledger.postgres_closets import PostgresClosetStore
from palace_retrievers.ledger.postgres_connection import PostgresConnection, PostgresOptions
from palace_retrievers.ledger.postgres_lock import AdvisoryWriterLock
from palace_retrievers.ledger.postgres_memories import PostgresMemoryStore
from palace_retrievers.ledger.postgres_text import clean
from palace_retrievers.ledger.sql.dialects import POSTGRES
from palace_retrievers.ledger.sql.filters import where_sql
from palace_retrievers.ledger.sql.graph import SQLGraphStore
from palace_retrievers.records import Drawer, Filter
from palace_retrievers.writer_lock import PalaceLock

if TYPE_CHECKING:
    import psycopg

    Connection = psycopg.Connection[Any]

_DRAWER_COLUMNS = (
    "id, text, wing, room, source, chunk_index, line_start, line_end, source_mtime, "
    "normalize_version, filed_at, content_date, user_id, kind, metadata"
)
_WRITTEN = (
    "id, text, wing, room, source, source_key, chunk_index, line_start, line_end, "
    "source_mtime, normalize_version, filed_at, content_date, ts, user_id, kind, metadata, "
    "embedding, embedding_model, words, grams"
)
#: The full-text GIN indexes: name → (table, column).
_FULL_TEXT_INDEXES = {
    "drawers_grams": ("drawers", "grams"),
    "drawers_words": ("drawers", "words"),
    "memories_grams": ("memories", "grams"),
    "memories_words": ("memories", "words"),
}
_SOURCE_COLUMNS = (
    "wing, source_key, location, content_hash, mtime, normalize_version, drawer_count, root, plugin"
)
#: Per collection: (table, source column, kind column, which rows the vector index holds).
#: Only active memories are indexed; the others are reached through the ledger.
_COLLECTIONS = {
    "drawers": ("drawers", "source", "kind", "TRUE"),
    "closets": ("closets", "coalesce(source_key, '')", "'closet'", "TRUE"),
    "memories": ("memories", "''", "kind", "status = 'active'"),
}


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _blob(vector: npt.ArrayLike) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()


def _vector(blob: bytes) -> npt.NDArray[np.float32]:
    return np.frombuffer(blob, dtype="<f4").astype(np.float32)


def _utc(value: datetime | None) -> datetime | None:
    return None if value is None else value.astimezone(UTC)


def _drop_triples(conn: Connection, drawer_ids: Sequence[str]) -> None:
    """Delete the graph's triples read from these drawers (being deleted with them)."""
    if drawer_ids:
        conn.execute("DELETE FROM triples WHERE source_drawer = ANY(%s)", (list(drawer_ids),))


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
        filed_at=_utc(row[10]) or datetime.now(UTC),
        content_date=_utc(row[11]),
        user_id=row[12] or None,
        kind=row[13],
        metadata=json.loads(row[14]),
    )


class PostgresLedger(
    PostgresConnection, PostgresClosetStore, PostgresMemoryStore, SQLGraphStore, Ledger
):
    """The ledger in one schema of a PostgreSQL database.

    Args:
        palace_dir: The palace's folder (names the default schema).
        options: ``[ledgers.postgres]``: ``url``, ``schema``, ``pool_size``, ``timeout``.
        create: Create (and migrate) the schema when it holds no ledger.

    Raises:
        ConfigError: an option is invalid, or psycopg is not installed.
        LedgerUnavailableError: the server cannot be reached.
        SchemaError: the schema holds a newer ledger, or other tables.
        PalaceNotFoundError: no ledger in the schema and ``create`` is false.
    """

    sql = POSTGRES

    def __init__(
        self, palace_dir: Path, options: Mapping[str, Any] | None = None, *, create: bool = True
    ) -> None:
        self._seen: dict[tuple[str, str], int] = {}
        self._seen_lock = threading.Lock()
        super().__init__(PostgresOptions.parse(palace_dir, options or {}), create=create)

    def __repr__(self) -> str:
        return f"PostgresLedger(schema={self.schema!r})"

    def writer_lock(self, palace_dir: Path) -> PalaceLock:
        """A session advisory lock in this schema: one writer across every machine
        (see :mod:`palace_retrievers.ledger.postgres_lock`)."""
        return AdvisoryWriterLock(self, str(palace_dir))

    # -- meta ---------------------------------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        rows = self._read("SELECT value FROM meta WHERE key = %s", (key,))
        return str(rows[0][0]) if rows else None

    def set_meta(self, key: str, value: str) -> None:
        with self._write() as conn:
            conn.execute(
                "INSERT INTO meta VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = %s",
                (key, value, value),
            )

    def generation(self) -> int:
        return int(self.get_meta("generation") or 0)

    # -- drawers ------------------------------------------------------------------------

    def _insert_drawers(
        self,
        conn: Connection,
        drawers: Sequence[Drawer],
        vectors: Vectors,
        model: str,
        source_key: str | None,
    ) -> None:
        if len(drawers) != len(vectors):
            raise ValueError(f"{len(drawers)} drawers but {len(vectors)} vectors")
        rows = []
        for d, v in zip(drawers, vectors, strict=True):
            text = clean(d.text)
            words, grams = fts.document(text)
            rows.append(
                (
                    d.id,
                    text,
                    d.wing,
                    d.room,
                    d.source,
                    source_key,
                    d.chunk_index,
                    d.line_start,
                    d.line_end,
                    d.source_mtime,
                    d.normalize_version,
                    d.filed_at,
                    d.content_date,
                    d.timestamp,
                    d.user_id or "",
                    d.kind,
                    json.dumps(dict(d.metadata), ensure_ascii=False, sort_keys=True),
                    _blob(v),
                    model,
                    words,
                    grams,
                )
            )
        updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in _WRITTEN.split(", ")[1:])
        with conn.cursor() as cursor:
            cursor.executemany(
                f"INSERT INTO drawers ({_WRITTEN}) VALUES ("
                + ", ".join(["%s"] * 19)
                + ", %s::tsvector, %s::tsvector) "
                f"ON CONFLICT (id) DO UPDATE SET {updates}",
                rows,
            )

    def upsert_drawers(self, drawers: Sequence[Drawer], vectors: Vectors, *, model: str) -> None:
        with self._write() as conn:
            self._insert_drawers(conn, drawers, vectors, model, None)

    @staticmethod
    def _drop_unkeyed_source(conn: Connection, state: SourceState, keep: set[str]) -> list[str]:
        """The drawers of the record an owned source had before keys named owners.

        Before, an owned source was recorded under its bare key; it is now recorded under
        one naming its owner (:func:`~palace_retrievers.ids.source_key`). The old record
        is forgotten when all of its drawers are this owner's (one shared with anyone
        else, or unowned, is left alone); its drawers are returned, to be deleted.
        """
        owner, bare = split_source_key(state.key)
        if owner is None:
            return []
        rows = conn.execute(
            "SELECT id, user_id FROM drawers WHERE wing = %s AND source_key = %s ORDER BY seq",
            (state.wing, bare),
        ).fetchall()
        if not rows or any(user != owner for _, user in rows):
            return []
        conn.execute("DELETE FROM sources WHERE wing = %s AND source_key = %s", (state.wing, bare))
        return [i for i, _ in rows if i not in keep]

    def _replace_source(
        self,
        conn: Connection,
        state: SourceState,
        drawers: Sequence[Drawer],
        vectors: Vectors,
        model: str,
    ) -> list[str]:
        keep = {d.id for d in drawers}
        old = conn.execute(
            "SELECT id FROM drawers WHERE wing = %s AND source_key = %s ORDER BY seq",
            (state.wing, state.key),
        ).fetchall()
        removed = [row[0] for row in old if row[0] not in keep]
        removed.extend(self._drop_unkeyed_source(conn, state, keep))
        if removed:
            conn.execute("DELETE FROM drawers WHERE id = ANY(%s)", (removed,))
            _drop_triples(conn, removed)
        conn.execute(
            f"INSERT INTO sources ({_SOURCE_COLUMNS}, mined_at) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, now()) "
            "ON CONFLICT (wing, source_key) DO UPDATE SET location = EXCLUDED.location, "
            "content_hash = EXCLUDED.content_hash, mtime = EXCLUDED.mtime, "
            "normalize_version = EXCLUDED.normalize_version, mined_at = EXCLUDED.mined_at, "
            "drawer_count = EXCLUDED.drawer_count, root = EXCLUDED.root, "
            "plugin = EXCLUDED.plugin",
            (
                state.wing,
                state.key,
                clean(state.location),
                state.content_hash,
                state.mtime,
                state.normalize_version,
                len(drawers),
                state.root,
                state.plugin,
            ),
        )
        self._insert_drawers(conn, drawers, vectors, model, state.key)
        return removed

    def replace_source(
        self, state: SourceState, drawers: Sequence[Drawer], vectors: Vectors, *, model: str
    ) -> list[str]:
        with self._write() as conn:
            return self._replace_source(conn, state, drawers, vectors, model)

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
        with self._write() as conn:
            offset = 0
            for state, drawers in sources:
                part = vectors[offset : offset + len(drawers)]
                offset += len(drawers)
                removed.extend(self._replace_source(conn, state, drawers, part, model))
                filed.extend(d.id for d in drawers)
            self._replace_closets(conn, closets, closet_vectors, model, [*filed, *removed])
        return removed

    def source_state(self, wing: str, key: str) -> SourceState | None:
        rows = self._read(
            f"SELECT {_SOURCE_COLUMNS} FROM sources WHERE wing = %s AND source_key = %s",
            (wing, key),
        )
        return SourceState(*rows[0]) if rows else None

    def source_states(self, wing: str) -> dict[str, SourceState]:
        rows = self._read(f"SELECT {_SOURCE_COLUMNS} FROM sources WHERE wing = %s", (wing,))
        return {row[1]: SourceState(*row) for row in rows}

    def touch_source(self, state: SourceState) -> None:
        with self._write(bump=False) as conn:
            conn.execute(
                "UPDATE sources SET mtime = %s, location = %s, root = coalesce(%s, root), "
                "plugin = coalesce(%s, plugin) WHERE wing = %s AND source_key = %s",
                (
                    state.mtime,
                    clean(state.location),
                    state.root,
                    state.plugin,
                    state.wing,
                    state.key,
                ),
            )

    def mined_roots(self) -> list[MinedRoot]:
        rows = self._read(
            "SELECT wing, root, plugin, count(*), coalesce(sum(drawer_count), 0) FROM sources "
            "WHERE root IS NOT NULL AND plugin IS NOT NULL "
            "GROUP BY wing, root, plugin ORDER BY root, wing, plugin"
        )
        return [MinedRoot(w, r, p, int(n), int(d)) for w, r, p, n, d in rows]

    def delete_sources(self, wing: str, keys: Sequence[str]) -> int:
        unique = list(dict.fromkeys(keys))
        with self._write() as conn:
            ids = [
                row[0]
                for row in conn.execute(
                    "DELETE FROM drawers WHERE wing = %s AND source_key = ANY(%s) RETURNING id",
                    (wing, unique),
                ).fetchall()
            ]
            deleted = len(ids)
            _drop_triples(conn, ids)
            conn.execute(
                "DELETE FROM sources WHERE wing = %s AND source_key = ANY(%s)", (wing, unique)
            )
            self._delete_orphans(conn)
        return deleted

    def get_drawers(self, ids: Sequence[str]) -> list[Drawer]:
        rows = self._read(
            f"SELECT {_DRAWER_COLUMNS} FROM drawers WHERE id = ANY(%s)", (list(set(ids)),)
        )
        found = {row[0]: _drawer(row) for row in rows}
        return [found[i] for i in ids if i in found]

    def delete_drawers(self, ids: Sequence[str]) -> list[str]:
        with self._write() as conn:
            rows = conn.execute(
                "DELETE FROM drawers WHERE id = ANY(%s) RETURNING id", (list(set(ids)),)
            ).fetchall()
            _drop_triples(conn, [row[0] for row in rows])
        existed = {row[0] for row in rows}
        return [i for i in dict.fromkeys(ids) if i in existed]

    def drawer_ids(self, where: Filter | None = None) -> list[str]:
        condition, params = where_sql(where)
        rows = self._rows(f"SELECT id FROM drawers WHERE {condition} ORDER BY seq", params)
        return [row[0] for row in rows]

    def iter_drawers(self, *, batch_size: int = 256) -> Iterator[list[Drawer]]:
        last = 0
        while rows := self._read(
            f"SELECT seq, {_DRAWER_COLUMNS} FROM drawers WHERE seq > %s ORDER BY seq LIMIT %s",
            (last, batch_size),
        ):
            last = rows[-1][0]
            yield [_drawer(row[1:]) for row in rows]

    def set_vectors(self, ids: Sequence[str], vectors: Vectors, *, model: str) -> None:
        rows = [(_blob(v), model, i) for i, v in zip(ids, vectors, strict=True)]
        with self._write() as conn, conn.cursor() as cursor:
            cursor.executemany(
                "UPDATE drawers SET embedding = %s, embedding_model = %s WHERE id = %s", rows
            )

    # -- vectors ------------------------------------------------------------------------

    @staticmethod
    def _vector_select(collection: str) -> tuple[str, str]:
        table, source, kind, indexed = _COLLECTIONS[collection]
        return (
            f"SELECT seq, id, embedding, wing, room, user_id, {kind}, ts, {source} "
            f"FROM {table} WHERE embedding IS NOT NULL AND {indexed}",
            table,
        )

    @staticmethod
    def _entries(rows: Sequence[Any]) -> list[IndexEntry]:
        return [
            IndexEntry(
                id=r[1],
                vector=_vector(r[2]),
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
        select, _ = self._vector_select(collection)
        last = 0
        while rows := self._read(
            f"{select} AND seq > %s ORDER BY seq LIMIT %s", (last, batch_size)
        ):
            last = rows[-1][0]
            yield self._entries(rows)

    def index_entries(self, collection: str, ids: Sequence[str]) -> list[IndexEntry]:
        select, _ = self._vector_select(collection)
        rows = self._read(f"{select} AND id = ANY(%s) ORDER BY seq", (list(set(ids)),))
        return self._entries(rows)

    def count_vectors(self, collection: str) -> int:
        table, _, _, indexed = _COLLECTIONS[collection]
        ((count,),) = self._read(
            f"SELECT count(*) FROM {table} WHERE embedding IS NOT NULL AND {indexed}"
        )
        return int(count)

    def vector_table(self, collection: str) -> VectorTable:
        select, _ = self._vector_select(collection)
        rows = self._read(f"{select} ORDER BY seq")
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

    def drawer_vectors(self, ids: Sequence[str]) -> dict[str, npt.NDArray[np.float32]]:
        rows = self._read(
            "SELECT id, embedding FROM drawers WHERE id = ANY(%s) AND embedding IS NOT NULL",
            (list(set(ids)),),
        )
        return {drawer_id: _vector(blob) for drawer_id, blob in rows}

    # -- the vector-index journal -------------------------------------------------------

    def pending_index(self, collection: str, *, limit: int = 1024) -> list[str]:
        rows = self._read(
            "SELECT id, seq FROM index_pending WHERE collection = %s ORDER BY id LIMIT %s",
            (collection, limit),
        )
        with self._seen_lock:
            for journal_id, seq in rows:
                self._seen[(collection, journal_id)] = int(seq)
        return [row[0] for row in rows]

    def clear_pending(self, collection: str, ids: Sequence[str] | None = None) -> None:
        """Mark ids as applied: each one read by :meth:`pending_index` only up to the
        change it was read at (a later change, by any writer, stays pending)."""
        with self._write(bump=False) as conn:
            if ids is None:
                conn.execute("DELETE FROM index_pending WHERE collection = %s", (collection,))
                with self._seen_lock:
                    for key in [k for k in self._seen if k[0] == collection]:
                        del self._seen[key]
                return
            with self._seen_lock:
                seen = {i: self._seen.pop((collection, i), None) for i in dict.fromkeys(ids)}
            known = [(i, s) for i, s in seen.items() if s is not None]
            unknown = [i for i, s in seen.items() if s is None]
            if known:
                conn.execute(
                    "DELETE FROM index_pending p USING unnest(%s::text[], %s::bigint[]) "
                    "AS done(id, seq) WHERE p.collection = %s AND p.id = done.id "
                    "AND p.seq <= done.seq",
                    ([i for i, _ in known], [s for _, s in known], collection),
                )
            if unknown:
                conn.execute(
                    "DELETE FROM index_pending WHERE collection = %s AND id = ANY(%s)",
                    (collection, unknown),
                )

    # -- full text ----------------------------------------------------------------------

    def lexical_problem(self) -> str | None:
        """A missing or invalid GIN index, or full text cut by another version of
        :mod:`~palace_retrievers.ledger.postgres_text` (one query: it runs before writes)."""
        ((present, version),) = self._read(
            "SELECT (SELECT coalesce(array_agg(c.relname::text ORDER BY c.relname), '{}') "
            "FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE i.indisvalid AND c.relnamespace = to_regnamespace(%s) "
            "AND c.relname = ANY(%s)), "
            "(SELECT value FROM meta WHERE key = 'lexical_version')",
            (_quoted(self.schema), list(_FULL_TEXT_INDEXES)),
        )
        missing = sorted(set(_FULL_TEXT_INDEXES) - set(present))
        if missing:
            return f"the full-text indexes {', '.join(missing)} are missing or invalid"
        if version != str(fts.VERSION):
            return f"the full text was cut by version {version} (this one is {fts.VERSION})"
        return None

    def rebuild_lexical(self, *, batch_size: int = 1000) -> None:
        """Cut every drawer's and memory's text again and rebuild the GIN indexes; the
        vector-index journal and the generation are left alone."""
        with self._write(bump=False) as conn:
            for index, (table, column) in _FULL_TEXT_INDEXES.items():
                conn.execute(f"DROP INDEX IF EXISTS {index}")
                conn.execute(f"CREATE INDEX {index} ON {table} USING gin ({column})")
        for table in ("drawers", "memories"):
            last = 0
            while True:
                with self._write(bump=False) as conn:
                    rows = conn.execute(
                        f"SELECT seq, id, text FROM {table} WHERE seq > %s ORDER BY seq LIMIT %s",
                        (last, batch_size),
                    ).fetchall()
                    if not rows:
                        break
                    last = rows[-1][0]
                    with conn.cursor() as cursor:
                        cursor.executemany(
                            f"UPDATE {table} SET words = %s::tsvector, grams = %s::tsvector "
                            "WHERE id = %s",
                            [(*fts.document(text), row_id) for _, row_id, text in rows],
                        )
        with self._write(bump=False) as conn:
            conn.execute(
                "INSERT INTO meta VALUES ('lexical_version', %s) "
                "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                (str(fts.VERSION),),
            )

    def lexical(self, query: str, *, where: Filter, limit: int) -> list[tuple[str, float]]:
        condition, params = where_sql(where, "d")
        return self._ranked("drawers", query, condition, params, limit)

    def _ranked(
        self, table: str, query: str, condition: str, params: list[Any], limit: int
    ) -> list[tuple[str, float]]:
        """Full-text candidates of ``table`` (alias ``d``) passing ``condition``."""
        scores: dict[str, float] = {}
        if limit <= 0:
            return []
        for column, terms in zip(("words", "grams"), fts.query(query), strict=True):
            if terms is None:
                continue
            rows = self._rows(
                f"SELECT d.id, ts_rank(d.{column}, q, 1) AS score FROM {table} d, "
                f"CAST(? AS tsquery) AS q WHERE d.{column} @@ q AND {condition} "
                "ORDER BY score DESC, d.id LIMIT ?",
                [terms, *params, limit],
            )
            for found, score in rows:
                scores[found] = scores.get(found, 0.0) + float(score)
        return sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:limit]

    # -- search support -----------------------------------------------------------------

    def source_drawers(self, *, wing: str, source: str, where: Filter) -> list[Drawer]:
        condition, params = where_sql(where)
        rows = self._rows(
            f"SELECT {_DRAWER_COLUMNS} FROM drawers WHERE wing = ? AND source = ? "
            f"AND {condition} ORDER BY chunk_index, id",
            [wing, source, *params],
        )
        return [_drawer(row) for row in rows]

    # -- export -------------------------------------------------------------------------

    def owners_and_keys(self) -> tuple[list[str], dict[str, list[str]], dict[str, list[str]]]:
        """What ``palace export`` walks (see :mod:`palace_retrievers.transfer`): every
        owner in stored form (``""`` for unowned), each owner's ids of memories whose
        history outlived them, and each owner's triple subject keys, all sorted."""
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
            wings.setdefault(wing, {})[room] = int(count)
        ((drawers, embedded, sources, closets),) = self._read(
            "SELECT (SELECT count(*) FROM drawers), (SELECT count(embedding) FROM drawers), "
            "(SELECT count(*) FROM sources), (SELECT count(*) FROM closets)"
        )
        return LedgerStats(
            int(drawers),
            int(sources),
            int(closets),
            int(embedded),
            wings,
            self.count_memories(),
        )
