"""``forget_user`` also deletes the user's sources that have no drawers left, on both
ledgers: an empty file the user mined, a file whose drawers were all deleted. Another
user's and the unowned ones of the same names stay.

Real SQLite, and the session's real PostgreSQL 16 (``tests/services.py``); synthetic
vectors: this is bookkeeping.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from palace_plugins.testing.backends import synthetic_vectors
from palace_plugins.testing.ledger_drawers import drawer, source
from palace_retrievers.ids import source_key
from palace_retrievers.ledger import Ledger
from palace_retrievers.ledger.sqlite import LEDGER_FILE, SQLiteLedger

if TYPE_CHECKING:
    from services import PostgresService

pytest_plugins = ["services"]


@pytest.fixture(params=["sqlite", "postgres"])
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Ledger]:
    if request.param == "sqlite":
        opened: Ledger = SQLiteLedger(tmp_path / LEDGER_FILE)
        yield opened
        opened.close()
        return
    from palace_retrievers.ledger.postgres import PostgresLedger

    postgres: PostgresService = request.getfixturevalue("postgres")
    schema = f"forget_{uuid.uuid4().hex[:10]}"
    opened = PostgresLedger(tmp_path, {"url": postgres.url, "schema": schema})
    try:
        yield opened
    finally:
        opened.close()
        postgres.sql(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def test_forget_user_deletes_the_users_sources_without_drawers(ledger: Ledger) -> None:
    none = synthetic_vectors(0)
    for owner in ("u1", "u2", None):
        ledger.replace_source(source(source_key("empty.md", owner)), [], none, model="m")
    gone = source_key("gone.md", "u1")
    ledger.replace_source(
        source(gone),
        [drawer("g1", "u1 notes", user_id="u1", source="gone.md")],
        synthetic_vectors(1),
        model="m",
    )
    ledger.delete_drawers(["g1"])  # the source is left with no drawers
    kept = source_key("kept.md", "u2")
    ledger.replace_source(
        source(kept),
        [drawer("k1", "u2 notes", user_id="u2", source="kept.md")],
        synthetic_vectors(1),
        model="m",
    )
    assert ledger.stats().sources == 5

    counts = ledger.forget_user("u1")

    assert counts["sources"] == 2
    assert ledger.source_state("w", source_key("empty.md", "u1")) is None
    assert ledger.source_state("w", gone) is None
    for key in (source_key("empty.md", "u2"), "empty.md", kept):
        assert ledger.source_state("w", key) is not None, key
    assert ledger.stats().sources == 3
    assert ledger.forget_user("u1")["sources"] == 0
