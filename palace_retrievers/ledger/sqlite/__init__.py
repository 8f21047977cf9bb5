"""The embedded ledger: one SQLite file per palace (:class:`SQLiteLedger`).

What is SQLite's own beside the SQL core (:mod:`palace_retrievers.ledger.sql`):

- :mod:`.ledger`: the connection, transactions and migrations, a read-only ledger, FTS5
  full-text search, the vector-index journal, counting a memory's access without waiting.
- :mod:`.dialect`: :data:`~.dialect.SQLITE`, the core's statements in SQLite's SQL.
- :mod:`.schema`: the schema's migrations in SQLite's DDL.
"""

from palace_retrievers.ledger.sqlite.ledger import LEDGER_FILE, SQLiteLedger

__all__ = ["LEDGER_FILE", "SQLiteLedger"]
