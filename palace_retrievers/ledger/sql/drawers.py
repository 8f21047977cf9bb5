"""Drawers and the sources they were mined from, in a SQL ledger (tables ``drawers`` and
``sources``).

:class:`SQLDrawerStore` is a part of both SQL ledgers. A source's drawers are replaced
in one transaction with its record, so a reader sees a source's drawers all at once or
not at all; the triples read from a deleted drawer go with it, and so do the closets
left pointing to nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np
import numpy.typing as npt

from palace_retrievers.closets import Closet
from palace_retrievers.embedder import Vectors
from palace_retrievers.ids import split_source_key
from palace_retrievers.ledger.drawer_store import DrawerStore
from palace_retrievers.ledger.records import MinedRoot, SourceState
from palace_retrievers.ledger.sql.closets import SQLClosetStore, delete_orphan_closets
from palace_retrievers.ledger.sql.filters import where_sql
from palace_retrievers.ledger.sql.store import Session
from palace_retrievers.ledger.sql.vectors import blob, vector_of
from palace_retrievers.records import Drawer, Filter

#: A drawer's fields, as :meth:`SQLDrawerStore._drawer` reads them.
DRAWER_COLUMNS = (
    "id, text, wing, room, source, chunk_index, line_start, line_end, source_mtime, "
    "normalize_version, filed_at, content_date, user_id, kind, metadata"
)
#: What writing a drawer sets (before the dialect's full-text cells).
_WRITTEN = (
    "id", "text", "wing", "room", "source", "source_key", "chunk_index", "line_start",
    "line_end", "source_mtime", "normalize_version", "filed_at", "content_date", "ts",
    "user_id", "kind", "metadata", "embedding", "embedding_model",
)  # fmt: skip
_SOURCE_COLUMNS = (
    "wing, source_key, location, content_hash, mtime, normalize_version, drawer_count, root, plugin"
)


class SQLDrawerStore(SQLClosetStore, DrawerStore):
    """Drawers and sources over a SQL ledger, with the closets filed beside them (a part
    of the ledger)."""

    def _drawer(self, row: Sequence[Any]) -> Drawer:
        """The drawer of a row of :data:`DRAWER_COLUMNS`."""
        when = self.sql.when
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
            filed_at=when(row[10]) or datetime.now(UTC),
            content_date=when(row[11]),
            user_id=row[12] or None,
            kind=row[13],
            metadata=json.loads(row[14]),
        )

    # -- writing ------------------------------------------------------------------------

    def _insert_drawers(
        self,
        db: Session,
        drawers: Sequence[Drawer],
        vectors: Vectors,
        model: str,
        source_key: str | None,
    ) -> None:
        if len(drawers) != len(vectors):
            raise ValueError(f"{len(drawers)} drawers but {len(vectors)} vectors")
        sql = self.sql
        rows = []
        for d, v in zip(drawers, vectors, strict=True):
            text = sql.clean(d.text)
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
                    sql.filed(d.filed_at),
                    None if d.content_date is None else sql.filed(d.content_date),
                    d.timestamp,
                    d.user_id or "",
                    d.kind,
                    json.dumps(dict(d.metadata), ensure_ascii=False, sort_keys=True),
                    blob(v),
                    model,
                    *sql.text_cells(text),
                )
            )
        replaced = [*_WRITTEN[1:], *sql.text_columns]
        columns, marks = sql.text_sql()
        db.executemany(
            f"INSERT INTO drawers ({', '.join(_WRITTEN)}{columns}) "
            f"VALUES ({', '.join('?' * len(_WRITTEN))}{marks}) "
            f"ON CONFLICT (id) DO UPDATE SET {', '.join(f'{c} = excluded.{c}' for c in replaced)}",
            rows,
        )

    def upsert_drawers(self, drawers: Sequence[Drawer], vectors: Vectors, *, model: str) -> None:
        with self._transaction() as db:
            self._insert_drawers(db, drawers, vectors, model, None)

    def _drop_triples(self, db: Session, drawer_ids: Sequence[str]) -> None:
        """Delete the graph's triples read from these drawers (being deleted with them)."""
        for among, batch in self.sql.among("source_drawer", drawer_ids):
            db.execute(f"DELETE FROM triples WHERE {among}", batch)

    def _drop_unkeyed_source(self, db: Session, state: SourceState, keep: set[str]) -> list[str]:
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
            f"SELECT id, user_id FROM drawers WHERE wing = ? AND source_key = ? "
            f"ORDER BY {self.sql.row}",
            (state.wing, bare),
        ).fetchall()
        if not rows or any(user != owner for _, user in rows):
            return []
        db.execute("DELETE FROM sources WHERE wing = ? AND source_key = ?", (state.wing, bare))
        return [i for i, _ in rows if i not in keep]

    def _replace_source(
        self,
        db: Session,
        state: SourceState,
        drawers: Sequence[Drawer],
        vectors: Vectors,
        model: str,
    ) -> list[str]:
        keep = {d.id for d in drawers}
        old = db.execute(
            f"SELECT id FROM drawers WHERE wing = ? AND source_key = ? ORDER BY {self.sql.row}",
            (state.wing, state.key),
        ).fetchall()
        removed = [row[0] for row in old if row[0] not in keep]
        removed.extend(self._drop_unkeyed_source(db, state, keep))
        for among, batch in self.sql.among("id", removed):
            db.execute(f"DELETE FROM drawers WHERE {among}", batch)
        self._drop_triples(db, removed)
        db.execute(
            f"INSERT INTO sources ({_SOURCE_COLUMNS}, mined_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (wing, source_key) DO UPDATE SET location = excluded.location, "
            "content_hash = excluded.content_hash, mtime = excluded.mtime, "
            "normalize_version = excluded.normalize_version, mined_at = excluded.mined_at, "
            "drawer_count = excluded.drawer_count, root = excluded.root, "
            "plugin = excluded.plugin",
            (
                state.wing,
                state.key,
                self.sql.clean(state.location),
                state.content_hash,
                state.mtime,
                state.normalize_version,
                len(drawers),
                state.root,
                state.plugin,
                self.sql.filed(datetime.now(UTC)),
            ),
        )
        self._insert_drawers(db, drawers, vectors, model, state.key)
        return removed

    def replace_source(
        self, state: SourceState, drawers: Sequence[Drawer], vectors: Vectors, *, model: str
    ) -> list[str]:
        with self._transaction() as db:
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
        with self._transaction() as db:
            offset = 0
            for state, drawers in sources:
                part = vectors[offset : offset + len(drawers)]
                offset += len(drawers)
                removed.extend(self._replace_source(db, state, drawers, part, model))
                filed.extend(d.id for d in drawers)
            self._replace_closets(db, closets, closet_vectors, model, [*filed, *removed])
        return removed

    def touch_source(self, state: SourceState) -> None:
        with self._transaction(bump=False) as db:
            db.execute(
                "UPDATE sources SET mtime = ?, location = ?, root = coalesce(?, root), "
                "plugin = coalesce(?, plugin) WHERE wing = ? AND source_key = ?",
                (
                    state.mtime,
                    self.sql.clean(state.location),
                    state.root,
                    state.plugin,
                    state.wing,
                    state.key,
                ),
            )

    def delete_sources(self, wing: str, keys: Sequence[str]) -> int:
        deleted = 0
        with self._transaction() as db:
            for among, batch in self.sql.among("source_key", keys):
                ids = [
                    row[0]
                    for row in db.execute(
                        f"DELETE FROM drawers WHERE wing = ? AND {among} RETURNING id",
                        [wing, *batch],
                    ).fetchall()
                ]
                deleted += len(ids)
                self._drop_triples(db, ids)
                db.execute(f"DELETE FROM sources WHERE wing = ? AND {among}", [wing, *batch])
            delete_orphan_closets(db)
        return deleted

    def delete_drawers(self, ids: Sequence[str]) -> list[str]:
        existed: set[str] = set()
        with self._transaction() as db:
            for among, batch in self.sql.among("id", ids):
                rows = db.execute(f"DELETE FROM drawers WHERE {among} RETURNING id", batch)
                existed.update(row[0] for row in rows.fetchall())
            deleted = [i for i in dict.fromkeys(ids) if i in existed]
            self._drop_triples(db, deleted)
        return deleted

    def set_vectors(self, ids: Sequence[str], vectors: Vectors, *, model: str) -> None:
        with self._transaction() as db:
            db.executemany(
                "UPDATE drawers SET embedding = ?, embedding_model = ? WHERE id = ?",
                [(blob(v), model, i) for i, v in zip(ids, vectors, strict=True)],
            )

    # -- reading ------------------------------------------------------------------------

    def source_state(self, wing: str, key: str) -> SourceState | None:
        rows = self._rows(
            f"SELECT {_SOURCE_COLUMNS} FROM sources WHERE wing = ? AND source_key = ?",
            (wing, key),
        )
        return SourceState(*rows[0]) if rows else None

    def source_states(self, wing: str) -> dict[str, SourceState]:
        rows = self._rows(f"SELECT {_SOURCE_COLUMNS} FROM sources WHERE wing = ?", (wing,))
        return {row[1]: SourceState(*row) for row in rows}

    def mined_roots(self) -> list[MinedRoot]:
        rows = self._rows(
            "SELECT wing, root, plugin, count(*), coalesce(sum(drawer_count), 0) FROM sources "
            "WHERE root IS NOT NULL AND plugin IS NOT NULL "
            "GROUP BY wing, root, plugin ORDER BY root, wing, plugin"
        )
        return [MinedRoot(w, r, p, int(n), int(d)) for w, r, p, n, d in rows]

    def get_drawers(self, ids: Sequence[str]) -> list[Drawer]:
        found = self._rows_by_id("drawers", DRAWER_COLUMNS, ids)
        return [self._drawer(found[i]) for i in ids if i in found]

    def drawer_ids(self, where: Filter | None = None) -> list[str]:
        condition, params = where_sql(where)
        rows = self._rows(
            f"SELECT id FROM drawers WHERE {condition} ORDER BY {self.sql.row}", params
        )
        return [row[0] for row in rows]

    def iter_drawers(self, *, batch_size: int = 256) -> Iterator[list[Drawer]]:
        for rows in self._pages("drawers", DRAWER_COLUMNS, batch_size):
            yield [self._drawer(r[1:]) for r in rows]

    def drawer_vectors(self, ids: Sequence[str]) -> dict[str, npt.NDArray[np.float32]]:
        found = self._rows_by_id("drawers", "id, embedding", ids)
        return {i: vector_of(stored) for i, (_, stored) in found.items() if stored is not None}

    def lexical(self, query: str, *, where: Filter, limit: int) -> list[tuple[str, float]]:
        condition, params = where_sql(where, "d")
        return self._full_text("drawers", query, condition, params, limit)

    def source_drawers(self, *, wing: str, source: str, where: Filter) -> list[Drawer]:
        condition, params = where_sql(where)
        rows = self._rows(
            f"SELECT {DRAWER_COLUMNS} FROM drawers WHERE wing = ? AND source = ? "
            f"AND {condition} ORDER BY chunk_index, id",
            [wing, source, *params],
        )
        return [self._drawer(row) for row in rows]
