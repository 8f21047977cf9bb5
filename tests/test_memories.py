"""Memories: the lifecycle (remember, dedupe, supersede, edit, archive, restore, gc).

Pure logic, so these tests use the FAKE hashing embedder (texts that share words are
close, nothing more) and the exact ``sqlite`` backend. The structural matcher is turned
off here (``no_matcher``) so that the cosine thresholds of ``[memory]`` decide; the
matcher's own decisions are tested with the real model in ``test_memories_real.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from palace_retrievers import InvalidQueryError, Palace
from palace_retrievers.errors import ConfigError, EmbedderMismatchError, MemoryNotFoundError
from palace_retrievers.memory.learned import judge as learned_judge
from palace_retrievers.records.memories import MEMORY_KINDS, Memory

MYSQL = "We use MySQL for the orders database"
POSTGRES = "We use PostgreSQL for the orders database"
T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def no_matcher(monkeypatch: pytest.MonkeyPatch) -> None:
    """Decide with the cosine thresholds only."""
    monkeypatch.setitem(learned_judge.DEFAULTS, "structural", False)


@pytest.fixture
def palace(open_palace: Callable[..., Palace], tmp_path: Path, no_matcher: None) -> Palace:
    """FAKE embedder, exact backend; supersede from 0.8, duplicate from 0.99."""
    return open_palace(
        tmp_path / "palace",
        backend="sqlite",
        config={"memory": {"supersede_similarity": 0.8, "duplicate_similarity": 0.99}},
    )


def cosine(palace: Palace, a: str, b: str) -> float:
    va, vb = palace._embed([a, b])
    return float(np.dot(va, vb))


def every_memory(palace: Palace, user_id: str | None = None) -> list[Memory]:
    return palace.memories(user_id=user_id, status=None)


# -- remember ---------------------------------------------------------------------------


def test_remember_adds_a_memory_with_its_fields(palace: Palace) -> None:
    palace.add_texts(["Alice's allergy card"], ids=["d_1"], user_id="u1")
    done = palace.remember(
        "  Alice is allergic to peanuts ",
        kind="fact",
        importance=0.7,
        tags=["health", "alice", "health"],
        user_id="u1",
        agent_id="bot",
        session_id="s1",
        source_ids=["d_1"],
        wing="family",
        now=T0,
    )
    memory = done.memory
    assert done.action == "added"
    assert done.previous is None
    assert memory.id.startswith("m_")
    assert memory.text == "Alice is allergic to peanuts"
    assert (memory.kind, memory.importance, memory.tags) == ("fact", 0.7, ("health", "alice"))
    assert (memory.user_id, memory.agent_id, memory.session_id) == ("u1", "bot", "s1")
    assert (memory.wing, memory.source_ids, memory.origin) == ("family", ("d_1",), "explicit")
    assert memory.created_at == memory.updated_at == memory.status_at == T0
    assert memory.status == "active"
    assert memory.superseded_by is None
    assert memory.access_count == 0
    assert memory.last_accessed is None
    assert palace.memory(memory.id, user_id="u1") == memory
    assert palace.memories(user_id="u1") == [memory]
    [event] = palace.history(memory.id, user_id="u1")
    assert (event.event, event.new_text, event.new_status) == ("add", memory.text, "active")
    # Active memories are in the vector index, through the journal.
    assert palace.ledger.pending_index("memories") == []
    assert palace.indexes.query(
        "memories", vector=palace._embed_query(memory.text), k=1, where=_where("u1")
    )[0].id == (memory.id)


def _where(user_id: str | None) -> Any:
    from palace_retrievers.records import Filter

    return Filter(user_id=user_id)


def test_remember_defaults_to_importance_one(palace: Palace) -> None:
    assert palace.remember("I like tea").memory.importance == 1.0


def test_the_same_text_is_a_duplicate(palace: Palace) -> None:
    first = palace.remember(MYSQL, user_id="u1", importance=0.4, tags=["db"], now=T0)
    later = T0 + timedelta(days=3)
    again = palace.remember(MYSQL, user_id="u1", importance=0.9, tags=["orders"], now=later)
    assert again.action == "duplicate"
    assert again.previous == first.memory
    assert again.memory.id == first.memory.id
    assert again.memory.importance == 0.9  # the larger of the two
    assert again.memory.tags == ("db", "orders")
    assert again.memory.last_accessed == later
    assert again.memory.updated_at == later
    assert [m.id for m in every_memory(palace, "u1")] == [first.memory.id]
    assert [e.event for e in palace.history(first.memory.id, user_id="u1")] == [
        "add",
        "duplicate",
    ]
    # A lower importance the second time never lowers it.
    assert palace.remember(MYSQL, user_id="u1", importance=0.1).memory.importance == 0.9


def test_a_duplicate_told_as_active_confirms_a_pending_memory(palace: Palace) -> None:
    pending = palace.remember(MYSQL, user_id="u1", status="pending").memory
    assert palace.memories(user_id="u1") == []  # pending is not active
    confirmed = palace.remember(MYSQL, user_id="u1")
    assert confirmed.action == "duplicate"
    assert confirmed.memory.id == pending.id
    assert confirmed.memory.status == "active"
    assert palace.memories(user_id="u1")[0].id == pending.id


def test_a_near_text_supersedes_and_keeps_the_chain(palace: Palace) -> None:
    assert 0.8 <= cosine(palace, MYSQL, POSTGRES) < 0.99
    old = palace.remember(MYSQL, user_id="u1", kind="decision", now=T0).memory
    done = palace.remember(POSTGRES, user_id="u1", kind="decision", now=T0 + timedelta(days=1))
    assert done.action == "updated"
    assert done.previous is not None
    assert done.previous.id == old.id
    assert [m.id for m in done.superseded] == [old.id]
    stored_old = palace.memory(old.id, user_id="u1")
    assert stored_old.status == "superseded"
    assert stored_old.superseded_by == done.memory.id
    assert stored_old.text == MYSQL  # nothing is lost
    assert [m.text for m in palace.chain(old.id, user_id="u1")] == [MYSQL, POSTGRES]
    assert [m.text for m in palace.chain(done.memory.id, user_id="u1")] == [MYSQL, POSTGRES]
    assert [e.event for e in palace.history(old.id, user_id="u1")] == ["add", "supersede"]
    [update] = palace.history(done.memory.id, user_id="u1")
    assert (update.event, update.old_text, update.new_text) == ("update", MYSQL, POSTGRES)
    assert update.detail["supersedes"] == [old.id]
    # Only the current value is active and indexed.
    assert [m.text for m in palace.memories(user_id="u1")] == [POSTGRES]
    assert palace.ledger.count_vectors("memories") == 1
    assert len(every_memory(palace, "u1")) == 2


def test_three_values_make_a_chain_oldest_first(palace: Palace) -> None:
    texts = [
        "We use MySQL for the orders database",
        "We use PostgreSQL for the orders database",
        "We use SQLite for the orders database",
    ]
    ids = [
        palace.remember(t, user_id="u1", now=T0 + timedelta(days=i)).memory.id
        for i, t in enumerate(texts)
    ]
    assert [m.text for m in palace.chain(ids[1], user_id="u1")] == texts
    assert [m.status for m in palace.chain(ids[0], user_id="u1")] == [
        "superseded",
        "superseded",
        "active",
    ]


def test_a_pending_update_waits_for_confirmation(palace: Palace) -> None:
    old = palace.remember(MYSQL, user_id="u1", now=T0).memory
    pending = palace.remember(POSTGRES, user_id="u1", status="pending", now=T0 + timedelta(1))
    assert pending.action == "added"
    assert pending.memory.status == "pending"
    assert pending.memory.metadata["updates"] == [old.id]
    assert palace.memory(old.id, user_id="u1").status == "active"  # still the truth
    assert [m.id for m in palace.memories(user_id="u1")] == [old.id]
    confirmed = palace.restore(pending.memory.id, user_id="u1")
    assert confirmed.status == "active"
    assert "updates" not in confirmed.metadata
    stored = palace.memory(old.id, user_id="u1")
    assert stored.status == "superseded"
    assert stored.superseded_by == confirmed.id
    assert [m.text for m in palace.chain(old.id, user_id="u1")] == [MYSQL, POSTGRES]
    assert palace.history(confirmed.id, user_id="u1")[-1].detail == {"confirmed": True}
    assert palace.history(old.id, user_id="u1")[-1].event == "supersede"


def test_a_pending_update_is_confirmed_by_being_told_again(palace: Palace) -> None:
    old = palace.remember(MYSQL, user_id="u1", now=T0).memory
    pending = palace.remember(POSTGRES, user_id="u1", status="pending", now=T0 + timedelta(1))
    again = palace.remember(POSTGRES, user_id="u1", now=T0 + timedelta(2))
    assert again.action == "duplicate"
    assert again.memory.id == pending.memory.id
    assert again.memory.status == "active"
    assert palace.memory(old.id, user_id="u1").superseded_by == pending.memory.id
    assert [m.text for m in palace.memories(user_id="u1")] == [POSTGRES]


def test_a_pending_update_supersedes_a_pending_memory(palace: Palace) -> None:
    old = palace.remember(MYSQL, user_id="u1", status="pending", now=T0).memory
    new = palace.remember(POSTGRES, user_id="u1", status="pending", now=T0 + timedelta(1))
    assert new.action == "updated"
    assert palace.memory(old.id, user_id="u1").superseded_by == new.memory.id


def test_an_older_statement_is_filed_already_superseded(palace: Palace) -> None:
    current = palace.remember(POSTGRES, user_id="u1", now=T0 + timedelta(days=10)).memory
    late = palace.remember(MYSQL, user_id="u1", now=T0)  # said earlier, mined later
    assert late.action == "updated"
    assert late.memory.status == "superseded"
    assert late.memory.superseded_by == current.id
    assert palace.memory(current.id, user_id="u1").status == "active"
    assert [m.text for m in palace.chain(current.id, user_id="u1")] == [MYSQL, POSTGRES]


def test_unrelated_texts_are_both_kept(palace: Palace) -> None:
    palace.remember(MYSQL, user_id="u1")
    palace.remember("Alice is allergic to peanuts", user_id="u1")
    assert len(palace.memories(user_id="u1")) == 2


def test_dedupe_never_crosses_users(palace: Palace) -> None:
    one = palace.remember(MYSQL, user_id="u1").memory
    two = palace.remember(MYSQL, user_id="u2")
    assert two.action == "added"
    assert two.memory.id != one.id
    assert palace.remember(POSTGRES, user_id="u2").superseded[0].id == two.memory.id
    assert palace.memory(one.id, user_id="u1").status == "active"


def test_remember_deletes_nothing(palace: Palace) -> None:
    for i in range(6):
        palace.remember(
            f"We use tool{i % 3} for the orders database", user_id="u1", now=T0 + timedelta(i)
        )
    # Each value supersedes the one before, even a value that was current once.
    assert palace.ledger.count_memories(user_id="u1") == {"active": 1, "superseded": 5}
    assert [m.text for m in palace.memories(user_id="u1")] == [
        "We use tool2 for the orders database"
    ]


# -- edit, pin, delete, restore, forget ------------------------------------------------


def test_edit_memory_reembeds_the_new_text(palace: Palace) -> None:
    memory = palace.remember("The standup is at 9am", user_id="u1").memory
    before = palace.ledger.memory_vectors([memory.id])[memory.id]
    edited = palace.edit_memory(
        memory.id,
        user_id="u1",
        text="The retro is on Friday afternoons",
        importance=0.5,
        tags=["team"],
        kind="event",
    )
    assert edited.text == "The retro is on Friday afternoons"
    assert (edited.importance, edited.tags, edited.kind) == (0.5, ("team",), "event")
    after = palace.ledger.memory_vectors([memory.id])[memory.id]
    assert not np.allclose(before, after)
    assert np.allclose(after, palace._embed_query(edited.text), atol=1e-6)
    [hit] = [h for h in palace.search("retro friday afternoons", user_id="u1") if h.is_memory]
    assert hit.id == memory.id
    last = palace.history(memory.id, user_id="u1")[-1]
    assert (last.event, last.old_text, last.new_text) == (
        "update",
        "The standup is at 9am",
        edited.text,
    )
    assert set(last.detail["changed"]) == {"text", "importance", "tags", "kind"}
    # No change, no event.
    palace.edit_memory(memory.id, user_id="u1", importance=0.5)
    assert len(palace.history(memory.id, user_id="u1")) == 2


def test_pin(palace: Palace) -> None:
    memory = palace.remember("I like tea", user_id="u1", importance=0.2).memory
    assert palace.pin(memory.id, user_id="u1").importance == 1.0
    assert palace.history(memory.id, user_id="u1")[-1].detail["pinned"] is True


def test_delete_memory_is_soft_and_restore_brings_it_back(palace: Palace) -> None:
    memory = palace.remember("Alice is allergic to peanuts", user_id="u1").memory
    deleted = palace.delete_memory(memory.id, user_id="u1")
    assert deleted.status == "archived"
    assert not [h for h in palace.search("peanuts allergic", user_id="u1") if h.is_memory]
    assert palace.ledger.count_vectors("memories") == 0
    restored = palace.restore(memory.id, user_id="u1")
    assert restored.status == "active"
    assert [h.id for h in palace.search("peanuts allergic", user_id="u1") if h.is_memory] == [
        memory.id
    ]
    assert [e.event for e in palace.history(memory.id, user_id="u1")] == [
        "add",
        "delete",
        "restore",
    ]
    with pytest.raises(InvalidQueryError, match="not archived or pending"):
        palace.restore(memory.id, user_id="u1")


def test_restore_of_a_superseded_memory_keeps_one_truth(palace: Palace) -> None:
    old = palace.remember(MYSQL, user_id="u1", now=T0).memory
    new = palace.remember(POSTGRES, user_id="u1", now=T0 + timedelta(days=1)).memory
    palace.delete_memory(old.id, user_id="u1")
    assert palace.restore(old.id, user_id="u1").status == "superseded"
    assert [m.id for m in palace.memories(user_id="u1")] == [new.id]


def test_forget_memories_is_hard_and_keeps_history(palace: Palace) -> None:
    keep = palace.remember("I like tea", user_id="u1").memory
    gone = palace.remember("Alice is allergic to peanuts", user_id="u1").memory
    assert palace.forget_memories([gone.id, "m_unknown"], user_id="u1") == 1
    with pytest.raises(MemoryNotFoundError):
        palace.memory(gone.id, user_id="u1")
    assert [e.event for e in palace.history(gone.id, user_id="u1")] == ["add", "delete"]
    assert palace.history(gone.id, user_id="u1")[-1].detail == {"hard": True}
    assert [m.id for m in every_memory(palace, "u1")] == [keep.id]
    assert palace.ledger.count_vectors("memories") == 1
    assert palace.indexes.status()[2].count == 1  # the index follows the ledger


# -- gc ---------------------------------------------------------------------------------


def test_gc_archives_by_policy_and_counts_per_reason(palace: Palace) -> None:
    expiring = palace.remember("The door code is 4512", user_id="u1", ttl=3600, now=T0).memory
    old = palace.remember(MYSQL, user_id="u2", now=T0).memory
    palace.remember(POSTGRES, user_id="u2", now=T0 + timedelta(days=1))
    unused = palace.remember("I once tried sushi", user_id="u1", importance=0.2, now=T0).memory
    important = palace.remember("My blood type is O negative", user_id="u1", now=T0).memory
    pending = palace.remember("Bob likes chess", status="pending", importance=0.1, now=T0).memory

    soon = palace.gc(now=T0 + timedelta(days=2))
    assert soon.counts == {"expired": 1, "superseded": 0, "unused": 0}
    assert soon.ids["expired"] == (expiring.id,)
    assert palace.memory(expiring.id, user_id="u1").status == "archived"

    later = T0 + timedelta(days=200)
    dry = palace.gc(now=later, dry_run=True)
    assert dry.dry_run
    assert dry.counts == {"expired": 0, "superseded": 1, "unused": 2}
    assert set(dry.ids["unused"]) == {unused.id, pending.id}
    assert palace.memory(old.id, user_id="u2").status == "superseded"  # nothing changed

    report = palace.gc(now=later)
    assert report.counts == dry.counts
    assert report.total == 3
    assert palace.memory(old.id, user_id="u2").status == "archived"
    assert palace.memory(unused.id, user_id="u1").status == "archived"
    assert palace.memory(important.id, user_id="u1").status == "active"
    event = palace.history(unused.id, user_id="u1")[-1]
    assert (event.event, event.detail["reason"]) == ("archive", "unused")
    assert palace.gc(now=later).total == 0  # nothing left to archive
    assert palace.restore(unused.id, user_id="u1").status == "active"


def test_gc_for_one_owner_archives_only_that_owners_memories(palace: Palace) -> None:
    mine = palace.remember("The door code is 4512", user_id="u1", ttl=3600, now=T0).memory
    theirs = palace.remember("The gate code is 7788", user_id="u2", ttl=3600, now=T0).memory
    nobodys = palace.remember("The wifi code is 1234", ttl=3600, now=T0).memory
    later = T0 + timedelta(days=2)

    assert palace.gc(now=later, user_id="u1", dry_run=True).ids["expired"] == (mine.id,)
    assert palace.gc(now=later, user_id=None, dry_run=True).ids["expired"] == (nobodys.id,)
    assert palace.gc(now=later, user_id="nobody").total == 0
    assert palace.gc(now=later, user_id="u1").ids["expired"] == (mine.id,)
    assert palace.memory(mine.id, user_id="u1").status == "archived"
    assert palace.memory(theirs.id, user_id="u2").status == "active"
    assert palace.memory(nobodys.id).status == "active"
    assert set(palace.gc(now=later).ids["expired"]) == {theirs.id, nobodys.id}  # every owner
    with pytest.raises(InvalidQueryError, match="user_id"):
        palace.gc(user_id=42)  # type: ignore[arg-type]


def test_gc_spares_a_memory_that_was_recalled(palace: Palace) -> None:
    memory = palace.remember("I once tried sushi", user_id="u1", importance=0.2, now=T0).memory
    palace.ledger.touch_memories([memory.id], at=T0 + timedelta(days=150))
    assert palace.gc(now=T0 + timedelta(days=200)).total == 0
    assert palace.gc(now=T0 + timedelta(days=340)).unused == 1


def test_gc_policy_is_configurable(open_palace: Callable[..., Palace], tmp_path: Path) -> None:
    palace = open_palace(
        tmp_path / "p",
        backend="sqlite",
        config={"memory": {"gc_unused_days": 10, "gc_unused_importance": 0.9}},
    )
    palace.remember("I once tried sushi", importance=0.5, now=T0)
    assert palace.gc(now=T0 + timedelta(days=11)).unused == 1


# -- bad input --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"text": ""}, "empty"),
        ({"text": "   \n"}, "empty"),
        ({"text": 42}, "string"),
        ({"kind": "opinion"}, "unknown memory kind"),
        ({"importance": 1.5}, r"\[0, 1\]"),
        ({"importance": -0.1}, r"\[0, 1\]"),
        ({"importance": True}, r"\[0, 1\]"),
        ({"importance": "high"}, r"\[0, 1\]"),
        ({"ttl": -5}, "positive"),
        ({"ttl": 0}, "positive"),
        ({"ttl": timedelta(seconds=-1)}, "positive"),
        ({"ttl": "1d"}, "timedelta or seconds"),
        ({"status": "superseded"}, "status"),
        ({"status": "archived"}, "status"),
        ({"tags": "health"}, "list of strings"),
        ({"tags": ["ok", ""]}, "non-empty"),
        ({"source_ids": [3]}, "non-empty strings"),
        ({"source_ids": ["d_nowhere"]}, "no such drawer: 'd_nowhere'"),
        ({"user_id": 7}, "user_id"),
        ({"wing": None}, "wing"),
        ({"now": "yesterday"}, "ISO-8601"),
    ],
)
def test_remember_rejects_bad_input(palace: Palace, kwargs: dict[str, Any], message: str) -> None:
    arguments = {"text": "I like tea", **kwargs}
    text = arguments.pop("text")
    with pytest.raises(InvalidQueryError, match=message):
        palace.remember(text, **arguments)
    assert every_memory(palace) == []


def test_other_methods_reject_bad_input(palace: Palace) -> None:
    memory = palace.remember("I like tea").memory
    with pytest.raises(InvalidQueryError):
        palace.memories(status="gone")
    with pytest.raises(InvalidQueryError):
        palace.memories(kind="opinion")
    with pytest.raises(InvalidQueryError):
        palace.memories(limit=0)
    with pytest.raises(InvalidQueryError):
        palace.memories(offset=-1)
    with pytest.raises(InvalidQueryError):
        palace.edit_memory(memory.id, text=" ")
    with pytest.raises(InvalidQueryError):
        palace.edit_memory(memory.id, importance=2)
    with pytest.raises(InvalidQueryError):
        palace.edit_memory(memory.id, kind="opinion")
    with pytest.raises(MemoryNotFoundError):
        palace.memory("m_nope")
    with pytest.raises(MemoryNotFoundError):
        palace.history("m_nope")
    with pytest.raises(InvalidQueryError):
        palace.memory("")
    with pytest.raises(InvalidQueryError):
        palace.forget(user_id="")
    with pytest.raises(InvalidQueryError):
        palace.forget_memories("m_x")  # a lone string is not a list of ids
    with pytest.raises(InvalidQueryError):
        palace.context("tea", max_tokens=0)
    with pytest.raises(InvalidQueryError):
        palace.context("", user_id=None)
    assert palace.memory(memory.id).importance == 1.0  # nothing changed


def test_memory_kinds_are_the_schema_kinds(palace: Palace) -> None:
    for kind in MEMORY_KINDS:
        assert palace.remember(f"a {kind} worth keeping", kind=kind).memory.kind == kind


# -- configuration ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "memory",
    [
        {"duplicate_similarity": 1.5},
        {"supersede_similarity": 0.95, "duplicate_similarity": 0.9},
        {"relevance_weight": -0.1},
        {"relevance_weight": 0, "importance_weight": 0, "freshness_weight": 0, "heat_weight": 0},
        {"half_life_days": 0},
        {"heat_cap": 0},
        {"extracted_status": "archived"},
        {"context_tokens": 0},
        {"gc_unused_days": -1},
        {"unknown_key": 1},
    ],
)
def test_memory_config_is_validated(
    open_palace: Callable[..., Palace], tmp_path: Path, memory: dict[str, Any]
) -> None:
    with pytest.raises(ConfigError):
        open_palace(tmp_path / "p", config={"memory": memory})


@pytest.mark.parametrize("graph", [{"boost": 2.0}, {"single_valued": ["lives_in", " "]}])
def test_graph_config_is_validated(
    open_palace: Callable[..., Palace], tmp_path: Path, graph: dict[str, Any]
) -> None:
    with pytest.raises(ConfigError):
        open_palace(tmp_path / "p", config={"graph": graph})


def test_graph_config_reaches_the_knowledge_graph(
    open_palace: Callable[..., Palace], tmp_path: Path
) -> None:
    palace = open_palace(tmp_path / "p", config={"graph": {"single_valued": ["drives"]}})
    assert palace.kg.is_single_valued("drives")
    assert not palace.kg.is_single_valued("lives_in")
    default = open_palace(tmp_path / "q")
    assert default.kg.is_single_valued("lives_in")
    assert default.kg.is_single_valued("prefers_editor")
    assert default.kg.is_single_valued("uses_database")


# -- another embedding model -------------------------------------------------------------


def test_memories_are_reembedded_by_reindex(
    open_palace: Callable[..., Palace], tmp_path: Path, no_matcher: None
) -> None:
    """A palace holding only memories still belongs to its model: the REAL MiniLM plays
    "another model" for a palace built with the FAKE one, and reindex re-embeds them."""
    path = tmp_path / "palace"
    first = open_palace(path)
    kept = first.remember("Alice is allergic to peanuts", user_id="u1").memory
    old = first.remember(MYSQL, user_id="u1", now=T0).memory
    first.delete_memory(old.id, user_id="u1")
    first.close()
    with pytest.raises(EmbedderMismatchError, match="palace reindex"):
        open_palace(path, fake=False)
    palace = open_palace(path, fake=False, check_model=False)
    palace.reindex()
    vectors = palace.ledger.memory_vectors([kept.id, old.id])
    assert {v.shape for v in vectors.values()} == {(palace.embedder.dimension,)}
    hits = [h for h in palace.search("what is Alice allergic to?", user_id="u1") if h.is_memory]
    assert [h.id for h in hits] == [kept.id]
    assert palace.memory(old.id, user_id="u1").status == "archived"  # statuses untouched
