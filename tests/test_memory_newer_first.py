"""Newer first: an unsure update files the new memory *related* to the old one, both stay
current, and recall shows both, the newer first
(:func:`palace_retrievers.memory.recall.newer_first`).

The first tests build hits by hand: they check the ordering rule alone (pure logic, no
model). The others run the REAL all-MiniLM-L6-v2 and the default Chroma backend through
``Palace.remember``, ``search`` and ``context``; the decision is a third-party judge with
a fixed rule (:class:`SameStart`, a deterministic stand-in that says so), so that which
pairs are linked is known and the ordering is what is tested.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from fakes import make_plugin

from palace_retrievers import Palace
from palace_retrievers.memory.judges import JudgeContext, MemoryJudge, Opinion, Pair
from palace_retrievers.memory.recall import NEWER_BY, newer_first
from palace_retrievers.records import Drawer, Hit
from palace_retrievers.records.memories import Memory

DAY = datetime(2025, 3, 3, 9, tzinfo=UTC)
USER = "u1"


def memory_hit(memory_id: str, score: float, days: int, related: Sequence[str] = ()) -> Hit:
    """A memory hit filed ``days`` after :data:`DAY`, related to ``related``."""
    at = DAY + timedelta(days=days)
    memory = Memory(
        id=memory_id,
        text=f"memory {memory_id}",
        user_id=USER,
        created_at=at,
        updated_at=at,
        status_at=at,
        metadata={"related": list(related)} if related else {},
    )
    return Hit(drawer=memory.as_drawer(), score=score, scores={"final": score}, memory=memory)


def drawer_hit(drawer_id: str, score: float) -> Hit:
    drawer = Drawer(id=drawer_id, text=f"drawer {drawer_id}", wing="w", room="r", source="s")
    return Hit(drawer=drawer, score=score, scores={"final": score})


def test_a_related_newer_memory_goes_just_above_the_older_one() -> None:
    hits = [
        memory_hit("old", 0.9, 0),
        drawer_hit("d", 0.7),
        memory_hit("other", 0.6, 5),
        memory_hit("new", 0.2, 1, related=["old"]),
    ]
    out = newer_first(hits)
    assert [h.id for h in out] == ["new", "old", "d", "other"]
    assert out[0].score == 0.9 + NEWER_BY
    assert out[0].scores["related"] == 1.0
    assert out[0].scores["final"] == out[0].score
    assert {h.id: h.score for h in out[1:]} == {"old": 0.9, "d": 0.7, "other": 0.6}


def test_a_chain_of_related_values_ends_newest_first() -> None:
    hits = [
        memory_hit("first", 0.9, 0),
        memory_hit("second", 0.5, 1, related=["first"]),
        memory_hit("third", 0.3, 2, related=["second"]),
        memory_hit("fourth", 0.1, 3, related=["first", "third"]),
    ]
    assert [h.id for h in newer_first(hits)] == ["fourth", "third", "second", "first"]


def test_a_newer_memory_ranked_above_stays_where_it_is() -> None:
    hits = [memory_hit("new", 0.8, 1, related=["old"]), memory_hit("old", 0.5, 0)]
    assert newer_first(hits) == hits


def test_a_link_to_a_later_dated_memory_does_not_raise_the_earlier_one() -> None:
    # A conversation mined out of order: the link is there, but this one is the older.
    hits = [memory_hit("later", 0.9, 5), memory_hit("earlier", 0.4, 0, related=["later"])]
    assert [h.id for h in newer_first(hits)] == ["later", "earlier"]


def test_memories_without_a_link_keep_their_order() -> None:
    hits = [memory_hit("old", 0.9, 0), memory_hit("new", 0.5, 1), drawer_hit("d", 0.4)]
    assert newer_first(hits) == hits


class SameStart(MemoryJudge):
    """A stand-in judge with a fixed rule: a pair whose texts share their first three
    words is an unsure update (new, update 0.45: under the default supersede_confidence,
    over related_confidence, so *related*); any other pair is plainly new."""

    def judge(self, pairs: Sequence[Pair], context: JudgeContext) -> list[Opinion]:
        out = []
        for pair in pairs:
            if pair.old.split()[:3] == pair.new.split()[:3]:
                out.append(Opinion("new", {"update": 0.45, "duplicate": 0.05, "new": 0.5}))
            else:
                out.append(Opinion("new", {"update": 0.01, "duplicate": 0.01, "new": 0.98}))
        return out


def judged_palace(open_palace: Callable[..., Palace], path: Path) -> Palace:
    def register(register: Callable[[str, Any], None]) -> None:
        register("same-start", lambda options: SameStart())

    plugin = make_plugin("palace-test-same-start", palace_register_memory_judges=register)
    return open_palace(
        path, fake=False, config={"memory": {"judge": "same-start"}}, plugins=[plugin]
    )


def test_search_and_context_show_every_value_newest_first(
    open_palace: Callable[..., Palace], tmp_path: Path
) -> None:
    palace = judged_palace(open_palace, tmp_path / "palace")
    values = [
        "The team standup is at 9am in room 4",
        "The team standup is at 9:30 now",
        "The team standup is at 10am from Monday",
    ]
    filed = []
    for days, text in enumerate(values):
        filed.append(palace.remember(text, user_id=USER, now=DAY + timedelta(days=days)).memory)
    palace.remember("My sister lives in Berlin", user_id=USER, now=DAY + timedelta(days=9))
    assert filed[1].metadata["related"] == [filed[0].id]
    assert filed[0].id in filed[2].metadata["related"]
    assert all(palace.memory(m.id, user_id=USER).status == "active" for m in filed)
    # Asked in the oldest value's own words, search lists all three, the newest first.
    hits = [h for h in palace.search(values[0], k=5, user_id=USER) if h.is_memory]
    assert [h.id for h in hits[:3]] == [m.id for m in reversed(filed)]
    assert [h.memory.created_at.date() for h in hits[:3] if h.memory] == [
        (DAY + timedelta(days=d)).date() for d in (2, 1, 0)
    ]
    block = palace.context(values[0], user_id=USER)
    assert block.index("10am") < block.index("9:30") < block.index("9am in room 4")
    assert "[2025-03-05] (fact) The team standup is at 10am from Monday" in block


def test_near_memories_without_a_link_keep_the_better_match_first(
    open_palace: Callable[..., Palace], tmp_path: Path
) -> None:
    # The judge saw two things (their first three words differ), so nothing links them:
    # however near their vectors, the memory asked about in its own words comes first.
    palace = judged_palace(open_palace, tmp_path / "palace")
    old = palace.remember("My sister Anna lives in Berlin", user_id=USER, now=DAY).memory
    new = palace.remember(
        "My brother Tom lives in Berlin", user_id=USER, now=DAY + timedelta(days=1)
    ).memory
    assert "related" not in new.metadata
    hits = [h for h in palace.search(old.text, k=5, user_id=USER) if h.is_memory]
    assert [h.id for h in hits[:2]] == [old.id, new.id]
