"""The temporal knowledge graph over a real SQLite ledger file (no embedder involved).

The ledger used here is ``SQLiteLedger`` with the graph mixin mixed in, exactly as the
palace's ledger carries it, so every write goes through the ledger's real transactions.
"""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Iterator
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest

from palace_retrievers.errors import InvalidQueryError
from palace_retrievers.graph.knowledge_graph import KnowledgeGraph
from palace_retrievers.ledger.sql import graph as sql_graph
from palace_retrievers.ledger.sqlite import SQLiteLedger
from palace_retrievers.records.triples import GraphStats, Triple, entity_key, predicate_name

#: The SQLite ledger (its graph part is :mod:`palace_retrievers.ledger.sql.graph`).
GraphLedger = SQLiteLedger


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[GraphLedger]:
    opened = GraphLedger(tmp_path / "ledger.sqlite3")
    yield opened
    opened.close()


@pytest.fixture
def kg(ledger: GraphLedger) -> KnowledgeGraph:
    return KnowledgeGraph(ledger)


def rows(ledger: GraphLedger, sql: str, *params: Any) -> list[Any]:
    return ledger._read(sql, params)


def facts(triples: list[Triple]) -> list[tuple[str, str, str]]:
    return [(t.subject, t.predicate, t.object) for t in triples]


# -- add, query, as_of, timeline ---------------------------------------------------------


def test_add_then_query_by_subject_and_object(kg: KnowledgeGraph) -> None:
    triple = kg.add("Alice", "Works At", "Acme Corp", valid_from="2024-01-01", confidence=0.8)

    assert triple.id.startswith("kg_")
    assert (triple.subject, triple.predicate, triple.object) == ("Alice", "works_at", "Acme Corp")
    assert triple.valid_from == at("2024-01-01")
    assert triple.valid_from.tzinfo is not None
    assert triple.valid_to is None
    assert triple.is_open
    assert triple.confidence == 0.8
    assert kg.query("alice") == [triple]
    assert kg.query("  ACME   corp ") == [triple]  # the object, any case and spacing
    assert kg.query("Alice", predicate="worksAt") == [triple]
    assert kg.query("Alice", predicate="lives_in") == []
    assert kg.query("Bob") == []


def test_as_of_is_half_open_and_open_sides_count(kg: KnowledgeGraph) -> None:
    kg.add("Alice", "role", "engineer", valid_from="2020-01-01")
    kg.add("Alice", "role", "manager", valid_from="2023-06-01T12:00:00+02:00")
    kg.add("Alice", "knows", "Bob")  # no start: true since always

    assert facts(kg.query("Alice", as_of="2019-12-31")) == [("Alice", "knows", "Bob")]
    assert ("Alice", "role", "engineer") in facts(kg.query("Alice", as_of=date(2021, 5, 5)))
    # 12:00+02:00 is 10:00 UTC: the old value holds until, not including, that instant.
    just_before = kg.query("Alice", as_of="2023-06-01T09:59:59Z", predicate="role")
    assert facts(just_before) == [("Alice", "role", "engineer")]
    assert facts(kg.query("Alice", as_of=at("2023-06-01T10:00:00"), predicate="role")) == [
        ("Alice", "role", "manager")
    ]
    assert facts(kg.query("Alice", predicate="role")) == [("Alice", "role", "manager")]


def test_timeline_is_everything_ordered_by_start_unknown_first(kg: KnowledgeGraph) -> None:
    kg.add("Alice", "lives_in", "Porto", valid_from="2022-01-01")
    kg.add("Alice", "knows", "Bob")
    kg.add("Carol", "mentors", "Alice", valid_from="2021-01-01")
    kg.add("Alice", "lives_in", "Lisbon", valid_from="2024-01-01")

    timeline = kg.timeline("alice")
    assert facts(timeline) == [
        ("Alice", "knows", "Bob"),
        ("Carol", "mentors", "Alice"),
        ("Alice", "lives_in", "Porto"),
        ("Alice", "lives_in", "Lisbon"),
    ]
    assert [t.is_open for t in timeline] == [True, True, False, True]


def test_dates_datetimes_and_epoch_seconds_are_stored_in_utc(
    kg: KnowledgeGraph, ledger: GraphLedger
) -> None:
    local = datetime(2024, 3, 1, 9, 30, tzinfo=UTC)
    kg.add("a", "p1", "x", valid_from=date(2024, 3, 1))
    kg.add("a", "p2", "x", valid_from=local.astimezone())
    kg.add("a", "p3", "x", valid_from=local.timestamp())

    stored = sorted(r[0] for r in rows(ledger, "SELECT valid_from FROM triples"))
    assert stored == [
        "2024-03-01T00:00:00.000000+00:00",
        "2024-03-01T09:30:00.000000+00:00",
        "2024-03-01T09:30:00.000000+00:00",
    ]


# -- single-valued predicates -------------------------------------------------------------


def test_single_valued_predicate_closes_the_old_value_at_the_new_start(
    kg: KnowledgeGraph,
) -> None:
    lisbon = kg.add("Alice", "lives in", "Lisbon", valid_from="2020-01-01")
    porto = kg.add("alice", "lives_in", "Porto", valid_from="2023-06-01")

    assert kg.query("Alice") == [porto]
    old, new = kg.timeline("Alice")
    assert old.id == lisbon.id
    assert old.valid_to == at("2023-06-01") == new.valid_from
    assert old.ended_reason == "superseded"
    assert new.valid_to is None
    assert facts(kg.query("Alice", as_of="2021-01-01")) == [("Alice", "lives_in", "Lisbon")]
    stats = kg.stats()
    assert (stats.triples, stats.open, stats.closed) == (2, 1, 1)


def test_single_valued_without_a_start_closes_the_old_one_now(kg: KnowledgeGraph) -> None:
    kg.add("Alice", "works_at", "Acme", valid_from="2020-01-01")
    before = datetime.now(UTC)
    new = kg.add("Alice", "works_at", "Globex")
    after = datetime.now(UTC)

    assert new.valid_from is not None
    assert before <= new.valid_from <= after
    old = kg.timeline("Alice")[0]
    assert old.valid_to == new.valid_from
    assert facts(kg.query("Alice")) == [("Alice", "works_at", "Globex")]


def test_a_backdated_value_does_not_override_a_newer_one(kg: KnowledgeGraph) -> None:
    porto = kg.add("Alice", "lives_in", "Porto", valid_from="2023-01-01")
    lisbon = kg.add("Alice", "lives_in", "Lisbon", valid_from="2019-01-01")

    assert lisbon.valid_to == at("2023-01-01")
    assert lisbon.ended_reason == "superseded"
    assert kg.query("Alice") == [porto]
    assert facts(kg.query("Alice", as_of="2020-01-01")) == [("Alice", "lives_in", "Lisbon")]


def _history(kg: KnowledgeGraph, order: list[tuple[int, str]], user_id: str) -> list[str]:
    """File ``(year, city)`` in ``order``; return the city held in the middle of each year."""
    for year, city in order:
        kg.add("Alice", "lives_in", city, valid_from=f"{year}-01-01", user_id=user_id)
    years = sorted({year for year, _ in order})
    answers = []
    for year in years:
        (held,) = kg.query("Alice", as_of=f"{year}-06-01", user_id=user_id)
        answers.append(held.object)
    return answers


def test_single_valued_history_does_not_depend_on_filing_order(kg: KnowledgeGraph) -> None:
    history = [(2010, "Lisbon"), (2012, "Porto"), (2015, "Paris"), (2016, "Rome"), (2020, "Oslo")]
    truth = [city for _, city in history]
    for n, order in enumerate(itertools.permutations(history)):
        assert _history(kg, list(order), f"u{n}") == truth, order
        assert [t.object for t in kg.query("Alice", user_id=f"u{n}")] == ["Oslo"]
        assert kg.stats(user_id=f"u{n}").open == 1


def test_restatements_in_or_against_time_order_are_merged(kg: KnowledgeGraph) -> None:
    history = [(2010, "Lisbon"), (2011, "Lisbon"), (2012, "Porto"), (2013, "Lisbon")]
    history += [(2014, "Lisbon")]
    truth = [city for _, city in history]
    merged = [
        ("Lisbon", at("2010-01-01"), at("2012-01-01")),
        ("Porto", at("2012-01-01"), at("2013-01-01")),
        ("Lisbon", at("2013-01-01"), None),
    ]
    for user_id, order in (("forward", history), ("backward", history[::-1])):
        assert _history(kg, order, user_id) == truth
        timeline = kg.timeline("Alice", user_id=user_id)
        assert [(t.object, t.valid_from, t.valid_to) for t in timeline] == merged


def test_a_restatement_keeps_the_interval_it_joins(kg: KnowledgeGraph) -> None:
    kg.add("Alice", "works_at", "Acme", valid_from="2020-01-01", confidence=0.5)
    kg.add("Alice", "works_at", "Globex", valid_from="2022-01-01")
    again = kg.add("Alice", "works_at", "Acme", valid_from="2021-01-01", confidence=0.9,
                   source_drawer="d7")  # fmt: skip

    assert (again.valid_from, again.valid_to) == (at("2020-01-01"), at("2022-01-01"))
    assert (again.confidence, again.source_drawer) == (0.9, "d7")
    assert len(kg.timeline("Alice")) == 2


def test_multi_valued_predicates_keep_every_value(kg: KnowledgeGraph) -> None:
    kg.add("Alice", "likes", "tea", valid_from="2020-01-01")
    kg.add("Alice", "likes", "coffee", valid_from="2024-01-01")

    assert sorted(t.object for t in kg.query("Alice")) == ["coffee", "tea"]
    assert kg.stats().closed == 0


def test_single_valued_list_is_configurable_with_wildcards(ledger: GraphLedger) -> None:
    kg = KnowledgeGraph(ledger, single_valued=["Favourite *", "uses database"])
    assert kg.single_valued == ("favourite_*", "uses_database")
    assert kg.is_single_valued("favouriteEditor")
    assert not kg.is_single_valued("lives in")

    kg.add("me", "favourite editor", "Vim", valid_from="2020-01-01")
    kg.add("me", "favourite_editor", "Emacs", valid_from="2021-01-01")
    kg.add("me", "lives_in", "Lisbon", valid_from="2020-01-01")
    kg.add("me", "lives_in", "Porto", valid_from="2021-01-01")

    current = facts(kg.query("me"))
    assert ("me", "favourite_editor", "Vim") not in current
    assert ("me", "favourite_editor", "Emacs") in current
    assert ("me", "lives_in", "Lisbon") in current
    assert ("me", "lives_in", "Porto") in current


def test_the_same_open_fact_is_not_filed_twice(kg: KnowledgeGraph, ledger: GraphLedger) -> None:
    first = kg.add("Alice", "likes", "tea", valid_from="2022-01-01", confidence=0.4)
    again = kg.add(
        "ALICE", "likes", " Tea ", valid_from="2021-01-01", confidence=0.9, source_drawer="d1"
    )
    weaker = kg.add("alice", "likes", "tea", confidence=0.1)

    assert again.id == first.id == weaker.id
    assert rows(ledger, "SELECT count(*) FROM triples") == [(1,)]
    (stored,) = kg.query("Alice")
    assert stored.confidence == 0.9
    assert stored.valid_from == at("2021-01-01")
    assert stored.source_drawer == "d1"


def test_a_fact_true_again_after_it_ended_is_a_new_triple(kg: KnowledgeGraph) -> None:
    kg.add("Alice", "lives_in", "Lisbon", valid_from="2018-01-01")
    kg.add("Alice", "lives_in", "Porto", valid_from="2020-01-01")
    back = kg.add("Alice", "lives_in", "Lisbon", valid_from="2023-01-01")

    assert [t.object for t in kg.timeline("Alice")] == ["Lisbon", "Porto", "Lisbon"]
    assert len({t.id for t in kg.timeline("Alice")}) == 3
    assert kg.query("Alice") == [back]


def test_a_fact_of_the_past_can_be_filed_closed(kg: KnowledgeGraph) -> None:
    now = kg.add("Alice", "works_at", "Globex", valid_from="2022-01-01")
    past = kg.add("Alice", "works_at", "Acme", valid_from="2015-01-01", valid_to="2019-01-01")

    assert past.valid_to == at("2019-01-01")
    assert not past.is_open
    assert kg.query("Alice") == [now]  # a closed arrival closes nothing
    assert facts(kg.query("Alice", as_of="2016-01-01")) == [("Alice", "works_at", "Acme")]


def test_a_failed_write_leaves_the_old_value_open(
    kg: KnowledgeGraph, ledger: GraphLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    kg.add("Alice", "lives_in", "Lisbon", valid_from="2020-01-01")

    def broken(*args: Any, **kwargs: Any) -> Triple:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(sql_graph, "_insert_triple", broken)
    with pytest.raises(sqlite3.OperationalError):
        kg.add("Alice", "lives_in", "Porto", valid_from="2023-01-01")

    (still,) = kg.query("Alice")
    assert still.object == "Lisbon"
    assert still.is_open
    assert rows(ledger, "SELECT count(*) FROM triples") == [(1,)]


# -- invalidate ---------------------------------------------------------------------------


def test_invalidate_with_ended(kg: KnowledgeGraph) -> None:
    kg.add("Alice", "works_at", "Acme", valid_from="2020-01-01")

    assert kg.invalidate("alice", "Works At", ended="2024-01-01") == 1
    assert kg.query("Alice") == []
    assert facts(kg.query("Alice", as_of="2023-12-31")) == [("Alice", "works_at", "Acme")]
    (closed,) = kg.timeline("Alice")
    assert closed.valid_to == at("2024-01-01")
    assert closed.ended_reason == "invalidated"
    assert kg.invalidate("Alice", "works_at") == 0  # nothing open any more


def test_invalidate_defaults_to_now_and_can_pick_one_object(kg: KnowledgeGraph) -> None:
    kg.add("Alice", "likes", "tea")
    kg.add("Alice", "likes", "coffee")

    before = datetime.now(UTC)
    assert kg.invalidate("Alice", "likes", "Coffee") == 1
    assert [t.object for t in kg.query("Alice")] == ["tea"]
    ended = next(t for t in kg.timeline("Alice") if t.object == "coffee").valid_to
    assert ended is not None
    assert ended >= before
    assert kg.invalidate("Alice", "likes") == 1


def test_invalidate_before_the_start_is_refused_and_closes_nothing(kg: KnowledgeGraph) -> None:
    kg.add("Alice", "likes", "tea", valid_from="2020-01-01")
    kg.add("Alice", "likes", "coffee", valid_from="2024-01-01")

    with pytest.raises(InvalidQueryError, match="before the fact started"):
        kg.invalidate("Alice", "likes", ended="2022-01-01")
    assert len(kg.query("Alice")) == 2


# -- isolation and deletion ---------------------------------------------------------------


def _three_owners(kg: KnowledgeGraph) -> None:
    kg.add("Alice", "lives_in", "Lisbon", valid_from="2020-01-01", source_drawer="d-none")
    kg.add(
        "Alice", "lives_in", "Paris", valid_from="2020-01-01", source_drawer="d-u1", user_id="u1"
    )
    kg.add(
        "Alice", "lives_in", "Berlin", valid_from="2020-01-01", source_drawer="d-u2", user_id="u2"
    )


def test_each_owner_sees_only_its_own_graph(kg: KnowledgeGraph) -> None:
    _three_owners(kg)

    assert [t.object for t in kg.query("Alice")] == ["Lisbon"]
    assert [t.object for t in kg.query("Alice", user_id="u1")] == ["Paris"]
    assert [t.object for t in kg.timeline("Alice", user_id="u2")] == ["Berlin"]
    assert kg.query("Alice", user_id="nobody") == []
    assert [t.user_id for t in kg.timeline("Alice", user_id="u1")] == ["u1"]
    assert kg.query("Alice")[0].user_id is None
    assert kg.stats(user_id="u1").triples == 1
    assert kg.drawer_boosts("where is Alice", user_id="u1") == {"d-u1": 0.05}
    assert kg.drawer_boosts("where is Alice") == {"d-none": 0.05}


def test_one_owners_writes_never_touch_another_owners_triples(kg: KnowledgeGraph) -> None:
    _three_owners(kg)

    kg.add("Alice", "lives_in", "Rome", valid_from="2024-01-01", user_id="u1")  # supersedes
    assert kg.invalidate("Alice", "lives_in", user_id="u2", ended="2025-01-01") == 1
    kg.add("alice", "lives_in", "Lisbon", user_id="u1")  # same text as the unowned fact

    assert [(t.object, t.is_open) for t in kg.timeline("Alice")] == [("Lisbon", True)]
    assert [t.object for t in kg.query("Alice", user_id="u1")] == ["Lisbon"]
    assert [t.is_open for t in kg.timeline("Alice", user_id="u2")] == [False]


def test_delete_user_graph_leaves_no_row_of_that_user(
    kg: KnowledgeGraph, ledger: GraphLedger
) -> None:
    _three_owners(kg)
    kg.add("u1 project", "uses", "PostgreSQL", user_id="u1")
    kg.invalidate("Alice", "lives_in", user_id="u1")

    assert ledger.delete_user_graph("u1") == 2

    for table in ("triples", "entities"):
        assert rows(ledger, f"SELECT count(*) FROM {table} WHERE user_id = 'u1'") == [(0,)]
    assert kg.timeline("Alice", user_id="u1") == []
    assert kg.stats(user_id="u1") == GraphStats()
    assert [t.object for t in kg.query("Alice")] == ["Lisbon"]
    assert [t.object for t in kg.query("Alice", user_id="u2")] == ["Berlin"]
    for bad in ("", None):
        with pytest.raises(InvalidQueryError):
            ledger.delete_user_graph(bad)  # type: ignore[arg-type]


def test_triples_from_drawers_and_their_deletion(kg: KnowledgeGraph, ledger: GraphLedger) -> None:
    kg.add("Alice", "likes", "tea", source_drawer="d1")
    kg.add("Alice", "likes", "jazz", source_drawer="d2", user_id="u1")
    kg.add("Bob", "likes", "tea", source_memory="m1")

    assert facts(ledger.triples_from_drawers(["d1", "d2"], user_id=None)) == [
        ("Alice", "likes", "tea")
    ]
    assert facts(ledger.triples_from_drawers(["d2"], user_id="u1")) == [("Alice", "likes", "jazz")]
    assert ledger.delete_triples_from(drawer_ids=["d1", "d2"], memory_ids=["m1"]) == 3
    assert rows(ledger, "SELECT count(*) FROM triples") == [(0,)]


# -- names: unicode, Chinese, quotes ------------------------------------------------------


def test_entity_and_predicate_normalisation() -> None:
    assert entity_key("  ＡＬＩＣＥ\n  Smith. ") == entity_key("alice smith") == "alice smith"
    assert entity_key("Straße") == entity_key("STRASSE")
    assert predicate_name("worksAt") == predicate_name("Works-At ") == "works_at"
    assert predicate_name("住 在") == "住_在"


def test_unicode_and_chinese_names(kg: KnowledgeGraph) -> None:
    zh = kg.add("张伟", "住在", "北京", valid_from="2020-01-01", source_drawer="d-zh")
    kg.add("张伟", "住在", "上海", valid_from="2024-03-01")  # 住在 is multi-valued by default
    kg.add("Zoë", "lives_in", "Zürich")

    assert zh.predicate == "住在"
    assert {t.object for t in kg.query("张伟")} == {"北京", "上海"}
    assert kg.query("北京", as_of="2021-01-01") == [zh]
    assert facts(kg.query("ZOË")) == [("Zoë", "lives_in", "Zürich")]
    assert kg.query("zurich") == []  # accents are part of the name
    assert kg.drawer_boosts("张伟现在住在哪里？") == {"d-zh": 0.05}


def test_names_with_quotes_are_data_not_sql(kg: KnowledgeGraph, ledger: GraphLedger) -> None:
    nasty = "Robert'); DROP TABLE triples; --"
    triple = kg.add("O'Brien", 'said "hi" to', nasty, source_drawer="d'1")

    assert triple.predicate == "said_hi_to"
    assert facts(kg.query("o'brien")) == [("O'Brien", "said_hi_to", nasty)]
    assert kg.query(nasty) == [triple]
    assert kg.invalidate("O'Brien", 'said "hi" to', nasty) == 1
    assert kg.drawer_boosts("what did O'Brien say?") == {}  # closed: no longer current
    assert rows(ledger, "SELECT count(*) FROM triples") == [(1,)]
    assert rows(ledger, "SELECT count(*) FROM entities") == [(2,)]


# -- search signal --------------------------------------------------------------------------


def test_drawer_boosts_finds_entities_named_in_a_query(kg: KnowledgeGraph) -> None:
    kg.add("Alice", "works_at", "Acme Corp", valid_from="2021-01-01", source_drawer="d1")
    kg.add(
        "Alice",
        "works_at",
        "Globex",
        valid_from="2020-01-01",
        valid_to="2021-01-01",
        source_drawer="d-old",
    )
    kg.add("Bob", "likes", "tea", source_drawer="d2")
    kg.add("Bob", "likes", "jazz")  # no drawer: nothing to boost
    kg.add("I", "use", "Vim", source_drawer="d-i")  # a stop word is never looked for

    assert kg.drawer_boosts("Where does ALICE work now?") == {"d1": 0.05}
    assert kg.drawer_boosts("alice at acme corp", boost=0.1) == {"d1": pytest.approx(0.2)}
    assert kg.drawer_boosts("Bob's favourite drink", boost=0.3) == {"d2": 0.3}
    assert kg.drawer_boosts("Alicent and Bobby") == {}  # whole words only
    assert kg.drawer_boosts("what do I use?") == {}
    assert kg.drawer_boosts("is vim any good") == {"d-i": 0.05}
    assert kg.drawer_boosts("Globex") == {}  # its only triple has ended
    assert kg.drawer_boosts("   ") == {}


# -- bad input and persistence ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (("", "likes", "tea"), {}, "must not be empty"),
        (("  \n ", "likes", "tea"), {}, "must not be empty"),
        (("Alice", "likes", "..."), {}, "must not be empty"),
        (("Alice", " -- ", "tea"), {}, "must have a word"),
        (("Alice", "", "tea"), {}, "must have a word"),
        ((None, "likes", "tea"), {}, "must be a string"),
        (("Alice", "likes", 3), {}, "must be a string"),
        (("Alice", "likes", "tea"), {"confidence": 1.5}, r"\[0, 1\]"),
        (("Alice", "likes", "tea"), {"confidence": -0.1}, r"\[0, 1\]"),
        (("Alice", "likes", "tea"), {"confidence": float("nan")}, r"\[0, 1\]"),
        (("Alice", "likes", "tea"), {"confidence": True}, r"\[0, 1\]"),
        (("Alice", "likes", "tea"), {"confidence": "high"}, r"\[0, 1\]"),
        (("Alice", "likes", "tea"), {"valid_from": "last tuesday"}, "not an ISO-8601 time"),
        (
            ("Alice", "likes", "tea"),
            {"valid_from": "2024-01-01", "valid_to": "2023-01-01"},
            "must be after valid_from",
        ),
        (
            ("Alice", "likes", "tea"),
            {"valid_from": "2024-01-01", "valid_to": "2024-01-01"},
            "must be after valid_from",
        ),
        (("Alice", "likes", "tea"), {"user_id": 7}, "user_id must be a string"),
    ],
)
def test_bad_input_is_refused_and_nothing_is_filed(
    kg: KnowledgeGraph,
    ledger: GraphLedger,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    message: str,
) -> None:
    with pytest.raises(InvalidQueryError, match=message):
        kg.add(*args, **kwargs)
    assert rows(ledger, "SELECT count(*) FROM triples") == [(0,)]
    assert rows(ledger, "SELECT count(*) FROM entities") == [(0,)]


def test_bad_arguments_to_the_readers(ledger: GraphLedger, kg: KnowledgeGraph) -> None:
    with pytest.raises(InvalidQueryError):
        kg.query("")
    with pytest.raises(InvalidQueryError):
        kg.query("Alice", as_of="soon")
    with pytest.raises(InvalidQueryError):
        kg.timeline("   ")
    with pytest.raises(InvalidQueryError):
        kg.invalidate("Alice", "likes", ended="whenever")
    with pytest.raises(InvalidQueryError):
        KnowledgeGraph(ledger, single_valued="lives_in")
    with pytest.raises(InvalidQueryError):
        KnowledgeGraph(ledger, single_valued=["*"])


def test_the_graph_is_in_the_ledger_file(tmp_path: Path) -> None:
    first = GraphLedger(tmp_path / "ledger.sqlite3")
    kg = KnowledgeGraph(first)
    kg.add("Alice", "lives_in", "Lisbon", valid_from="2020-01-01", user_id="u1")
    kg.add("Alice", "lives_in", "Porto", valid_from="2023-01-01", user_id="u1")
    generation = first.generation()
    first.close()

    again = GraphLedger(tmp_path / "ledger.sqlite3")
    try:
        assert generation >= 2  # each write was a ledger transaction
        reopened = KnowledgeGraph(again)
        assert [t.object for t in reopened.timeline("alice", user_id="u1")] == ["Lisbon", "Porto"]
        assert reopened.stats(user_id="u1") == GraphStats(
            entities=3, triples=2, open=1, closed=1, predicates={"lives_in": 2}
        )
    finally:
        again.close()
