"""The conformance suite of vector index backends: :class:`BackendTests`.

It feeds the backend a small, deterministic set of synthetic unit vectors rather than
real embeddings: what is tested is the index (ordering, filters, upserts, deletes,
concurrent readers), not a model, and synthetic vectors make every expected answer exact.

About 760 lines: one conformance class, :class:`BackendTests`, whose tests share its
fixtures and grid of entries, so that a plugin author subclasses one class.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from itertools import combinations
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import pytest

from palace_plugins.factories import BackendFactory as IndexFactory
from palace_retrievers.index import (
    BackendContext,
    Capabilities,
    Health,
    IndexEntry,
    VectorIndex,
    VectorMatch,
)
from palace_retrievers.ledger import Ledger
from palace_retrievers.ledger.sqlite import LEDGER_FILE, SQLiteLedger
from palace_retrievers.records import Drawer, Filter

__all__ = [
    "DAY",
    "DIMENSION",
    "EPOCH",
    "BackendTests",
    "IndexFactory",
    "brute_force",
    "entry",
    "passes",
    "synthetic_vectors",
    "unit",
]

Vector = npt.NDArray[np.float32]

#: Dimension of the synthetic vectors the backend suite uses.
DIMENSION = 16
#: 2026-01-01T00:00:00Z; synthetic entries are one day apart from here.
EPOCH = 1_767_225_600.0
DAY = 86_400.0


def synthetic_vectors(count: int, *, dimension: int = DIMENSION, seed: int = 0) -> Vector:
    """``count`` random unit vectors, the same ones for the same arguments (a FAKE set)."""
    rng = np.random.default_rng(seed)
    matrix = rng.normal(size=(count, dimension)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix


def unit(vector: npt.ArrayLike) -> Vector:
    """``vector`` scaled to unit length, as float32."""
    array = np.asarray(vector, dtype=np.float32)
    result: Vector = (array / np.linalg.norm(array)).astype(np.float32)
    return result


def entry(
    id: str,
    vector: npt.ArrayLike,
    *,
    wing: str = "w",
    room: str = "r",
    user_id: str = "",
    kind: str = "drawer",
    timestamp: float = EPOCH,
    source: str = "",
) -> IndexEntry:
    """An :class:`IndexEntry` with defaults for every field but the id and vector."""
    return IndexEntry(
        id=id,
        vector=unit(vector),
        wing=wing,
        room=room,
        user_id=user_id,
        kind=kind,
        timestamp=timestamp,
        source=source or f"test://{id}",
    )


def brute_force(entries: Sequence[IndexEntry], vector: Vector, k: int, where: Filter) -> list[str]:
    """The reference answer: ids of the ``k`` nearest entries passing ``where``."""
    query = np.asarray(vector, dtype=np.float64)
    scored = [
        (-float(np.dot(np.asarray(e.vector, dtype=np.float64), query)), e.id)
        for e in entries
        if passes(e, where)
    ]
    return [i for _, i in sorted(scored)[:k]]


def passes(e: IndexEntry, where: Filter) -> bool:
    """Whether an entry passes a filter (what :meth:`Filter.matches` says of a drawer)."""
    return where.matches(_drawer(e))


def _drawer(e: IndexEntry) -> Drawer:
    return Drawer(
        id=e.id,
        text=f"synthetic entry {e.id}",
        wing=e.wing,
        room=e.room,
        source=e.source,
        content_date=datetime.fromtimestamp(e.timestamp, UTC),
        user_id=e.user_id or None,
        kind=e.kind,
    )


def _grid() -> list[IndexEntry]:
    """Entries spread over every filter field: 2 wings × 2 rooms × 3 owners × 2 kinds."""
    vectors = synthetic_vectors(48, seed=7)
    out = []
    n = 0
    for wing in ("alpha", "beta"):
        for room in ("docs", "chat"):
            for user in ("", "u1", "u2"):
                for kind in ("drawer", "memory"):
                    out.append(
                        entry(
                            f"g{n:02d}",
                            vectors[n],
                            wing=wing,
                            room=room,
                            user_id=user,
                            kind=kind,
                            timestamp=EPOCH + n * DAY,
                        )
                    )
                    n += 1
    return out


class BackendTests:
    """The contract of a vector index backend (:class:`~palace_retrievers.index.VectorIndex`).

    Subclass it and provide the ``index_factory`` fixture: a callable that takes a
    :class:`~palace_retrievers.index.BackendContext` and returns a ``VectorIndex``.
    Set :attr:`backend_options` for the options table the factory receives.

    Every write goes to a real ledger first and to the index second, as the palace does,
    so backends derived from the ledger (``capabilities.derived_from_ledger``) see it.
    """

    #: The ``[backends.<name>]`` options passed in every :class:`BackendContext`.
    backend_options: ClassVar[dict[str, Any]] = {}
    #: The size of the large-batch test (a few thousand entries).
    batch_size: ClassVar[int] = 3000
    #: How many threads query at once in the concurrent-reader tests.
    readers: ClassVar[int] = 4
    #: Entries in the index a reader queries while it is rebuilt.
    rebuild_size: ClassVar[int] = 600

    # -- fixtures -----------------------------------------------------------------------

    @pytest.fixture
    def index_factory(self) -> IndexFactory:
        """Override: return ``callable(BackendContext) -> VectorIndex``."""
        raise NotImplementedError("a BackendTests subclass must provide `index_factory`")

    @pytest.fixture
    def palace_dir(self, tmp_path: Path) -> Path:
        path = tmp_path / "palace"
        path.mkdir()
        return path

    @pytest.fixture
    def ledger(self, palace_dir: Path) -> Iterator[Ledger]:
        ledger = SQLiteLedger(palace_dir / LEDGER_FILE)
        yield ledger
        ledger.close()

    @pytest.fixture
    def open_index(
        self, index_factory: IndexFactory, palace_dir: Path, ledger: Ledger
    ) -> Iterator[Callable[..., VectorIndex]]:
        """``open_index(collection="drawers")``: a new index over the test palace."""
        opened: list[VectorIndex] = []

        def open_index(collection: str = "drawers", dimension: int = DIMENSION) -> VectorIndex:
            context = BackendContext(
                palace_dir=palace_dir,
                collection=collection,
                dimension=dimension,
                ledger=ledger,
                options=dict(self.backend_options),
            )
            index = index_factory(context)
            opened.append(index)
            return index

        yield open_index
        for index in reversed(opened):
            index.close()

    @pytest.fixture
    def index(self, open_index: Callable[..., VectorIndex]) -> VectorIndex:
        return open_index()

    # -- helpers ------------------------------------------------------------------------

    @staticmethod
    def put(ledger: Ledger, index: VectorIndex, entries: Sequence[IndexEntry]) -> None:
        """File ``entries`` in the ledger, then upsert them into the index."""
        vectors = np.stack([e.vector for e in entries]).astype(np.float32)
        ledger.upsert_drawers([_drawer(e) for e in entries], vectors, model="synthetic")
        index.upsert(entries=entries)

    @staticmethod
    def remove(ledger: Ledger, index: VectorIndex, ids: Sequence[str]) -> None:
        """Delete ``ids`` from the ledger, then from the index."""
        ledger.delete_drawers(ids)
        index.delete(ids=ids)

    @staticmethod
    def ids(matches: Sequence[VectorMatch]) -> list[str]:
        return [m.id for m in matches]

    @staticmethod
    def assert_well_formed(matches: Sequence[VectorMatch], k: int) -> None:
        """At most ``k`` matches, no id twice, best first, ties broken by id."""
        assert len(matches) <= k
        assert all(isinstance(m, VectorMatch) for m in matches)
        assert len({m.id for m in matches}) == len(matches), "an id was returned twice"
        for m in matches:
            assert math.isfinite(m.similarity)
            assert -1.0001 <= m.similarity <= 1.0001, m
        keys = [(-m.similarity, m.id) for m in matches]
        assert keys == sorted(keys), "matches are not ordered best first, ties by id"

    # -- the contract -------------------------------------------------------------------

    def test_is_a_vector_index(self, index: VectorIndex) -> None:
        assert isinstance(index, VectorIndex)
        assert isinstance(type(index).capabilities, Capabilities)

    def test_empty_index(self, index: VectorIndex) -> None:
        assert index.count() == 0
        assert index.query(vector=synthetic_vectors(1)[0], k=5, where=Filter()) == []
        health = index.health()
        assert isinstance(health, Health)
        assert health.ok
        assert health.count == 0

    def test_upsert_then_query_returns_nearest_first(
        self, index: VectorIndex, ledger: Ledger
    ) -> None:
        vectors = synthetic_vectors(60, seed=1)
        entries = [entry(f"e{i:02d}", v) for i, v in enumerate(vectors)]
        self.put(ledger, index, entries)
        assert index.count() == 60
        noise = synthetic_vectors(5, seed=2) * 0.05
        for target, jitter in zip((0, 17, 33, 48, 59), noise, strict=True):
            query = unit(vectors[target] + jitter)
            matches = index.query(vector=query, k=5, where=Filter())
            self.assert_well_formed(matches, 5)
            assert matches[0].id == f"e{target:02d}"
            assert self.ids(matches) == brute_force(entries, query, 5, Filter())
            expected = float(np.dot(vectors[target], query))
            assert matches[0].similarity == pytest.approx(expected, abs=1e-4)

    def test_similarity_is_cosine(self, index: VectorIndex, ledger: Ledger) -> None:
        axis = np.eye(DIMENSION, dtype=np.float32)
        self.put(
            ledger,
            index,
            [entry("same", axis[0]), entry("opposite", -axis[0]), entry("orthogonal", axis[1])],
        )
        matches = index.query(vector=axis[0], k=3, where=Filter())
        assert self.ids(matches) == ["same", "orthogonal", "opposite"]
        sims = [m.similarity for m in matches]
        assert sims == pytest.approx([1.0, 0.0, -1.0], abs=1e-4)

    def test_upsert_is_idempotent_by_id(self, index: VectorIndex, ledger: Ledger) -> None:
        vectors = synthetic_vectors(20, seed=3)
        entries = [entry(f"e{i:02d}", v, wing="old") for i, v in enumerate(vectors)]
        self.put(ledger, index, entries)
        self.put(ledger, index, entries)
        assert index.count() == 20
        # Re-upserting one id replaces its vector and its metadata.
        fresh = unit(np.ones(DIMENSION, dtype=np.float32))
        self.put(ledger, index, [entry("e05", fresh, wing="new", room="moved")])
        assert index.count() == 20
        top = index.query(vector=fresh, k=1, where=Filter())
        assert self.ids(top) == ["e05"]
        assert top[0].similarity == pytest.approx(1.0, abs=1e-4)
        old_vector_hits = index.query(vector=vectors[5], k=20, where=Filter(wing="old"))
        assert "e05" not in self.ids(old_vector_hits)
        assert self.ids(index.query(vector=fresh, k=5, where=Filter(wing="new"))) == ["e05"]
        assert self.ids(index.query(vector=fresh, k=5, where=Filter(room="moved"))) == ["e05"]

    def test_delete(self, index: VectorIndex, ledger: Ledger) -> None:
        vectors = synthetic_vectors(10, seed=4)
        self.put(ledger, index, [entry(f"e{i}", v) for i, v in enumerate(vectors)])
        self.remove(ledger, index, ["e3", "e7", "never-there"])
        assert index.count() == 8
        for i in (3, 7):
            found = self.ids(index.query(vector=vectors[i], k=10, where=Filter()))
            assert f"e{i}" not in found
            assert len(found) == 8
        index.delete(ids=[])
        index.delete(ids=["unknown-1", "unknown-2"])
        assert index.count() == 8

    def test_k_larger_than_the_data(self, index: VectorIndex, ledger: Ledger) -> None:
        vectors = synthetic_vectors(7, seed=5)
        entries = [entry(f"e{i}", v) for i, v in enumerate(vectors)]
        self.put(ledger, index, entries)
        matches = index.query(vector=vectors[0], k=1000, where=Filter())
        self.assert_well_formed(matches, 1000)
        assert sorted(self.ids(matches)) == [e.id for e in entries]
        narrow = index.query(vector=vectors[0], k=1000, where=Filter(wing="nowhere"))
        assert narrow == []

    @pytest.mark.parametrize(
        "where",
        [
            Filter(),
            Filter(user_id="u1"),
            Filter(user_id="u2"),
            Filter(wing="alpha"),
            Filter(wing="beta", user_id="u1"),
            Filter(room="chat"),
            Filter(kind="memory"),
            Filter(kind="drawer", user_id="u2"),
            Filter(wing="alpha", room="docs", kind="drawer"),
            Filter(since=datetime.fromtimestamp(EPOCH + 20 * DAY, UTC)),
            Filter(until=datetime.fromtimestamp(EPOCH + 20 * DAY, UTC)),
            Filter(
                since=datetime.fromtimestamp(EPOCH + 12 * DAY, UTC),
                until=datetime.fromtimestamp(EPOCH + 30 * DAY, UTC),
                user_id="u1",
            ),
            Filter(wing="gamma"),
        ],
        ids=lambda f: ",".join(f"{k}={v}" for k, v in _filter_fields(f).items()) or "none",
    )
    def test_filters(self, index: VectorIndex, ledger: Ledger, where: Filter) -> None:
        entries = _grid()
        self.put(ledger, index, entries)
        query = synthetic_vectors(1, seed=99)[0]
        expected = brute_force(entries, query, len(entries), where)
        matches = index.query(vector=query, k=len(entries), where=where)
        self.assert_well_formed(matches, len(entries))
        assert set(self.ids(matches)) == set(expected)
        for e in entries:
            if e.id in self.ids(matches):
                assert passes(e, where), f"{e.id} does not pass {where}"

    def test_user_partition_is_exact(self, index: VectorIndex, ledger: Ledger) -> None:
        """``user_id=None`` sees only unowned entries; a user never sees another's."""
        vectors = synthetic_vectors(9, seed=6)
        owners = ["", "u1", "u2"] * 3
        entries = [
            entry(f"e{i}", v, user_id=o)
            for i, (v, o) in enumerate(zip(vectors, owners, strict=True))
        ]
        self.put(ledger, index, entries)
        for owner in ("", "u1", "u2"):
            where = Filter(user_id=owner or None)
            found = self.ids(index.query(vector=vectors[0], k=100, where=where))
            assert sorted(found) == sorted(e.id for e in entries if e.user_id == owner)
        assert index.query(vector=vectors[0], k=100, where=Filter(user_id="u3")) == []

    def test_filters_apply_inside_the_query(self, index: VectorIndex, ledger: Ledger) -> None:
        """With a filter, ``k`` results come back even when the nearest entries fail it."""
        target = unit(np.ones(DIMENSION, dtype=np.float32))
        near = synthetic_vectors(200, seed=8) * 0.2 + target  # all close to the query
        far = synthetic_vectors(10, seed=9)  # random: far on average
        entries = [entry(f"near{i:03d}", v, wing="crowd") for i, v in enumerate(near)]
        entries += [entry(f"far{i}", v, wing="rare", user_id="u9") for i, v in enumerate(far)]
        self.put(ledger, index, entries)
        where = Filter(wing="rare", user_id="u9")
        matches = index.query(vector=target, k=5, where=where)
        assert self.ids(matches) == brute_force(entries, target, 5, where)
        assert len(matches) == 5

    def test_time_range_is_inclusive(self, index: VectorIndex, ledger: Ledger) -> None:
        vectors = synthetic_vectors(5, seed=10)
        entries = [entry(f"day{i}", v, timestamp=EPOCH + i * DAY) for i, v in enumerate(vectors)]
        self.put(ledger, index, entries)
        where = Filter(
            since=datetime.fromtimestamp(EPOCH + DAY, UTC),
            until=datetime.fromtimestamp(EPOCH + 3 * DAY, UTC),
        )
        found = self.ids(index.query(vector=vectors[0], k=10, where=where))
        assert sorted(found) == ["day1", "day2", "day3"]

    def test_unicode_metadata(self, index: VectorIndex, ledger: Ledger) -> None:
        vectors = synthetic_vectors(4, seed=11)
        fields = [
            ("ü-1", "北京", "会议 ☕", "użytkownik"),
            ("ü-2", "北京", "docs", ""),
            ("ü-3", "Zürich", "会议 ☕", "użytkownik"),
            ("emoji-🦜", "Zürich", "🐦 birds", ""),
        ]
        entries = [
            entry(i, v, wing=w, room=r, user_id=u)
            for (i, w, r, u), v in zip(fields, vectors, strict=True)
        ]
        self.put(ledger, index, entries)
        assert index.count() == 4
        got = index.query(vector=vectors[0], k=10, where=Filter(wing="北京", user_id="użytkownik"))
        assert self.ids(got) == ["ü-1"]
        got = index.query(vector=vectors[3], k=10, where=Filter(room="🐦 birds"))
        assert self.ids(got) == ["emoji-🦜"]
        got = index.query(
            vector=vectors[2], k=10, where=Filter(room="会议 ☕", user_id="użytkownik")
        )
        assert sorted(self.ids(got)) == ["ü-1", "ü-3"]

    def test_a_batch_of_thousands(self, index: VectorIndex, ledger: Ledger) -> None:
        n = self.batch_size
        vectors = synthetic_vectors(n, seed=12)
        wings = ("north", "south", "east")
        entries = [entry(f"b{i:05d}", v, wing=wings[i % 3]) for i, v in enumerate(vectors)]
        self.put(ledger, index, entries)
        assert index.count() == n
        assert index.health().count == n
        for target in (0, n // 2, n - 1):
            matches = index.query(vector=vectors[target], k=10, where=Filter())
            assert matches[0].id == f"b{target:05d}"
            self.assert_well_formed(matches, 10)
            in_wing = index.query(vector=vectors[target], k=10, where=Filter(wing="east"))
            assert len(in_wing) == 10
            assert all(int(m.id[1:]) % 3 == 2 for m in in_wing)

    def test_clear(self, index: VectorIndex, ledger: Ledger) -> None:
        vectors = synthetic_vectors(12, seed=13)
        entries = [entry(f"e{i:02d}", v) for i, v in enumerate(vectors)]
        self.put(ledger, index, entries)
        index.clear()
        if not type(index).capabilities.derived_from_ledger:
            assert index.count() == 0
            assert index.query(vector=vectors[0], k=5, where=Filter()) == []
        # Clearing then upserting again (what `palace reindex` does) gives a full index.
        self.put(ledger, index, entries)
        assert index.count() == 12
        assert self.ids(index.query(vector=vectors[4], k=1, where=Filter())) == ["e04"]

    def test_clear_accepts_another_dimension(
        self, open_index: Callable[..., VectorIndex], ledger: Ledger
    ) -> None:
        """What ``palace reindex`` does after a change of embedding model: the index is
        opened with the new dimension over the old vectors, cleared, and filled again."""
        old = open_index()
        self.put(ledger, old, [entry(f"e{i}", v) for i, v in enumerate(synthetic_vectors(3))])
        old.close()
        wider = open_index(dimension=DIMENSION * 2)
        ledger.delete_drawers(["e0", "e1", "e2"])  # the ledger is re-embedded first
        wider.clear()
        vectors = synthetic_vectors(3, dimension=DIMENSION * 2, seed=14)
        self.put(ledger, wider, [entry(f"w{i}", v) for i, v in enumerate(vectors)])
        assert wider.count() == 3
        assert self.ids(wider.query(vector=vectors[1], k=1, where=Filter())) == ["w1"]

    def test_rebuild_replaces_the_content(self, index: VectorIndex, ledger: Ledger) -> None:
        """``rebuild`` (what ``palace reindex`` calls) leaves exactly the entries it was
        given, whatever the index held before."""
        old = [entry(f"old{i}", v) for i, v in enumerate(synthetic_vectors(8, seed=26))]
        self.put(ledger, index, old)
        ledger.delete_drawers([e.id for e in old])
        new = [entry(f"new{i:02d}", v) for i, v in enumerate(synthetic_vectors(30, seed=27))]
        vectors = np.stack([e.vector for e in new]).astype(np.float32)
        ledger.upsert_drawers([_drawer(e) for e in new], vectors, model="synthetic")
        index.rebuild(batches=(new[start : start + 7] for start in range(0, len(new), 7)))
        assert index.count() == len(new)
        assert index.health().ok
        for target in (0, 13, 29):
            found = self.ids(index.query(vector=vectors[target], k=5, where=Filter()))
            assert found == brute_force(new, vectors[target], 5, Filter())
        # The index goes on taking writes after a rebuild.
        self.put(ledger, index, [entry("later", synthetic_vectors(1, seed=28)[0])])
        assert index.count() == len(new) + 1

    def test_rebuild_accepts_another_dimension(
        self, open_index: Callable[..., VectorIndex], ledger: Ledger
    ) -> None:
        """``palace reindex`` after a change of embedding model: the index opened with the
        new dimension over the old vectors is rebuilt from the re-embedded ledger."""
        old = open_index()
        self.put(ledger, old, [entry(f"e{i}", v) for i, v in enumerate(synthetic_vectors(3))])
        old.close()
        wider = open_index(dimension=DIMENSION * 2)
        ledger.delete_drawers(["e0", "e1", "e2"])
        vectors = synthetic_vectors(3, dimension=DIMENSION * 2, seed=29)
        fresh = [entry(f"w{i}", v) for i, v in enumerate(vectors)]
        ledger.upsert_drawers([_drawer(e) for e in fresh], vectors, model="synthetic")
        wider.rebuild(batches=[fresh])
        assert wider.count() == 3
        assert self.ids(wider.query(vector=vectors[1], k=1, where=Filter())) == ["w1"]

    def test_a_rebuild_is_never_seen_half_done(
        self, open_index: Callable[..., VectorIndex], ledger: Ledger
    ) -> None:
        """While one handle rebuilds the index from the ledger (another process's, or
        another machine's, ``palace reindex``), a reader on another handle gets the full,
        right answer to every query: the old index or the new one, never an empty or a
        partly filled one. Only for a backend with ``capabilities.atomic_rebuild``."""
        builder = open_index()
        if not type(builder).capabilities.atomic_rebuild:
            pytest.skip("the backend does not rebuild atomically (clear, then upsert)")
        reader = open_index()
        vectors = synthetic_vectors(self.rebuild_size, seed=30)
        wings = ("north", "south")
        entries = [entry(f"r{i:04d}", v, wing=wings[i % 2]) for i, v in enumerate(vectors)]
        self.put(ledger, builder, entries)
        targets = list(range(0, len(entries), max(1, len(entries) // 25)))
        filters = (Filter(), Filter(wing="south"))
        expected = {
            (t, f): brute_force(entries, vectors[t], 5, where)
            for t in targets
            for f, where in enumerate(filters)
        }
        for (t, f), ids in expected.items():  # the reader is warm before the rebuild
            assert self.ids(reader.query(vector=vectors[t], k=5, where=filters[f])) == ids

        def batches() -> Iterator[list[IndexEntry]]:
            for batch in ledger.iter_entries("drawers", batch_size=50):
                time.sleep(0.01)  # a reindex that lasts, for the reader to run during it
                yield batch

        during = 0
        with ThreadPoolExecutor(max_workers=1) as pool:
            rebuilt = pool.submit(builder.rebuild, batches=batches())
            while not rebuilt.done() or during < 20:
                for (t, f), ids in expected.items():
                    found = self.ids(reader.query(vector=vectors[t], k=5, where=filters[f]))
                    assert found == ids, f"query {t} {filters[f]} during the rebuild"
                    during += 1
            rebuilt.result()
        assert builder.count() == reader.count() == len(entries)
        for (t, f), ids in expected.items():
            assert self.ids(reader.query(vector=vectors[t], k=5, where=filters[f])) == ids

    def test_health(self, index: VectorIndex, ledger: Ledger) -> None:
        vectors = synthetic_vectors(6, seed=15)
        self.put(ledger, index, [entry(f"e{i}", v) for i, v in enumerate(vectors)])
        health = index.health()
        assert health.ok
        assert health.count == index.count() == 6
        assert isinstance(health.detail, str)

    def test_ties_are_ordered_by_id(self, index: VectorIndex, ledger: Ledger) -> None:
        tied = unit(np.arange(1, DIMENSION + 1, dtype=np.float32))
        others = synthetic_vectors(8, seed=16)
        entries = [entry(i, tied) for i in ("t3", "t1", "t4", "t2")]
        entries += [entry(f"o{i}", v) for i, v in enumerate(others)]
        self.put(ledger, index, entries)
        matches = index.query(vector=tied, k=4, where=Filter())
        assert self.ids(matches) == ["t1", "t2", "t3", "t4"]
        if type(index).capabilities.exact:
            # An exact index breaks the tie at the k-th rank by id too.
            assert self.ids(index.query(vector=tied, k=2, where=Filter())) == ["t1", "t2"]

    def test_collections_are_separate(
        self, open_index: Callable[..., VectorIndex], ledger: Ledger
    ) -> None:
        drawers = open_index("drawers")
        closets = open_index("closets")
        vectors = synthetic_vectors(3, seed=17)
        self.put(ledger, drawers, [entry(f"e{i}", v) for i, v in enumerate(vectors)])
        assert drawers.count() == 3
        assert closets.count() == 0
        assert closets.query(vector=vectors[0], k=3, where=Filter()) == []

    def test_persists_across_close(
        self, open_index: Callable[..., VectorIndex], ledger: Ledger
    ) -> None:
        first = open_index()
        if not type(first).capabilities.persistent:
            pytest.skip("the backend does not persist")
        vectors = synthetic_vectors(5, seed=18)
        self.put(ledger, first, [entry(f"e{i}", v) for i, v in enumerate(vectors)])
        first.close()
        again = open_index()
        assert again.count() == 5
        assert self.ids(again.query(vector=vectors[2], k=1, where=Filter())) == ["e2"]

    def test_every_combination_of_filter_fields(self, index: VectorIndex, ledger: Ledger) -> None:
        """Every operator (equality on wing, room, owner and kind; ``since``, at or after;
        ``until``, at or before, both bounds on an entry's own time) alone and combined."""
        entries = _grid()
        self.put(ledger, index, entries)
        query = synthetic_vectors(1, seed=98)[0]
        values: dict[str, Any] = {
            "wing": "beta",
            "room": "docs",
            "user_id": "u2",
            "kind": "memory",
            "since": datetime.fromtimestamp(EPOCH + 9 * DAY, UTC),
            "until": datetime.fromtimestamp(EPOCH + 40 * DAY, UTC),
        }
        for size in range(len(values) + 1):
            for names in combinations(values, size):
                where = Filter(**{name: values[name] for name in names})
                expected = brute_force(entries, query, len(entries), where)
                matches = index.query(vector=query, k=len(entries), where=where)
                self.assert_well_formed(matches, len(entries))
                assert set(self.ids(matches)) == set(expected), f"filter {names}"
        everything = Filter(**values)
        assert self.ids(index.query(vector=query, k=5, where=everything)) == ["g17"]

    def test_filter_values_are_taken_literally(self, index: VectorIndex, ledger: Ledger) -> None:
        """Quotes, wildcards and backslashes in a filter value match only themselves."""
        wings = ["O'Brien", 'say "hi"', "100%", "a_b", "axb", "a\\b", "a%", "{$ne: 1}", " "]
        vectors = synthetic_vectors(len(wings), seed=20)
        entries = [
            entry(f"lit{i}", v, wing=w) for i, (w, v) in enumerate(zip(wings, vectors, strict=True))
        ]
        self.put(ledger, index, entries)
        for i, wing in enumerate(wings):
            found = self.ids(index.query(vector=vectors[0], k=20, where=Filter(wing=wing)))
            assert found == [f"lit{i}"], f"wing {wing!r} matched {found}"
        assert index.query(vector=vectors[0], k=20, where=Filter(wing="%")) == []
        assert index.query(vector=vectors[0], k=20, where=Filter(wing="a\\_b")) == []

    def test_upsert_replaces_every_filter_field(self, index: VectorIndex, ledger: Ledger) -> None:
        vectors = synthetic_vectors(4, seed=21)
        entries = [entry(f"e{i}", v, kind="drawer", timestamp=EPOCH) for i, v in enumerate(vectors)]
        self.put(ledger, index, entries)
        later = EPOCH + 30 * DAY
        self.put(ledger, index, [entry("e2", vectors[2], kind="memory", timestamp=later)])
        assert index.count() == 4
        cutoff = datetime.fromtimestamp(EPOCH + DAY, UTC)
        assert self.ids(index.query(vector=vectors[2], k=9, where=Filter(since=cutoff))) == ["e2"]
        assert "e2" not in self.ids(index.query(vector=vectors[2], k=9, where=Filter(until=cutoff)))
        assert self.ids(index.query(vector=vectors[2], k=9, where=Filter(kind="memory"))) == ["e2"]
        drawers = self.ids(index.query(vector=vectors[2], k=9, where=Filter(kind="drawer")))
        assert sorted(drawers) == ["e0", "e1", "e3"]

    def test_empty_results(self, index: VectorIndex, ledger: Ledger) -> None:
        """No entry, ``k=0``, an empty upsert and a deleted palace all answer ``[]``."""
        index.upsert(entries=[])
        assert index.count() == 0
        vectors = synthetic_vectors(6, seed=22)
        entries = [entry(f"e{i}", v, user_id="u1") for i, v in enumerate(vectors)]
        self.put(ledger, index, entries)
        assert index.query(vector=vectors[0], k=0, where=Filter(user_id="u1")) == []
        assert index.query(vector=vectors[0], k=5, where=Filter()) == []  # no unowned entry
        self.remove(ledger, index, [e.id for e in entries])
        assert index.count() == 0
        assert index.query(vector=vectors[0], k=5, where=Filter(user_id="u1")) == []
        health = index.health()
        assert health.ok
        assert health.count == 0
        # A deleted id can be filed again.
        self.put(ledger, index, entries[:2])
        assert index.count() == 2
        top = index.query(vector=vectors[1], k=1, where=Filter(user_id="u1"))
        assert self.ids(top) == ["e1"]

    def test_ties_under_a_filter_are_ordered_by_id(
        self, index: VectorIndex, ledger: Ledger
    ) -> None:
        tied = unit(np.arange(DIMENSION, 0, -1, dtype=np.float32))
        names = ["t6", "t1", "t5", "t2", "t4", "t3"]
        entries = [entry(n, tied, wing="odd" if int(n[1]) % 2 else "even") for n in names]
        entries += [entry(f"o{i}", v, wing="odd") for i, v in enumerate(synthetic_vectors(5))]
        self.put(ledger, index, entries)
        assert self.ids(index.query(vector=tied, k=3, where=Filter(wing="even"))) == [
            "t2",
            "t4",
            "t6",
        ]
        assert self.ids(index.query(vector=tied, k=3, where=Filter(wing="odd"))) == [
            "t1",
            "t3",
            "t5",
        ]

    def test_a_large_delete(self, index: VectorIndex, ledger: Ledger) -> None:
        n = max(30, self.batch_size // 3)
        vectors = synthetic_vectors(n, seed=23)
        entries = [entry(f"b{i:05d}", v) for i, v in enumerate(vectors)]
        self.put(ledger, index, entries)
        gone = [e.id for i, e in enumerate(entries) if i % 3]
        self.remove(ledger, index, gone)
        kept = [e for i, e in enumerate(entries) if not i % 3]
        assert index.count() == len(kept)
        for target in (1, 2, n // 2 + 1):
            found = self.ids(index.query(vector=vectors[target], k=10, where=Filter()))
            assert found
            assert not set(found) & set(gone)
        assert self.ids(index.query(vector=vectors[3], k=1, where=Filter())) == ["b00003"]

    def test_concurrent_readers(self, index: VectorIndex, ledger: Ledger) -> None:
        """Queries from several threads at once give what they give one at a time."""
        entries = _grid()
        self.put(ledger, index, entries)
        filters = [
            Filter(),
            Filter(user_id="u1"),
            Filter(wing="beta", user_id="u2"),
            Filter(kind="memory", user_id="u1"),
            Filter(room="chat", since=datetime.fromtimestamp(EPOCH + 10 * DAY, UTC)),
        ]
        queries = [
            (vector, where)
            for vector, where in zip(synthetic_vectors(20, seed=24), filters * 4, strict=True)
        ]

        def ask(query: tuple[Vector, Filter]) -> list[str]:
            return self.ids(index.query(vector=query[0], k=6, where=query[1]))

        alone = [ask(q) for q in queries]
        with ThreadPoolExecutor(max_workers=self.readers) as pool:
            together = list(pool.map(ask, queries * 3))
        assert together == alone * 3

    def test_readers_during_a_write(self, index: VectorIndex, ledger: Ledger) -> None:
        """While one thread files entries into one wing, readers of another wing see it
        unchanged, and every answer is well formed."""
        anchor = [entry(f"a{i:02d}", v, wing="anchor") for i, v in enumerate(synthetic_vectors(8))]
        self.put(ledger, index, anchor)
        fresh = synthetic_vectors(200, seed=25)
        anchor_ids = sorted(e.id for e in anchor)

        def write() -> None:
            for start in range(0, len(fresh), 25):
                batch = [
                    entry(f"f{i:03d}", fresh[i], wing="fresh") for i in range(start, start + 25)
                ]
                self.put(ledger, index, batch)

        def read(seed: int) -> int:
            vectors = synthetic_vectors(20, seed=seed)
            for vector in vectors:
                everything = index.query(vector=vector, k=10, where=Filter())
                self.assert_well_formed(everything, 10)
                found = index.query(vector=vector, k=50, where=Filter(wing="anchor"))
                assert sorted(self.ids(found)) == anchor_ids
            return len(vectors)

        with ThreadPoolExecutor(max_workers=self.readers + 1) as pool:
            writer = pool.submit(write)
            readers = [pool.submit(read, 300 + i) for i in range(self.readers)]
            writer.result()
            assert sum(r.result() for r in readers) == 20 * self.readers
        assert index.count() == len(anchor) + len(fresh)


def _filter_fields(where: Filter) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in ("wing", "room", "user_id", "kind", "since", "until"):
        value = getattr(where, name)
        if value is not None:
            out[name] = value.date().isoformat() if isinstance(value, datetime) else value
    return out
