"""The PostgreSQL ledger's options, its connection pool, its transactions and migrations.

Options (``[ledgers.postgres]`` in ``palace.toml``, or ``PALACE_LEDGERS__POSTGRES__URL``
and the like in the environment):

- ``url``: any libpq connection string or URL (``postgresql://palace@db.internal/palace``,
  ``host=/run/postgresql dbname=palace``). Empty (the default) means libpq's defaults and
  ``PG*`` variables, which is also how to keep a password out of ``palace.toml``
  (``PGPASSWORD``, ``~/.pgpass``).
- ``schema``: the PostgreSQL schema that holds this palace's tables. Several palaces
  share a database, one schema each. The default is derived from the palace's folder,
  ``palace_<folder>_<8 hex digits of the resolved path's hash>`` (the same name the
  ``pgvector`` backend gives its tables by default); palaces that several machines open
  through different paths must set it, to the same name everywhere.
- ``pool_size`` (default 4): most connections the ledger keeps open; ``timeout``
  (default 5 s): how long to wait for a connection, and to connect.

**Outages fail fast and heal by themselves.** A call that cannot get a working connection
within ``timeout`` raises :class:`LedgerUnavailableError` (one line: where, and why). The
ledger then counts as down, and the next call opens a fresh pool (one connection attempt:
at once when the server refuses, ``timeout`` at most) instead of waiting for the old
pool's reconnection back-off (1 s, 2 s, 4 s, ...). When that fails too, calls in the next
:data:`RETRY_SECONDS` fail at once with the same error, so a search that asks the ledger
several times is not kept waiting a multiple of ``timeout``. The first call after the
server is back works; the palace is never reopened.

The connecting role needs to create a schema in the database (or an administrator
creates it and grants it); no extension is needed.

Writes are serialised per palace, as SQLite's ``BEGIN IMMEDIATE`` does: every write
transaction first takes a transaction-scoped advisory lock named after the schema, so
two processes, on one machine or several, never interleave their writes, and a reader,
which takes no lock, sees a write whole or not at all.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from palace_retrievers.errors import (
    ConfigError,
    LedgerUnavailableError,
    PalaceNotFoundError,
    SchemaError,
)
from palace_retrievers.ids import palace_name as default_schema
from palace_retrievers.ledger.postgres import text as fts
from palace_retrievers.ledger.postgres.schema import MIGRATIONS, SCHEMA_VERSION
from palace_retrievers.ledger.sql.ddl import newer

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool

DEFAULTS: dict[str, Any] = {"url": "", "schema": "", "pool_size": 4, "timeout": 5.0}
#: After a failed attempt to reach the server again, how long calls fail at once before
#: one of them tries again.
RETRY_SECONDS = 0.5
#: First key of the ledger's advisory locks (the second is the schema's hash), so that
#: they never collide with single-key locks other software takes.
LOCK_CLASS = 0x7A1A
#: Longest schema name: PostgreSQL names are at most 63 bytes.
MAX_SCHEMA = 63
_SCHEMA = re.compile(r"^[a-z_][a-z0-9_]*$")


@dataclass(frozen=True, slots=True)
class PostgresOptions:
    """The checked options of a PostgreSQL ledger (see the module's docstring)."""

    url: str
    schema: str
    pool_size: int
    timeout: float

    @classmethod
    def parse(cls, palace_dir: Path, options: Mapping[str, Any]) -> PostgresOptions:
        """Check ``[ledgers.postgres]`` and fill in the defaults.

        Raises:
            ConfigError: an option is unknown or has the wrong type or range.
        """
        unknown = sorted(set(options) - set(DEFAULTS))
        if unknown:
            raise ConfigError(
                f"ledger 'postgres': unknown option {unknown[0]!r}; "
                f"known: {', '.join(sorted(DEFAULTS))}"
            )
        values = {**DEFAULTS, **options}
        for name in ("url", "schema"):
            if not isinstance(values[name], str):
                raise ConfigError(f"ledger 'postgres': {name} must be a string")
        schema = values["schema"] or default_schema(palace_dir)
        if not _SCHEMA.match(schema) or len(schema) > MAX_SCHEMA or schema.startswith("pg_"):
            raise ConfigError(
                "ledger 'postgres': schema must be a lower-case name of letters, digits and "
                f"_ (not starting with a digit or pg_), at most {MAX_SCHEMA} characters; "
                f"got {schema!r}"
            )
        size, timeout = values["pool_size"], values["timeout"]
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ConfigError(
                f"ledger 'postgres': pool_size must be a whole number >= 1, got {size!r}"
            )
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not math.isfinite(timeout)
            or timeout <= 0
        ):
            raise ConfigError(f"ledger 'postgres': timeout must be a number > 0, got {timeout!r}")
        return cls(url=values["url"], schema=schema, pool_size=size, timeout=float(timeout))


def _shown(url: str) -> str:
    """``url`` without its password, for messages."""
    return re.sub(r"(://[^:/@]*):[^@/]*@", r"\1:***@", re.sub(r"password=\S+", "password=***", url))


class PostgresConnection:
    """A pool of connections to one palace's schema, its transactions and its migrations.

    The base of :class:`~palace_retrievers.ledger.postgres.PostgresLedger`: the ledger's
    parts read through :meth:`_read` and write through :meth:`_write`.

    Args:
        options: Where the ledger is.
        create: Create the schema when it does not exist (otherwise
            :class:`~palace_retrievers.errors.PalaceNotFoundError`).

    Raises:
        LedgerUnavailableError: the server cannot be reached.
        SchemaError: the schema holds something else, or a newer ledger.
        PalaceNotFoundError: no ledger in the schema and ``create`` is false.
    """

    def __init__(self, options: PostgresOptions, *, create: bool = True) -> None:
        try:
            import psycopg  # noqa: F401 - the dependency, checked before anything else
            import psycopg_pool  # noqa: F401
        except ImportError:
            raise ConfigError(
                "ledger 'postgres' needs psycopg 3 and its pool: "
                "pip install 'psycopg[binary]' psycopg-pool"
            ) from None
        self.options = options
        self.schema = options.schema
        self._closed = threading.Event()
        self._pool_lock = threading.Lock()
        #: Since when (monotonic) the server is known to be unreachable, and why.
        self._down: tuple[float, str] | None = None
        #: The pool each connection lent by :meth:`checkout` came from, by its id().
        self._lent: dict[int, ConnectionPool[Any]] = {}
        self._pool = self._open_pool()
        try:
            self._migrate(create=create)
        except BaseException:
            self._pool.close()
            raise

    def _open_pool(self) -> ConnectionPool[Any]:
        """A new pool, opened with one working connection within ``timeout``.

        Raises:
            LedgerUnavailableError: the server cannot be reached.
        """
        from psycopg_pool import ConnectionPool

        options = self.options
        pool: ConnectionPool[Any] = ConnectionPool(
            options.url,
            min_size=1,
            max_size=options.pool_size,
            timeout=options.timeout,
            kwargs={
                "autocommit": True,
                "connect_timeout": max(1, math.ceil(options.timeout)),
                "application_name": "palace-ledger",
            },
            configure=self._configure,
            check=ConnectionPool.check_connection,
            name=f"palace-ledger-{self.schema}",
            open=False,
        )
        try:
            pool.open(wait=True, timeout=options.timeout)
        except Exception as exc:
            pool.close(timeout=0)
            raise LedgerUnavailableError(self._unreachable(exc)) from exc
        return pool

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        from psycopg import sql

        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema)))
        conn.execute("SET TimeZone TO 'UTC'")

    def _unreachable(self, exc: BaseException) -> str:
        where = _shown(self.options.url) or "libpq defaults"
        return (
            f"the PostgreSQL ledger cannot be reached at {where} "
            f"({type(exc).__name__}: {exc}); check the server and [ledgers.postgres] url"
        )

    # -- transactions -------------------------------------------------------------------

    def _pool_now(self) -> ConnectionPool[Any]:
        """The pool to use: after an outage, a fresh one once :data:`RETRY_SECONDS` have
        passed (until then :class:`LedgerUnavailableError` at once)."""
        if self._closed.is_set():
            raise LedgerUnavailableError(f"the ledger in schema {self.schema} is closed")
        down = self._down
        if down is None:
            return self._pool
        with self._pool_lock:
            down = self._down
            if down is None:
                return self._pool
            since, reason = down
            if time.monotonic() - since < RETRY_SECONDS:
                raise LedgerUnavailableError(reason)
            try:
                self._probe()
                fresh = self._open_pool()
            except LedgerUnavailableError as exc:
                self._down = (time.monotonic(), str(exc))
                raise
            stale, self._pool, self._down = self._pool, fresh, None
        stale.close(timeout=0)
        return fresh

    def _probe(self) -> None:
        """One connection attempt (a pool's opening retries until its timeout even when
        the server refuses at once).

        Raises:
            LedgerUnavailableError: the server cannot be reached.
        """
        import psycopg

        try:
            probe = psycopg.connect(
                self.options.url, connect_timeout=max(1, math.ceil(self.options.timeout))
            )
        except psycopg.Error as exc:
            raise LedgerUnavailableError(self._unreachable(exc)) from exc
        probe.close()

    def _mark_down(self, exc: BaseException) -> LedgerUnavailableError:
        error = LedgerUnavailableError(self._unreachable(exc))
        with self._pool_lock:
            if self._down is None:  # the next call tries a fresh pool at once
                self._down = (-math.inf, str(error))
        return error

    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[Any]]:
        import psycopg
        from psycopg_pool import PoolClosed, PoolTimeout

        pool = self._pool_now()
        used: list[psycopg.Connection[Any]] = []
        try:
            with pool.connection() as conn:
                used.append(conn)
                yield conn
        except (psycopg.OperationalError, PoolTimeout, PoolClosed) as exc:
            if self._closed.is_set():
                raise LedgerUnavailableError(
                    f"the ledger in schema {self.schema} is closed"
                ) from exc
            if used and not used[0].broken and not used[0].closed:
                # The server answered (a statement failed): the ledger is not down.
                raise LedgerUnavailableError(self._unreachable(exc)) from exc
            raise self._mark_down(exc) from exc

    def checkout(self) -> psycopg.Connection[Any]:
        """A connection of the pool for the caller alone, until :meth:`checkin` (the
        writer lock keeps one for as long as it is held).

        Raises:
            LedgerUnavailableError: the server cannot be reached.
        """
        import psycopg
        from psycopg_pool import PoolClosed, PoolTimeout

        pool = self._pool_now()
        try:
            conn: psycopg.Connection[Any] = pool.getconn()
        except (psycopg.OperationalError, PoolTimeout, PoolClosed) as exc:
            raise self._mark_down(exc) from exc
        self._lent[id(conn)] = pool
        return conn

    def checkin(self, conn: psycopg.Connection[Any], *, broken: bool = False) -> None:
        """Give back a connection from :meth:`checkout` (``broken``: close it instead)."""
        pool = self._lent.pop(id(conn), self._pool)
        if broken:
            conn.close()
        try:
            pool.putconn(conn)
        except Exception:  # a pool replaced after an outage, or closed: drop the connection
            conn.close()

    def read_rows(self, statement: str, params: Sequence[Any] = ()) -> list[Any]:
        """The rows of one read-only statement (for the ledger's helpers)."""
        return self._read(statement, params)

    @contextmanager
    def _write(self, *, bump: bool = True) -> Iterator[psycopg.Connection[Any]]:
        """A write transaction under the palace's advisory lock, that bumps the
        generation (when ``bump``); rolled back on any error."""
        with self._connection() as conn, conn.transaction():
            conn.execute(
                "SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (LOCK_CLASS, self.schema)
            )
            yield conn
            if bump:
                conn.execute(
                    "UPDATE meta SET value = (value::bigint + 1)::text WHERE key = 'generation'"
                )

    def _read(self, statement: str, params: Sequence[Any] = ()) -> list[Any]:
        """The rows of one statement (its own snapshot; autocommit)."""
        with self._connection() as conn:
            return conn.execute(statement, params).fetchall()

    # -- schema -------------------------------------------------------------------------

    def _version(self, conn: psycopg.Connection[Any]) -> int:
        exists = conn.execute("SELECT to_regclass('schema_version') IS NOT NULL").fetchone()
        if not exists or not exists[0]:
            return 0
        row = conn.execute("SELECT max(version) FROM schema_version").fetchone()
        return int(row[0] or 0) if row else 0

    @property
    def schema_version(self) -> int:
        """The schema version the ledger is at."""
        with self._connection() as conn:
            return self._version(conn)

    def _migrate(self, *, create: bool) -> None:
        from psycopg import errors

        with self._connection() as conn:
            current = self._version(conn)
        if current == SCHEMA_VERSION:
            return
        self._refuse_newer(current)
        if current == 0 and not create:
            raise PalaceNotFoundError(
                f"no palace ledger in schema {self.schema!r} of "
                f"{_shown(self.options.url) or 'the default database'}"
            )
        for version in range(current + 1, SCHEMA_VERSION + 1):
            with self._connection() as conn:
                # A session lock, taken before the transaction begins: a transaction that
                # began earlier could still see the schema as it was before another
                # process, which held the lock, created it.
                conn.execute("SELECT pg_advisory_lock(%s, hashtext(%s))", (LOCK_CLASS, self.schema))
                try:
                    with conn.transaction():
                        self._migrate_to(conn, version)
                except errors.DuplicateTable as exc:
                    raise SchemaError(
                        f"schema {self.schema!r} already holds tables that are not a palace "
                        f"ledger ({exc}); choose another [ledgers.postgres] schema"
                    ) from None
                finally:
                    conn.execute(
                        "SELECT pg_advisory_unlock(%s, hashtext(%s))", (LOCK_CLASS, self.schema)
                    )

    def _migrate_to(self, conn: psycopg.Connection[Any], version: int) -> None:
        """Apply migration ``version`` unless another process already has."""
        from psycopg import sql

        found = self._version(conn)
        self._refuse_newer(found)
        if found >= version:
            return
        if version == 1:
            conn.execute(
                sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(self.schema))
            )
            conn.execute(
                "CREATE TABLE schema_version "
                "(version integer PRIMARY KEY, applied_at timestamptz NOT NULL)"
            )
        conn.execute(MIGRATIONS[version - 1])
        if version == 1:  # a new ledger: no text was cut by an older version of the cutting
            conn.execute(
                "UPDATE meta SET value = %s WHERE key = 'lexical_version'", (str(fts.VERSION),)
            )
        conn.execute("INSERT INTO schema_version VALUES (%s, now())", (version,))

    def _refuse_newer(self, version: int) -> None:
        if version > SCHEMA_VERSION:
            raise newer(f"the ledger in schema {self.schema!r}", version, SCHEMA_VERSION)

    def close(self) -> None:
        """Close the pool's connections (idempotent)."""
        if not self._closed.is_set():
            self._closed.set()
            with self._pool_lock:
                self._pool.close()
