"""Memories and drawers on one scale (palace_retrievers.memory.scale).

The memory page's own example runs with the REAL all-MiniLM-L6-v2 and Chroma: the demo
palace of the screenshots, the question of its search page. The scale's arithmetic is
checked with the FAKE hashing embedder (it depends on no meaning), as the test says.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from palace_retrievers import Palace
from palace_retrievers.config import MEMORY_SCALES, MemoryConfig, SearchConfig
from palace_retrievers.errors import ConfigError
from palace_retrievers.memory.scale import (
    BESIDE,
    bound_to_sources,
    shared_scale,
    under_better_coverage,
)
from palace_retrievers.records import Hit
from palace_retrievers.terms import terms
from palace_retrievers.web.screenshots import seed_demo

QUESTION = "which database do we use for orders?"


def test_the_memory_page_example_ranks_the_memory_that_answers_first(
    open_palace: Callable[..., Palace], tmp_path: Path
) -> None:
    palace = open_palace(tmp_path / "demo", fake=False)  # real MiniLM, real Chroma
    demo = seed_demo(palace)
    hits = palace.search(QUESTION, k=5, user_id=demo.user)
    assert hits[0].id == demo.database
    assert hits[0].text == "We moved the orders database to PostgreSQL 15"
    backup = next(h for h in hits if "nightly backup" in h.text)
    assert hits[0].score > backup.score
    # The merge before this scale put it below the backup note (third).
    palace.close()
    before = open_palace(tmp_path / "demo", fake=False, config={"memory": {"scale": "recall"}})
    ranked = [h.id for h in before.search(QUESTION, k=5, user_id=demo.user)]
    assert ranked.index(demo.database) > 0


def test_drawers_keep_their_scores_and_order(
    open_palace: Callable[..., Palace], tmp_path: Path
) -> None:
    """FAKE embedder: the drawers' ranking is the pipeline's, memories or not."""
    palace = open_palace(tmp_path / "p", backend="sqlite")
    palace.add_texts(
        ["The orders database is backed up nightly.", "Lunch was pizza on Friday."],
        user_id="u1",
    )
    before = palace.search("orders database", k=5, user_id="u1")
    palace.remember("The orders database is PostgreSQL 15", user_id="u1")
    after = palace.search("orders database", k=5, user_id="u1")
    assert [(h.id, h.score) for h in after if not h.is_memory] == [(h.id, h.score) for h in before]
    [memory] = [h for h in after if h.is_memory]
    top = before[0]
    assert memory.scores["scale"] >= top.score  # the top drawer's score over its relevance
    assert 0 < memory.scores["relevance"] <= 1


def test_relevance_is_shared_and_worth_anchors_at_the_top_drawer(
    open_palace: Callable[..., Palace], tmp_path: Path
) -> None:
    """FAKE embedder: the arithmetic of shared_scale on real hits."""
    palace = open_palace(tmp_path / "p", backend="sqlite")
    palace.add_texts(["orders database backups", "lunch pizza"], user_id="u1")
    drawers = palace.search("orders database", k=2, user_id="u1", memories=False)
    config = SearchConfig()  # the palace's: opened with the defaults
    terms = [["order", "databas", "backup"], ["lunch", "pizza"]]
    # A memory as near the query as the top drawer, with the same terms, is as relevant.
    top_cosine = drawers[0].scores["vector"]
    shared = shared_scale(
        ["order", "databas"], drawers, terms, [(top_cosine, terms[0]), (0.0, [])], config
    )
    assert shared.relevance[0] == pytest.approx(1.0)
    assert shared.relevance[1] == 0.0
    assert shared.worth == pytest.approx(drawers[0].score)
    alone = shared_scale(["order"], [], [], [(0.5, ["order"])], config)
    assert alone.relevance == [1.0]
    assert alone.worth == 1.0


def test_the_scale_setting_is_checked(open_palace: Callable[..., Palace], tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"memory\.scale"):
        open_palace(tmp_path / "p", config={"memory": {"scale": "loudest"}})


VOLUNTEERS = "what do volunteers need when there is no signal in the field?"


def test_a_mined_memory_stands_by_its_source(sample_palace: Palace) -> None:
    """REAL MiniLM and Chroma, the mined sample corpus: the rules extractor read "Train with
    bad signal for part of Tuesday" from a retro; on relevance alone it ranked first for
    the volunteers' question, above the interview that answers it. Bound to its sources,
    no extracted memory ranks above the drawers it was read from."""
    hits = sample_palace.search(VOLUNTEERS, k=10, wing="larkspur")
    assert not hits[0].is_memory
    assert hits[0].source.endswith("interview-field-volunteer.txt")
    listed = [h.id for h in hits]
    for n, hit in enumerate(hits):
        if hit.memory is None or hit.memory.origin != "extracted":
            continue
        below = listed[n + 1 :]
        assert any(i in below for i in hit.memory.source_ids), hit.text
        assert "bound" not in hit.scores or hit.scores["final"] <= hit.scores["bound"] + 1e-5
    assert "Train with bad signal" not in hits[0].text


def test_extracted_memories_are_bound_and_told_ones_are_not(
    open_palace: Callable[..., Palace], tmp_path: Path
) -> None:
    """FAKE embedder: the arithmetic of bound_to_sources on memories made by the palace
    (three memories: the learned judges, which would read the told one as a repeat, off)."""
    config = {"memory": {"pair_model": False, "pair_reader": False}}
    palace = open_palace(tmp_path / "p", backend="sqlite", config=config)
    first, second = palace.add_texts(["orders database notes", "lunch pizza"], user_id="u1")
    drawers = palace.search("orders", k=1, user_id="u1", memories=False)
    scored = {h.id: h.score for h in drawers}
    assert list(scored) == [first]  # the lunch is not among the drawer hits

    def remembered(text: str, origin: str, sources: tuple[str, ...]) -> Hit:
        memory = palace.remember(
            text, user_id="u1", origin=origin, source_ids=sources, kind="event"
        ).memory
        return Hit(drawer=memory.as_drawer(), score=9.0, scores={"final": 9.0}, memory=memory)

    beside = remembered("The orders database is PostgreSQL", "extracted", (first,))
    lost = remembered("Pizza for lunch", "extracted", (second,))
    told = remembered("I keep the orders in PostgreSQL", "explicit", ())
    bound = {h.id: h for h in bound_to_sources([beside, lost, told], drawers)}
    assert bound[told.id].score == 9.0  # its own evidence: not bound
    assert bound[beside.id].score == pytest.approx(scored[first] + BESIDE)
    assert bound[beside.id].scores["bound"] == scored[first]
    assert bound[lost.id].score == pytest.approx(min(scored.values()) - BESIDE)
    assert bound[lost.id].scores["bound"] == 0.0
    # A memory already below its bound keeps its score; no drawer hit binds nothing.
    low = Hit(drawer=beside.drawer, score=0.0, scores={"final": 0.0}, memory=beside.memory)
    assert bound_to_sources([low], drawers)[0].score == 0.0
    assert bound_to_sources([beside], [])[0].score == 9.0


LEASE = (
    "Hi! Before you move in on the 1st, please send me the signed lease, a copy of your "
    "renter's insurance and the deposit. Keys can be picked up at the office. - Mrs Okoro"
)


def test_on_the_coverage_scale_a_memory_covering_fewer_query_words_ranks_below_the_top_drawer(
    open_palace: Callable[..., Palace], tmp_path: Path
) -> None:
    """REAL MiniLM and Chroma: the short memory on the landlord is nearer the question than
    the landlord's message that answers it, and on relevance alone ranked first; it holds
    one of the question's terms ("okoro") where the message holds two ("okoro", "send")."""
    question = "What does Mrs Okoro want me to send?"
    ranked: dict[str, list[Hit]] = {}
    for scale in ("coverage", "drawers", "relevance"):
        palace = open_palace(tmp_path / scale, fake=False, config={"memory": {"scale": scale}})
        palace.add_texts(
            [LEASE, "Reminder: the building's boiler will be serviced next Tuesday morning."],
            user_id="u1",
        )
        palace.remember(
            "Landlord is Mrs Okoro; rent is due on the 1st of each month.", user_id="u1"
        )
        ranked[scale] = palace.search(question, k=3, user_id="u1")
        palace.close()
    assert ranked["relevance"][0].is_memory  # relevance alone: the memory first
    assert ranked["drawers"][0].is_memory  # the default: no coverage limit either
    first, second = ranked["coverage"][:2]
    assert first.text == LEASE
    assert second.is_memory
    assert second.score < first.score
    assert second.scores["covered"] > second.scores["coverage"]


def test_coverage_limits_memories_below_the_top_drawer_unless_they_hold_the_slot(
    open_palace: Callable[..., Palace], tmp_path: Path
) -> None:
    """FAKE embedder: the arithmetic of under_better_coverage on memories made by the
    palace (terms as the search reads them)."""
    palace = open_palace(tmp_path / "p", backend="sqlite")
    palace.add_texts(["orders database backups nightly"], user_id="u1")
    [top] = palace.search("orders database", k=1, user_id="u1", memories=False)

    def hit(text: str, score: float, held: float = 0.0) -> Hit:
        memory = palace.remember(text, user_id="u1", kind="event").memory
        scores = {"final": score, "held": held}
        return Hit(drawer=memory.as_drawer(), score=score, scores=scores, memory=memory)

    fewer = hit("The orders are shipped on Mondays", 9.0)
    as_many = hit("The orders database is PostgreSQL", 9.0)
    holds = hit("We keep orders in a ledger", 9.0, held=1.0)
    below = hit("Orders by mail", 0.0)
    terms = ["order", "database"]
    limited = {
        h.id: h
        for h in under_better_coverage(
            [fewer, as_many, holds, below], [top], terms, palace_terms(palace)
        )
    }
    assert limited[fewer.id].score == pytest.approx(top.score - BESIDE)
    assert limited[fewer.id].scores["covered"] == 1.0
    assert limited[as_many.id].score == 9.0  # covers both terms, as the drawer does
    assert limited[holds.id].score == 9.0  # holds the asked slot: not moved
    assert limited[below.id].score == 0.0  # already below the drawer
    assert under_better_coverage([fewer], [], terms, palace_terms(palace))[0].score == 9.0


def palace_terms(palace: Palace) -> Callable[[str], list[str]]:
    """A text's terms as the palace's search reads them (the defaults: stop words dropped,
    light stemming)."""
    return lambda text: terms(text, stop_words=True, stemming=True)


def test_the_three_scales_are_accepted() -> None:
    assert [MemoryConfig(scale=s).scale for s in MEMORY_SCALES] == [
        "drawers",
        "coverage",
        "relevance",
        "recall",
    ]
