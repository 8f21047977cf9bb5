"""The base of the SQL core's parts: a dialect, its statements, reads and transactions.

A ledger class is made of the core's parts (:class:`~.graph.SQLGraphStore`,
:class:`~.memories.SQLMemoryStore`, ...), each a subclass of :class:`SQLStore`, and
implements its abstract methods: ``_read(sql, params)``, the rows of one statement in the
ledger's own placeholder style, ``_write(bump=...)``, a write transaction that yields the
ledger's connection, and ``_full_text``, each dialect's full-text search. The parts write
every statement with ``?`` placeholders; :class:`Dialect` turns them into the ledger's
own.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from typing import Any, ClassVar, Protocol


class Cursor(Protocol):
    """What the core reads of a statement's result (sqlite3's and psycopg's cursors)."""

    @property
    def rowcount(self) -> int: ...

    def fetchall(self) -> list[Any]: ...

    def fetchone(self) -> Any: ...


class Session(Protocol):
    """A connection inside a write transaction that takes statements written with ``?``."""

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> Cursor: ...

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> object: ...


class Dialect(ABC):
    """What a SQL ledger does its own way; the core's statements are the same otherwise.

    ==============================  ==============================  ========================
                                    SQLite                          PostgreSQL
    ==============================  ==============================  ========================
    placeholders                    ``?``                           ``%s`` (``%`` doubled)
    a list of ids                   ``IN (?, ...)``, 500 at a time  ``= ANY(?)``, one array
    a memory's or triple's time     fixed-width ISO-8601 text, UTC  ``timestamptz``
    a drawer's, source's, closet's  ISO-8601 text, UTC              ``timestamptz``
    rows in insertion order         ``rowid``                       ``seq``
    text                            as is                           NUL as U+FFFD
    full text                       FTS5 tables kept by triggers    ``words``/``grams`` cells
                                    (and a ``pairs`` cell)
    ==============================  ==============================  ========================

    The two are :data:`palace_retrievers.ledger.sqlite.dialect.SQLITE` and
    :data:`palace_retrievers.ledger.postgres.dialect.POSTGRES`.
    """

    #: The column that numbers a table's rows in insertion order.
    row: ClassVar[str]
    #: ``LIMIT`` for no limit at all.
    no_limit: ClassVar[int | None]
    #: The larger of two values (SQLite's two-argument ``max``, PostgreSQL's ``greatest``).
    greatest: ClassVar[str]
    #: Where a string occurs in another (``instr(text, part)``, ``strpos(text, part)``).
    find: ClassVar[str]
    #: A join that keeps its left side as the outer loop.
    outer_join: ClassVar[str]
    #: ``a <same> b``: equal, or both NULL.
    same: ClassVar[str]
    #: Order by a column, its NULLs first (``{}`` is the column).
    nulls_first: ClassVar[str]
    #: The full-text columns a drawer or memory row carries beyond its fields (what the
    #: database cannot cut itself), and a placeholder for a value of one.
    text_columns: ClassVar[tuple[str, ...]] = ()
    text_mark: ClassVar[str] = "?"

    @abstractmethod
    def statement(self, sql: str) -> str:
        """``sql`` (written with ``?``) in the database's own placeholder style."""

    @abstractmethod
    def session(self, conn: Any) -> Session:
        """The connection of a write transaction, taking statements written with ``?``."""

    @abstractmethod
    def among(self, column: str, ids: Sequence[str]) -> list[tuple[str, list[Any]]]:
        """Conditions ``column`` is one of ``ids`` (repeats dropped), with their
        parameters: one per batch the database takes; none when ``ids`` is empty."""

    @abstractmethod
    def stamp(self, value: datetime) -> Any:
        """An aware time as a memory's or a triple's column stores it (one that sorts
        as the time does)."""

    @abstractmethod
    def filed(self, value: datetime) -> Any:
        """An aware time as a drawer's, a source's or a closet's column stores it."""

    @abstractmethod
    def when(self, value: Any) -> datetime | None:
        """A stored time as an aware time (``None`` stays ``None``)."""

    @abstractmethod
    def clean(self, text: str) -> str:
        """``text`` as the database can hold it."""

    def text_sql(self) -> tuple[str, str]:
        """What follows a row's own columns and placeholders in an ``INSERT`` for
        :attr:`text_columns` (``, words, grams`` and theirs; both empty for none)."""
        return (
            "".join(f", {column}" for column in self.text_columns),
            "".join(f", {self.text_mark}" for _ in self.text_columns),
        )

    @abstractmethod
    def text_cells(self, text: str) -> tuple[Any, ...]:
        """The cells of :attr:`text_columns` for a row of this (cleaned) text."""


class SQLStore(ABC):
    """The base of the core's parts: :attr:`sql` is the ledger's dialect.

    The parts run their statements through the three methods below, which each ledger
    (:class:`~palace_retrievers.ledger.sqlite.SQLiteLedger`,
    :class:`~palace_retrievers.ledger.postgres.PostgresLedger`) implements over its own
    connections; a ledger class that leaves one out cannot be made.
    """

    sql: ClassVar[Dialect]

    @abstractmethod
    def _write(self, *, bump: bool = True) -> AbstractContextManager[Any]:
        """A write transaction that yields the ledger's connection (``bump``: count it as
        a change of the ledger's generation)."""

    @abstractmethod
    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """The rows of one statement in the ledger's own placeholder style."""

    @abstractmethod
    def _full_text(
        self, table: str, query: str, condition: str, params: list[Any], limit: int
    ) -> list[tuple[str, float]]:
        """Full-text candidates ``(id, score)`` of ``table`` (``drawers`` or
        ``memories``, alias ``d``) that pass ``condition`` (written with ``?``), best
        first (higher is better), ties by id; each dialect searches its own way."""

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """The rows of one statement written with ``?``."""
        return self._read(self.sql.statement(sql), params)

    def _rows_by_id(self, table: str, columns: str, ids: Sequence[str]) -> dict[str, Any]:
        """The rows of ``table`` (its ``columns``, ``id`` first) whose id is in ``ids``."""
        found: dict[str, Any] = {}
        for among, batch in self.sql.among("id", ids):
            rows = self._rows(f"SELECT {columns} FROM {table} WHERE {among}", batch)
            found.update((row[0], row) for row in rows)
        return found

    def _pages(self, table: str, columns: str, batch_size: int) -> Iterator[list[Any]]:
        """Every row of ``table`` (its ``columns``, led by the row's number) in insertion
        order, ``batch_size`` rows at a time."""
        last, row = 0, self.sql.row
        while rows := self._rows(
            f"SELECT {row}, {columns} FROM {table} WHERE {row} > ? ORDER BY {row} LIMIT ?",
            (last, batch_size),
        ):
            last = rows[-1][0]
            yield rows

    @contextmanager
    def _transaction(self, *, bump: bool = True) -> Iterator[Session]:
        """The ledger's write transaction (see ``_write``), taking statements with ``?``."""
        with self._write(bump=bump) as conn:
            yield self.sql.session(conn)
