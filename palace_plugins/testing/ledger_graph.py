"""The knowledge-graph part of the ledger suite: :class:`GraphStoreTests`.

Mixed into :class:`~palace_plugins.testing.ledger.LedgerTests`; it needs the suite's
``ledger`` fixture. Triples are built as :class:`~palace_retrievers.graph.KnowledgeGraph`
builds them (normalised names and keys), then handed to the store directly.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from palace_retrievers.errors import InvalidQueryError
from palace_retrievers.ledger import Ledger
from palace_retrievers.records.triples import Triple, entity_key, entity_name

__all__ = ["GraphStoreTests", "fact", "year"]


def year(value: int, month: int = 1) -> datetime:
    """The first of ``month`` of ``value``, midnight UTC."""
    return datetime(value, month, 1, tzinfo=UTC)


def fact(subject: str, predicate: str, object: str, **fields: Any) -> Triple:
    """A triple as the knowledge graph hands it to the store (no id yet)."""
    return Triple(
        id="",
        subject=entity_name(subject),
        predicate=predicate,
        object=entity_name(object),
        subject_key=entity_key(subject),
        object_key=entity_key(object),
        **fields,
    )


def _spans(triples: list[Triple]) -> list[tuple[str, datetime | None, datetime | None]]:
    return [(t.object, t.valid_from, t.valid_to) for t in triples]


class GraphStoreTests:
    """The contract of :class:`~palace_retrievers.ledger.graph_store.GraphStore`."""

    def test_a_multi_valued_fact_is_filed_once(self, ledger: Ledger) -> None:
        tea = ledger.add_triple(
            fact("Alice", "likes", "tea", confidence=0.5, valid_from=year(2022)),
            single_valued=False,
        )
        coffee = ledger.add_triple(fact("Alice", "likes", "coffee"), single_valued=False)
        assert tea.id
        assert coffee.id
        assert tea.id != coffee.id
        again = ledger.add_triple(
            fact(
                "alice", "likes", "Tea", confidence=0.9, valid_from=year(2020), source_drawer="d1"
            ),
            single_valued=False,
        )
        assert again.id == tea.id
        assert (again.confidence, again.valid_from, again.source_drawer) == (0.9, year(2020), "d1")
        about = ledger.triples_about("alice", user_id=None, as_of=None)
        assert [t.object for t in about] == ["coffee", "tea"]  # no start first, then by start
        assert about[1].confidence == 0.9
        assert [t.id for t in ledger.triples_about("tea", user_id=None, as_of=None)] == [tea.id]
        only = ledger.triples_about("alice", user_id=None, as_of=None, predicate="likes")
        assert len(only) == 2
        assert ledger.triples_about("alice", user_id=None, as_of=None, predicate="knows") == []

    def test_a_single_valued_fact_forms_a_sequence(self, ledger: Ledger) -> None:
        def file(city: str, start: datetime) -> Triple:
            return ledger.add_triple(
                fact("Bob", "lives_in", city, valid_from=start), single_valued=True
            )

        file("Paris", year(2020))
        berlin = file("Berlin", year(2023))
        file("London", year(2021))  # filed late: it ends where Berlin starts
        timeline = ledger.triples_about("bob", user_id=None, as_of=None)
        assert _spans(timeline) == [
            ("Paris", year(2020), year(2021)),
            ("London", year(2021), year(2023)),
            ("Berlin", year(2023), None),
        ]
        assert [t.ended_reason for t in timeline] == ["superseded", "superseded", None]
        restated = file("Berlin", year(2024))
        assert restated.id == berlin.id
        assert restated.valid_from == year(2023)
        assert len(ledger.triples_about("bob", user_id=None, as_of=None)) == 3

        def held(at: datetime) -> list[str]:
            return [t.object for t in ledger.triples_about("bob", user_id=None, as_of=at)]

        assert held(year(2019)) == []
        assert held(year(2020)) == ["Paris"]
        assert held(year(2021)) == ["London"]  # valid_to is exclusive
        assert held(year(2022, 6)) == ["London"]
        assert held(year(2030)) == ["Berlin"]

    def test_a_closed_fact_is_filed_as_given(self, ledger: Ledger) -> None:
        past = fact("Carol", "works_at", "Acme", valid_from=year(2010), valid_to=year(2015))
        first = ledger.add_triple(past, single_valued=True)
        second = ledger.add_triple(past, single_valued=True)
        assert first.id == second.id
        (stored,) = ledger.triples_about("carol", user_id=None, as_of=None)
        assert (stored.valid_from, stored.valid_to) == (year(2010), year(2015))
        assert ledger.triples_about("carol", user_id=None, as_of=year(2016)) == []

    def test_close_triples(self, ledger: Ledger) -> None:
        ledger.add_triple(fact("Dan", "knows", "Eve", valid_from=year(2020)), single_valued=False)
        ledger.add_triple(fact("Dan", "knows", "Fay"), single_valued=False)
        with pytest.raises(InvalidQueryError):
            ledger.close_triples(user_id=None, subject_key="dan", predicate="knows", at=year(2019))
        assert all(t.is_open for t in ledger.triples_about("dan", user_id=None, as_of=None))
        closed = ledger.close_triples(
            user_id=None, subject_key="dan", predicate="knows", object_key="fay", at=year(2024)
        )
        assert closed == 1
        spans = {
            t.object: (t.valid_to, t.ended_reason)
            for t in ledger.triples_about("dan", user_id=None, as_of=None)
        }
        assert spans == {"Eve": (None, None), "Fay": (year(2024), "invalidated")}
        assert (
            ledger.close_triples(
                user_id=None, subject_key="dan", predicate="knows", at=year(2025), reason="left"
            )
            == 1
        )
        assert (
            ledger.close_triples(user_id=None, subject_key="dan", predicate="knows", at=year(2026))
            == 0
        )

    def test_the_graph_is_partitioned_by_owner(self, ledger: Ledger) -> None:
        ledger.add_triple(fact("Gus", "likes", "jazz", user_id="u1"), single_valued=False)
        ledger.add_triple(fact("Gus", "likes", "punk", user_id="u2"), single_valued=False)
        ledger.upsert_entity(user_id="u2", key="ivy", name="Ivy", type="person")
        assert [t.object for t in ledger.triples_about("gus", user_id="u1", as_of=None)] == ["jazz"]
        assert [t.object for t in ledger.triples_about("gus", user_id="u2", as_of=None)] == ["punk"]
        assert ledger.triples_about("gus", user_id=None, as_of=None) == []
        assert ledger.graph_stats(user_id="u1").entities == 2
        assert ledger.graph_stats(user_id="u2").entities == 3
        assert ledger.delete_user_graph("u1") == 1
        assert ledger.graph_stats(user_id="u1").entities == 0
        assert ledger.graph_stats(user_id="u2").triples == 1
        with pytest.raises(InvalidQueryError):
            ledger.delete_user_graph("")

    def test_upsert_entity_keeps_the_first_name(self, ledger: Ledger) -> None:
        ledger.upsert_entity(user_id=None, key="ivy", name="Ivy")
        ledger.upsert_entity(user_id=None, key="ivy", name="IVY", type="person")
        ledger.upsert_entity(user_id="u1", key="ivy", name="Ivy")
        assert ledger.graph_stats(user_id=None).entities == 1
        assert ledger.user_rows(None)["entities"] == 1
        assert ledger.user_rows("u1")["entities"] == 1

    def test_triples_from_drawers_and_entity_drawers(self, ledger: Ledger) -> None:
        ledger.add_triple(
            fact("Hal", "works_at", "Initech", source_drawer="d1", valid_from=year(2020)),
            single_valued=True,
        )
        ledger.add_triple(
            fact("Hal", "works_at", "Globex", source_drawer="d2", valid_from=year(2024)),
            single_valued=True,
        )
        ledger.add_triple(fact("Hal", "likes", "chess", source_memory="m1"), single_valued=False)
        ledger.add_triple(
            fact("Hal", "likes", "go", source_drawer="d9", user_id="u1"), single_valued=False
        )
        found = ledger.triples_from_drawers(["d1", "d2", "d9"], user_id=None)
        assert sorted(t.object for t in found) == ["Globex", "Initech"]
        at_2021 = ledger.entity_drawers("where does hal work?", user_id=None, at=year(2021))
        assert at_2021 == [("hal", "d1")]
        at_2025 = ledger.entity_drawers("hal joined globex", user_id=None, at=year(2025))
        assert at_2025 == [("globex", "d2"), ("hal", "d2")]
        assert ledger.entity_drawers("nobody here", user_id=None, at=year(2025)) == []
        assert ledger.entity_drawers("hal", user_id="u1", at=year(2025)) == [("hal", "d9")]

    def test_graph_stats(self, ledger: Ledger) -> None:
        assert ledger.graph_stats(user_id=None).triples == 0
        ledger.add_triple(fact("Jo", "lives_in", "Oslo", valid_from=year(2020)), single_valued=True)
        ledger.add_triple(
            fact("Jo", "lives_in", "Bergen", valid_from=year(2022)), single_valued=True
        )
        ledger.add_triple(fact("Jo", "likes", "skiing"), single_valued=False)
        stats = ledger.graph_stats(user_id=None)
        assert (stats.entities, stats.triples, stats.open, stats.closed) == (4, 3, 2, 1)
        assert dict(stats.predicates) == {"likes": 1, "lives_in": 2}

    def test_delete_triples_from(self, ledger: Ledger) -> None:
        ledger.add_triple(fact("Kim", "likes", "a", source_drawer="d1"), single_valued=False)
        ledger.add_triple(fact("Kim", "likes", "b", source_drawer="d2"), single_valued=False)
        ledger.add_triple(fact("Kim", "likes", "c", source_memory="m1"), single_valued=False)
        ledger.add_triple(fact("Kim", "likes", "d"), single_valued=False)
        assert ledger.delete_triples_from(drawer_ids=["d1"], memory_ids=["m1"]) == 2
        assert ledger.delete_triples_from() == 0
        left = ledger.triples_about("kim", user_id=None, as_of=None)
        assert sorted(t.object for t in left) == ["b", "d"]
