"""The words of the one schema description, and how a dialect turns it into migrations.

The ledger's schema is described once (:mod:`.tables`): tables of columns with portable
types, their indexes and checks, which tables have full text, which changes the vector-
index journal watches, and the rows a new ledger starts with. Each part says the step of
the schema it came in (``since``) and, where one database has it and the other not
(an index only one of them was given), which (``only``).

A dialect's :class:`SchemaRenderer` writes the DDL: its types, how rows are numbered,
full text (SQLite: FTS5 tables kept by triggers; PostgreSQL: ``tsvector`` columns with
GIN indexes) and the journal's triggers. Its migration ``n`` takes a ledger from version
``n - 1`` to ``n``: the SQLite ledger has one migration a step; the PostgreSQL ledger,
which came at step 4, has all of steps 1 to 4 in its first migration and one a step
after that (:attr:`SchemaRenderer.first`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import Enum
from typing import ClassVar

from palace_retrievers.errors import SchemaError


class Type(Enum):
    """A column's portable type."""

    TEXT = "text"
    #: Text that is sorted on or matched exactly (ids, owners, names): PostgreSQL gives it
    #: the ``"C"`` collation, so that it sorts by code point, as Python does.
    KEY = "key"
    INT = "int"
    REAL = "real"
    #: A point in time (SQLite: ISO-8601 text in UTC; PostgreSQL: ``timestamptz``).
    TIME = "time"
    BYTES = "bytes"
    #: A number the database counts up for each new row.
    COUNTER = "counter"


@dataclass(frozen=True, slots=True)
class Check:
    """A column's check: one of ``values``, a number ``between`` two, or a text at most
    ``longest`` characters long."""

    values: tuple[str, ...] = ()
    between: tuple[str, str] | None = None
    longest: int | None = None


@dataclass(frozen=True, slots=True)
class Column:
    """A column, ``NOT NULL`` unless ``null``. ``default`` is an SQL literal both
    databases read alike; ``references`` is a column constraint (``closets (id) ON
    DELETE CASCADE``); ``since`` is the step that added it to its table (0: the table's)."""

    name: str
    type: Type
    null: bool = False
    default: str | None = None
    check: Check | None = None
    primary: bool = False
    references: str | None = None
    since: int = 0


@dataclass(frozen=True, slots=True)
class Table:
    """A table. ``primary`` is a primary key of several columns and ``foreign`` its
    ``FOREIGN KEY`` clauses. A ``numbered`` table keeps its rows' insertion order (SQLite's
    ``rowid``, PostgreSQL's ``seq``) beside its primary key ``id``; the ``journal`` table is
    the vector-index journal, which each dialect keeps its own way."""

    name: str
    columns: tuple[Column, ...]
    primary: tuple[str, ...] = ()
    foreign: tuple[str, ...] = ()
    numbered: bool = False
    journal: bool = False
    since: int = 1
    only: str | None = None


@dataclass(frozen=True, slots=True)
class Index:
    """An index of ``table`` on ``columns``."""

    name: str
    table: str
    columns: tuple[str, ...]
    since: int = 1
    only: str | None = None


@dataclass(frozen=True, slots=True)
class FullText:
    """The full text of ``table``'s ``text`` column, searched by words and by trigrams."""

    table: str
    since: int = 1
    only: str | None = None


@dataclass(frozen=True, slots=True)
class Pairs:
    """The character pairs of ``table``'s Chinese, Japanese and Korean runs
    (:func:`~palace_retrievers.ledger.sql.full_text.pairs`), searched as words: where the
    database cannot cut them itself, a column the ledger writes
    (:meth:`~palace_retrievers.ledger.sql.store.Dialect.text_cells`) and its full text."""

    table: str
    since: int = 1
    only: str | None = None


@dataclass(frozen=True, slots=True)
class Watch:
    """The changes of ``table`` the vector-index journal takes in (under the collection
    of the same name): every insert and delete, and the updates of ``updates`` (every
    update when ``None``)."""

    table: str
    updates: tuple[str, ...] | None = None
    since: int = 1
    only: str | None = None


@dataclass(frozen=True, slots=True)
class Row:
    """A row a new ledger starts with."""

    table: str
    values: tuple[str, ...]
    since: int = 1
    only: str | None = None


Part = Table | Index | FullText | Pairs | Watch | Row


@dataclass(frozen=True, slots=True)
class Step:
    """What one migration adds: its tables, the columns it adds to older tables, and the
    rest of its parts."""

    tables: tuple[Table, ...]
    columns: tuple[tuple[Table, Column], ...]
    indexes: tuple[Index, ...]
    full_text: tuple[FullText, ...]
    watches: tuple[Watch, ...]
    rows: tuple[Row, ...]
    pairs: tuple[Pairs, ...] = ()


class SchemaRenderer(ABC):
    """A dialect's DDL for the schema description."""

    #: The dialect's name, as the description's ``only`` says it.
    name: ClassVar[str]
    #: The schema steps the dialect's first migration holds.
    first: ClassVar[int] = 1
    #: Each portable type in the dialect's DDL.
    types: ClassVar[dict[Type, str]]
    #: The function giving a text's length in characters.
    length: ClassVar[str]

    def migrations(self, parts: Sequence[Part]) -> tuple[str, ...]:
        """The dialect's migrations, the first holding steps 1 to :attr:`first`."""
        mine = [p for p in parts if p.only in (None, self.name)]
        last = max(p.since for p in mine)
        groups = [range(1, self.first + 1)] + [
            range(s, s + 1) for s in range(self.first + 1, last + 1)
        ]
        return tuple(self.render(_step(mine, steps)) for steps in groups)

    def render(self, step: Step) -> str:
        """One migration's DDL."""
        full_text = {f.table for f in step.full_text}
        statements: list[str] = []
        for table in step.tables:
            statements += self.create(table, table.name in full_text)
        for table, column in step.columns:
            statements.append(f"ALTER TABLE {table.name} ADD COLUMN {self.column(table, column)}")
        statements += [
            f"CREATE INDEX {i.name} ON {i.table} ({', '.join(i.columns)})" for i in step.indexes
        ]
        for text in step.full_text:
            statements += self.full_text(text, step)
        for cut in step.pairs:
            statements += self.pairs(cut)
        for watch in step.watches:
            statements += self.watch(watch, step)
        statements += [
            f"INSERT INTO {r.table} VALUES ({', '.join(_literal(v) for v in r.values)})"
            for r in step.rows
        ]
        return "".join(f"{statement};\n" for statement in statements)

    def create(self, table: Table, full_text: bool) -> list[str]:
        """``CREATE TABLE``, and whatever else the dialect keeps with the table."""
        lines = self.numbering(table)
        lines += [self.column(table, c) for c in table.columns]
        lines += self.extra_columns(table, full_text)
        if table.primary:
            lines.append(f"PRIMARY KEY ({', '.join(table.primary)})")
        lines += list(table.foreign)
        body = ",\n    ".join(lines)
        return [f"CREATE TABLE {table.name} (\n    {body}\n){self.table_suffix(table)}"]

    def column(self, table: Table, column: Column) -> str:
        """A column's definition."""
        key = self.key(table, column)
        words = [column.name, self.types[column.type]]
        if not column.null and not key.startswith("PRIMARY KEY"):
            words.append("NOT NULL")
        if column.default is not None:
            words.append(f"DEFAULT {column.default}")
        if column.check is not None:
            words.append(f"CHECK ({self.check(column.name, column.check)})")
        words += [key] if key else []
        if column.references:
            words.append(f"REFERENCES {column.references}")
        return " ".join(words)

    def check(self, name: str, check: Check) -> str:
        """A check's condition."""
        if check.values:
            return f"{name} IN ({', '.join(_literal(v) for v in check.values)})"
        if check.between:
            return f"{name} BETWEEN {check.between[0]} AND {check.between[1]}"
        return f"{self.length}({name}) <= {check.longest}"

    @abstractmethod
    def key(self, table: Table, column: Column) -> str:
        """What makes ``column`` a key (``PRIMARY KEY``, ``UNIQUE`` or nothing)."""

    @abstractmethod
    def numbering(self, table: Table) -> list[str]:
        """The column numbering a ``numbered`` table's rows, before its own (or none)."""

    def extra_columns(self, table: Table, full_text: bool) -> list[str]:
        """The columns the dialect adds after a table's own (for its full text, when it
        has full text from the start)."""
        return []

    def table_suffix(self, table: Table) -> str:
        """What follows ``CREATE TABLE``'s closing bracket."""
        return ""

    @abstractmethod
    def full_text(self, text: FullText, step: Step) -> list[str]:
        """What makes a table's text searchable, beyond its columns."""

    def pairs(self, cut: Pairs) -> list[str]:
        """The column of a table's character pairs and what searches it (only the
        dialects whose full text cannot cut them are given a :class:`Pairs` part)."""
        raise SchemaError(f"the {self.name} ledger cuts character pairs in its own full text")

    @abstractmethod
    def watch(self, watch: Watch, step: Step) -> list[str]:
        """The triggers that journal a table's changes for the vector index."""


def newer(where: str, version: int, known: int) -> SchemaError:
    """The error for a ledger (``where`` names it) at ``version``, above the ``known``
    one: a newer palace-retrievers wrote it."""
    return SchemaError(
        f"{where} was written by a newer palace-retrievers (schema {version}, this one "
        f"knows {known}); upgrade palace-retrievers to open it"
    )


def _step(parts: Sequence[Part], steps: range) -> Step:
    """The parts that came in ``steps``; tables with the columns they had by then."""
    latest = steps[-1]
    tables, columns = [], []
    for table in (p for p in parts if isinstance(p, Table)):
        if table.since in steps:
            kept = tuple(c for c in table.columns if c.since <= latest)
            tables.append(replace(table, columns=kept))
        else:
            columns += [(table, c) for c in table.columns if c.since in steps]
    return Step(
        tables=tuple(tables),
        columns=tuple(columns),
        indexes=tuple(p for p in parts if isinstance(p, Index) and p.since in steps),
        full_text=tuple(p for p in parts if isinstance(p, FullText) and p.since in steps),
        watches=tuple(p for p in parts if isinstance(p, Watch) and p.since in steps),
        rows=tuple(p for p in parts if isinstance(p, Row) and p.since in steps),
        pairs=tuple(p for p in parts if isinstance(p, Pairs) and p.since in steps),
    )


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"
