"""The SQL core's SQLite dialect, :data:`SQLITE`: ``?`` placeholders, ids matched 500 at
a time, times as ISO-8601 text, rows numbered by ``rowid``, full text kept by FTS5 (and
the ``pairs`` cell of a drawer's or memory's Chinese, Japanese and Korean character
pairs and the words written against them, which no FTS5 tokenizer cuts)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, ClassVar

from palace_retrievers.ledger.sql.full_text import apart, pairs
from palace_retrievers.ledger.sql.store import Dialect, Session

#: SQLite takes at most 999 parameters in older builds: ids go 500 to a statement.
SQLITE_BATCH = 500


class SQLiteDialect(Dialect):
    """The embedded ledger's SQL (:class:`~palace_retrievers.ledger.sqlite.SQLiteLedger`)."""

    row: ClassVar[str] = "rowid"
    no_limit: ClassVar[int | None] = -1
    greatest: ClassVar[str] = "max"
    find: ClassVar[str] = "instr"
    # CROSS JOIN keeps the left side as SQLite's outer loop, so each look-up of the right
    # side uses an index (left to itself, SQLite may scan the right side).
    outer_join: ClassVar[str] = "CROSS JOIN"
    same: ClassVar[str] = "IS"
    nulls_first: ClassVar[str] = "{0} IS NOT NULL, {0}"
    text_columns: ClassVar[tuple[str, ...]] = ("pairs",)

    def statement(self, sql: str) -> str:
        return sql

    def session(self, conn: Any) -> Session:
        session: Session = conn  # sqlite3.Connection takes ``?`` itself
        return session

    def among(self, column: str, ids: Sequence[str]) -> list[tuple[str, list[Any]]]:
        unique = list(dict.fromkeys(ids))
        return [
            (f"{column} IN ({','.join('?' * len(batch))})", batch)
            for batch in (unique[i : i + SQLITE_BATCH] for i in range(0, len(unique), SQLITE_BATCH))
        ]

    def stamp(self, value: datetime) -> str:
        """``2026-03-01T09:00:00.000000+00:00``: fixed width, so the strings sort as the
        times do."""
        return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f+00:00")

    def filed(self, value: datetime) -> str:
        return value.astimezone(UTC).isoformat()

    def when(self, value: Any) -> datetime | None:
        return None if value is None else datetime.fromisoformat(value)

    def clean(self, text: str) -> str:
        return text

    def text_cells(self, text: str) -> tuple[Any, ...]:
        return (cut_pairs(text),)


def cut_pairs(text: str) -> str:
    """A text's ``pairs`` cell, space-separated, each an FTS5 word: the character pairs
    of its Chinese, Japanese and Korean runs, and the words written against a run
    (``PMP`` in ``在学PMP``: the word table's tokenizer reads ``在学pmp`` as one word)."""
    return " ".join([*pairs(text), *apart(text)[1]])


SQLITE = SQLiteDialect()
