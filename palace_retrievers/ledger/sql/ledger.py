"""The SQL ledger: the core's parts composed, with the palace's facts, export and counts.

:class:`SQLLedger` is what the SQLite and PostgreSQL ledgers share whole; each one adds
its connection and transactions (``_read``, ``_write``), its schema and migrations, its
full-text queries, its vector-index journal and how it counts a memory's access.
"""

from __future__ import annotations

from abc import ABC

from palace_retrievers.ledger import Ledger
from palace_retrievers.ledger.records import LedgerStats
from palace_retrievers.ledger.sql.drawers import SQLDrawerStore
from palace_retrievers.ledger.sql.graph import SQLGraphStore
from palace_retrievers.ledger.sql.memories import SQLMemoryStore
from palace_retrievers.ledger.sql.vectors import SQLVectorStore


class SQLLedger(SQLDrawerStore, SQLVectorStore, SQLMemoryStore, SQLGraphStore, Ledger, ABC):
    """A ledger whose records are SQL rows (its dialect is :attr:`sql`)."""

    # -- meta ---------------------------------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        rows = self._rows("SELECT value FROM meta WHERE key = ?", (key,))
        return str(rows[0][0]) if rows else None

    def set_meta(self, key: str, value: str) -> None:
        with self._transaction() as db:
            db.execute(
                "INSERT INTO meta VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = ?",
                (key, value, value),
            )

    def generation(self) -> int:
        return int(self.get_meta("generation") or 0)

    # -- export -------------------------------------------------------------------------

    def owners_and_keys(self) -> tuple[list[str], dict[str, list[str]], dict[str, list[str]]]:
        owners = [
            row[0]
            for row in self._rows(
                "SELECT user_id FROM drawers UNION SELECT user_id FROM memories "
                "UNION SELECT user_id FROM memory_history UNION SELECT user_id FROM triples "
                "ORDER BY 1"
            )
        ]
        orphans: dict[str, list[str]] = {}
        for owner, memory_id in self._rows(
            "SELECT DISTINCT h.user_id, h.memory_id FROM memory_history h "
            "WHERE NOT EXISTS (SELECT 1 FROM memories m WHERE m.id = h.memory_id) "
            "ORDER BY 1, 2"
        ):
            orphans.setdefault(owner, []).append(memory_id)
        subjects: dict[str, list[str]] = {}
        for owner, key in self._rows(
            "SELECT DISTINCT user_id, subject_key FROM triples ORDER BY 1, 2"
        ):
            subjects.setdefault(owner, []).append(key)
        return owners, orphans, subjects

    # -- status -------------------------------------------------------------------------

    def stats(self) -> LedgerStats:
        wings: dict[str, dict[str, int]] = {}
        for wing, room, count in self._rows(
            "SELECT wing, room, count(*) FROM drawers GROUP BY wing, room ORDER BY wing, room"
        ):
            wings.setdefault(wing, {})[room] = int(count)
        ((drawers, embedded, sources, closets),) = self._rows(
            "SELECT (SELECT count(*) FROM drawers), (SELECT count(embedding) FROM drawers), "
            "(SELECT count(*) FROM sources), (SELECT count(*) FROM closets)"
        )
        return LedgerStats(
            int(drawers), int(sources), int(closets), int(embedded), wings, self.count_memories()
        )
