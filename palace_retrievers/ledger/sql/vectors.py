"""Stored vectors of a SQL ledger as vector-index entries: what an index is built from.

:class:`SQLVectorStore` is a part of both SQL ledgers. Vectors are stored as
little-endian float32 bytes (:func:`blob`), whatever the model's dimension. The journal
of the ids an index still has to apply stays with each ledger (PostgreSQL numbers its
entries, since several machines may apply it).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from palace_retrievers.index import IndexEntry
from palace_retrievers.ledger.index_journal import IndexJournal
from palace_retrievers.ledger.records import VectorTable
from palace_retrievers.ledger.sql.store import SQLStore

#: Per collection: (table, source column, kind column, which rows the vector index holds).
#: Only active memories are indexed; a memory that is superseded, archived or pending
#: leaves the index through the journal and is reached through the ledger.
COLLECTIONS = {
    "drawers": ("drawers", "source", "kind", "TRUE"),
    "closets": ("closets", "coalesce(source_key, '')", "'closet'", "TRUE"),
    "memories": ("memories", "''", "kind", "status = 'active'"),
}


def blob(vector: npt.ArrayLike) -> bytes:
    """A vector as the ledger stores it: little-endian float32 bytes."""
    return np.asarray(vector, dtype="<f4").tobytes()


def vector_of(stored: bytes) -> npt.NDArray[np.float32]:
    """A stored vector as a float32 array."""
    return np.frombuffer(stored, dtype="<f4").astype(np.float32)


def _entries(rows: Sequence[Any]) -> list[IndexEntry]:
    return [
        IndexEntry(
            id=r[1],
            vector=vector_of(r[2]),
            wing=r[3],
            room=r[4],
            user_id=r[5],
            kind=r[6],
            timestamp=r[7],
            source=r[8],
        )
        for r in rows
    ]


class SQLVectorStore(SQLStore, IndexJournal):
    """The stored vectors of each collection (a part of the ledger)."""

    def _vector_select(self, collection: str) -> str:
        table, source, kind, indexed = COLLECTIONS[collection]
        return (
            f"SELECT {self.sql.row}, id, embedding, wing, room, user_id, {kind}, ts, {source} "
            f"FROM {table} WHERE embedding IS NOT NULL AND {indexed}"
        )

    def iter_entries(self, collection: str, *, batch_size: int = 512) -> Iterator[list[IndexEntry]]:
        select, row, last = self._vector_select(collection), self.sql.row, 0
        while rows := self._rows(
            f"{select} AND {row} > ? ORDER BY {row} LIMIT ?", (last, batch_size)
        ):
            last = rows[-1][0]
            yield _entries(rows)

    def index_entries(self, collection: str, ids: Sequence[str]) -> list[IndexEntry]:
        select, out = self._vector_select(collection), []
        for among, batch in self.sql.among("id", ids):
            out.extend(_entries(self._rows(f"{select} AND {among} ORDER BY {self.sql.row}", batch)))
        return out

    def count_vectors(self, collection: str) -> int:
        table, _, _, indexed = COLLECTIONS[collection]
        ((count,),) = self._rows(
            f"SELECT count(*) FROM {table} WHERE embedding IS NOT NULL AND {indexed}"
        )
        return int(count)

    def vector_table(self, collection: str) -> VectorTable:
        rows = self._rows(f"{self._vector_select(collection)} ORDER BY {self.sql.row}")
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
