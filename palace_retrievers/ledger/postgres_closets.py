"""Closets in the PostgreSQL ledger (tables ``closets`` and ``closet_drawers``).

:class:`PostgresClosetStore` is a mixin of
:class:`~palace_retrievers.ledger.postgres.PostgresLedger`: it writes through the
ledger's ``_write()`` (one transaction under the palace's advisory lock) and reads
through ``_read()``; :meth:`_replace_closets` also runs inside the ledger's
``file_sources`` transaction. A closet points only to drawers that exist, and one left
pointing to none is deleted in the same transaction that left it so.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from palace_retrievers.closets import Closet
from palace_retrievers.embedder import Vectors
from palace_retrievers.ledger.postgres_text import clean

if TYPE_CHECKING:
    import psycopg

    Connection = psycopg.Connection[Any]


def _blob(vector: Any) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()


class PostgresClosetStore:
    """The closets of the PostgreSQL ledger."""

    if TYPE_CHECKING:
        # Provided by PostgresLedger, the class this is mixed into.
        def _write(self, *, bump: bool = True) -> AbstractContextManager[Connection]: ...

        def _read(self, statement: str, params: Sequence[Any] = ()) -> list[Any]: ...

    @staticmethod
    def _delete_orphans(conn: Connection) -> list[str]:
        rows = conn.execute(
            "DELETE FROM closets c WHERE NOT EXISTS "
            "(SELECT 1 FROM closet_drawers l WHERE l.closet_id = c.id) RETURNING id"
        ).fetchall()
        return sorted(row[0] for row in rows)

    def replace_closets(
        self,
        closets: Sequence[Closet],
        vectors: Vectors,
        *,
        model: str,
        drawer_ids: Sequence[str],
    ) -> list[str]:
        with self._write() as conn:
            return self._replace_closets(conn, closets, vectors, model, drawer_ids)

    def _replace_closets(
        self,
        conn: Connection,
        closets: Sequence[Closet],
        vectors: Vectors,
        model: str,
        drawer_ids: Sequence[str],
    ) -> list[str]:
        if len(closets) != len(vectors):
            raise ValueError(f"{len(closets)} closets but {len(vectors)} vectors")
        now = datetime.now(UTC)
        rows = conn.execute(
            "DELETE FROM closets WHERE id IN "
            "(SELECT closet_id FROM closet_drawers WHERE drawer_id = ANY(%s)) RETURNING id",
            (list(set(drawer_ids)),),
        ).fetchall()
        removed = {row[0] for row in rows}
        removed.update(self._delete_orphans(conn))
        pointed = list({i for c in closets for i in c.drawer_ids})
        known = {
            row[0]
            for row in conn.execute(
                "SELECT id FROM drawers WHERE id = ANY(%s)", (pointed,)
            ).fetchall()
        }
        filed: list[tuple[Any, ...]] = []
        links: list[tuple[str, str]] = []
        for closet, vector in zip(closets, vectors, strict=True):
            pointers = [i for i in closet.drawer_ids if i in known]
            if not pointers:
                continue
            filed.append(
                (
                    closet.id,
                    clean(closet.line),
                    closet.wing,
                    closet.room,
                    closet.source,
                    closet.user_id or "",
                    closet.extractor,
                    now,
                    now.timestamp(),
                    _blob(vector),
                    model,
                )
            )
            links.extend((closet.id, i) for i in pointers)
            removed.discard(closet.id)
        with conn.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO closets (id, line, wing, room, source_key, user_id, extractor, "
                "filed_at, ts, embedding, embedding_model) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO "
                "UPDATE SET line = EXCLUDED.line, embedding = EXCLUDED.embedding, "
                "embedding_model = EXCLUDED.embedding_model",
                filed,
            )
            cursor.executemany(
                "INSERT INTO closet_drawers VALUES (%s, %s) ON CONFLICT DO NOTHING", links
            )
        return sorted(removed)

    def prune_closets(self) -> list[str]:
        with self._write() as conn:
            return self._delete_orphans(conn)

    def closet_lines(self, ids: Sequence[str]) -> dict[str, str]:
        rows = self._read("SELECT id, line FROM closets WHERE id = ANY(%s)", (list(set(ids)),))
        return {closet_id: line for closet_id, line in rows}

    def closet_pointers(self, ids: Sequence[str]) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for closet_id, drawer_id in self._read(
            "SELECT l.closet_id, l.drawer_id FROM closet_drawers l "
            "JOIN drawers d ON d.id = l.drawer_id WHERE l.closet_id = ANY(%s) "
            "ORDER BY l.closet_id, d.chunk_index, d.id",
            (list(set(ids)),),
        ):
            out.setdefault(closet_id, []).append(drawer_id)
        return out

    def iter_closets(self, *, batch_size: int = 256) -> Iterator[list[Closet]]:
        last = 0
        while rows := self._read(
            "SELECT seq, id, line, wing, room, coalesce(source_key, ''), user_id, extractor "
            "FROM closets WHERE seq > %s ORDER BY seq LIMIT %s",
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
        rows = [(_blob(v), model, i) for i, v in zip(ids, vectors, strict=True)]
        with self._write() as conn, conn.cursor() as cursor:
            cursor.executemany(
                "UPDATE closets SET embedding = %s, embedding_model = %s WHERE id = %s", rows
            )
