"""The SQLite ledger's schema: the one description (:mod:`~palace_retrievers.ledger.sql.tables`)
in SQLite's DDL, one migration a step.

Migration ``n`` takes a ledger from version ``n - 1`` to ``n``. A ledger is migrated
forward on open, in one transaction per step; a ledger whose version is above
:data:`SCHEMA_VERSION` was written by a newer palace-retrievers and is refused.

What is SQLite's own: numbered tables keep their order in ``rowid``; the journal table
has no rowid; each table with text has two FTS5 tables (:data:`FULL_TEXT`: words, and
trigrams for Chinese, Japanese and substrings) kept by triggers, and since step 5 a
third (:data:`PAIRS`) over a ``pairs`` column the ledger writes (the character pairs of
Chinese, Japanese and Korean runs and the words written against them, space-separated:
no FTS5 tokenizer cuts them), and the journal is
written by triggers that insert an id unless it is there (``NOT EXISTS``, not ``INSERT OR
IGNORE``: an upsert's conflict clause would override the trigger's).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from palace_retrievers.ledger.sql.ddl import (
    Column,
    FullText,
    Pairs,
    SchemaRenderer,
    Step,
    Table,
    Type,
    Watch,
)
from palace_retrievers.ledger.sql.tables import SCHEMA

#: A full-text table's FTS5 tables (by their ending) and their tokenizers.
FULL_TEXT = (("fts", "unicode61 remove_diacritics 2"), ("trigram", "trigram"))
#: The FTS5 table of a table's ``pairs`` column (by its ending) and its tokenizer: each
#: pair, between spaces, is a word.
PAIRS = ("pairs", "unicode61 remove_diacritics 0")


def fts_table(
    table: str, ending: str, tokenize: str, *, if_missing: bool = False, column: str = "text"
) -> str:
    """The statement creating one of ``table``'s FTS5 tables (of its ``column``)."""
    missing = "IF NOT EXISTS " if if_missing else ""
    return (
        f"CREATE VIRTUAL TABLE {missing}{table}_{ending} USING fts5 ({column}, content = "
        f"'{table}', content_rowid = 'rowid', tokenize = '{tokenize}')"
    )


def _trigger(name: str, event: str, table: str, body: list[str]) -> str:
    lines = "".join(f"    {line};\n" for line in body)
    return f"CREATE TRIGGER {name} AFTER {event} ON {table} BEGIN\n{lines}END"


def _indexed(table: str) -> list[str]:
    return [
        f"INSERT INTO {table}_{end} (rowid, text) VALUES (new.rowid, new.text)"
        for end, _ in FULL_TEXT
    ]


def _unindexed(table: str) -> list[str]:
    return [
        f"INSERT INTO {fts} ({fts}, rowid, text) VALUES ('delete', old.rowid, old.text)"
        for fts in (f"{table}_{end}" for end, _ in FULL_TEXT)
    ]


def _journalled(table: str, row: str) -> list[str]:
    return [
        f"INSERT INTO index_pending SELECT '{table}', {row}.id WHERE NOT EXISTS "
        f"(SELECT 1 FROM index_pending WHERE collection = '{table}' AND id = {row}.id)"
    ]


class SQLiteSchema(SchemaRenderer):
    """The description in SQLite's DDL."""

    name: ClassVar[str] = "sqlite"
    #: SQLite's storage classes: a time is ISO-8601 text, a counter the integer rowid.
    types: ClassVar[dict[Type, str]] = {
        **dict.fromkeys((Type.TEXT, Type.KEY, Type.TIME), "TEXT"),
        **dict.fromkeys((Type.INT, Type.COUNTER), "INTEGER"),
        Type.REAL: "REAL",
        Type.BYTES: "BLOB",
    }
    length: ClassVar[str] = "length"

    def key(self, table: Table, column: Column) -> str:
        if not column.primary:
            return ""
        if table.numbered:
            return "UNIQUE"  # the rowid is the primary key
        return "PRIMARY KEY AUTOINCREMENT" if column.type is Type.COUNTER else "PRIMARY KEY"

    def numbering(self, table: Table) -> list[str]:
        return ["rowid INTEGER PRIMARY KEY"] if table.numbered else []

    def table_suffix(self, table: Table) -> str:
        return " WITHOUT ROWID" if table.journal else ""

    def full_text(self, text: FullText, step: Step) -> list[str]:
        """The FTS5 tables and the triggers that keep them. A table whose journal comes
        in the same step shares its insert and delete triggers with the journal."""
        table = text.table
        shared = _watched(table, step)
        statements = [fts_table(table, end, tokenize) for end, tokenize in FULL_TEXT]
        return [
            *statements,
            _trigger(f"{table}_ai", "INSERT", table, _indexed(table) + shared("new")),
            _trigger(f"{table}_ad", "DELETE", table, _unindexed(table) + shared("old")),
            _trigger(
                f"{table}_au_text" if shared("new") else f"{table}_au",
                "UPDATE OF text",
                table,
                _unindexed(table) + _indexed(table),
            ),
        ]

    def pairs(self, cut: Pairs) -> list[str]:
        """The ``pairs`` column, its FTS5 table (holding the rows already there) and the
        triggers that keep it."""
        table, (end, tokenize) = cut.table, PAIRS
        fts = f"{table}_{end}"
        insert = f"INSERT INTO {fts} (rowid, pairs) VALUES (new.rowid, new.pairs)"
        delete = f"INSERT INTO {fts} ({fts}, rowid, pairs) VALUES ('delete', old.rowid, old.pairs)"
        return [
            f"ALTER TABLE {table} ADD COLUMN pairs TEXT NOT NULL DEFAULT ''",
            fts_table(table, end, tokenize, column="pairs"),
            # the rows already there, as yet without pairs: an update deletes a row's
            # entry, which must be there
            f"INSERT INTO {fts} ({fts}) VALUES ('rebuild')",
            _trigger(f"{fts}_ai", "INSERT", table, [insert]),
            _trigger(f"{fts}_ad", "DELETE", table, [delete]),
            _trigger(f"{fts}_au", "UPDATE OF pairs", table, [delete, insert]),
        ]

    def watch(self, watch: Watch, step: Step) -> list[str]:
        """Triggers journalling the changed ids; an update that may change the id
        journals the old one too."""
        table = watch.table
        if watch.updates is None:
            update = _trigger(
                f"{table}_pending_au",
                "UPDATE",
                table,
                _journalled(table, "old") + _journalled(table, "new"),
            )
        else:
            columns = ", ".join(watch.updates)
            update = _trigger(
                f"{table}_pending_au", f"UPDATE OF {columns}", table, _journalled(table, "new")
            )
        if any(text.table == table for text in step.full_text):
            return [update]  # inserts and deletes: the full text's triggers
        return [
            _trigger(f"{table}_pending_ai", "INSERT", table, _journalled(table, "new")),
            update,
            _trigger(f"{table}_pending_ad", "DELETE", table, _journalled(table, "old")),
        ]


def _watched(table: str, step: Step) -> Callable[[str], list[str]]:
    """What a full-text trigger of ``table`` journals of a row (``new`` or ``old``):
    the row's id when the journal watches the table from the same step."""
    watched = any(watch.table == table for watch in step.watches)
    return lambda row: _journalled(table, row) if watched else []


MIGRATIONS: tuple[str, ...] = SQLiteSchema().migrations(SCHEMA)

SCHEMA_VERSION = len(MIGRATIONS)
