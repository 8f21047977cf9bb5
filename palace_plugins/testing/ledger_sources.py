"""The source, closet and journal part of the ledger suite: :class:`SourceStoreTests`.

Mixed into :class:`~palace_plugins.testing.ledger.LedgerTests`; it needs the suite's
``ledger`` fixture. Mined sources and their atomic replacement, closets and their
pointers, and the journal of ids the vector index has yet to take in.
"""

from __future__ import annotations

import numpy as np
import pytest

from palace_plugins.testing.backends import synthetic_vectors
from palace_plugins.testing.ledger_drawers import LedgerSuite, closet, drawer, source
from palace_plugins.testing.ledger_graph import fact
from palace_retrievers.ids import source_key
from palace_retrievers.ledger import Ledger

__all__ = ["SourceStoreTests"]


class SourceStoreTests(LedgerSuite):
    """The contract of a ledger's sources, closets and vector-index journal."""

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

    def test_triples_go_with_the_drawers_they_were_read_from(self, ledger: Ledger) -> None:
        ledger.replace_source(
            source("f.md"), [drawer("a", "a"), drawer("b", "b")], synthetic_vectors(2), model="m"
        )
        ledger.replace_source(
            source("g.md"), [drawer("c", "c"), drawer("e", "e")], synthetic_vectors(2), model="m"
        )
        for name, drawer_id in (("a", "a"), ("b", "b"), ("c", "c"), ("e", "e"), ("x", None)):
            ledger.add_triple(
                fact("Kim", "likes", name, source_drawer=drawer_id), single_valued=False
            )

        def left() -> list[str]:
            return sorted(t.object for t in ledger.triples_about("kim", user_id=None, as_of=None))

        # A replacement drops the triples of the drawers it removes, a failed one none.
        with pytest.raises(ValueError, match="vectors"):
            ledger.replace_source(
                source("f.md", "h2"), [drawer("a", "a")], synthetic_vectors(2), model="m"
            )
        assert left() == ["a", "b", "c", "e", "x"]
        ledger.file_sources(
            [(source("f.md", "h2"), [drawer("a", "a")])],
            synthetic_vectors(1),
            [],
            synthetic_vectors(0),
            model="m",
        )
        assert left() == ["a", "c", "e", "x"]
        assert ledger.delete_drawers(["c"]) == ["c"]
        assert left() == ["a", "e", "x"]
        assert ledger.delete_sources("w", ["g.md"]) == 1
        assert left() == ["a", "x"]

    def test_an_owners_bare_keyed_source_gives_way(self, ledger: Ledger) -> None:
        """A source mined by alice before keys named owners is replaced by her keyed one,
        in the same transaction; a bare-keyed source holding anyone else's is kept."""
        alice = source_key("f.md", "alice")
        ledger.replace_source(
            source("f.md"), [drawer("a", "a", user_id="alice")], synthetic_vectors(1), model="m"
        )
        ledger.replace_source(
            source("g.md"), [drawer("b", "b", user_id="bob")], synthetic_vectors(1), model="m"
        )
        ledger.add_triple(fact("Kim", "likes", "a", source_drawer="a"), single_valued=False)
        removed = ledger.replace_source(
            source(alice), [drawer("a2", "a", user_id="alice")], synthetic_vectors(1), model="m"
        )
        assert removed == ["a"]
        assert sorted(ledger.source_states("w")) == sorted([alice, "g.md"])
        assert ledger.triples_about("kim", user_id=None, as_of=None) == []
        ledger.replace_source(
            source(source_key("g.md", "alice")),
            [drawer("b2", "b", user_id="alice")],
            synthetic_vectors(1),
            model="m",
        )
        assert sorted(ledger.drawer_ids()) == ["a2", "b", "b2"]
        assert "g.md" in ledger.source_states("w")

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
