"""The drawer part of the ledger suite: :class:`DrawerStoreTests`, and the suite's samples.

Mixed into :class:`~palace_plugins.testing.ledger.LedgerTests`; it needs the suite's
``ledger`` fixture. Drawers, their filters, vectors and full text; vectors are synthetic
and times fixed, so every expected answer is exact.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from itertools import combinations
from typing import Any

import numpy as np
import pytest

from palace_plugins.testing.backends import synthetic_vectors
from palace_plugins.testing.ledger_memories import memory
from palace_retrievers.closets import Closet
from palace_retrievers.ledger import Ledger, SourceState
from palace_retrievers.records import Drawer, Filter

__all__ = [
    "EPOCH",
    "FILTERS",
    "DrawerStoreTests",
    "LedgerSuite",
    "closet",
    "drawer",
    "grid",
    "source",
]

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


def grid() -> list[Drawer]:
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


class LedgerSuite:
    """What every part of the ledger suite shares: filing drawers, reading full text."""

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


class DrawerStoreTests(LedgerSuite):
    """The contract of a ledger's drawers: fields, upserts, deletes, filters, vectors,
    full text."""

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
        drawers = grid()
        self.put(ledger, drawers)
        expected = sorted(d.id for d in drawers if where.matches(d))
        assert sorted(ledger.drawer_ids(where)) == expected
        assert sorted(self.found(ledger, "shared word", where)) == expected

    def test_every_combination_of_filter_fields(self, ledger: Ledger) -> None:
        drawers = grid()
        self.put(ledger, drawers)
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
                expected = sorted(d.id for d in drawers if where.matches(d))
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

    def test_lexical_finds_chinese_words_of_two_characters(self, ledger: Ledger) -> None:
        """Most Chinese words are two characters: a text sharing only such words with
        the query is found by its character pairs (a trigram index never finds it), and
        one sharing a word written against Chinese by that word."""
        self.put(
            ledger,
            [
                drawer("mango", "我对芒果过敏，不能吃芒果干"),
                drawer("weight", "体重：65kg"),
                drawer("other", "我们下周三开会讨论预算"),
                drawer("exam", "在学PMP，准备考证"),
            ],
        )
        assert self.found(ledger, "芒果") == ["mango"]
        # a word written against a run of Chinese is a word of its own
        assert self.found(ledger, "PMP已经考过了") == ["exam"]
        assert self.found(ledger, "the PMP exam") == ["exam"]
        assert self.found(ledger, "过年胖了，现在的体重68公斤") == ["weight"]
        assert self.found(ledger, "预算表") == ["other"]
        assert self.found(ledger, "芒") == []  # one character is no pair
        assert self.found(ledger, "果过") == ["mango"]
        assert self.found(ledger, "体 重") == []  # a pair is of one run

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

    def test_rebuilding_the_full_text_changes_no_answer(self, ledger: Ledger) -> None:
        self.put(
            ledger,
            [
                drawer("en", "the heron nests by the lake", user_id="u1"),
                drawer("zh", "中国用户的数据存储在阿里云上海区域"),
            ],
        )
        ledger.save_memories([memory("m", "the orders database is PostgreSQL")])
        assert ledger.lexical_problem() is None
        before = (
            self.found(ledger, "heron lake", Filter(user_id="u1")),
            self.found(ledger, "数据存储"),
            ledger.lexical_memories("orders database", user_id=None),
        )
        ledger.clear_pending("drawers")
        ledger.clear_pending("memories")
        generation = ledger.generation()
        ledger.rebuild_lexical()
        assert ledger.lexical_problem() is None
        after = (
            self.found(ledger, "heron lake", Filter(user_id="u1")),
            self.found(ledger, "数据存储"),
            ledger.lexical_memories("orders database", user_id=None),
        )
        assert after == before
        assert (before[0], before[1], [i for i, _ in before[2]]) == (["en"], ["zh"], ["m"])
        assert ledger.generation() == generation
        assert ledger.pending_index("drawers") == []
        assert ledger.pending_index("memories") == []
