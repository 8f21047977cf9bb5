"""Memories in search and in the context block.

Ranking logic is tested with the FAKE hashing embedder and the exact ``sqlite`` backend
(texts that share words are close; nothing here depends on meaning).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from palace_retrievers import Palace
from palace_retrievers.memory.learned import judge as learned_judge
from palace_retrievers.memory.recall import CONTEXT_HEADER, tokens

DRAWERS = [
    "The orders service writes every order to the orders database at night.",
    "Lunch on Friday was pizza with the whole team.",
    "Backups of the orders database run every six hours.",
    "Alice adopted a cat called Miso last spring.",
]


#: Every distinct text is a new memory (the fake embedder makes near texts very close; the
#: learned judges are not asked: the e5 reader would read these texts, whatever the embedder).
DISTINCT = {
    "memory": {
        "supersede_similarity": 0.99,
        "duplicate_similarity": 0.999,
        "pair_model": False,
        "pair_reader": False,
    }
}


@pytest.fixture(autouse=True)
def no_matcher(monkeypatch: pytest.MonkeyPatch) -> None:
    """Decide with the cosine thresholds only."""
    monkeypatch.setitem(learned_judge.DEFAULTS, "structural", False)


@pytest.fixture
def palace(open_palace: Callable[..., Palace], tmp_path: Path) -> Palace:
    palace = open_palace(tmp_path / "palace", backend="sqlite", config=DISTINCT)
    palace.add_texts(DRAWERS, user_id="u1", wing="work")
    return palace


def test_memories_and_drawers_are_searched_together(palace: Palace) -> None:
    memory = palace.remember("The orders database is PostgreSQL 15", user_id="u1").memory
    hits = palace.search("orders database", k=5, user_id="u1")
    kinds = [h.is_memory for h in hits]
    assert True in kinds
    assert False in kinds
    [hit] = [h for h in hits if h.is_memory]
    assert hit.memory == memory
    assert hit.id == memory.id
    assert hit.drawer.source == f"memory:{memory.id}"
    assert hit.drawer.kind == "fact"
    assert hit.drawer.metadata["memory"] is True
    assert hit.text == memory.text
    parts = hit.scores
    recall = 0.6 * parts["relevance"] + 0.2 * parts["importance"]
    recall += 0.1 * parts["freshness"] + 0.1 * parts["heat"]
    assert parts["recall"] == pytest.approx(recall)
    # On the drawers' scale (palace_retrievers.memory.scale): relevance 1 is worth
    # scores["scale"], times the memory's standing (importance and freshness; not heat).
    standing = (0.6 + 0.2 * parts["importance"] + 0.1 * parts["freshness"]) / (0.6 + 0.2)
    assert parts["standing"] == pytest.approx(standing)
    on_scale = parts["scale"] * parts["relevance"] * parts["standing"]
    assert hit.score == parts["final"] == pytest.approx(on_scale)
    assert 0 < parts["relevance"] <= 1
    assert hit.as_dict()["is_memory"] is True
    assert hit.as_dict()["memory"]["id"] == memory.id
    assert not hits[-1].is_memory or hits[-1].as_dict()["is_memory"]


def test_drawer_ranking_is_unchanged_by_memories(palace: Palace) -> None:
    before = palace.search("orders database backups", k=4, user_id="u1")
    for text in ("The orders database is PostgreSQL 15", "Backups are kept for 30 days"):
        palace.remember(text, user_id="u1")
    after = palace.search("orders database backups", k=10, user_id="u1")
    drawers = [h for h in after if not h.is_memory]
    assert [(h.id, h.score) for h in drawers[:4]] == [(h.id, h.score) for h in before]
    assert [
        h.id for h in palace.search("orders database backups", k=4, user_id="u1", memories=False)
    ] == [h.id for h in before]
    assert any(h.is_memory for h in after)


def test_a_palace_without_memories_searches_as_before(palace: Palace) -> None:
    with_flag = palace.search("orders database", k=4, user_id="u1")
    without = palace.search("orders database", k=4, user_id="u1", memories=False)
    assert with_flag == without


def test_recall_scores_importance_freshness_and_heat(palace: Palace) -> None:
    now = datetime.now(UTC)
    fresh = palace.remember("Deploys happen on Tuesday", user_id="u2", now=now).memory
    stale = palace.remember(
        "Deploys happen on Thursday", user_id="u2", importance=0.3, now=now - timedelta(days=30)
    ).memory
    hits = {h.id: h for h in palace.search("deploys happen", k=5, user_id="u2")}
    assert hits[fresh.id].scores["freshness"] == pytest.approx(1.0, abs=1e-3)
    assert hits[stale.id].scores["freshness"] == pytest.approx(0.5, abs=1e-3)  # one half-life
    assert hits[stale.id].scores["importance"] == 0.3
    assert hits[fresh.id].score > hits[stale.id].score
    # Each search that returns a memory counts as an access, without touching the index.
    generation = palace.ledger.generation()
    for _ in range(3):
        palace.search("deploys happen", k=5, user_id="u2")
    assert palace.ledger.generation() == generation
    assert palace.ledger.pending_index("memories") == []
    touched = palace.memory(fresh.id, user_id="u2")
    assert touched.access_count == 4
    assert touched.last_accessed is not None
    hit = next(h for h in palace.search("deploys happen", user_id="u2") if h.id == fresh.id)
    assert hit.scores["heat"] == pytest.approx(0.4)  # 4 accesses of a cap of 10


def test_irrelevant_memories_are_not_recalled(palace: Palace) -> None:
    palace.remember("Alice is allergic to peanuts", user_id="u1")
    assert not [h for h in palace.search("orders database", user_id="u1") if h.is_memory]


def test_kind_filter_applies_to_memories(palace: Palace) -> None:
    palace.remember("The orders database is PostgreSQL", user_id="u1", kind="decision")
    palace.remember("I prefer the orders database dashboards dark", user_id="u1", kind="preference")
    only_drawers = palace.search("orders database", k=10, user_id="u1", kind="drawer")
    assert only_drawers
    assert not any(h.is_memory for h in only_drawers)
    decisions = palace.search("orders database", k=10, user_id="u1", kind="decision")
    assert [h.drawer.kind for h in decisions] == ["decision"]
    assert palace.search("orders database", k=10, user_id="u1", kind="event") == []


def test_wing_filter_keeps_memories_of_no_wing(palace: Palace) -> None:
    everywhere = palace.remember("The orders database is PostgreSQL", user_id="u1").memory
    home = palace.remember("The orders database at home is SQLite", user_id="u1", wing="home")
    found = {h.id for h in palace.search("orders database", k=10, user_id="u1", wing="work")}
    assert everywhere.id in found
    assert home.memory.id not in found
    found = {h.id for h in palace.search("orders database", k=10, user_id="u1", wing="home")}
    assert home.memory.id in found
    assert everywhere.id in found


def test_include_history_adds_the_superseded_values(
    open_palace: Callable[..., Palace], tmp_path: Path
) -> None:
    palace = open_palace(
        tmp_path / "p", backend="sqlite", config={"memory": {"supersede_similarity": 0.7}}
    )
    palace.add_texts(DRAWERS, user_id="u1", wing="work")
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    texts = [f"The orders database is {name}" for name in ("MySQL", "PostgreSQL", "SQLite")]
    ids = [
        palace.remember(t, user_id="u1", now=t0 + timedelta(days=i)).memory.id
        for i, t in enumerate(texts)
    ]
    plain = [h for h in palace.search("orders database", k=3, user_id="u1") if h.is_memory]
    assert [h.id for h in plain] == [ids[2]]  # only the current value
    hits = palace.search("orders database", k=3, user_id="u1", include_history=True)
    at = [h.id for h in hits].index(ids[2])
    history = hits[at + 1 : at + 3]
    assert [h.id for h in history] == [ids[1], ids[0]]
    assert [h.scores["history"] for h in history] == [1.0, 2.0]
    assert all(h.scores["superseded"] == 1.0 for h in history)
    assert all(h.memory is not None and h.memory.status == "superseded" for h in history)
    assert history[0].drawer.metadata["superseded_by"] == ids[2]
    assert len([h for h in hits if "superseded" not in h.scores]) == 3  # k counts the rest
    # History is not counted as an access.
    assert palace.memory(ids[0], user_id="u1").access_count == 0


def test_pending_archived_and_expired_memories_are_not_searched(palace: Palace) -> None:
    palace.remember("The orders database is MySQL", user_id="u3", status="pending")
    archived = palace.remember("The orders database was Oracle", user_id="u3").memory
    palace.delete_memory(archived.id, user_id="u3")
    palace.remember(
        "The orders database is down today",
        user_id="u3",
        ttl=60,
        now=datetime.now(UTC) - timedelta(hours=1),
    )
    assert palace.search("orders database", user_id="u3") == []


# -- context ----------------------------------------------------------------------------

LINE = re.compile(r"^\[\d{4}-\d{2}-\d{2}\] \((fact|preference|decision|summary|event)\) \S.*$")


def test_context_block_format(palace: Palace) -> None:
    when = datetime(2026, 3, 1, 9, tzinfo=UTC)
    palace.remember("The orders database is PostgreSQL 15", user_id="u1", kind="decision", now=when)
    palace.remember(
        "I prefer the orders\ndashboard in dark mode",
        user_id="u1",
        kind="preference",
        now=when + timedelta(days=1),
    )
    block = palace.context("orders database dashboard", user_id="u1")
    header, *lines = block.split("\n")
    assert header == CONTEXT_HEADER
    assert "ignore" in header
    assert len(lines) == 2
    assert all(LINE.match(line) for line in lines)
    assert "[2026-03-01] (decision) The orders database is PostgreSQL 15" in lines
    assert "[2026-03-02] (preference) I prefer the orders dashboard in dark mode" in lines
    assert not any("Lunch" in line for line in lines)  # memories only, by default
    with_drawers = palace.context("orders database", user_id="u1", drawers=True, k=10)
    assert "(drawer) The orders service" in with_drawers


def test_context_respects_the_token_budget_and_k(palace: Palace) -> None:
    for i in range(30):
        palace.remember(f"Orders database fact number {i} is worth keeping around", user_id="u1")
    kept = len(palace.memories(user_id="u1"))  # the FAKE embedder merges a few numbers
    assert kept > 20
    full = palace.context("orders database fact", user_id="u1", k=30, max_tokens=10_000)
    assert len(full.split("\n")) == kept + 1
    for budget in (80, 150, 300):
        block = palace.context("orders database fact", user_id="u1", k=30, max_tokens=budget)
        assert sum(tokens(line) for line in block.split("\n")) <= budget
        assert 1 < len(block.split("\n")) <= kept
    assert len(palace.context("orders database fact", user_id="u1", k=3).split("\n")) == 4
    assert palace.context("orders database fact", user_id="u1", max_tokens=10) == ""


def test_context_is_empty_without_relevant_memories(palace: Palace) -> None:
    assert palace.context("orders database", user_id="u1") == ""
    palace.remember("Alice is allergic to peanuts", user_id="u1")
    assert palace.context("orders database", user_id="u1") == ""


def test_context_default_budget_is_configured(
    open_palace: Callable[..., Palace], tmp_path: Path
) -> None:
    config = {"memory": {**DISTINCT["memory"], "context_tokens": 70}}
    palace = open_palace(tmp_path / "p", backend="sqlite", config=config)
    for i in range(20):
        palace.remember(f"Orders database fact number {i} is worth keeping around")
    block = palace.context("orders database fact", k=20)
    assert sum(tokens(line) for line in block.split("\n")) <= 70


# -- the knowledge graph as a signal ---------------------------------------------------


def test_the_graph_boosts_the_drawers_its_triples_came_from(
    open_palace: Callable[..., Palace], tmp_path: Path
) -> None:
    palace = open_palace(tmp_path / "p", backend="sqlite")
    ids = palace.add_texts(DRAWERS, user_id="u1")
    cat = ids[3]  # "Alice adopted a cat called Miso last spring."
    plain = {h.id: h for h in palace.search("what does Alice have", k=4, user_id="u1")}
    palace.kg.add("Alice", "owns", "Miso", source_drawer=cat, user_id="u1")
    palace.kg.add("Alice", "owns", "a parrot", source_drawer=ids[1], user_id="u2")
    boosted = {h.id: h for h in palace.search("what does Alice have", k=4, user_id="u1")}
    assert boosted[cat].scores["graph"] == pytest.approx(0.05)
    assert boosted[cat].score >= plain[cat].score + 0.05 - 1e-9
    assert all(h.scores["graph"] == 0 for i, h in boosted.items() if i != cat)  # u2's triple
    # No graph, no boost; a graph that fails is skipped.
    off = open_palace(tmp_path / "p", backend="sqlite", config={"graph": {"boost": 0.0}})
    assert off.search("what does Alice have", k=4, user_id="u1")[0].scores["graph"] == 0


def test_a_failing_graph_never_stops_a_search(
    palace: Palace, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object, **kwargs: object) -> dict[str, float]:
        raise RuntimeError("graph down")

    monkeypatch.setattr(palace.kg, "drawer_boosts", broken)
    assert palace.search("orders database", user_id="u1")
