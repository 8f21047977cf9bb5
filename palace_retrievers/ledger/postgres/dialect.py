"""The SQL core's PostgreSQL dialect, :data:`POSTGRES`: ``%s`` placeholders, ids matched
as one array, times as ``timestamptz``, rows numbered by ``seq``, NUL kept out of text,
and the ``words``/``grams`` full-text cells each drawer and memory row carries."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any, ClassVar

from palace_retrievers.ledger.postgres import text as postgres_text
from palace_retrievers.ledger.postgres.schema import FULL_TEXT
from palace_retrievers.ledger.sql.store import Cursor, Dialect, Session


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
    text_columns: ClassVar[tuple[str, ...]] = FULL_TEXT
    text_mark: ClassVar[str] = "?::tsvector"

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


POSTGRES = PostgresDialect()
