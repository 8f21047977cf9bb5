"""The memory part of the ledger suite: :class:`MemoryStoreTests`.

Mixed into :class:`~palace_plugins.testing.ledger.LedgerTests`; it needs the suite's
``ledger`` fixture. Times are fixed (from 2026-03-01), vectors synthetic: what is tested
is storage, ordering and scoping, not a model.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest

from palace_plugins.testing.backends import synthetic_vectors
from palace_retrievers.errors import InvalidQueryError, MemoryConflictError
from palace_retrievers.ledger import Ledger
from palace_retrievers.records.memories import Memory, MemoryEvent

__all__ = ["T0", "MemoryStoreTests", "memory"]

#: The time the suite's memories are stated at (one hour apart from here).
T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
DIMENSION = 16


def memory(id: str, text: str, *, hour: int = 0, **fields: Any) -> Memory:
    """A memory stated ``hour`` hours after :data:`T0`, with every other field given."""
    at = T0 + timedelta(hours=hour)
    values: dict[str, Any] = {"created_at": at, "updated_at": at, "status_at": at}
    values.update(fields)
    return Memory(id=id, text=text, **values)


def event(memory_id: str, name: str, *, hour: int = 0, **fields: Any) -> MemoryEvent:
    return MemoryEvent(memory_id=memory_id, event=name, at=T0 + timedelta(hours=hour), **fields)


class MemoryStoreTests:
    """The contract of :class:`~palace_retrievers.ledger.memory_store.MemoryStore`."""

    def test_memory_round_trip(self, ledger: Ledger) -> None:
        original = Memory(
            id="m-1",
            text="Our team moved the orders database to PostgreSQL 15 🐘",
            kind="decision",
            importance=0.75,
            tags=("infra", "数据库"),
            user_id="u1",
            agent_id="agent-7",
            session_id="s-42",
            wing="work",
            room="infra",
            source_ids=("d1", "d2"),
            slot="orders_database",
            origin="extracted",
            created_at=T0,
            updated_at=T0 + timedelta(days=1),
            last_accessed=T0 + timedelta(days=2, microseconds=7),
            access_count=3,
            expires_at=T0 + timedelta(days=365),
            status="pending",
            superseded_by=None,
            status_at=T0 + timedelta(hours=5),
            metadata={"confidence": 0.9, "by": "Zoë", "nested": {"list": [1, "二"]}},
        )
        ledger.save_memories([original], vectors={"m-1": synthetic_vectors(1)[0]}, model="m")
        assert ledger.get_memories(["m-1"]) == [original]
        assert ledger.get_memories(["nope"]) == []

    def test_save_replaces_fields_and_keeps_the_vector(self, ledger: Ledger) -> None:
        first, second = synthetic_vectors(2, seed=1)
        ledger.save_memories(
            [memory("m", "lives in Paris", user_id="u1")],
            vectors={"m": first},
            model="m1",
            events=[event("m", "add", user_id="u1", new_text="lives in Paris")],
        )
        changed = memory("m", "lives in Berlin", user_id="u1", importance=0.2, hour=1)
        ledger.save_memories(
            [changed],
            events=[
                event(
                    "m",
                    "update",
                    hour=1,
                    user_id="u1",
                    old_text="lives in Paris",
                    new_text="lives in Berlin",
                    detail={"why": "moved"},
                )
            ],
        )
        assert ledger.get_memories(["m"]) == [changed]
        np.testing.assert_allclose(ledger.memory_vectors(["m"])["m"], first, rtol=1e-6)
        ledger.save_memories([changed], vectors={"m": second}, model="m2")
        np.testing.assert_allclose(ledger.memory_vectors(["m"])["m"], second, rtol=1e-6)
        history = ledger.memory_history("m")
        assert [e.event for e in history] == ["add", "update"]
        assert history[0].seq < history[1].seq
        assert (history[1].old_text, history[1].new_text) == ("lives in Paris", "lives in Berlin")
        assert history[1].detail == {"why": "moved"}
        assert history[1].at == T0 + timedelta(hours=1)
        assert history[1].user_id == "u1"

    def test_a_memory_without_a_vector_is_not_indexed(self, ledger: Ledger) -> None:
        ledger.save_memories([memory("bare", "no vector yet")])
        assert ledger.memory_vectors(["bare"]) == {}
        assert ledger.count_vectors("memories") == 0
        assert ledger.get_memories(["bare"])[0].text == "no vector yet"

    def test_list_memories(self, ledger: Ledger) -> None:
        ledger.save_memories(
            [
                memory("a", "one", user_id="u1", hour=1),
                memory("b", "two", user_id="u1", hour=3, kind="preference"),
                memory("c", "three", user_id="u1", hour=2, status="superseded"),
                memory("d", "four", user_id="u1", hour=3),
                memory("e", "five", user_id="u2", hour=4),
                memory("f", "six", hour=5),
            ]
        )

        def ids(**kwargs: Any) -> list[str]:
            return [m.id for m in ledger.list_memories(**kwargs)]

        assert ids(user_id="u1") == ["b", "d", "a"]  # newest first, ties by id
        assert ids(user_id="u1", statuses=None) == ["b", "d", "c", "a"]
        assert ids(user_id="u1", statuses=("superseded",)) == ["c"]
        assert ids(user_id="u1", statuses=()) == []
        assert ids(user_id="u1", kind="preference") == ["b"]
        assert ids(user_id="u1", limit=2) == ["b", "d"]
        assert ids(user_id="u1", limit=2, offset=2) == ["a"]
        assert ids(user_id="u1", limit=None) == ["b", "d", "a"]
        assert ids(user_id="u2") == ["e"]
        assert ids(user_id=None) == ["f"]
        assert ids(user_id="u3") == []
        every = [m.id for batch in ledger.iter_memories(batch_size=4) for m in batch]
        assert sorted(every) == ["a", "b", "c", "d", "e", "f"]
        assert [len(b) for b in ledger.iter_memories(batch_size=4)] == [4, 2]

    def test_count_memories(self, ledger: Ledger) -> None:
        ledger.save_memories(
            [
                memory("a", "one", user_id="u1"),
                memory("b", "two", user_id="u1", status="archived"),
                memory("c", "three", user_id="u2"),
                memory("d", "four", status="pending"),
            ]
        )
        assert ledger.count_memories() == {"active": 2, "archived": 1, "pending": 1}
        assert ledger.count_memories(user_id="u1") == {"active": 1, "archived": 1}
        assert ledger.count_memories(user_id="u3") == {}

    def test_nearest_memories(self, ledger: Ledger) -> None:
        axis = np.eye(DIMENSION, dtype=np.float32)
        close = (axis[0] * 0.8 + axis[1] * 0.6).astype(np.float32)
        ledger.save_memories(
            [
                memory("same", "x", user_id="u1"),
                memory("close", "y", user_id="u1", kind="preference"),
                memory("far", "z", user_id="u1"),
                memory("tie", "w", user_id="u1", status="pending"),
                memory("old", "v", user_id="u1", status="superseded"),
                memory("theirs", "u", user_id="u2"),
            ],
            vectors={
                "same": axis[0],
                "close": close,
                "far": -axis[0],
                "tie": axis[0],
                "old": axis[0],
                "theirs": axis[0],
            },
            model="m",
        )

        def nearest(**kwargs: Any) -> list[tuple[str, float]]:
            found = ledger.nearest_memories(axis[0], user_id="u1", **kwargs)
            return [(m.id, round(s, 4)) for m, s in found]

        assert nearest() == [("same", 1.0), ("tie", 1.0), ("close", 0.8), ("far", -1.0)]
        assert nearest(min_similarity=0.5) == [("same", 1.0), ("tie", 1.0), ("close", 0.8)]
        assert nearest(limit=1) == [("same", 1.0)]
        assert nearest(limit=0) == []
        assert nearest(kind="preference") == [("close", 0.8)]
        assert nearest(statuses=("superseded",)) == [("old", 1.0)]
        found = ledger.nearest_memories(axis[0], user_id="u3")
        assert found == []
        wider = np.ones(DIMENSION * 2, dtype=np.float32) / np.sqrt(DIMENSION * 2)
        assert ledger.nearest_memories(wider, user_id="u1") == []  # another model's size

    def test_slot_memories(self, ledger: Ledger) -> None:
        ledger.save_memories(
            [
                memory("b", "lives in Berlin", user_id="u1", slot="lives_in", hour=2),
                memory("p", "lives in Paris", user_id="u1", slot="lives_in", hour=1),
                memory("s", "lived in Rome", user_id="u1", slot="lives_in", status="superseded"),
                memory("o", "lives in Oslo", user_id="u2", slot="lives_in"),
                memory("x", "works at Acme", user_id="u1", slot="works_at"),
            ]
        )
        found = ledger.slot_memories("lives_in", user_id="u1")
        assert [m.id for m in found] == ["p", "b"]
        every = ledger.slot_memories("lives_in", user_id="u1", statuses=("superseded", "active"))
        assert [m.id for m in every] == ["s", "p", "b"]
        assert ledger.slot_memories("lives_in", user_id=None) == []

    def test_lexical_memories(self, ledger: Ledger) -> None:
        ledger.save_memories(
            [
                memory("en", "We moved the orders database to PostgreSQL", user_id="u1"),
                memory("zh", "中国用户的数据存储在阿里云上海区域", user_id="u1"),
                memory("old", "The orders database was MySQL", user_id="u1", status="superseded"),
                memory("theirs", "Their database is Oracle", user_id="u2"),
            ]
        )

        def found(query: str, **kwargs: Any) -> list[str]:
            return [i for i, _ in ledger.lexical_memories(query, **kwargs)]

        assert found("database", user_id="u1") == ["en"]
        assert sorted(found("database", user_id="u1", statuses=("active", "superseded"))) == [
            "en",
            "old",
        ]
        assert found("数据存储在哪里", user_id="u1") == ["zh"]
        assert found("上海", user_id="u1") == ["zh"]  # a word of two characters
        assert found("database", user_id="u2") == ["theirs"]
        assert found("database", user_id=None) == []
        assert found("zebra", user_id="u1") == []
        assert found("database", user_id="u1", limit=0) == []

    def test_predecessors(self, ledger: Ledger) -> None:
        ledger.save_memories(
            [
                memory("v1", "lives in Rome", status="superseded", superseded_by="v3", hour=1),
                memory("v2", "lives in Paris", status="superseded", superseded_by="v3", hour=2),
                memory("v3", "lives in Berlin", hour=3),
            ]
        )
        chains = ledger.predecessors(["v3", "v2", "none"])
        assert {k: [m.id for m in v] for k, v in chains.items()} == {"v3": ["v1", "v2"]}

    def test_touch_memories_changes_only_the_counters(self, ledger: Ledger) -> None:
        ledger.save_memories(
            [memory("m", "likes tea", user_id="u1")],
            vectors={"m": synthetic_vectors(1)[0]},
            model="m",
        )
        ledger.clear_pending("memories")
        generation = ledger.generation()
        later = T0 + timedelta(days=3)
        ledger.touch_memories(["m", "m", "unknown"], at=later)
        ledger.touch_memories(["m"], at=later + timedelta(hours=1))
        ledger.touch_memories([], at=later)
        (touched,) = ledger.get_memories(["m"])
        assert touched.access_count == 2
        assert touched.last_accessed == later + timedelta(hours=1)
        assert ledger.generation() == generation, "a touch must not invalidate caches"
        assert ledger.pending_index("memories") == [], "a touch must not journal the memory"

    def test_memory_journal(self, ledger: Ledger) -> None:
        vector = synthetic_vectors(1, seed=3)[0]
        ledger.save_memories([memory("m", "likes tea")], vectors={"m": vector}, model="m")
        assert ledger.pending_index("memories") == ["m"]
        assert [e.id for e in ledger.index_entries("memories", ["m"])] == ["m"]
        ledger.clear_pending("memories", ["m"])
        superseded = memory("m", "likes tea", status="superseded", superseded_by="n")
        ledger.save_memories([superseded])
        assert ledger.pending_index("memories") == ["m"]
        assert ledger.index_entries("memories", ["m"]) == []  # only active ones are entries
        assert ledger.count_vectors("memories") == 0
        ledger.clear_pending("memories")
        assert ledger.delete_memories(["m"]) == 1
        assert ledger.pending_index("memories") == ["m"]

    def test_delete_memories_keeps_their_history(self, ledger: Ledger) -> None:
        ledger.save_memories(
            [memory("a", "one", user_id="u1"), memory("b", "two", user_id="u1")],
            events=[event("a", "add", user_id="u1", new_text="one")],
        )
        deleted = ledger.delete_memories(
            ["a", "a", "missing"],
            events=[event("a", "delete", hour=1, user_id="u1", old_text="one")],
        )
        assert deleted == 1
        assert ledger.get_memories(["a", "b"])[0].id == "b"
        assert [e.event for e in ledger.memory_history("a")] == ["add", "delete"]
        assert ledger.memory_history("missing") == []

    def test_a_save_under_a_moved_mark_writes_nothing(self, ledger: Ledger) -> None:
        """``if_mark``: a decision read under one mark is written only while it holds."""
        assert ledger.memory_mark("u1") == 0
        ledger.save_memories(
            [memory("a", "deploy on Monday", user_id="u1")],
            events=[event("a", "add", user_id="u1", new_text="deploy on Monday")],
            if_mark=("u1", 0),
        )
        mark = ledger.memory_mark("u1")
        assert mark > 0
        assert ledger.memory_mark("u2") == 0  # another owner's mark does not move
        # Another writer supersedes "a" meanwhile: the mark moves.
        ledger.save_memories(
            [memory("a", "deploy on Monday", user_id="u1", status="superseded")],
            events=[event("a", "supersede", user_id="u1", detail={"superseded_by": "b"})],
        )
        assert ledger.memory_mark("u1") > mark
        with pytest.raises(MemoryConflictError):
            ledger.save_memories(
                [
                    memory("c", "deploy on Friday", user_id="u1"),
                    memory("a", "deploy on Monday", user_id="u1", status="superseded"),
                ],
                events=[event("a", "supersede", user_id="u1", detail={"superseded_by": "c"})],
                if_mark=("u1", mark),
            )
        assert ledger.get_memories(["c"]) == []
        assert [e.detail.get("superseded_by") for e in ledger.memory_history("a")] == [None, "b"]

    def test_memory_histories_is_memory_history_per_id(self, ledger: Ledger) -> None:
        ledger.save_memories(
            [memory(i, i, user_id="u1") for i in ("b", "a", "c")],
            events=[
                event("b", "add", user_id="u1", new_text="b"),
                event("a", "add", user_id="u1", new_text="a"),
                event("c", "add", user_id="u1", new_text="c"),
            ],
        )
        # the events of one memory interleave with the others' and one repeats a time
        for hour, memory_id, name in (
            (1, "a", "update"),
            (2, "b", "supersede"),
            (1, "a", "pin"),
            (3, "a", "archive"),
            (4, "b", "archive"),
        ):
            ledger.save_memories(
                [],
                events=[event(memory_id, name, hour=hour, user_id="u1", detail={"n": hour})],
            )
        ledger.delete_memories(["c"], events=[event("c", "delete", hour=5, user_id="u1")])
        histories = ledger.memory_histories(["b", "missing", "a", "c", "a"])
        assert set(histories) == {"a", "b", "c"}
        for memory_id in ("a", "b", "c"):
            assert histories[memory_id] == ledger.memory_history(memory_id)
        assert [e.event for e in histories["a"]] == ["add", "update", "pin", "archive"]
        assert [e.event for e in histories["c"]] == ["add", "delete"]  # kept after a delete
        assert ledger.memory_histories(["missing"]) == {}
        assert ledger.memory_histories([]) == {}

    def test_gc_candidates(self, ledger: Ledger) -> None:
        now = T0 + timedelta(days=400)
        ledger.save_memories(
            [
                memory("expired", "a", expires_at=now - timedelta(days=1), importance=0.1),
                memory("expires-later", "b", expires_at=now + timedelta(days=1)),
                memory("archived", "c", status="archived", expires_at=now - timedelta(days=1)),
                memory("superseded", "d", status="superseded", superseded_by="x"),
                memory(
                    "recent-superseded",
                    "e",
                    status="superseded",
                    superseded_by="x",
                    status_at=now - timedelta(days=1),
                ),
                memory("unused", "f", importance=0.1),
                memory("important", "g", importance=0.9),
                memory("recently-used", "h", importance=0.1, last_accessed=now - timedelta(days=1)),
            ]
        )
        found = ledger.gc_candidates(
            now=now,
            superseded_before=now - timedelta(days=90),
            unused_before=now - timedelta(days=180),
            unused_importance=0.3,
        )
        assert {k: [m.id for m in v] for k, v in found.items()} == {
            "expired": ["expired"],
            "superseded": ["superseded"],
            "unused": ["unused"],
        }

    def test_forget_user_needs_a_user(self, ledger: Ledger) -> None:
        with pytest.raises(InvalidQueryError):
            ledger.forget_user("")
