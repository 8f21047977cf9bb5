"""The two dialects of the SQL core, side by side: :data:`SQLITE` and :data:`POSTGRES`.

What differs, and nothing else:

==============================  ==============================  =============================
                                SQLite                          PostgreSQL
==============================  ==============================  =============================
placeholders                    ``?``                           ``%s`` (``%`` doubled)
a list of ids                   ``IN (?, ...)``, 500 at a time  ``= ANY(?)``, one array
a memory's or triple's time     fixed-width ISO-8601 text, UTC  ``timestamptz``
a drawer's, source's, closet's  ISO-8601 text, UTC              ``timestamptz``
rows in insertion order         ``rowid``                       ``seq``
text                            as is                           NUL as U+FFFD
full text                       FTS5 tables kept by triggers    ``words``/``grams`` cells
==============================  ==============================  =============================
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any, ClassVar

from palace_retrievers.ledger import postgres_text
from palace_retrievers.ledger.sql.store import Cursor, Dialect, Session

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
    text_columns: ClassVar[str] = ""
    text_marks: ClassVar[str] = ""

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
        return ()


@lru_cache(maxsize=512)
def _percent(sql: str) -> str:
    return sql.replace("%", "%%").replace("?", "%s")


class _Percent:
    """A psycopg connection that takes statements written with ``?``."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> Cursor:
        cursor: Cursor = self._conn.execute(_percent(sql), parameters)
        return cursor

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> object:
        rows = list(parameters)
        if rows:
            with self._conn.cursor() as cursor:
                cursor.executemany(_percent(sql), rows)
        return None


class PostgresDialect(Dialect):
    """The PostgreSQL ledger's SQL (:class:`~palace_retrievers.ledger.postgres.PostgresLedger`)."""

    row: ClassVar[str] = "seq"
    no_limit: ClassVar[int | None] = None
    greatest: ClassVar[str] = "greatest"
    find: ClassVar[str] = "strpos"
    outer_join: ClassVar[str] = "JOIN"
    same: ClassVar[str] = "IS NOT DISTINCT FROM"
    nulls_first: ClassVar[str] = "{0} NULLS FIRST"
    text_columns: ClassVar[str] = ", words, grams"
    text_marks: ClassVar[str] = ", ?::tsvector, ?::tsvector"

    def statement(self, sql: str) -> str:
        return _percent(sql)

    def session(self, conn: Any) -> Session:
        return _Percent(conn)

    def among(self, column: str, ids: Sequence[str]) -> list[tuple[str, list[Any]]]:
        return [(f"{column} = ANY(?)", [list(dict.fromkeys(ids))])] if ids else []

    def stamp(self, value: datetime) -> datetime:
        return value

    def filed(self, value: datetime) -> datetime:
        return value

    def when(self, value: Any) -> datetime | None:
        return None if value is None else value.astimezone(UTC)

    def clean(self, text: str) -> str:
        return postgres_text.clean(text)

    def text_cells(self, text: str) -> tuple[Any, ...]:
        return postgres_text.document(text)


SQLITE = SQLiteDialect()
POSTGRES = PostgresDialect()
