"""Both ledgers pass the one conformance suite, :class:`~palace_plugins.testing.LedgerTests`.

- SQLite: a ledger file in the test's folder.
- PostgreSQL: a schema of its own per test in the session's real PostgreSQL 16
  (``pgserver``, see ``tests/services.py``), dropped afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from palace_plugins.testing import LedgerTests
from palace_retrievers.ledger import Ledger
from palace_retrievers.ledger.sqlite import LEDGER_FILE, SQLiteLedger

if TYPE_CHECKING:
    from services import PostgresService

pytest_plugins = ["services"]

#: The tables of a PostgreSQL ledger, in an order that deleting their rows respects.
RESET = (
    "closet_drawers",
    "closets",
    "drawers",
    "sources",
    "memories",
    "memory_history",
    "entities",
    "triples",
    "index_pending",
    "meta",
)


class TestSQLiteLedger(LedgerTests):
    @pytest.fixture
    def ledger(self, tmp_path: Path) -> Iterator[Ledger]:
        ledger = SQLiteLedger(tmp_path / LEDGER_FILE)
        yield ledger
        ledger.close()

    @pytest.fixture
    def second_ledger(self, ledger: Ledger, tmp_path: Path) -> Iterator[Ledger]:
        other = SQLiteLedger(tmp_path / LEDGER_FILE)
        yield other
        other.close()


@pytest.fixture(scope="module")
def suite_schema(
    postgres: PostgresService, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """One migrated schema for the suite's tests, dropped at the end of the module."""
    from palace_retrievers.ledger.postgres import PostgresLedger

    name = "ledger_suite"
    PostgresLedger(tmp_path_factory.mktemp("suite"), {"url": postgres.url, "schema": name}).close()
    yield name
    postgres.sql(f"DROP SCHEMA IF EXISTS {name} CASCADE")


@pytest.fixture
def pg_schema(postgres: PostgresService, suite_schema: str) -> str:
    """The suite's schema, emptied: each test starts from an empty ledger (deleting the
    rows of a migrated schema takes milliseconds, migrating a new one a second)."""
    import psycopg

    with psycopg.connect(postgres.url, autocommit=True) as conn:
        conn.execute(f"SET search_path TO {suite_schema}")
        conn.execute(
            "BEGIN; "
            + " ".join(f"DELETE FROM {table};" for table in RESET)
            + " INSERT INTO meta VALUES ('generation', '0'); COMMIT;"
        )
    return suite_schema


class TestPostgresLedger(LedgerTests):
    @pytest.fixture
    def ledger(self, postgres: PostgresService, pg_schema: str, tmp_path: Path) -> Iterator[Ledger]:
        from palace_retrievers.ledger.postgres import PostgresLedger

        ledger = PostgresLedger(tmp_path, {"url": postgres.url, "schema": pg_schema})
        yield ledger
        ledger.close()

    @pytest.fixture
    def second_ledger(
        self, ledger: Ledger, postgres: PostgresService, pg_schema: str, tmp_path: Path
    ) -> Iterator[Ledger]:
        from palace_retrievers.ledger.postgres import PostgresLedger

        other = PostgresLedger(tmp_path, {"url": postgres.url, "schema": pg_schema})
        yield other
        other.close()
