"""The embedded Chroma backend's copy of the vectors (``vector_catalog``) stays in step with
the index: writes through another handle on the same folder are seen, whether the copy is
refreshed from what changed, rebuilt from the ledger, or set aside until its rebuild; the
backend's own writes keep it current; rows of deleted records are compacted away.

Synthetic unit vectors (a FAKE set): these tests are about bookkeeping, not meaning.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from palace_plugins.builtin.backends import vector_catalog
from palace_plugins.builtin.backends.chroma import ChromaIndex
from palace_plugins.testing import BackendTests
from palace_plugins.testing.backends import DIMENSION, brute_force, entry, synthetic_vectors
from palace_retrievers.index import BackendContext, IndexEntry
from palace_retrievers.ledger.sqlite import LEDGER_FILE, SQLiteLedger
from palace_retrievers.records import Filter

put = BackendTests.put
remove = BackendTests.remove


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[SQLiteLedger]:
    ledger = SQLiteLedger(tmp_path / LEDGER_FILE)
    yield ledger
    ledger.close()


def open_chroma(tmp_path: Path, ledger: SQLiteLedger, **options: object) -> ChromaIndex:
    context = BackendContext(
        palace_dir=tmp_path, collection="drawers", dimension=DIMENSION, ledger=ledger,
        options=options,
    )  # fmt: skip
    return ChromaIndex(context)


def entries(start: int, count: int, *, seed: int) -> list[IndexEntry]:
    vectors = synthetic_vectors(count, seed=seed)
    return [
        entry(f"e{start + i:04d}", v, wing=f"w{(start + i) % 5}", user_id="u" if i % 7 else "")
        for i, v in enumerate(vectors)
    ]


@pytest.mark.parametrize(
    ("refresh_at_most", "build_after"),
    [(vector_catalog.REFRESH_AT_MOST, 10**6), (0, 3), (0, 10**6)],
    ids=["refreshed", "rebuilt", "set-aside"],
)
def test_writes_through_another_handle_are_seen(
    tmp_path: Path,
    ledger: SQLiteLedger,
    monkeypatch: pytest.MonkeyPatch,
    refresh_at_most: int,
    build_after: int,
) -> None:
    writer = open_chroma(tmp_path, ledger)
    reader = open_chroma(tmp_path, ledger)
    try:
        everything = entries(0, 300, seed=1)
        put(ledger, writer, everything)
        probes = synthetic_vectors(12, seed=2)
        filters = [Filter(wing="w1"), Filter(wing="w2", user_id="u"), Filter(user_id="u")]

        def check() -> None:
            for n, probe in enumerate(probes):
                where = filters[n % len(filters)]
                found = [m.id for m in reader.query(vector=probe, k=8, where=where)]
                assert found == brute_force(everything, probe, 8, where)

        check()  # the reader's copy is built from the ledger on its first query
        monkeypatch.setattr(vector_catalog, "REBUILD_EVERY", 0.0)
        monkeypatch.setattr(vector_catalog, "REFRESH_AT_MOST", refresh_at_most)
        monkeypatch.setattr(vector_catalog, "BUILD_AFTER", build_after)
        fresh = entries(300, 120, seed=3)
        put(ledger, writer, fresh)
        gone = [e.id for e in everything[::4]]
        remove(ledger, writer, gone)
        everything = [e for e in everything + fresh if e.id not in set(gone)]
        check()
        catalog = reader._catalog
        assert catalog is not None
        # Refreshed from what changed, rebuilt after BUILD_AFTER queries, or still set
        # aside (waiting for more queries before a rebuild).
        current = catalog._table is not None and catalog._seen == reader._version()
        assert current is (refresh_at_most > 0 or build_after == 3)
        # And the writer's own copy followed its writes without a rebuild.
        monkeypatch.setattr(vector_catalog, "BUILD_AFTER", 10**6)
        probe = probes[0]
        where = Filter(wing="w3", user_id="u")
        found = [m.id for m in writer.query(vector=probe, k=8, where=where)]
        assert found == brute_force(everything, probe, 8, where)
    finally:
        reader.close()
        writer.close()


def test_a_filter_passing_few_records_is_answered_exactly_and_others_by_the_index(
    tmp_path: Path, ledger: SQLiteLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = open_chroma(tmp_path, ledger, exact_below=50)
    asked: list[int] = []
    original = ChromaIndex._nearest

    def spy(self: ChromaIndex, query: np.ndarray, n: int, where: object) -> object:
        asked.append(n)
        return original(self, query, n, where)  # type: ignore[arg-type]

    monkeypatch.setattr(ChromaIndex, "_nearest", spy)
    try:
        everything = entries(0, 500, seed=4)
        put(ledger, index, everything)
        probe = synthetic_vectors(1, seed=5)[0]
        narrow = Filter(wing="w1", user_id="")  # about 15 records
        assert [m.id for m in index.query(vector=probe, k=5, where=narrow)] == brute_force(
            everything, probe, 5, narrow
        )
        assert asked == []  # never asked Chroma
        broad = Filter(user_id="u")  # about 430 records
        assert [m.id for m in index.query(vector=probe, k=5, where=broad)] == brute_force(
            everything, probe, 5, broad
        )
        assert asked
        assert asked[0] < 30  # a probe sized by the share passing
    finally:
        index.close()


def test_exact_below_must_be_a_count(tmp_path: Path, ledger: SQLiteLedger) -> None:
    from palace_retrievers.errors import ConfigError

    for bad in (-1, "many", True, 1.5):
        with pytest.raises(ConfigError, match="exact_below"):
            open_chroma(tmp_path, ledger, exact_below=bad)


def test_deleted_rows_are_compacted_away(
    tmp_path: Path, ledger: SQLiteLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vector_catalog, "COMPACT_ABOVE", 10)
    index = open_chroma(tmp_path, ledger)
    try:
        everything = entries(0, 100, seed=6)
        put(ledger, index, everything)
        gone = {e.id for e in everything[:60]}
        remove(ledger, index, sorted(gone))
        catalog = index._catalog
        assert catalog is not None
        table = catalog._table
        assert table is not None
        assert len(table.ids) == 40  # compacted: no row of a deleted record left
        back = everything[:5]
        put(ledger, index, back)  # deleted ids filed again
        everything = [e for e in everything if e.id not in gone] + back
        for n, probe in enumerate(synthetic_vectors(6, seed=7)):
            where = Filter(wing=f"w{n % 5}") if n % 2 else Filter(user_id="u")
            found = [m.id for m in index.query(vector=probe, k=6, where=where)]
            assert found == brute_force(everything, probe, 6, where)
    finally:
        index.close()
