"""The hybrid pipeline end to end, with the real all-MiniLM-L6-v2 (retrieval is the point).

- Signal, not gate: with closets deleted or their index broken, results are those of the
  pipeline without closets, and with lexical weight 0 exactly the plain vector ranking.
- On a small hand-made corpus: a rare code the embedding misses is found by the lexical
  stage; a boosted closet raises its drawer; every hit's parts add up to its score.
- Bad input: a clear error or a correct empty result, never a crash.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from palace_retrievers import Filter, InvalidQueryError, Palace
from palace_retrievers.embedder import Embedder
from palace_retrievers.records import Hit

pytestmark = pytest.mark.slow

CORPUS = [
    "Alice adopted a grey cat called Miso from the shelter last spring.",
    "Bob's team moved the billing service to PostgreSQL 15 in March.",
    "The quarterly report is due on Friday; Carol owns the charts.",
    "Dana ran the Lisbon half marathon in 1:52 and wants to go under 1:45.",
    "Error ZX-4471 means the badge reader lost its network connection.",
    "We discussed holiday plans: Erin is going to Kyoto in November.",
    "Frank's sourdough starter died again, so he bought rye flour.",
    "The parking garage on Elm Street closes at 10 pm on weekdays.",
    "Grace is learning the cello and practises every morning before work.",
    "Hank fixed the leaking kitchen tap with a new washer.",
]
QUERIES = ["Which database does billing use?", "what does ZX-4471 mean", "Erin travel plans"]


@pytest.fixture
def palace_with(
    open_palace: Callable[..., Palace], tmp_path: Path, real_embedder: Embedder
) -> Callable[..., Palace]:
    """``palace_with(**search)``: a palace of :data:`CORPUS` with these search settings."""
    counter = iter(range(100))

    def make(backend: str = "sqlite", **search: Any) -> Palace:
        palace = open_palace(
            tmp_path / f"p{next(counter)}",
            fake=False,
            embedder=real_embedder,
            backend=backend,
            config={"search": search, "closets": {"drawers_per_closet": 1}},
        )
        palace.add_texts(
            CORPUS,
            metadatas=[{"source": "notes", "chunk_index": i} for i in range(len(CORPUS))],
            ids=[f"n{i}" for i in range(len(CORPUS))],
        )
        return palace

    return make


def ranking(hits: list[Hit]) -> list[tuple[str, float]]:
    return [(h.id, round(h.score, 6)) for h in hits]


def break_closets(palace: Palace, monkeypatch: pytest.MonkeyPatch) -> None:
    real = palace.indexes.query

    def query(collection: str, **kwargs: Any) -> Any:
        if collection == "closets":
            raise RuntimeError("closet index is corrupt")
        return real(collection, **kwargs)

    monkeypatch.setattr(palace.indexes, "query", query)


def delete_closets(palace: Palace) -> None:
    ids = [c.id for batch in palace.ledger.iter_closets() for c in batch]
    palace.ledger.replace_closets(
        [], palace._embed([]), model="x", drawer_ids=[f"n{i}" for i in range(len(CORPUS))]
    )
    palace.indexes.delete("closets", ids)
    assert palace.stats().ledger.closets == 0


@pytest.mark.parametrize("damage", ["deleted", "broken"])
def test_without_closets_results_equal_the_pipeline_without_them(
    palace_with: Callable[..., Palace], monkeypatch: pytest.MonkeyPatch, damage: str
) -> None:
    reference = palace_with(closets=False)
    palace = palace_with()
    assert palace.stats().ledger.closets == len(CORPUS)
    if damage == "deleted":
        delete_closets(palace)
    else:
        break_closets(palace, monkeypatch)
    for query in QUERIES:
        hits = palace.search(query, k=5)
        assert ranking(hits) == ranking(reference.search(query, k=5))
        assert all(h.scores["closet"] == 0.0 for h in hits)


def test_with_lexical_weight_zero_and_no_closets_results_are_the_plain_vector_ranking(
    palace_with: Callable[..., Palace], monkeypatch: pytest.MonkeyPatch
) -> None:
    palace = palace_with(
        bm25_weight=0.0,
        lexical=False,
        neighbour_weight=0.0,
        source_weight=0.0,
        expand_neighbours=0,
    )
    break_closets(palace, monkeypatch)
    for query in QUERIES:
        vector = palace._embed_query(query)
        plain = palace.indexes.query("drawers", vector=vector, k=4, where=Filter())
        hits = palace.search(query, k=4)
        assert [h.id for h in hits] == [m.id for m in plain]
        for hit, match in zip(hits, plain, strict=True):
            assert hit.scores["vector"] == pytest.approx(match.similarity)


def test_a_rare_code_is_found_by_the_lexical_stage(palace_with: Callable[..., Palace]) -> None:
    palace = palace_with(closets=False, min_candidates=1, overfetch=1)
    hits = palace.search("ZX-4471", k=1)
    assert hits[0].id == "n4"
    assert hits[0].scores["bm25"] > 0
    plain = palace_with(closets=False, lexical=False, bm25_weight=0.0)
    assert "n4" in [h.id for h in palace.search("ZX-4471", k=3)]
    assert len(plain.search("ZX-4471", k=1)) == 1  # the floor alone still answers


def test_a_closet_boost_only_raises_and_the_parts_add_up(
    palace_with: Callable[..., Palace],
) -> None:
    boosts = [0.40, 0.25, 0.15, 0.08, 0.04]
    palace = palace_with(closet_boosts=boosts)
    plain = palace_with(closets=False)
    for query in QUERIES:
        with_closets = {h.id: h for h in palace.search(query, k=10)}
        without = {h.id: h for h in plain.search(query, k=10)}
        assert set(with_closets) == set(without)  # the same ten drawers: nothing hidden
        for drawer_id, hit in with_closets.items():
            parts = hit.scores
            assert parts["final"] == pytest.approx(
                parts["vector_part"]
                + parts["bm25_part"]
                + parts["closet"]
                + parts["neighbours"]
                + parts["speaker"]
            )
            assert parts["closet"] in [0.0, *boosts]
            assert hit.score >= without[drawer_id].score - 1e-9
        assert max(h.scores["closet"] for h in with_closets.values()) == boosts[0]
    top = palace.search("Which database does billing use?", k=1)[0]
    assert top.id == "n1"
    assert top.scores["closet"] == boosts[0]


def test_the_hits_say_where_they_come_from(palace_with: Callable[..., Palace]) -> None:
    hit = palace_with().search("cello practice", k=1)[0]
    assert hit.id == "n8"
    assert hit.source == "notes"
    assert hit.wing == "default"
    assert set(hit.scores) == {
        "vector",
        "bm25",
        "vector_part",
        "bm25_part",
        "closet",
        "neighbours",
        "speaker",
        "context",
        "graph",
        "final",
    }


def test_reciprocal_rank_fusion_is_an_option(palace_with: Callable[..., Palace]) -> None:
    hits = palace_with(fusion="rrf").search("Which database does billing use?", k=3)
    assert hits[0].id == "n1"


# -- bad input ----------------------------------------------------------------------------


@pytest.mark.parametrize("query", ["", "   ", "\n\t"])
def test_empty_query_is_a_clear_error(palace_with: Callable[..., Palace], query: str) -> None:
    with pytest.raises(InvalidQueryError, match="empty"):
        palace_with().search(query)


def test_a_100_kb_query(palace_with: Callable[..., Palace]) -> None:
    palace = palace_with()
    words = " ".join(f"word{i} cat" for i in range(20_000))
    query = words[:100_000]
    hits = palace.search(query, k=3)
    assert len(hits) == 3
    with pytest.raises(InvalidQueryError, match="max_query_chars"):
        palace.search(query + " more", k=3)


def test_k_larger_than_the_palace_returns_every_drawer(
    palace_with: Callable[..., Palace],
) -> None:
    hits = palace_with().search("anything at all", k=1000)
    assert sorted(h.id for h in hits) == sorted(f"n{i}" for i in range(len(CORPUS)))


def test_filters_naming_unknown_keys_or_nothing(palace_with: Callable[..., Palace]) -> None:
    palace = palace_with()
    with pytest.raises(InvalidQueryError, match="unknown filter 'colour'"):
        Filter.from_mapping({"colour": "red"})
    assert palace.search("cat", k=5, wing="no-such-wing") == []
    assert palace.search("cat", k=5, user_id="nobody") == []
    with pytest.raises(TypeError):
        palace.search("cat", colour="red")  # type: ignore[call-arg]
