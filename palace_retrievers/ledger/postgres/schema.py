"""The PostgreSQL ledger's schema: the one description
(:mod:`~palace_retrievers.ledger.sql.tables`) in PostgreSQL's DDL.

The same tables as the SQLite ledger (:mod:`palace_retrievers.ledger.sqlite.schema`), in one
PostgreSQL schema per palace; every statement runs with ``search_path`` set to that
schema alone, so the names here are unqualified. Migration ``n`` takes a ledger from
version ``n - 1`` to ``n`` (its first holds the description's steps 1 to 4, which the
SQLite ledger took one at a time; each later step is one more); a ledger is migrated
forward on open, one transaction per step (PostgreSQL's DDL is transactional: a step is
applied whole or not at all), under the palace's advisory lock so that two processes
opening it at once migrate it once.

What differs from SQLite, and why:

- Times are ``timestamptz`` (UTC), not ISO strings; ids and the names that are sorted on
  are ``COLLATE "C"``, so ``ORDER BY id`` is the code-point order Python sorts in.
- Full text: each drawer and memory carries two ``tsvector`` columns written by the
  ledger (see :mod:`palace_retrievers.ledger.postgres.text`): ``words`` (the text's words,
  case and accents folded) and ``grams`` (the trigrams and the character pairs of its
  Chinese, Japanese and Korean runs, as the SQLite ledger's trigram and pair tables), each
  with a GIN index. No extension is needed:
  neither ``pg_trgm`` nor ``unaccent``, nor ``vector``.
- Embeddings are ``bytea`` (little-endian float32, as in SQLite): the ledger keeps any
  model's vectors whatever their dimension, and the ``pgvector`` backend keeps its own
  ``vector(n)`` tables, with their HNSW indexes, beside this schema in the same database.
- The vector-index journal (``index_pending``) is written by triggers, in the same
  transaction as the change, as in SQLite. Each row carries a sequence number that a
  new change of the same id raises, so that a writer clearing the ids it has applied
  never clears a change made after it read them (several machines may write).
"""

from __future__ import annotations

from typing import ClassVar

from palace_retrievers.ledger.sql import ddl
from palace_retrievers.ledger.sql.tables import SCHEMA

#: The full-text columns of a table with text, each with a GIN index named
#: ``<table>_<column>``.
FULL_TEXT = ("words", "grams")

#: Journals a change of a row under the collection its trigger names (``TG_ARGV[0]``),
#: raising the entry's sequence number when it is there already. SET search_path FROM
#: CURRENT: the function finds this palace's index_pending whatever the search_path of
#: the session whose change fires it.
_JOURNAL_CHANGE = """CREATE FUNCTION journal_change() RETURNS trigger LANGUAGE plpgsql
    SET search_path FROM CURRENT AS $$
    BEGIN
        IF TG_OP = 'DELETE' OR (TG_OP = 'UPDATE' AND OLD.id IS DISTINCT FROM NEW.id) THEN
            INSERT INTO index_pending (collection, id) VALUES (TG_ARGV[0], OLD.id)
            ON CONFLICT (collection, id) DO UPDATE SET seq = EXCLUDED.seq;
        END IF;
        IF TG_OP <> 'DELETE' THEN
            INSERT INTO index_pending (collection, id) VALUES (TG_ARGV[0], NEW.id)
            ON CONFLICT (collection, id) DO UPDATE SET seq = EXCLUDED.seq;
        END IF;
        RETURN NULL;
    END
    $$"""


def gin_index(table: str, column: str) -> str:
    """The statement creating the GIN index of one of ``table``'s full-text columns."""
    return f"CREATE INDEX {table}_{column} ON {table} USING gin ({column})"


def _text_columns() -> list[str]:
    return [f"{column} tsvector NOT NULL DEFAULT ''::tsvector" for column in FULL_TEXT]


class PostgresSchema(ddl.SchemaRenderer):
    """The description in PostgreSQL's DDL."""

    name: ClassVar[str] = "postgres"
    first: ClassVar[int] = 4
    types: ClassVar[dict[ddl.Type, str]] = {
        ddl.Type.TEXT: "text",
        ddl.Type.KEY: 'text COLLATE "C"',
        ddl.Type.INT: "integer",
        ddl.Type.REAL: "double precision",
        ddl.Type.TIME: "timestamptz",
        ddl.Type.BYTES: "bytea",
        ddl.Type.COUNTER: "bigint GENERATED ALWAYS AS IDENTITY",
    }
    length: ClassVar[str] = "char_length"

    def key(self, table: ddl.Table, column: ddl.Column) -> str:
        return "PRIMARY KEY" if column.primary else ""

    def numbering(self, table: ddl.Table) -> list[str]:
        return ["seq bigint GENERATED ALWAYS AS IDENTITY UNIQUE"] if table.numbered else []

    def extra_columns(self, table: ddl.Table, full_text: bool) -> list[str]:
        """A table's full-text columns; the journal's number of each id's last change."""
        columns = _text_columns() if full_text else []
        if table.journal:
            columns.append(f"seq bigint NOT NULL DEFAULT nextval('{table.name}_seq')")
        return columns

    def create(self, table: ddl.Table, full_text: bool) -> list[str]:
        if not table.journal:
            return super().create(table, full_text)
        return [
            f"CREATE SEQUENCE {table.name}_seq",
            *super().create(table, full_text),
            _JOURNAL_CHANGE,
        ]

    def full_text(self, text: ddl.FullText, step: ddl.Step) -> list[str]:
        """The GIN indexes (and the columns, for a table that had no full text before)."""
        columns: list[str] = []
        if all(table.name != text.table for table in step.tables):
            columns = [f"ALTER TABLE {text.table} ADD COLUMN {c}" for c in _text_columns()]
        return columns + [gin_index(text.table, c) for c in FULL_TEXT]

    def watch(self, watch: ddl.Watch, step: ddl.Step) -> list[str]:
        """``journal_change`` on every insert and delete, and on the updates watched (of
        the id too: a changed id journals the old one)."""
        table = watch.table
        run = f"FOR EACH ROW EXECUTE FUNCTION journal_change('{table}')"
        if watch.updates is None:
            return [
                f"CREATE TRIGGER {table}_journal AFTER INSERT OR UPDATE OR DELETE ON {table} {run}"
            ]
        columns = ", ".join(("id", *watch.updates))
        return [
            f"CREATE TRIGGER {table}_journal AFTER INSERT OR DELETE ON {table} {run}",
            f"CREATE TRIGGER {table}_journal_update AFTER UPDATE OF {columns} ON {table} {run}",
        ]


MIGRATIONS: tuple[str, ...] = PostgresSchema().migrations(SCHEMA)

SCHEMA_VERSION = len(MIGRATIONS)
