"""The conformance suite of ledgers: :class:`LedgerTests`.

A ledger is the palace's system of record (:class:`~palace_retrievers.ledger.Ledger`).
The suite is made of parts, one per idea: drawers with their filters, vectors and full
text (:mod:`~palace_plugins.testing.ledger_drawers`); sources, closets and the
vector-index journal (:mod:`~palace_plugins.testing.ledger_sources`); memories
(:mod:`~palace_plugins.testing.ledger_memories`); the knowledge graph
(:mod:`~palace_plugins.testing.ledger_graph`); and here, what spans them: meta and the
generation, unicode, empty answers, a batch of thousands, ``forget_user``, concurrent
readers and a second handle on the same store. The embedded SQLite ledger and the
PostgreSQL ledger pass this one suite; so must any other.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import ClassVar

import numpy as np
import pytest

from palace_plugins.testing.backends import synthetic_vectors
from palace_plugins.testing.ledger_drawers import (
    FILTERS,
    DrawerStoreTests,
    closet,
    drawer,
    grid,
    source,
)
from palace_plugins.testing.ledger_graph import GraphStoreTests, fact
from palace_plugins.testing.ledger_memories import MemoryStoreTests, event, memory
from palace_plugins.testing.ledger_sources import SourceStoreTests
from palace_retrievers.errors import InvalidQueryError
from palace_retrievers.ids import source_key
from palace_retrievers.ledger import Ledger, LedgerStats
from palace_retrievers.records import Filter

__all__ = ["LedgerTests"]


class LedgerTests(DrawerStoreTests, SourceStoreTests, MemoryStoreTests, GraphStoreTests):
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
        # A source of u1 with no drawers (an empty file): forgotten with the user too.
        empty_key = source_key("empty.md", "u1")
        ledger.replace_source(source(empty_key), [], synthetic_vectors(0), model="m")
        before = ledger.user_rows("u2")
        counts = ledger.forget_user("u1")
        assert counts == {
            "drawers": 3,
            "closets": 1,
            "sources": 2,
            "memories": 1,
            "history": 1,
            "triples": 1,
            "entities": 2,
        }
        assert set(ledger.user_rows("u1").values()) == {0}
        assert ledger.user_rows("u2") == before
        assert ledger.source_state("w", "theirs.md") is None
        assert ledger.source_state("w", empty_key) is None
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
        self.put(ledger, grid())

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
