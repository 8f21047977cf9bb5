"""What search remembers between queries is forgotten when the palace changes.

The pipeline keeps drawers, vectors, closet pointers and closet terms read from the
ledger, and the palace keeps, per owner, whether there are memories and triples at all;
all of it is valid for one ledger generation. These tests write between two searches
(through the same palace and through a second one open on the same directory, as another
process would) and check that the second search sees the write. The FAKE hashing
embedder and the exact ``sqlite`` backend are enough: nothing here depends on meaning.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from palace_retrievers import Palace

DRAWERS = [
    "The orders service writes every order to the orders database at night.",
    "Lunch on Friday was pizza with the whole team.",
    "Backups of the orders database run every six hours.",
    "Alice adopted a cat called Miso last spring.",
]


@pytest.fixture
def palace(open_palace: Callable[..., Palace], tmp_path: Path) -> Palace:
    palace = open_palace(tmp_path / "palace", backend="sqlite")
    palace.add_texts(DRAWERS, ids=[f"d{n}" for n in range(len(DRAWERS))], wing="work")
    palace.add_texts(DRAWERS[:2], ids=["u1-0", "u1-1"], wing="work", user_id="u1")
    return palace


def ids(palace: Palace, query: str, **kwargs: object) -> list[str]:
    return [h.id for h in palace.search(query, k=10, **kwargs)]  # type: ignore[arg-type]


def test_a_drawer_added_or_deleted_after_a_search_is_seen_by_the_next(palace: Palace) -> None:
    assert "new" not in ids(palace, "zebra crossing")
    palace.add_texts(["A zebra crossing was painted outside the office."], ids=["new"])
    assert ids(palace, "zebra crossing")[0] == "new"
    palace.delete(["new"])
    assert "new" not in ids(palace, "zebra crossing")


def test_a_drawer_rewritten_under_the_same_id_is_searched_with_its_new_text(
    palace: Palace,
) -> None:
    before = palace.search("pizza lunch", k=1, wing="work")[0]
    assert before.id == "d1"
    assert before.scores["bm25"] > 0
    palace.add_texts(["Nothing about food at all here."], ids=["d1"], wing="work")
    hits = {h.id: h for h in palace.search("pizza lunch", k=10, wing="work")}
    assert hits["d1"].text == "Nothing about food at all here."
    assert hits["d1"].scores["bm25"] == 0.0


def test_a_write_through_another_palace_on_the_same_directory_is_seen(
    palace: Palace, open_palace: Callable[..., Palace]
) -> None:
    assert "other" not in ids(palace, "quokka sighting")
    other = open_palace(palace.path, backend="sqlite")
    other.add_texts(["A quokka sighting near the harbour."], ids=["other"])
    assert ids(palace, "quokka sighting")[0] == "other"


def test_memories_appear_once_remembered_and_only_for_their_owner(palace: Palace) -> None:
    def memory_hits(user_id: str | None) -> list[str]:
        return [h.id for h in palace.search("orders database", user_id=user_id) if h.is_memory]

    assert memory_hits("u1") == []
    assert memory_hits("u2") == []
    assert memory_hits(None) == []
    memory = palace.remember("The orders database is PostgreSQL 15", user_id="u1").memory
    assert memory_hits("u1") == [memory.id]
    assert memory_hits("u2") == []
    assert memory_hits(None) == []
    palace.forget_memories([memory.id], user_id="u1")
    assert memory_hits("u1") == []


def test_memories_remembered_through_another_palace_are_found(
    palace: Palace, open_palace: Callable[..., Palace]
) -> None:
    assert not any(h.is_memory for h in palace.search("orders database", user_id="u1"))
    other = open_palace(palace.path, backend="sqlite")
    other.remember("The orders database is PostgreSQL 15", user_id="u1")
    assert any(h.is_memory for h in palace.search("orders database", user_id="u1"))


def test_the_graph_boost_follows_triples_added_after_a_search(palace: Palace) -> None:
    def graph_score(user_id: str | None, drawer: str) -> float:
        hits = {h.id: h for h in palace.search("What did Alice adopt?", user_id=user_id)}
        return hits[drawer].scores["graph"] if drawer in hits else 0.0

    assert graph_score(None, "d3") == 0.0
    palace.kg.add("Alice", "adopted", "Miso", source_drawer="d3")
    assert graph_score(None, "d3") > 0
    assert graph_score("u1", "u1-0") == 0.0  # u1 has no triples: nothing is boosted
    palace.kg.add("Alice", "ordered", "pizza", source_drawer="u1-1", user_id="u1")
    assert graph_score("u1", "u1-1") > 0


def test_closet_pointers_follow_a_rewritten_source(
    open_palace: Callable[..., Palace], tmp_path: Path
) -> None:
    palace = open_palace(tmp_path / "closets", backend="sqlite")
    palace.add_texts(
        ["Kestrel Project kickoff with Ingrid Olafsdottir on Monday."],
        metadatas=[{"source": "notes.md"}],
        ids=["a"],
    )
    first = palace.search("Ingrid Olafsdottir", k=1)[0]
    assert first.id == "a"
    assert first.scores["closet"] > 0
    palace.delete(["a"])
    palace.add_texts(
        ["Kestrel Project kickoff with Ingrid Olafsdottir moved to Tuesday."],
        metadatas=[{"source": "notes.md"}],
        ids=["b"],
    )
    hits = palace.search("Ingrid Olafsdottir", k=5)
    assert [h.id for h in hits] == ["b"]
    assert hits[0].scores["closet"] > 0
