"""The ``pgvector`` backend against a real PostgreSQL 16 with pgvector (``pgserver``).

The server starts once for the session (``tests/services.py``); every test's palace has
its own folder, hence its own tables. Skipped only when ``pgserver`` is not installed and
``CI`` is unset.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
from degraded_palace import check_degrades_and_recovers, palace_config

from palace_plugins.builtin.backends.pgvector import PgvectorIndex
from palace_plugins.testing import BackendTests, IndexFactory
from palace_retrievers import Palace
from palace_retrievers.errors import ConfigError, IndexUnavailableError
from palace_retrievers.index import BackendContext
from palace_retrievers.ledger import Ledger
from palace_retrievers.records import Filter

if TYPE_CHECKING:
    from services import PostgresService

pytest_plugins = ["services"]


def with_url(url: str, **extra: Any) -> IndexFactory:
    """The pgvector factory with the test server's URL (and ``extra`` options) filled in."""

    def factory(context: BackendContext) -> PgvectorIndex:
        options = {"url": url, **extra, **context.options}
        return PgvectorIndex(dataclasses.replace(context, options=options))

    return factory


class TestPgvectorBackend(BackendTests):
    """The defaults: these small tables stay below ``index_after``, an exact scan."""

    @pytest.fixture
    def index_factory(self, postgres: PostgresService) -> IndexFactory:
        return with_url(postgres.url)


class TestPgvectorBackendThroughHNSW(BackendTests):
    """``index_after = 0``, ``exact_below = 0``: the HNSW index exists from the start and
    serves every query (an exact scan only when it finds fewer than k)."""

    batch_size = 1000  # rows are linked into the graph one by one: slower than a bulk load

    @pytest.fixture
    def index_factory(self, postgres: PostgresService) -> IndexFactory:
        return with_url(postgres.url, index_after=0, exact_below=0)


def _context(tmp_path: Path, ledger: Ledger, **options: Any) -> BackendContext:
    return BackendContext(
        palace_dir=tmp_path, collection="drawers", dimension=8, ledger=ledger, options=options
    )


@pytest.fixture
def ledger(tmp_path: Path) -> Any:
    from palace_retrievers.ledger.sqlite import LEDGER_FILE, SQLiteLedger

    ledger = SQLiteLedger(tmp_path / LEDGER_FILE)
    yield ledger
    ledger.close()


def entries(count: int, *, seed: int, dimension: int = 8, **fields: Any) -> list[Any]:
    from palace_plugins.testing import entry, synthetic_vectors

    vectors = synthetic_vectors(count, dimension=dimension, seed=seed)
    return [entry(f"p{seed}-{i:04d}", v, **fields) for i, v in enumerate(vectors)]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"nope": 1}, "unknown option 'nope'"),
        ({"ef_search": 0}, "ef_search must be a whole number >= 1"),
        ({"m": "16"}, "m must be a whole number"),
        ({"timeout": True}, "timeout must be a number"),
        ({"url": 5}, "url must be a string"),
        ({"namespace": "Robert'); DROP TABLE x;--"}, "namespace must be a lower-case name"),
    ],
)
def test_bad_options_are_config_errors(
    tmp_path: Path, ledger: Ledger, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        PgvectorIndex(_context(tmp_path, ledger, **options))


def test_an_unreachable_server_is_index_unavailable(tmp_path: Path, ledger: Ledger) -> None:
    url = f"postgresql://postgres@/postgres?host={tmp_path / 'no-server-here'}"
    with pytest.raises(IndexUnavailableError, match=r"pgvector.*palace reindex"):
        PgvectorIndex(_context(tmp_path, ledger, url=url, timeout=1))


def test_table_columns_and_indexes(
    postgres: PostgresService, tmp_path: Path, ledger: Ledger
) -> None:
    index = PgvectorIndex(
        _context(tmp_path, ledger, url=postgres.url, namespace="layout", index_after=0)
    )
    try:
        columns = dict(
            postgres.sql(
                "SELECT column_name, data_type FROM information_schema.columns"
                " WHERE table_name = 'layout_drawers'"
            )
        )
        assert columns == {
            "id": "text",
            "wing": "text",
            "room": "text",
            "user_id": "text",
            "kind": "text",
            "ts": "double precision",
            "meta": "jsonb",
            "embedding": "USER-DEFINED",
        }
        definitions = [
            row[0]
            for row in postgres.sql(
                "SELECT indexdef FROM pg_indexes WHERE tablename = 'layout_drawers'"
            )
        ]
        hnsw = [d for d in definitions if "hnsw" in d]
        assert len(hnsw) == 1
        assert "vector_cosine_ops" in hnsw[0]
        assert "m='16'" in hnsw[0].replace(" ", "")
        assert len(definitions) == 5  # primary key, HNSW, three B-trees on the filters
        index.upsert(entries=entries(3, seed=1, wing="w", room="r", source="notes/a.md"))
        meta = postgres.sql("SELECT meta->>'source' FROM layout_drawers ORDER BY id")
        assert [m[0] for m in meta] == ["notes/a.md"] * 3
    finally:
        index.close()


def test_the_hnsw_index_serves_an_unfiltered_query(
    postgres: PostgresService, tmp_path: Path, ledger: Ledger
) -> None:
    """The plan of the query the backend sends uses the HNSW index, not a full sort."""
    index = PgvectorIndex(
        _context(tmp_path, ledger, url=postgres.url, namespace="plan", index_after=2000)
    )
    try:
        index.upsert(entries=entries(2000, seed=2))
        assert index.health().ok  # builds the index over the loaded rows
        postgres.sql("ANALYZE plan_drawers")
        vector = "[" + ",".join(["0.35"] * 8) + "]"
        plan = "\n".join(
            row[0]
            for row in postgres.sql(
                f"EXPLAIN SELECT id, embedding <=> '{vector}' AS distance FROM plan_drawers"
                f" WHERE user_id = '' ORDER BY distance LIMIT 10"
            )
        )
        assert "plan_drawers_hnsw" in plan, plan
    finally:
        index.close()


def test_approximate_results_agree_with_the_exact_scan(
    postgres: PostgresService, tmp_path: Path, ledger: Ledger
) -> None:
    """Through the HNSW index (2,000 rows), top 10 with and without filters: recall ≥ 0.95,
    and a selective filter (10 rows: below ``exact_below``) gets the exact answer."""
    from palace_plugins.testing import brute_force, synthetic_vectors

    index = PgvectorIndex(
        _context(
            tmp_path, ledger, url=postgres.url, namespace="recall", index_after=500, exact_below=50
        )
    )
    try:
        stored = entries(1990, seed=3, wing="big") + entries(10, seed=4, wing="small")
        index.upsert(entries=stored)
        found = expected = 0
        for query in synthetic_vectors(20, dimension=8, seed=5):
            for where in (Filter(), Filter(wing="big"), Filter(wing="small")):
                got = [m.id for m in index.query(vector=query, k=10, where=where)]
                truth = brute_force(stored, query, 10, where)
                assert len(got) == len(truth) == 10
                found += len(set(got) & set(truth))
                expected += len(truth)
                if where.wing == "small":
                    assert got == truth  # answered by the exact scan
        assert found / expected >= 0.95
    finally:
        index.close()


def test_the_hnsw_index_is_built_once_the_table_is_big_enough(
    postgres: PostgresService, tmp_path: Path, ledger: Ledger
) -> None:
    """Rows load without the index; the check after the load builds it (what a reindex
    does), and a clear drops it with the table."""

    def has_hnsw() -> bool:
        return bool(postgres.sql("SELECT to_regclass('deferred_drawers_hnsw') IS NOT NULL")[0][0])

    index = PgvectorIndex(
        _context(tmp_path, ledger, url=postgres.url, namespace="deferred", index_after=300)
    )
    try:
        stored = entries(299, seed=11)
        index.upsert(entries=stored)
        health = index.health()
        assert health.ok
        assert "exact scan until it holds 300 rows" in health.detail
        assert not has_hnsw()
        assert [m.id for m in index.query(vector=stored[5].vector, k=1, where=Filter())] == [
            stored[5].id
        ]
        index.upsert(entries=entries(1, seed=12))
        assert index.health().ok
        assert has_hnsw()
        assert "exact scan" not in index.health().detail
        assert [m.id for m in index.query(vector=stored[7].vector, k=1, where=Filter())] == [
            stored[7].id
        ]
        index.clear()
        assert not has_hnsw()
        index.upsert(entries=stored + entries(1, seed=12))
        index.query(vector=stored[0].vector, k=1, where=Filter())  # a query builds it too
        assert has_hnsw()
    finally:
        index.close()


def test_filter_values_are_parameters(
    postgres: PostgresService, tmp_path: Path, ledger: Ledger
) -> None:
    index = PgvectorIndex(_context(tmp_path, ledger, url=postgres.url))
    try:
        sly = "x'; DROP TABLE pg_class; --"
        index.upsert(entries=entries(3, seed=6, wing=sly, room='"quoted"'))
        query = np.ones(8, dtype=np.float32) / np.sqrt(8)
        assert len(index.query(vector=query, k=5, where=Filter(wing=sly))) == 3
        assert len(index.query(vector=query, k=5, where=Filter(room='"quoted"'))) == 3
        assert index.query(vector=query, k=5, where=Filter(wing="x")) == []
    finally:
        index.close()


def test_two_palaces_on_one_server_are_separate_unless_they_share_a_namespace(
    postgres: PostgresService, tmp_path: Path, ledger: Ledger
) -> None:
    def open_at(folder: str, **options: Any) -> PgvectorIndex:
        path = tmp_path / folder
        path.mkdir(exist_ok=True)
        context = dataclasses.replace(_context(path, ledger, url=postgres.url, **options))
        return PgvectorIndex(context)

    one, two = open_at("one"), open_at("two")
    shared_a, shared_b = open_at("a", namespace="team_notes"), open_at("b", namespace="team_notes")
    try:
        one.upsert(entries=entries(4, seed=7))
        shared_a.upsert(entries=entries(2, seed=8))
        assert (one.count(), two.count()) == (4, 0)
        assert shared_b.count() == 2
    finally:
        for index in (one, two, shared_a, shared_b):
            index.close()


def test_a_table_of_another_dimension_is_unhealthy_until_cleared(
    postgres: PostgresService, tmp_path: Path, ledger: Ledger
) -> None:
    old = PgvectorIndex(_context(tmp_path, ledger, url=postgres.url))
    old.upsert(entries=entries(2, seed=9))
    old.close()
    wider = PgvectorIndex(
        dataclasses.replace(_context(tmp_path, ledger, url=postgres.url), dimension=16)
    )
    try:
        health = wider.health()
        assert not health.ok
        assert "dimension 8" in health.detail
        wider.clear()
        assert wider.health().ok
    finally:
        wider.close()


def test_the_pool_replaces_connections_the_server_dropped(
    postgres: PostgresService, tmp_path: Path, ledger: Ledger
) -> None:
    index = PgvectorIndex(_context(tmp_path, ledger, url=postgres.url, namespace="dropped"))
    try:
        index.upsert(entries=entries(5, seed=10))
        postgres.sql(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE application_name = 'palace-pgvector'"
        )
        assert index.count() == 5
        assert index.health().ok
    finally:
        index.close()


# -- the palace over pgvector: health and fallback -------------------------------------


def test_a_palace_on_pgvector_searches_and_falls_back_while_the_server_is_down(
    postgres: PostgresService,
    tmp_path: Path,
    open_palace: Callable[..., Palace],
    caplog: pytest.LogCaptureFixture,
) -> None:
    palace_dir = tmp_path / "palace"
    palace_config(palace_dir, "pgvector", url=postgres.url, timeout=0.5)
    check_degrades_and_recovers(
        palace_dir,
        open_palace,
        caplog,
        breaks=postgres.stop,
        repairs=postgres.start,
    )


def test_a_palace_with_a_wrong_url_opens_degraded(
    tmp_path: Path, open_palace: Callable[..., Palace], caplog: pytest.LogCaptureFixture
) -> None:
    palace_dir = tmp_path / "palace"
    palace_config(
        palace_dir, "pgvector", url=f"postgresql://postgres@/x?host={tmp_path}", timeout=1
    )
    palace = open_palace(palace_dir, fake=False)
    status = {s.collection: s for s in palace.stats().indexes}
    assert not status["drawers"].ok
    assert "IndexUnavailableError" in status["drawers"].detail
    assert "palace reindex" in caplog.text
    palace.add_texts(["The boiler was serviced on Tuesday."], ids=["boiler"])
    assert [h.id for h in palace.search("when was the boiler serviced?", k=1)] == ["boiler"]
