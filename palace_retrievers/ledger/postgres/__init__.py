"""The PostgreSQL ledger: one schema of a PostgreSQL database per palace
(:class:`PostgresLedger`), shared by processes on several machines.

What is PostgreSQL's own beside the SQL core (:mod:`palace_retrievers.ledger.sql`):

- :mod:`.ledger`: the numbered vector-index journal, ``tsvector`` full-text search,
  counting a memory's access without waiting.
- :mod:`.connection`: options, the connection pool, transactions and migrations.
- :mod:`.lock`: the palace's writer lock, a session advisory lock.
- :mod:`.text`: the ``tsvector`` and ``tsquery`` values the ledger cuts itself.
- :mod:`.dialect`: :data:`~.dialect.POSTGRES`, the core's statements in PostgreSQL's SQL.
- :mod:`.schema`: the schema's migrations in PostgreSQL's DDL.
"""

from palace_retrievers.ledger.postgres.ledger import PostgresLedger

__all__ = ["PostgresLedger"]
