"""The conformance suite of ledgers: :class:`LedgerTests`.

A ledger is the palace's system of record (:class:`~palace_retrievers.ledger.Ledger`):
drawers with their vectors and full text, sources, closets, the vector-index journal,
memories (:class:`~palace_plugins.testing.ledger_memories.MemoryStoreTests`) and the
knowledge graph (:class:`~palace_plugins.testing.ledger_graph.GraphStoreTests`). The
embedded SQLite ledger and the PostgreSQL ledger pass this one suite; so must any other.
Vectors are synthetic and times fixed, so every expected answer is exact.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from itertools import combinations
from typing import Any, ClassVar

import numpy as np
import pytest

from palace_plugins.testing.backends import synthetic_vectors
from palace_plugins.testing.ledger_graph import GraphStoreTests, fact
from palace_plugins.testing.ledger_memories import MemoryStoreTests, event, memory
from palace_retrievers.closets import Closet
from palace_retrievers.errors import InvalidQueryError
from palace_retrievers.ledger import Ledger, LedgerStats, SourceState
from palace_retrievers.records import Drawer, Filter

__all__ = ["LedgerTests", "closet", "drawer", "source"]

#: 2026-01-01T00:00:00Z; the suite's drawers are dated from here.
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def drawer(id: str, text: str, **fields: Any) -> Drawer:
    """A drawer in wing ``w``, room ``r``, source ``test`` unless ``fields`` say otherwise."""
    values: dict[str, Any] = {"wing": "w", "room": "r", "source": "test", "filed_at": EPOCH}
    values.update(fields)
    return Drawer(id=id, text=text, **values)


def source(key: str, content: str = "h1", *, wing: str = "w", **fields: Any) -> SourceState:
    """A mined source's state in ``wing``."""
    values: dict[str, Any] = {
        "location": f"/src/{key}",
        "content_hash": content,
        "mtime": 1.0,
        "normalize_version": 1,
    }
    values.update(fields)
    return SourceState(wing=wing, key=key, **values)


def closet(id: str, drawer_ids: Sequence[str], *, topic: str = "topic", **fields: Any) -> Closet:
    """A closet pointing to ``drawer_ids``."""
    values: dict[str, Any] = {
        "wing": "w",
        "room": "r",
        "source": "test",
        "user_id": None,
        "extractor": "suite",
    }
    values.update(fields)
    line = f"{topic}|entity|→{','.join(drawer_ids)}"
    return Closet(
        id=id, line=line, text=line.rsplit("|", 1)[0], drawer_ids=tuple(drawer_ids), **values
    )


def _grid() -> list[Drawer]:
    """Drawers over every filter field: 2 wings × 2 rooms × 3 owners × 2 kinds, a day apart."""
    out = []
    n = 0
    for wing in ("alpha", "beta"):
        for room in ("docs", "chat"):
            for owner in (None, "u1", "u2"):
                for kind in ("drawer", "memory"):
                    out.append(
                        drawer(
                            f"g{n:02d}",
                            f"grid entry {n} shared word",
                            wing=wing,
                            room=room,
                            user_id=owner,
                            kind=kind,
                            content_date=EPOCH + timedelta(days=n),
                        )
                    )
                    n += 1
    return out


def _day(n: int) -> datetime:
    return EPOCH + timedelta(days=n)


FILTERS = [
    Filter(),
    Filter(user_id="u1"),
    Filter(wing="alpha"),
    Filter(wing="beta", user_id="u2"),
    Filter(room="chat"),
    Filter(kind="memory"),
    Filter(wing="alpha", room="docs", kind="drawer"),
    Filter(since=_day(20)),
    Filter(until=_day(20)),
    Filter(since=_day(12), until=_day(30), user_id="u1"),
    Filter(wing="gamma"),
    Filter(user_id="u3"),
]


class LedgerTests(MemoryStoreTests, GraphStoreTests):
    """The contract of a ledger. Subclass it and provide the ``ledger`` fixture: an
    empty ledger, closed by the fixture after the test.

    Override ``second_ledger`` too when the ledger can be opened twice (as a second
    process opens it): another handle on the same store, which the multi-handle tests
    use to check that one handle's commits are seen by the other, whole.
    """

    #: The size of the large-batch test (a few thousand drawers in one call).
    batch_size: ClassVar[int] = 3000
    #: How many threads read at once in the concurrency tests.
    readers: ClassVar[int] = 4

    # -- fixtures -----------------------------------------------------------------------

    @pytest.fixture
    def ledger(self) -> Iterator[Ledger]:
        """Override: yield an empty ledger (and close it afterwards)."""
        raise NotImplementedError("a LedgerTests subclass must provide `ledger`")

    @pytest.fixture
    def second_ledger(self, ledger: Ledger) -> Ledger:
        """Override: another handle on ``ledger``'s store (yield it, and close it after)."""
        pytest.skip("no second handle on this ledger (override `second_ledger`)")

    # -- helpers ------------------------------------------------------------------------

    @staticmethod
    def put(ledger: Ledger, drawers: Sequence[Drawer], seed: int = 0) -> np.ndarray:
        """Upsert ``drawers`` with synthetic vectors; returns the vectors."""
        vectors = synthetic_vectors(len(drawers), seed=seed)
        ledger.upsert_drawers(drawers, vectors, model="synthetic")
        return vectors

    @staticmethod
    def found(
        ledger: Ledger, query: str, where: Filter | None = None, limit: int = 50
    ) -> list[str]:
        results = ledger.lexical(query, where=where or Filter(), limit=limit)
        keys = [(-score, i) for i, score in results]
        assert keys == sorted(keys), "lexical results are not best first, ties by id"
        assert len({i for i, _ in results}) == len(results)
        return [i for i, _ in results]

    # -- identity and meta --------------------------------------------------------------

    def test_is_a_ledger(self, ledger: Ledger) -> None:
        assert isinstance(ledger, Ledger)
        assert ledger.schema_version >= 1
        assert isinstance(ledger.generation(), int)

    def test_meta(self, ledger: Ledger) -> None:
        assert ledger.get_meta("embedding_model") is None
        ledger.set_meta("embedding_model", "all-MiniLM-L6-v2")
        ledger.set_meta("embedding_model", "模型 ü")
        ledger.set_meta("embedding_dimension", "384")
        assert ledger.get_meta("embedding_model") == "模型 ü"
        assert ledger.get_meta("embedding_dimension") == "384"

    def test_generation_changes_with_every_write(self, ledger: Ledger) -> None:
        seen = [ledger.generation()]
        self.put(ledger, [drawer("a", "one"), drawer("b", "two")])
        seen.append(ledger.generation())
        ledger.replace_closets([closet("c", ["a"])], synthetic_vectors(1), model="m", drawer_ids=[])
        seen.append(ledger.generation())
        ledger.delete_drawers(["b"])
        seen.append(ledger.generation())
        ledger.save_memories([memory("m", "likes tea")])
        seen.append(ledger.generation())
        assert seen == sorted(set(seen)), f"generation did not grow with each write: {seen}"

    # -- drawers ------------------------------------------------------------------------

    def test_drawer_round_trip(self, ledger: Ledger) -> None:
        original = Drawer(
            id="d1",
            text="数据存储 in Shanghai 🦜\nsecond line\ttabbed, \"quoted\" and 'single'\n",
            wing="北京",
            room="会议",
            source="/notes/a b.md",
            chunk_index=3,
            line_start=10,
            line_end=12,
            source_mtime=1_700_000_000.5,
            normalize_version=1,
            filed_at=datetime(2026, 3, 1, 9, 30, 15, 123456, tzinfo=UTC),
            content_date=datetime(2026, 2, 28, tzinfo=UTC),
            user_id="u1",
            kind="drawer",
            metadata={"file_name": "a.md", "tags": ["x", "ü"], "n": 1, "f": 0.5, "none": None},
        )
        self.put(ledger, [original])
        assert ledger.get_drawers(["d1"]) == [original]

    def test_get_drawers_keeps_the_order_asked(self, ledger: Ledger) -> None:
        self.put(ledger, [drawer(i, f"text {i}") for i in "abc"])
        found = ledger.get_drawers(["c", "missing", "a", "c"])
        assert [d.id for d in found] == ["c", "a", "c"]
        assert ledger.get_drawers([]) == []

    def test_upsert_is_idempotent(self, ledger: Ledger) -> None:
        drawers = [drawer(f"d{i}", f"chunk number {i}") for i in range(5)]
        vectors = self.put(ledger, drawers)
        ledger.upsert_drawers(drawers, vectors, model="synthetic")
        assert sorted(ledger.drawer_ids()) == [d.id for d in drawers]
        assert ledger.get_drawers([d.id for d in drawers]) == drawers
        assert ledger.count_vectors("drawers") == 5
        assert ledger.stats().drawers == 5
        assert self.found(ledger, "chunk") == sorted(d.id for d in drawers)

    def test_upsert_replaces_every_field(self, ledger: Ledger) -> None:
        self.put(ledger, [drawer("a", "the heron nests by the lake"), drawer("b", "other")])
        moved = drawer(
            "a",
            "the sandpiper feeds on mudflats",
            wing="w2",
            room="shore",
            user_id="u1",
            kind="memory",
            content_date=_day(40),
            metadata={"new": True},
        )
        vector = synthetic_vectors(1, seed=9)[0]
        ledger.upsert_drawers([moved], vector[None, :], model="m2")
        assert ledger.get_drawers(["a"]) == [moved]
        assert ledger.stats().drawers == 2
        assert self.found(ledger, "heron", Filter(user_id="u1")) == []
        assert self.found(ledger, "sandpiper", Filter(user_id="u1")) == ["a"]
        assert self.found(ledger, "sandpiper") == []  # no longer unowned
        assert ledger.drawer_ids(Filter(user_id="u1", wing="w2", room="shore", kind="memory")) == [
            "a"
        ]
        np.testing.assert_allclose(ledger.drawer_vectors(["a"])["a"], vector, rtol=1e-6)

    def test_delete_drawers(self, ledger: Ledger) -> None:
        self.put(ledger, [drawer(i, f"text {i}") for i in "abc"])
        ledger.replace_closets(
            [closet("c1", ["a", "b"])], synthetic_vectors(1), model="m", drawer_ids=[]
        )
        assert ledger.delete_drawers(["b", "zzz", "b"]) == ["b"]
        assert ledger.delete_drawers([]) == []
        assert sorted(ledger.drawer_ids()) == ["a", "c"]
        assert ledger.get_drawers(["b"]) == []
        assert sorted(self.found(ledger, "text")) == ["a", "c"]
        assert sorted(ledger.drawer_vectors(["a", "b", "c"])) == ["a", "c"]
        assert ledger.vector_table("drawers").ids == ["a", "c"]
        assert ledger.closet_pointers(["c1"]) == {"c1": ["a"]}

    @pytest.mark.parametrize("where", FILTERS, ids=repr)
    def test_filters(self, ledger: Ledger, where: Filter) -> None:
        grid = _grid()
        self.put(ledger, grid)
        expected = sorted(d.id for d in grid if where.matches(d))
        assert sorted(ledger.drawer_ids(where)) == expected
        assert sorted(self.found(ledger, "shared word", where)) == expected

    def test_every_combination_of_filter_fields(self, ledger: Ledger) -> None:
        grid = _grid()
        self.put(ledger, grid)
        values: dict[str, Any] = {
            "wing": "beta",
            "room": "docs",
            "user_id": "u2",
            "kind": "memory",
            "since": _day(9),
            "until": _day(40),
        }
        for size in range(len(values) + 1):
            for names in combinations(values, size):
                where = Filter(**{name: values[name] for name in names})
                expected = sorted(d.id for d in grid if where.matches(d))
                assert sorted(ledger.drawer_ids(where)) == expected, f"filter {names}"
        assert ledger.drawer_ids(Filter(**values)) == ["g17"]

    def test_filter_values_are_taken_literally(self, ledger: Ledger) -> None:
        wings = ["O'Brien", 'say "hi"', "100%", "a_b", "axb", "a\\b", "a%", "{$ne: 1}", " "]
        self.put(ledger, [drawer(f"lit{i}", "literal", wing=w) for i, w in enumerate(wings)])
        for i, wing in enumerate(wings):
            assert ledger.drawer_ids(Filter(wing=wing)) == [f"lit{i}"], wing
            assert self.found(ledger, "literal", Filter(wing=wing)) == [f"lit{i}"]
        assert ledger.drawer_ids(Filter(wing="%")) == []

    def test_user_partition_is_exact(self, ledger: Ledger) -> None:
        owners = [None, "u1", "u2"]
        drawers = [
            drawer(f"{owner or 'nobody'}-{i}", "the backup schedule", user_id=owner, chunk_index=i)
            for owner in owners
            for i in range(2)
        ]
        self.put(ledger, drawers)
        for owner in owners:
            mine = sorted(d.id for d in drawers if d.user_id == owner)
            where = Filter(user_id=owner)
            assert sorted(ledger.drawer_ids(where)) == mine
            assert sorted(self.found(ledger, "backup", where)) == mine
            shown = ledger.source_drawers(wing="w", source="test", where=where)
            assert [d.id for d in shown] == mine
            assert ledger.wing_counts(user_id=owner) == {"w": {"r": 2}}
        assert ledger.drawer_ids(Filter(user_id="u3")) == []
        assert self.found(ledger, "backup", Filter(user_id="u3")) == []
        assert ledger.wing_counts(user_id="u3") == {}

    def test_source_drawers_in_chunk_order(self, ledger: Ledger) -> None:
        self.put(
            ledger,
            [
                drawer("c2", "third", source="notes.md", chunk_index=2),
                drawer("c0", "first", source="notes.md", chunk_index=0),
                drawer("c1", "second", source="notes.md", chunk_index=1, kind="memory"),
                drawer("x0", "elsewhere", source="other.md"),
            ],
        )
        found = ledger.source_drawers(wing="w", source="notes.md", where=Filter())
        assert [d.id for d in found] == ["c0", "c1", "c2"]
        drawers_only = ledger.source_drawers(
            wing="w", source="notes.md", where=Filter(kind="drawer")
        )
        assert [d.id for d in drawers_only] == ["c0", "c2"]
        assert ledger.source_drawers(wing="v", source="notes.md", where=Filter()) == []

    def test_iter_drawers_is_stable_and_complete(self, ledger: Ledger) -> None:
        ids = [f"d{i:03d}" for i in range(25)]
        self.put(ledger, [drawer(i, f"text {i}") for i in ids])
        batches = list(ledger.iter_drawers(batch_size=10))
        assert [len(b) for b in batches] == [10, 10, 5]
        order = [d.id for b in batches for d in b]
        assert sorted(order) == ids
        assert [d.id for b in ledger.iter_drawers(batch_size=7) for d in b] == order

    # -- vectors ------------------------------------------------------------------------

    def test_vectors(self, ledger: Ledger) -> None:
        vectors = self.put(
            ledger,
            [
                drawer("a", "one", wing="w1", room="r1", content_date=EPOCH, source="s1"),
                drawer("b", "two", wing="w2", room="r2", user_id="u1", kind="memory"),
            ],
        )
        assert ledger.count_vectors("drawers") == 2
        table = ledger.vector_table("drawers")
        assert sorted(table.ids) == ["a", "b"]
        a, b = table.ids.index("a"), table.ids.index("b")
        assert table.matrix.dtype == np.float32
        np.testing.assert_allclose(table.matrix[a], vectors[0], rtol=1e-6)
        np.testing.assert_allclose(table.matrix[b], vectors[1], rtol=1e-6)
        assert (table.wing[a], table.room[a], table.user_id[a], table.kind[a]) == (
            "w1",
            "r1",
            "",
            "drawer",
        )
        assert (table.user_id[b], table.kind[b]) == ("u1", "memory")
        assert table.timestamp[a] == EPOCH.timestamp()
        entries = [e for batch in ledger.iter_entries("drawers", batch_size=1) for e in batch]
        assert sorted(e.id for e in entries) == ["a", "b"]
        (entry,) = ledger.index_entries("drawers", ["a", "unknown"])
        assert (entry.id, entry.wing, entry.source, entry.timestamp) == (
            "a",
            "w1",
            "s1",
            EPOCH.timestamp(),
        )
        np.testing.assert_allclose(entry.vector, vectors[0], rtol=1e-6)
        fresh = synthetic_vectors(1, seed=5)
        ledger.set_vectors(["a"], fresh, model="new")
        np.testing.assert_allclose(ledger.drawer_vectors(["a"])["a"], fresh[0], rtol=1e-6)

    def test_vector_tables_of_each_collection(self, ledger: Ledger) -> None:
        self.put(ledger, [drawer("a", "one"), drawer("b", "two")])
        ledger.replace_closets([closet("c", ["a"])], synthetic_vectors(1), model="m", drawer_ids=[])
        ledger.save_memories(
            [memory("active", "x"), memory("gone", "y", status="superseded", superseded_by="x")],
            vectors={"active": synthetic_vectors(1)[0], "gone": synthetic_vectors(1)[0]},
            model="m",
        )
        assert ledger.count_vectors("drawers") == 2
        assert ledger.count_vectors("closets") == 1
        assert ledger.count_vectors("memories") == 1
        closets = ledger.vector_table("closets")
        assert closets.ids == ["c"]
        assert list(closets.kind) == ["closet"]
        assert ledger.vector_table("memories").ids == ["active"]
        assert [e.id for b in ledger.iter_entries("memories") for e in b] == ["active"]

    # -- sources ------------------------------------------------------------------------

    def test_replace_source(self, ledger: Ledger) -> None:
        first = [drawer(i, f"chunk {i}", chunk_index=n) for n, i in enumerate("abc")]
        state = source("f.md", root="/src", plugin="files")
        assert ledger.replace_source(state, first, synthetic_vectors(3), model="m") == []
        recorded = ledger.source_state("w", "f.md")
        assert recorded is not None
        assert (recorded.content_hash, recorded.drawer_count, recorded.root, recorded.plugin) == (
            "h1",
            3,
            "/src",
            "files",
        )
        second = [drawer("a", "chunk a"), drawer("d", "chunk d")]
        state2 = source("f.md", "h2", root="/src", plugin="files")
        removed = ledger.replace_source(state2, second, synthetic_vectors(2), model="m")
        assert sorted(removed) == ["b", "c"]
        assert sorted(ledger.drawer_ids()) == ["a", "d"]
        assert ledger.source_states("w") == {"f.md": ledger.source_state("w", "f.md")}
        assert ledger.source_states("w")["f.md"].content_hash == "h2"
        assert ledger.source_states("elsewhere") == {}
        (root,) = ledger.mined_roots()
        assert (root.wing, root.root, root.plugin, root.sources, root.drawers) == (
            "w",
            "/src",
            "files",
            1,
            2,
        )
        ledger.touch_source(source("f.md", "h2", mtime=9.5, location="/moved/f.md"))
        touched = ledger.source_state("w", "f.md")
        assert touched is not None
        assert (touched.mtime, touched.location, touched.root) == (9.5, "/moved/f.md", "/src")
        assert ledger.stats().sources == 1

    def test_replace_source_is_atomic(self, ledger: Ledger) -> None:
        old = [drawer(i, f"old chunk {i}") for i in "abc"]
        ledger.replace_source(source("f.md"), old, synthetic_vectors(3), model="m")
        generation = ledger.generation()
        new = [drawer("x", "new chunk x"), drawer("y", "new chunk y")]
        with pytest.raises(ValueError, match="vectors"):
            ledger.replace_source(source("f.md", "h2"), new, synthetic_vectors(1), model="m")
        assert sorted(ledger.drawer_ids()) == ["a", "b", "c"]
        recorded = ledger.source_state("w", "f.md")
        assert recorded is not None
        assert recorded.content_hash == "h1"
        assert ledger.generation() == generation
        assert sorted(self.found(ledger, "old")) == ["a", "b", "c"]
        assert self.found(ledger, "new") == []

    def test_file_sources_files_drawers_and_closets_at_once(self, ledger: Ledger) -> None:
        one = [drawer(f"1{i}", f"first source chunk {i}", chunk_index=i) for i in range(3)]
        two = [drawer(f"2{i}", f"second source chunk {i}", chunk_index=i) for i in range(2)]
        closets = [closet("k1", ["10", "11"]), closet("k2", ["12", "20", "21"])]
        removed = ledger.file_sources(
            [(source("one"), one), (source("two"), two)],
            synthetic_vectors(5),
            closets,
            synthetic_vectors(2, seed=1),
            model="m",
        )
        assert removed == []
        assert len(ledger.drawer_ids()) == 5
        assert ledger.closet_pointers(["k1", "k2"]) == {
            "k1": ["10", "11"],
            "k2": ["20", "21", "12"],
        }
        # Mining "one" again with one chunk fewer replaces the closets over the drawers
        # it files; a closet left pointing only to another source's drawers stays.
        shorter = one[:2]
        removed = ledger.file_sources(
            [(source("one", "h2"), shorter)],
            synthetic_vectors(2),
            [closet("k3", ["10", "11"])],
            synthetic_vectors(1),
            model="m",
        )
        assert removed == ["12"]
        pointers = ledger.closet_pointers(["k1", "k2", "k3"])
        assert pointers == {"k2": ["20", "21"], "k3": ["10", "11"]}
        assert ledger.stats().closets == 2

    def test_file_sources_is_atomic(self, ledger: Ledger) -> None:
        ledger.replace_source(source("one"), [drawer("a", "kept")], synthetic_vectors(1), model="m")
        generation = ledger.generation()
        with pytest.raises(ValueError, match="vectors"):
            ledger.file_sources(
                [(source("one", "h2"), [drawer("b", "lost")]), (source("two"), [drawer("c", "x")])],
                synthetic_vectors(2),
                [closet("k", ["b"])],
                synthetic_vectors(2),  # one closet, two vectors
                model="m",
            )
        assert ledger.drawer_ids() == ["a"]
        assert ledger.source_state("w", "two") is None
        state = ledger.source_state("w", "one")
        assert state is not None
        assert state.content_hash == "h1"
        assert ledger.generation() == generation
        with pytest.raises(ValueError, match="vectors"):
            ledger.file_sources(
                [(source("two"), [drawer("c", "x")])],
                synthetic_vectors(2),
                [],
                synthetic_vectors(0),
                model="m",
            )

    def test_delete_sources(self, ledger: Ledger) -> None:
        ledger.replace_source(
            source("gone"), [drawer("a", "x"), drawer("b", "y")], synthetic_vectors(2), model="m"
        )
        ledger.replace_source(source("kept"), [drawer("c", "z")], synthetic_vectors(1), model="m")
        ledger.replace_closets(
            [closet("k1", ["a", "b"]), closet("k2", ["b", "c"])],
            synthetic_vectors(2),
            model="m",
            drawer_ids=[],
        )
        assert ledger.delete_sources("w", ["gone", "gone", "never"]) == 2
        assert ledger.source_state("w", "gone") is None
        assert ledger.drawer_ids() == ["c"]
        assert ledger.closet_pointers(["k1", "k2"]) == {"k2": ["c"]}
        assert [c.id for batch in ledger.iter_closets() for c in batch] == ["k2"]
        assert ledger.delete_sources("w", []) == 0
        assert ledger.delete_sources("other-wing", ["kept"]) == 0
        assert ledger.drawer_ids() == ["c"]

    # -- closets ------------------------------------------------------------------------

    def test_replace_closets(self, ledger: Ledger) -> None:
        self.put(
            ledger,
            [
                drawer("b", "two", chunk_index=1),
                drawer("a", "one", chunk_index=0),
                drawer("c", "three", chunk_index=2),
            ],
        )
        filed = [
            closet("k1", ["b", "a"], topic="Birds 鸟"),
            closet("k2", ["c", "missing"], user_id="u1"),
            closet("k3", ["missing"]),
        ]
        vectors = synthetic_vectors(3, seed=2)
        assert ledger.replace_closets(filed, vectors, model="m", drawer_ids=[]) == []
        assert ledger.closet_pointers(["k1", "k2", "k3"]) == {"k1": ["a", "b"], "k2": ["c"]}
        assert ledger.closet_lines(["k1", "k3"]) in ({"k1": filed[0].line}, {})
        closets = {c.id: c for batch in ledger.iter_closets(batch_size=1) for c in batch}
        assert sorted(closets) == ["k1", "k2"]
        assert closets["k1"].text == "Birds 鸟|entity"
        assert (closets["k2"].user_id, closets["k2"].extractor, closets["k2"].source) == (
            "u1",
            "suite",
            "test",
        )
        np.testing.assert_allclose(
            ledger.vector_table("closets").matrix[ledger.vector_table("closets").ids.index("k1")],
            vectors[0],
            rtol=1e-6,
        )
        # Filing the closets of drawer "a" again removes every closet pointing to it.
        removed = ledger.replace_closets(
            [closet("k4", ["a"])], synthetic_vectors(1), model="m", drawer_ids=["a"]
        )
        assert removed == ["k1"]
        refiled = ledger.replace_closets(
            [closet("k4", ["a"])], synthetic_vectors(1), model="m", drawer_ids=["a"]
        )
        assert refiled == []
        assert sorted(ledger.closet_pointers(["k1", "k2", "k4"])) == ["k2", "k4"]
        ledger.set_closet_vectors(["k4"], synthetic_vectors(1, seed=8), model="m2")
        table = ledger.vector_table("closets")
        np.testing.assert_allclose(
            table.matrix[table.ids.index("k4")], synthetic_vectors(1, seed=8)[0], rtol=1e-6
        )

    def test_prune_closets(self, ledger: Ledger) -> None:
        self.put(ledger, [drawer("a", "one"), drawer("b", "two")])
        ledger.replace_closets(
            [closet("k1", ["a"]), closet("k2", ["a", "b"])],
            synthetic_vectors(2),
            model="m",
            drawer_ids=[],
        )
        ledger.delete_drawers(["a"])
        assert ledger.prune_closets() == ["k1"]
        assert ledger.prune_closets() == []
        assert ledger.closet_pointers(["k1", "k2"]) == {"k2": ["b"]}

    # -- the vector-index journal -------------------------------------------------------

    def test_journal_records_every_change(self, ledger: Ledger) -> None:
        assert ledger.pending_index("drawers") == []
        self.put(ledger, [drawer("a", "one"), drawer("b", "two"), drawer("c", "three")])
        assert sorted(ledger.pending_index("drawers")) == ["a", "b", "c"]
        assert len(ledger.pending_index("drawers", limit=2)) == 2
        ledger.clear_pending("drawers", ["a"])
        assert sorted(ledger.pending_index("drawers")) == ["b", "c"]
        ledger.clear_pending("drawers")
        assert ledger.pending_index("drawers") == []
        ledger.delete_drawers(["b"])
        assert ledger.pending_index("drawers") == ["b"]
        assert ledger.index_entries("drawers", ["b"]) == []  # so the index drops it
        ledger.clear_pending("drawers", ["b"])
        ledger.set_vectors(["a"], synthetic_vectors(1, seed=3), model="m")
        assert ledger.pending_index("drawers") == ["a"]
        ledger.replace_closets([closet("k", ["c"])], synthetic_vectors(1), model="m", drawer_ids=[])
        assert ledger.pending_index("closets") == ["k"]
        ledger.clear_pending("closets")
        assert ledger.pending_index("drawers") == ["a"]  # collections are separate
        ledger.delete_drawers(["c"])
        ledger.prune_closets()
        assert ledger.pending_index("closets") == ["k"]

    def test_a_failed_write_journals_nothing(self, ledger: Ledger) -> None:
        with pytest.raises(ValueError, match="vectors"):
            ledger.upsert_drawers([drawer("a", "x")], synthetic_vectors(2), model="m")
        assert ledger.pending_index("drawers") == []
        assert ledger.drawer_ids() == []
        self.put(ledger, [drawer("a", "still writable")])
        assert ledger.drawer_ids() == ["a"]

    # -- full text ----------------------------------------------------------------------

    def test_lexical_finds_english_words(self, ledger: Ledger) -> None:
        self.put(
            ledger,
            [
                drawer("en", "We moved the production database to PostgreSQL 15 in March."),
                drawer("zh", "中国用户的数据存储在阿里云上海区域，使用独立的数据库。"),
                drawer("mixed", "The Spoon-billed Sandpiper (勺嘴鹬) is critically endangered."),
                drawer("other", "Bashir owns the iOS release; he lives in Zürich."),
            ],
        )
        assert self.found(ledger, "which database?") == ["en"]
        assert self.found(ledger, "POSTGRESQL") == ["en"]
        assert self.found(ledger, "postgresql 15") == ["en"]
        assert self.found(ledger, "billed sandpiper") == ["mixed"]
        assert self.found(ledger, "zurich") == ["other"]
        assert self.found(ledger, "zebra") == []
        assert self.found(ledger, "?!. ,;") == []
        for hostile in ('"; DROP TABLE drawers; --', "' OR 1=1 --", "a & b | !c", "NEAR(x y)"):
            assert isinstance(ledger.lexical(hostile, where=Filter(), limit=5), list)
        assert ledger.stats().drawers == 4

    def test_lexical_finds_chinese(self, ledger: Ledger) -> None:
        self.put(
            ledger,
            [
                drawer("zh", "中国用户的数据存储在阿里云上海区域，使用独立的数据库。"),
                drawer("mixed", "The Spoon-billed Sandpiper (勺嘴鹬) is critically endangered."),
                drawer("other", "我们下周三开会讨论预算"),
            ],
        )
        assert self.found(ledger, "数据存储在哪里")[0] == "zh"
        assert self.found(ledger, "勺嘴鹬") == ["mixed"]
        assert self.found(ledger, "讨论预算") == ["other"]
        assert self.found(ledger, "火星探测器") == []

    def test_lexical_ranks_more_matches_first(self, ledger: Ledger) -> None:
        self.put(
            ledger,
            [
                drawer("one", "a heron stood still"),
                drawer("all", "the heron nests by the lake in the reeds"),
                drawer("none", "nothing about birds"),
            ],
        )
        results = ledger.lexical("heron lake reeds", where=Filter(), limit=10)
        assert [i for i, _ in results] == ["all", "one"]
        assert all(score > 0 for _, score in results)

    def test_lexical_limit(self, ledger: Ledger) -> None:
        self.put(ledger, [drawer(f"d{i:02d}", f"common word number {i}") for i in range(30)])
        assert len(self.found(ledger, "common", limit=5)) == 5
        assert len(self.found(ledger, "common", limit=100)) == 30
        assert ledger.lexical("common", where=Filter(), limit=0) == []

    # -- everything else ----------------------------------------------------------------

    def test_unicode_everywhere(self, ledger: Ledger) -> None:
        drawers = [
            drawer("ü-1", "Grüße aus Köln", wing="北京", room="会议 ☕", user_id="użytkownik"),
            drawer("emoji-🦜", "🦜 parrots talk", wing="Zürich", room="🐦 birds"),
            drawer("ü-3", "naïve café", wing="北京", room="会议 ☕", user_id="użytkownik"),
        ]
        self.put(ledger, drawers)
        assert ledger.get_drawers(["emoji-🦜", "ü-1", "ü-3"]) == [
            drawers[1],
            drawers[0],
            drawers[2],
        ]
        where = Filter(wing="北京", room="会议 ☕", user_id="użytkownik")
        assert sorted(ledger.drawer_ids(where)) == ["ü-1", "ü-3"]
        assert ledger.drawer_ids(Filter(room="🐦 birds")) == ["emoji-🦜"]
        assert self.found(ledger, "Köln", where) == ["ü-1"]
        assert self.found(ledger, "cafe naive", where) == ["ü-3"]
        assert self.found(ledger, "parrots") == ["emoji-🦜"]
        assert ledger.wing_counts(user_id="użytkownik") == {"北京": {"会议 ☕": 2}}

    def test_an_empty_ledger_answers_empty(self, ledger: Ledger) -> None:
        ledger.upsert_drawers([], np.zeros((0, 16), dtype=np.float32), model="m")
        assert ledger.get_drawers(["x"]) == []
        assert ledger.drawer_ids() == []
        assert list(ledger.iter_drawers()) == []
        assert ledger.vector_table("drawers").ids == []
        assert ledger.count_vectors("closets") == 0
        assert list(ledger.iter_entries("memories")) == []
        assert ledger.index_entries("drawers", ["x"]) == []
        assert ledger.drawer_vectors(["x"]) == {}
        assert self.found(ledger, "anything") == []
        assert ledger.source_drawers(wing="w", source="s", where=Filter()) == []
        assert ledger.source_states("w") == {}
        assert ledger.source_state("w", "k") is None
        assert ledger.mined_roots() == []
        assert ledger.closet_pointers(["x"]) == {}
        assert list(ledger.iter_closets()) == []
        assert ledger.prune_closets() == []
        assert ledger.delete_drawers(["x"]) == []
        assert ledger.stats() == LedgerStats(0, 0, 0, 0, {}, {})
        assert ledger.get_memories(["x"]) == []
        assert ledger.list_memories(user_id=None) == []
        assert list(ledger.iter_memories()) == []
        assert ledger.count_memories() == {}
        assert ledger.lexical_memories("x", user_id=None) == []
        assert ledger.predecessors(["x"]) == {}
        assert ledger.memory_history("x") == []
        assert ledger.delete_memories(["x"]) == 0
        assert ledger.triples_about("x", user_id=None, as_of=None) == []
        assert ledger.graph_stats(user_id=None).triples == 0
        assert ledger.user_rows("u1") == dict.fromkeys(
            ("drawers", "closets", "memories", "history", "triples", "entities"), 0
        )

    def test_a_batch_of_thousands(self, ledger: Ledger) -> None:
        n = self.batch_size
        wings = ("north", "south", "east")
        drawers = [
            drawer(f"b{i:05d}", f"batch drawer token{i} in the {wings[i % 3]}", wing=wings[i % 3])
            for i in range(n)
        ]
        vectors = self.put(ledger, drawers)
        assert ledger.stats().drawers == n
        assert ledger.count_vectors("drawers") == n
        assert len(ledger.drawer_ids(Filter(wing="east"))) == len(range(2, n, 3))
        assert [d.id for d in ledger.get_drawers([d.id for d in drawers])] == [
            d.id for d in drawers
        ]
        assert self.found(ledger, f"token{n - 1}") == [f"b{n - 1:05d}"]
        table = ledger.vector_table("drawers")
        assert table.matrix.shape == (n, vectors.shape[1])
        assert sum(len(b) for b in ledger.iter_drawers(batch_size=500)) == n
        gone = [d.id for i, d in enumerate(drawers) if i % 3]
        assert len(ledger.delete_drawers(gone)) == len(gone)
        assert sorted(ledger.drawer_ids()) == [d.id for i, d in enumerate(drawers) if not i % 3]
        assert len(ledger.pending_index("drawers", limit=10 * n)) == n

    def test_stats(self, ledger: Ledger) -> None:
        ledger.replace_source(
            source("f.md"), [drawer("a", "x", room="docs")], synthetic_vectors(1), model="m"
        )
        self.put(ledger, [drawer("b", "y", room="chat"), drawer("c", "z", wing="v")])
        ledger.replace_closets([closet("k", ["a"])], synthetic_vectors(1), model="m", drawer_ids=[])
        ledger.save_memories([memory("m", "x"), memory("n", "y", status="archived")])
        stats = ledger.stats()
        assert (stats.drawers, stats.sources, stats.closets, stats.embedded) == (3, 1, 1, 3)
        assert stats.wings == {"v": {"r": 1}, "w": {"chat": 1, "docs": 1}}
        assert dict(stats.memories) == {"active": 1, "archived": 1}

    def test_forget_user(self, ledger: Ledger) -> None:
        ledger.replace_source(
            source("theirs.md"),
            [drawer("t1", "u1 notes", user_id="u1"), drawer("t2", "more u1", user_id="u1")],
            synthetic_vectors(2),
            model="m",
        )
        ledger.replace_source(
            source("shared.md"),
            [drawer("s1", "u1 part", user_id="u1"), drawer("s2", "u2 part", user_id="u2")],
            synthetic_vectors(2),
            model="m",
        )
        self.put(ledger, [drawer("o", "unowned"), drawer("v", "u2 only", user_id="u2")], seed=1)
        ledger.replace_closets(
            [closet("k1", ["t1"], user_id="u1"), closet("k2", ["v"], user_id="u2")],
            synthetic_vectors(2),
            model="m",
            drawer_ids=[],
        )
        ledger.save_memories(
            [memory("m1", "u1 memory", user_id="u1"), memory("m2", "u2 memory", user_id="u2")],
            events=[event("m1", "add", user_id="u1"), event("m2", "add", user_id="u2")],
        )
        ledger.add_triple(fact("Lee", "likes", "tea", user_id="u1"), single_valued=False)
        ledger.add_triple(fact("Lee", "likes", "tea", user_id="u2"), single_valued=False)
        before = ledger.user_rows("u2")
        counts = ledger.forget_user("u1")
        assert counts == {
            "drawers": 3,
            "closets": 1,
            "sources": 1,
            "memories": 1,
            "history": 1,
            "triples": 1,
            "entities": 2,
        }
        assert set(ledger.user_rows("u1").values()) == {0}
        assert ledger.user_rows("u2") == before
        assert ledger.source_state("w", "theirs.md") is None
        assert ledger.source_state("w", "shared.md") is not None
        assert sorted(ledger.drawer_ids(Filter(user_id="u2"))) == ["s2", "v"]
        assert ledger.drawer_ids(Filter()) == ["o"]
        assert sorted(ledger.pending_index("drawers")) == ["o", "s1", "s2", "t1", "t2", "v"]
        assert ledger.forget_user("u1") == dict.fromkeys(counts, 0)
        with pytest.raises(InvalidQueryError):
            ledger.forget_user("")

    # -- several readers, several handles -------------------------------------------------

    def test_concurrent_readers(self, ledger: Ledger) -> None:
        """Reads from several threads at once give what they give one at a time."""
        self.put(ledger, _grid())

        def read(where: Filter) -> tuple[list[str], list[str], int]:
            return (
                sorted(ledger.drawer_ids(where)),
                self.found(ledger, "grid shared", where),
                len(ledger.get_drawers(ledger.drawer_ids(where))),
            )

        alone = [read(where) for where in FILTERS]
        with ThreadPoolExecutor(max_workers=self.readers) as pool:
            together = list(pool.map(read, FILTERS * 3))
        assert together == alone * 3

    def test_readers_see_a_write_whole(self, ledger: Ledger) -> None:
        """While a writer replaces a source's drawers again and again, a reader sees
        the old set or the new one, never a mix or a half."""
        sets = {
            flavour: [drawer(f"{flavour}{i:02d}", f"{flavour} chunk {i}") for i in range(20)]
            for flavour in ("old", "new")
        }
        expected = {flavour: sorted(d.id for d in ds) for flavour, ds in sets.items()}
        ledger.replace_source(source("s"), sets["old"], synthetic_vectors(20), model="m")

        def write() -> None:
            for n in range(10):
                flavour = "new" if n % 2 == 0 else "old"
                ledger.replace_source(
                    source("s", str(n)), sets[flavour], synthetic_vectors(20), model="m"
                )

        def read(_: int) -> int:
            for _ in range(25):
                seen = sorted(ledger.drawer_ids(Filter(wing="w")))
                assert seen in expected.values(), f"a reader saw half a write: {seen}"
            return 25

        with ThreadPoolExecutor(max_workers=self.readers + 1) as pool:
            writer = pool.submit(write)
            readers = list(pool.map(read, range(self.readers)))
            writer.result()
        assert sum(readers) == 25 * self.readers

    def test_a_second_handle_sees_every_commit(self, ledger: Ledger, second_ledger: Ledger) -> None:
        generation = second_ledger.generation()
        self.put(ledger, [drawer("a", "written by the first handle")])
        assert [d.text for d in second_ledger.get_drawers(["a"])] == ["written by the first handle"]
        assert second_ledger.generation() > generation, "another process's caches must expire"
        assert self.found(second_ledger, "first handle") == ["a"]
        second_ledger.save_memories([memory("m", "remembered by the second")])
        assert [m.id for m in ledger.list_memories(user_id=None)] == ["m"]
        # The journal is shared: what one writer left pending, the next one replays.
        assert sorted(second_ledger.pending_index("drawers")) == ["a"]
        second_ledger.clear_pending("drawers")
        assert ledger.pending_index("drawers") == []
        ledger.set_meta("embedding_model", "m1")
        assert second_ledger.get_meta("embedding_model") == "m1"

    def test_two_handles_write_at_once(self, ledger: Ledger, second_ledger: Ledger) -> None:
        def write(handle: Ledger, prefix: str) -> None:
            for n in range(8):
                batch = [drawer(f"{prefix}{n}-{i}", f"{prefix} batch {n}") for i in range(5)]
                handle.upsert_drawers(batch, synthetic_vectors(5, seed=n), model="m")
                handle.replace_source(
                    source("shared", f"{prefix}{n}"),
                    [drawer("shared-0", f"{prefix} wrote last")],
                    synthetic_vectors(1),
                    model="m",
                )

        with ThreadPoolExecutor(max_workers=2) as pool:
            done = [pool.submit(write, ledger, "p"), pool.submit(write, second_ledger, "q")]
            for future in done:
                future.result()
        assert len(ledger.drawer_ids()) == 2 * 8 * 5 + 1
        state = second_ledger.source_state("w", "shared")
        assert state is not None
        assert state.drawer_count == 1
