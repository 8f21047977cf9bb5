"""PalaceStore against the contract LangGraph's own stores are tested on: batches in
order, put/get/update/delete, search with filters, limit and offset, list_namespaces,
sync and async; then what the palace adds (supersede, dedupe, scores, TTL, users)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchItem,
    SearchOp,
)
from palace_retrievers import Palace

from langgraph.store.palace import PalaceStore
from tests.conftest import NEW, OLD

NOTES = ("drawers", "u1", "notes", "general")
PETS = ("drawers", "u1", "home", "pets")
MEMORIES = ("memories", "u1")


def test_a_batch_answers_each_op_in_order(store: PalaceStore) -> None:
    store.put(NOTES, "k1", {"text": "the boiler was serviced", "tag": "a"})
    store.put(PETS, "k2", {"text": "Miso the cat eats twice a day", "tag": "b"})
    results = store.batch(
        [
            GetOp(NOTES, "k1"),
            PutOp(PETS, "k3", {"text": "the dog sleeps in the hall", "tag": "a"}),
            SearchOp(("drawers", "u1"), filter={"tag": "a"}),
            ListNamespacesOp(match_conditions=(MatchCondition("prefix", ("drawers", "u1")),)),
            GetOp(NOTES, "missing"),
        ]
    )
    assert len(results) == 5
    first = results[0]
    assert isinstance(first, Item)
    assert first.value == {"text": "the boiler was serviced", "tag": "a"}
    assert first.key == "k1"
    assert first.namespace == NOTES
    assert results[1] is None
    found = results[2]
    assert isinstance(found, list)
    assert sorted(item.key for item in found) == ["k1", "k3"]
    assert results[3] == [PETS, NOTES]
    assert results[4] is None


def test_put_get_update_delete_a_drawer(store: PalaceStore) -> None:
    value = {"title": "Boiler", "text": "The boiler was serviced in March."}
    store.put(NOTES, "boiler", value)
    item = store.get(NOTES, "boiler")
    assert item is not None
    assert (item.namespace, item.key, item.value) == (NOTES, "boiler", value)

    updated = {"title": "Boiler", "text": "The boiler was replaced in October."}
    store.put(NOTES, "boiler", updated)
    again = store.get(NOTES, "boiler")
    assert again is not None
    assert again.value == updated
    assert again.created_at == item.created_at
    assert again.updated_at > item.updated_at
    assert len(store.palace.drawer_ids(user_id="u1")) == 1

    assert store.get(("drawers", "u1", "notes", "other"), "boiler") is None
    store.delete(NOTES, "boiler")
    assert store.get(NOTES, "boiler") is None
    assert store.palace.drawer_ids(user_id="u1") == []
    store.delete(NOTES, "boiler")  # deleting what is gone is no error


def test_a_memory_put_again_supersedes_the_old_value(store: PalaceStore, palace: Palace) -> None:
    store.put(MEMORIES, "db", {"content": OLD, "kind": "decision"})
    first = store.get(MEMORIES, "db")
    assert first is not None
    assert first.value == {"content": OLD, "kind": "decision"}

    store.put(MEMORIES, "db", {"content": NEW, "kind": "decision"})
    item = store.get(MEMORIES, "db")
    assert item is not None
    assert item.value == {"content": NEW, "kind": "decision"}
    assert item.updated_at > first.updated_at
    (current,) = palace.memories(user_id="u1")
    assert current.text == NEW
    assert [m.text for m in palace.chain(current.id, user_id="u1")] == [OLD, NEW]
    old = palace.chain(current.id, user_id="u1")[0]
    assert old.status == "superseded"
    assert [e.event for e in palace.history(old.id, user_id="u1")] == ["add", "supersede"]

    store.delete(MEMORIES, "db")
    assert store.get(MEMORIES, "db") is None
    assert palace.memory(current.id, user_id="u1").status == "archived"


def test_a_repeat_files_no_second_memory_and_both_keys_read_it(
    store: PalaceStore, palace: Palace
) -> None:
    store.put(MEMORIES, "a", {"content": "My favourite editor is Vim"})
    store.put(MEMORIES, "b", {"content": "My favourite editor is Vim"})
    (memory,) = palace.memories(user_id="u1")
    a, b = store.get(MEMORIES, "a"), store.get(MEMORIES, "b")
    assert a is not None
    assert b is not None
    assert a.value["content"] == b.value["content"] == memory.text
    store.delete(MEMORIES, "a")
    assert store.get(MEMORIES, "a") is None
    assert store.get(MEMORIES, "b") is not None  # the memory keeps its other key
    store.delete(MEMORIES, "b")
    assert palace.memories(user_id="u1") == []


def test_a_memory_filed_outside_the_store_reads_under_its_id(
    store: PalaceStore, palace: Palace
) -> None:
    memory = palace.remember("The team standup is at 9am", user_id="u1", wing="work").memory
    item = store.get(("memories", "u1", "work"), memory.id)
    assert item is not None
    assert item.value == {"content": "The team standup is at 9am", "kind": "fact"}
    assert store.get(MEMORIES, memory.id) is None  # filed in a wing, not in every wing


def test_search_filters_limits_and_offsets(store: PalaceStore) -> None:
    rows = [
        (NOTES, "a", {"text": "first note", "author": "Alice", "score": 2}),
        (NOTES, "b", {"text": "second note", "author": "Bob", "score": 9}),
        (PETS, "c", {"text": "the cat's vet visit", "author": "Alice", "score": 10}),
        (PETS, "d", {"text": "the dog's walk", "author": "Carol", "score": 11}),
    ]
    for namespace, key, value in rows:
        store.put(namespace, key, value)

    def keys(prefix: tuple[str, ...] = ("drawers", "u1"), **options: object) -> list[str]:
        return sorted(item.key for item in store.search(prefix, **options))  # type: ignore[arg-type]

    assert keys() == ["a", "b", "c", "d"]
    assert keys(NOTES) == ["a", "b"]
    assert keys(("drawers", "u1", "home")) == ["c", "d"]
    assert keys(filter={"author": "Alice"}) == ["a", "c"]
    assert keys(filter={"score": {"$gte": 10}}) == ["c", "d"]
    assert keys(filter={"score": {"$gt": 2, "$lt": 11}}) == ["b", "c"]
    assert keys(filter={"author": {"$ne": "Alice"}}) == ["b", "d"]
    assert len(store.search(("drawers", "u1"), limit=3)) == 3
    assert len(store.search(("drawers", "u1"), offset=3)) == 1
    newest = store.search(("drawers", "u1"))
    assert [item.key for item in newest] == ["d", "c", "b", "a"]  # no query: newest first
    assert all(item.score is None for item in newest)
    pages = store.search(("drawers", "u1"), limit=2) + store.search(("drawers", "u1"), offset=2)
    assert [item.key for item in pages] == ["d", "c", "b", "a"]


def test_a_query_runs_the_palace_search_and_scores_each_item(store: PalaceStore) -> None:
    store.put(PETS, "cat", {"text": "Alice adopted a grey cat called Miso in May."})
    store.put(NOTES, "db", {"text": "We moved the main database to PostgreSQL 15."})
    store.put(MEMORIES, "tea", {"content": "I drink green tea every morning"})
    store.put(MEMORIES, "db", {"content": NEW})

    hits = store.search(("drawers", "u1"), query="which pet did Alice adopt?")
    assert hits[0].key == "cat"
    assert all(isinstance(hit, SearchItem) and isinstance(hit.score, float) for hit in hits)
    assert hits[0].score >= hits[-1].score  # type: ignore[operator]

    memories = store.search(MEMORIES, query="which database do we use?", limit=1)
    assert [(m.key, m.value["content"]) for m in memories] == [("db", NEW)]
    assert memories[0].namespace == MEMORIES
    both = store.search(MEMORIES, query="what do I drink?", limit=2)
    assert both[0].key == "tea"
    store.put(MEMORIES, "coffee", {"content": "I drink black coffee after lunch"})
    query = "what do I drink during the day?"
    found = store.search(MEMORIES, query=query)
    ranked = [m.key for m in found]
    assert sorted(ranked[:2]) == ["coffee", "tea"]
    paged = store.search(MEMORIES, query=query, offset=1, limit=1)
    assert [m.key for m in paged] == ranked[1:2]
    best = found[0].value["content"]
    only = store.search(MEMORIES, query=query, filter={"content": {"$ne": best}})
    assert [m.key for m in only][:1] == ranked[1:2]


def test_list_namespaces_by_prefix_suffix_depth_and_page(store: PalaceStore) -> None:
    for namespace in [NOTES, PETS, ("drawers", "u1", "home", "garden")]:
        store.put(namespace, "k", {"text": f"a note in {namespace[-1]}"})
    store.put(("memories", "u1", "work"), "k", {"content": "The team standup is at 9am"})
    every = store.list_namespaces(prefix=("*", "u1"))
    assert every == [
        ("drawers", "u1", "home", "garden"),
        PETS,
        NOTES,
        ("memories", "u1", "work"),
    ]
    assert store.list_namespaces(prefix=("drawers", "u1", "home")) == every[:2]
    assert store.list_namespaces(prefix=("*", "u1"), suffix=("pets",)) == [PETS]
    assert store.list_namespaces(prefix=("*", "u1"), suffix=("u1", "*")) == [
        ("memories", "u1", "work")
    ]
    assert store.list_namespaces(prefix=("*", "u1"), max_depth=3) == [
        ("drawers", "u1", "home"),
        ("drawers", "u1", "notes"),
        ("memories", "u1", "work"),
    ]
    assert store.list_namespaces(prefix=("*", "u1"), limit=2, offset=1) == every[1:3]


def test_one_user_never_reads_another(store: PalaceStore, palace: Palace) -> None:
    store.put(NOTES, "k", {"text": "u1's secret plan"})
    store.put(MEMORIES, "m", {"content": "I live in Lisbon"})
    assert store.get(("drawers", "u2", "notes", "general"), "k") is None
    assert store.get(("memories", "u2"), "m") is None
    assert store.search(("drawers", "u2"), query="secret plan") == []
    assert store.search(("memories", "u2"), query="where do I live") == []
    assert store.list_namespaces(prefix=("*", "u2")) == []
    store.delete(("drawers", "u2", "notes", "general"), "k")
    assert store.get(NOTES, "k") is not None

    mine = PalaceStore(palace, user_id="u1")
    assert [item.key for item in mine.search(("memories",))] == ["m"]
    assert mine.list_namespaces() == [NOTES, MEMORIES]
    with pytest.raises(InvalidNamespaceError, match="serves user 'u1' only"):
        mine.get(("memories", "u2"), "m")


def test_a_memory_ttl_is_the_palace_ttl(store: PalaceStore, palace: Palace) -> None:
    assert store.supports_ttl
    store.put(MEMORIES, "soon", {"content": "The parcel arrives tomorrow"}, ttl=60)
    (memory,) = palace.memories(user_id="u1")
    assert memory.expires_at is not None
    minutes = (memory.expires_at - datetime.now(UTC)).total_seconds() / 60
    assert 58 < minutes <= 60
    store.put(MEMORIES, "gone", {"content": "My locker code is 4411"}, ttl=1e-6)
    assert store.get(MEMORIES, "gone") is None
    assert [item.key for item in store.search(MEMORIES)] == ["soon"]


def test_a_path_opens_the_palace_and_close_closes_it(palace: Palace) -> None:
    PalaceStore(palace).put(NOTES, "k", {"text": "kept"})
    palace.close()
    with PalaceStore(palace=palace.path) as store:
        item = store.get(NOTES, "k")
        assert item is not None
        assert item.value == {"text": "kept"}


async def test_the_async_methods(store: PalaceStore) -> None:
    await store.aput(NOTES, "a", {"text": "async note one", "n": 1})
    await store.aput(PETS, "b", {"text": "async note two", "n": 2})
    item = await store.aget(NOTES, "a")
    assert item is not None
    assert item.value == {"text": "async note one", "n": 1}
    found = await store.asearch(("drawers", "u1"), filter={"n": {"$gt": 1}})
    assert [i.key for i in found] == ["b"]
    ranked = await store.asearch(("drawers", "u1"), query="async note two", limit=1)
    assert [i.key for i in ranked] == ["b"]
    assert await store.alist_namespaces(prefix=("drawers", "u1")) == [PETS, NOTES]
    results = await asyncio.gather(store.aget(NOTES, "a"), store.aget(PETS, "b"))
    assert [r.key for r in results if r is not None] == ["a", "b"]
    await store.adelete(NOTES, "a")
    assert await store.aget(NOTES, "a") is None
    await store.aput(MEMORIES, "db", {"content": OLD})
    await store.aput(MEMORIES, "db", {"content": NEW})
    memory = await store.aget(MEMORIES, "db")
    assert memory is not None
    assert memory.value == {"content": NEW}


async def test_parallel_async_puts_keep_one_value_per_key(
    store: PalaceStore, palace: Palace
) -> None:
    values = [f"note number {n} about the garden" for n in range(6)]
    await asyncio.gather(
        *(store.aput(NOTES, f"k{n}", {"text": text}) for n, text in enumerate(values))
    )
    await asyncio.gather(
        store.aput(MEMORIES, "db", {"content": OLD}),
        store.aput(MEMORIES, "tea", {"content": "I drink green tea every morning"}),
    )
    await store.aput(MEMORIES, "db", {"content": NEW})
    found = await store.asearch(("drawers", "u1"), limit=10)
    assert sorted(item.value["text"] for item in found) == values
    current = {item.key: item.value["content"] for item in await store.asearch(MEMORIES)}
    assert current == {"db": NEW, "tea": "I drink green tea every morning"}


def test_index_and_fields_name_the_text_the_palace_files(
    store: PalaceStore, palace: Palace
) -> None:
    value = {"title": "Grey cat Miso adopted", "body": {"notes": ["vet on Friday"]}}
    store.put(PETS, "miso", value, index=["title", "body.notes[*]"])
    (drawer,) = palace.get(palace.drawer_ids(user_id="u1"), user_id="u1")
    assert drawer.text == "Grey cat Miso adopted\nvet on Friday"
    assert store.search(PETS, query="which cat was adopted?")[0].value == value

    titled = PalaceStore(palace, fields=["title"])
    titled.put(NOTES, "boiler", {"title": "Boiler serviced", "text": "ignored here"})
    item = titled.get(NOTES, "boiler")
    assert item is not None
    assert item.value["text"] == "ignored here"
    texts = {d.text for d in palace.get(palace.drawer_ids(user_id="u1"), user_id="u1")}
    assert "Boiler serviced" in texts

    store.put(NOTES, "plain", {"text": "filed even with index=False"}, index=False)
    assert store.get(NOTES, "plain") is not None
