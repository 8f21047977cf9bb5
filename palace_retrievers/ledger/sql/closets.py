"""Closets in a SQL ledger (tables ``closets`` and ``closet_drawers``).

:class:`SQLClosetStore` is a part of both SQL ledgers; :meth:`~SQLClosetStore._replace_closets`
also runs inside the drawers' ``file_sources`` transaction. A closet points only to
drawers that exist, and one left pointing to none is deleted in the same transaction
that left it so (:func:`delete_orphan_closets`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

from palace_retrievers.closets import Closet
from palace_retrievers.embedder import Vectors
from palace_retrievers.ledger.closet_store import ClosetStore
from palace_retrievers.ledger.sql.store import Session, SQLStore
from palace_retrievers.ledger.sql.vectors import blob


def delete_orphan_closets(db: Session) -> list[str]:
    """Delete the closets that point to no drawer; returns their ids, sorted."""
    rows = db.execute(
        "DELETE FROM closets WHERE NOT EXISTS "
        "(SELECT 1 FROM closet_drawers l WHERE l.closet_id = closets.id) RETURNING id"
    ).fetchall()
    return sorted(row[0] for row in rows)


class SQLClosetStore(SQLStore, ClosetStore):
    """The closets of a SQL ledger (a part of the ledger)."""

    def replace_closets(
        self,
        closets: Sequence[Closet],
        vectors: Vectors,
        *,
        model: str,
        drawer_ids: Sequence[str],
    ) -> list[str]:
        with self._transaction() as db:
            return self._replace_closets(db, closets, vectors, model, drawer_ids)

    def _replace_closets(
        self,
        db: Session,
        closets: Sequence[Closet],
        vectors: Vectors,
        model: str,
        drawer_ids: Sequence[str],
    ) -> list[str]:
        if len(closets) != len(vectors):
            raise ValueError(f"{len(closets)} closets but {len(vectors)} vectors")
        sql, now = self.sql, datetime.now(UTC)
        removed: set[str] = set()
        for among, batch in sql.among("drawer_id", drawer_ids):
            rows = db.execute(
                "DELETE FROM closets WHERE id IN "
                f"(SELECT closet_id FROM closet_drawers WHERE {among}) RETURNING id",
                batch,
            )
            removed.update(row[0] for row in rows.fetchall())
        removed.update(delete_orphan_closets(db))
        known: set[str] = set()
        for among, batch in sql.among("id", [i for c in closets for i in c.drawer_ids]):
            rows = db.execute(f"SELECT id FROM drawers WHERE {among}", batch)
            known.update(row[0] for row in rows.fetchall())
        filed: list[tuple[Any, ...]] = []
        links: list[tuple[str, str]] = []
        for closet, vector in zip(closets, vectors, strict=True):
            pointers = [i for i in closet.drawer_ids if i in known]
            if not pointers:
                continue
            filed.append(
                (
                    closet.id,
                    sql.clean(closet.line),
                    closet.wing,
                    closet.room,
                    closet.source,
                    closet.user_id or "",
                    closet.extractor,
                    sql.filed(now),
                    now.timestamp(),
                    blob(vector),
                    model,
                )
            )
            links.extend((closet.id, i) for i in pointers)
            removed.discard(closet.id)
        db.executemany(
            "INSERT INTO closets (id, line, wing, room, source_key, user_id, extractor, "
            "filed_at, ts, embedding, embedding_model) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET "
            "line = excluded.line, embedding = excluded.embedding, "
            "embedding_model = excluded.embedding_model",
            filed,
        )
        db.executemany("INSERT INTO closet_drawers VALUES (?, ?) ON CONFLICT DO NOTHING", links)
        return sorted(removed)

    def prune_closets(self) -> list[str]:
        with self._transaction() as db:
            return delete_orphan_closets(db)

    def closet_lines(self, ids: Sequence[str]) -> dict[str, str]:
        out: dict[str, str] = {}
        for among, batch in self.sql.among("id", ids):
            rows = self._rows(f"SELECT id, line FROM closets WHERE {among}", batch)
            out.update((closet_id, line) for closet_id, line in rows)
        return out

    def closet_pointers(self, ids: Sequence[str]) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for among, batch in self.sql.among("l.closet_id", ids):
            for closet_id, drawer_id in self._rows(
                "SELECT l.closet_id, l.drawer_id FROM closet_drawers l "
                f"JOIN drawers d ON d.id = l.drawer_id WHERE {among} "
                "ORDER BY l.closet_id, d.chunk_index, d.id",
                batch,
            ):
                out.setdefault(closet_id, []).append(drawer_id)
        return out

    def iter_closets(self, *, batch_size: int = 256) -> Iterator[list[Closet]]:
        columns = "id, line, wing, room, coalesce(source_key, ''), user_id, extractor"
        for rows in self._pages("closets", columns, batch_size):
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
        with self._transaction() as db:
            db.executemany(
                "UPDATE closets SET embedding = ?, embedding_model = ? WHERE id = ?",
                [(blob(v), model, i) for i, v in zip(ids, vectors, strict=True)],
            )
