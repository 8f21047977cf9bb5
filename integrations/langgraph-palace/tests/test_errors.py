"""What PalaceStore refuses, with LangGraph's own kinds of error, storing nothing."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.store.base import GetOp, InvalidNamespaceError, PutOp
from palace_retrievers import InvalidQueryError, Palace

from langgraph.store.palace import PalaceStore

NOTES = ("drawers", "u1", "notes", "general")


def nothing_stored(palace: Palace) -> bool:
    return (
        palace.drawer_ids(user_id="u1") == []
        and palace.memories(user_id="u1", status=None) == []
        and palace.wings(user_id="u1") == {}
    )


@pytest.mark.parametrize(
    "namespace",
    [
        ("test", "foo"),  # no palace root
        ("users", "u1", "memories"),
        ("drawers", "u1", "notes"),  # a drawer needs a wing and a room
        ("drawers", "u1"),
        ("memories", "u1", "work", "ops", "extra"),  # deeper than wing and room
        ("memories",),  # no user, and the store serves every user
    ],
)
def test_a_namespace_that_cannot_be_mapped(
    store: PalaceStore, palace: Palace, namespace: tuple[str, ...]
) -> None:
    with pytest.raises(InvalidNamespaceError):
        store.put(namespace, "k", {"content": "I live in Lisbon"})
    with pytest.raises(InvalidNamespaceError):
        store.get(namespace, "k")
    assert nothing_stored(palace)


def test_a_prefix_that_cannot_be_mapped(store: PalaceStore) -> None:
    with pytest.raises(InvalidNamespaceError, match="'memories' or 'drawers'"):
        store.search(("test",), query="anything")
    with pytest.raises(InvalidNamespaceError, match="names no user"):
        store.search(("memories",), query="anything")
    with pytest.raises(InvalidNamespaceError, match="list_namespaces needs a user"):
        store.list_namespaces()
    with pytest.raises(InvalidNamespaceError, match="needs a user"):
        store.list_namespaces(suffix=("general",))


@pytest.mark.parametrize("value", [["a list"], "a string", 42, {"when": object()}, {1: "x"}])
def test_a_value_that_is_not_a_json_dict(store: PalaceStore, palace: Palace, value: Any) -> None:
    with pytest.raises(TypeError, match="store value"):
        store.put(NOTES, "k", value)
    with pytest.raises(TypeError, match="store value"):
        store.put(("memories", "u1"), "k", value)
    assert nothing_stored(palace)


def test_a_bad_op_in_a_batch_stores_nothing_of_the_batch(
    store: PalaceStore, palace: Palace
) -> None:
    ops = [
        PutOp(NOTES, "fine", {"text": "a good note"}),
        PutOp(("memories", "u1"), "fine", {"content": "I live in Lisbon"}),
        PutOp(("elsewhere", "u1"), "bad", {"text": "no place for it"}),
    ]
    with pytest.raises(InvalidNamespaceError):
        store.batch(ops)
    with pytest.raises(TypeError):
        store.batch([ops[0], PutOp(NOTES, "bad", ["not", "a", "dict"])])  # type: ignore[arg-type]
    with pytest.raises(InvalidNamespaceError):
        store.batch([ops[0], GetOp(("drawers", "u1"), "k")])
    assert nothing_stored(palace)


def test_a_value_with_no_text_or_a_ttl_on_a_drawer(store: PalaceStore, palace: Palace) -> None:
    with pytest.raises(ValueError, match="no text"):
        store.put(("memories", "u1"), "k", {"content": "   "})
    with pytest.raises(ValueError, match="no text"):
        store.put(NOTES, "k", {"title": "x"}, index=["missing"])
    with pytest.raises(ValueError, match="drawers have no TTL"):
        store.put(NOTES, "k", {"text": "a note"}, ttl=5)
    assert nothing_stored(palace)


def test_a_filter_on_an_unknown_key_or_operator(store: PalaceStore) -> None:
    store.put(NOTES, "k", {"text": "the boiler was serviced", "year": 2026})
    store.put(("memories", "u1"), "m", {"content": "I live in Lisbon"})
    with pytest.raises(ValueError, match=r"unknown key 'colour'.*text, year"):
        store.search(("drawers", "u1"), filter={"colour": "red"})
    with pytest.raises(ValueError, match="unknown key 'colour'"):
        store.search(("drawers", "u1"), query="boiler", filter={"colour": "red"})
    with pytest.raises(ValueError, match="unknown key 'city'"):
        store.search(("memories", "u1"), query="where do I live", filter={"city": "Lisbon"})
    with pytest.raises(ValueError, match=r"unknown filter operator \$regex"):
        store.search(("drawers", "u1"), filter={"text": {"$regex": "boil.*"}})
    with pytest.raises(ValueError, match="a filter must be a dict"):
        store.search(("drawers", "u1"), filter=["text"])  # type: ignore[arg-type]
    # a known key that no item matches is no error
    assert store.search(("drawers", "u1"), filter={"year": 1999}) == []


def test_a_kind_that_is_no_memory_kind_is_refused_by_the_palace(
    store: PalaceStore, palace: Palace
) -> None:
    with pytest.raises(InvalidQueryError):
        store.put(("memories", "u1"), "k", {"content": "Quarterly numbers", "kind": "report"})
    assert nothing_stored(palace)
