"""Both ledgers pass the one conformance suite, :class:`~palace_plugins.testing.LedgerTests`,
and a palace on the PostgreSQL ledger works end to end, shared by two processes.

- SQLite: a ledger file in the test's folder.
- PostgreSQL: the session's real PostgreSQL 16 (``pgserver``, see ``tests/services.py``);
  the suite's tests share one migrated schema, emptied before each test; the end-to-end
  tests get a schema of their own, dropped afterwards.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from palace_plugins.testing import LedgerTests
from palace_retrievers import Palace
from palace_retrievers.embedder import Embedder
from palace_retrievers.errors import PalaceNotFoundError
from palace_retrievers.ledger import Ledger
from palace_retrievers.ledger.sqlite import LEDGER_FILE, SQLiteLedger
from palace_retrievers.records import Filter

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
            + " DELETE FROM meta WHERE key <> 'lexical_version';"
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


# -- a palace on the PostgreSQL ledger, end to end ------------------------------------------


def _postgres_palace(path: Path, url: str, schema: str, embedder: Any, **kwargs: Any) -> Palace:
    from pg_palace import open_postgres_palace

    return open_postgres_palace(path, url=url, schema=schema, embedder=embedder, **kwargs)


@pytest.fixture
def fresh_schema(postgres: PostgresService) -> Iterator[str]:
    """A schema name no ledger has used; the schema is dropped afterwards."""
    name = f"palace_e2e_{uuid.uuid4().hex[:12]}"
    yield name
    postgres.sql(f"DROP SCHEMA IF EXISTS {name} CASCADE")


@pytest.mark.slow
def test_a_postgres_palace_mines_searches_and_remembers(
    postgres: PostgresService, fresh_schema: str, tmp_path: Path, real_embedder: Embedder
) -> None:
    """The real MiniLM model, the exact index over the ledger's own vectors."""
    corpus = tmp_path / "notes"
    corpus.mkdir()
    (corpus / "database.md").write_text(
        "# Infrastructure\n\nIn March we moved the production database from MySQL to "
        "PostgreSQL 15, because we needed better JSON support.\n",
        encoding="utf-8",
    )
    (corpus / "pets.md").write_text(
        "# Home\n\nAlice adopted a grey cat called Miso from the shelter last spring.\n",
        encoding="utf-8",
    )
    (corpus / "区域.md").write_text(
        "中国用户的数据存储在阿里云上海区域，使用独立的数据库集群。\n", encoding="utf-8"
    )
    path = tmp_path / "palace"
    with _postgres_palace(path, postgres.url, fresh_schema, real_embedder) as palace:
        report = palace.mine(corpus, wing="notes")
        assert (report.seen, report.mined) == (3, 3)
        hits = palace.search("which database do we use in production?", k=3)
        assert hits[0].source.endswith("database.md")
        assert "PostgreSQL 15" in hits[0].text
        assert palace.search("who has a pet cat?", k=1)[0].source.endswith("pets.md")
        assert palace.search("数据存储在哪里", k=1)[0].source.endswith("区域.md")
        assert palace.ledger.lexical("Miso", where=Filter(), limit=5)  # full text in PostgreSQL
        remembered = palace.remember(
            "We moved the orders database to PostgreSQL 16", kind="decision", user_id="u1"
        )
        assert remembered.action == "added"
        found = palace.search("what database do the orders use?", k=5, user_id="u1")
        assert any(h.is_memory and h.id == remembered.memory.id for h in found)
        palace.kg.add("orders", "uses", "PostgreSQL 16", user_id="u1", valid_from="2026-03-01")
        assert [t.object for t in palace.kg.query("orders", user_id="u1")] == ["PostgreSQL 16"]
        stats = palace.stats()
        assert (stats.ledger.drawers, stats.ledger.sources) == (3, 3)
        assert dict(stats.ledger.memories) == {"active": 1}
        again = palace.mine(corpus, wing="notes")
        assert (again.mined, again.unchanged) == (0, 3)
    # Closed and opened again: everything is in PostgreSQL.
    with _postgres_palace(path, postgres.url, fresh_schema, real_embedder) as palace:
        assert palace.stats().ledger.drawers == 3
        assert [m.id for m in palace.memories(user_id="u1")] == [remembered.memory.id]
        report = palace.forget(user_id="u1")
        assert (report.memories, report.triples) == (1, 1)
        assert palace.memories(user_id="u1") == []
    assert not (path / LEDGER_FILE).exists()


@pytest.mark.parametrize("backend", ["sqlite", "pgvector"])
def test_two_processes_share_one_postgres_palace(
    postgres: PostgresService, fresh_schema: str, tmp_path: Path, backend: str
) -> None:
    """Two palace folders (two machines) on one schema; the other is a child process.
    FAKE embedder: what is tested is that each sees the other's writes."""
    from fakes import FAKE_PLUGIN, HashingEmbedder

    options = {"url": postgres.url, "namespace": fresh_schema} if backend == "pgvector" else {}
    if backend == "pgvector":
        pytest.importorskip("pgvector")
    here = _postgres_palace(
        tmp_path / "machine-a",
        postgres.url,
        fresh_schema,
        HashingEmbedder(),
        backend=backend,
        backend_options=options,
        plugins=(FAKE_PLUGIN,),
    )
    with here:
        mine = here.add_texts(["the heron nests by the lake"], wing="shared", user_id="u1")
        child = {
            "path": str(tmp_path / "machine-b"),
            "url": postgres.url,
            "schema": fresh_schema,
            "backend": backend,
            "backend_options": options,
            "texts": ["the sandpiper feeds on the mudflats by the lake"],
            "memory": "We chose PostgreSQL for the shared palace",
            "query": "lake",
        }
        done = subprocess.run(
            [sys.executable, str(Path(__file__).with_name("pg_palace.py")), json.dumps(child)],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=Path(__file__).parent,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).parent)},
            check=False,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        theirs = json.loads(done.stdout.strip().splitlines()[-1])
        assert set(mine) <= set(theirs["seen"]), "the child did not see this process's drawer"
        seen = [h.id for h in here.search("lake", k=20, user_id="u1", memories=False)]
        assert set(theirs["ids"]) | set(mine) <= set(seen)
        vector_hits = here.search_by_vector(
            here.embedder.embed_query("the sandpiper feeds on the mudflats by the lake"),
            k=1,
            user_id="u1",
        )
        assert [h.id for h in vector_hits] == theirs["ids"]
        assert [m.id for m in here.memories(user_id="u1")] == [theirs["memory"]]
        assert [t.object for t in here.kg.query("project", user_id="u1")] == ["PostgreSQL 16"]
        assert here.stats().ledger.drawers == 2


def test_palace_open_picks_the_postgres_ledger(
    postgres: PostgresService, fresh_schema: str, tmp_path: Path
) -> None:
    from fakes import FAKE_PLUGIN

    from palace_retrievers.ledger.postgres import PostgresLedger

    settings = {
        "ledger": "postgres",
        "ledgers": {"postgres": {"url": postgres.url, "schema": fresh_schema}},
    }
    path = tmp_path / "palace"
    kwargs: dict[str, Any] = {"embedder": "fake", "plugins": [FAKE_PLUGIN], "backend": "sqlite"}
    with pytest.raises(PalaceNotFoundError):
        Palace.open(path, config=settings, create=False, **kwargs)
    with Palace.open(path, config=settings, **kwargs) as palace:
        assert isinstance(palace.ledger, PostgresLedger)
        palace.add_texts(["kept in PostgreSQL"], ids=["t1"])
    assert not (path / LEDGER_FILE).exists()
    assert 'ledger = "postgres"' in (path / "palace.toml").read_text(encoding="utf-8")
    with Palace.open(path, config=settings, create=False, **kwargs) as palace:
        assert [d.text for d in palace.ledger.get_drawers(["t1"])] == ["kept in PostgreSQL"]
    # A palace.toml written by hand, with the URL in the environment.
    other = tmp_path / "by-hand"
    other.mkdir()
    (other / "palace.toml").write_text(
        'ledger = "postgres"\nbackend = "sqlite"\n\n'
        f'[ledgers.postgres]\nschema = "{fresh_schema}"\n',
        encoding="utf-8",
    )
    with pytest.MonkeyPatch.context() as env:
        env.setenv("PALACE_LEDGERS__POSTGRES__URL", postgres.url)
        with Palace.open(other, embedder="fake", plugins=[FAKE_PLUGIN], create=False) as palace:
            assert [d.id for d in palace.ledger.get_drawers(["t1"])] == ["t1"]
            assert palace.search("kept", k=1)[0].id == "t1"
