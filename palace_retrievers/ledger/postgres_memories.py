"""What the PostgreSQL ledger does its own way with memories: full text and access counts.

:class:`PostgresMemoryStore` is the SQL core's memory part
(:class:`~palace_retrievers.ledger.sql.memories.SQLMemoryStore`) with the two things
PostgreSQL does differently: the full-text query over the ``words`` and ``grams``
columns (the ledger's ``_ranked``), and :meth:`touch_memories`, which skips the rows
another transaction has locked instead of waiting for them.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import TYPE_CHECKING, Any

from palace_retrievers.ledger import memory_rows
from palace_retrievers.ledger.sql.memories import SQLMemoryStore, statuses_sql

if TYPE_CHECKING:
    import psycopg

    Connection = psycopg.Connection[Any]

log = logging.getLogger(__name__)

#: How long counting a memory access waits for a table lock (row locks: not at all).
TOUCH_LOCK_TIMEOUT = "100ms"


class PostgresMemoryStore(SQLMemoryStore):
    """The :class:`MemoryStore` part of the PostgreSQL ledger."""

    if TYPE_CHECKING:
        # Provided by PostgresLedger, the class this is mixed into.
        def _connection(self) -> AbstractContextManager[Connection]: ...

        def _ranked(
            self, table: str, query: str, condition: str, params: list[Any], limit: int
        ) -> list[tuple[str, float]]: ...

    def touch_memories(self, ids: Sequence[str], *, at: datetime) -> None:
        """Count the accesses, unless that means waiting: a search calls this, and a
        search does not wait behind another write for a counter. So neither the
        palace's advisory lock (which no reader or counter needs) nor a row another
        transaction has locked is waited for: such a memory is not counted this time.
        A table lock (a migration) is waited for :data:`TOUCH_LOCK_TIMEOUT` at most."""
        if not ids:
            return
        from psycopg import errors

        with self._connection() as conn:
            try:
                with conn.transaction():
                    conn.execute(f"SET LOCAL lock_timeout = '{TOUCH_LOCK_TIMEOUT}'")
                    conn.execute(
                        "UPDATE memories SET access_count = access_count + 1, "
                        "last_accessed = %s WHERE id IN (SELECT id FROM memories "
                        "WHERE id = ANY(%s) FOR UPDATE SKIP LOCKED)",
                        (at, list(set(ids))),
                    )
            except errors.LockNotAvailable as exc:
                log.debug("memory accesses not counted: the ledger is busy (%s)", exc)

    def lexical_memories(
        self,
        query: str,
        *,
        user_id: str | None,
        statuses: Sequence[str] = ("active",),
        limit: int = 50,
    ) -> list[tuple[str, float]]:
        condition, params = statuses_sql(statuses, "d.status")
        return self._ranked(
            "memories",
            query,
            f"d.user_id = ? AND {condition}",
            [memory_rows.owner(user_id), *params],
            limit,
        )
