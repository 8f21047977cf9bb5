"""Pure arithmetic of the search stages: terms, normalisation, fusion, BM25, closet lines.

No embedder and no palace: these are functions of numbers and strings.
"""

from __future__ import annotations

import math

import pytest

from palace_retrievers import ConfigError
from palace_retrievers.closets import ClosetEntry, render_line
from palace_retrievers.config import SearchConfig
from palace_retrievers.errors import PluginError
from palace_retrievers.search import bm25_scores
from palace_retrievers.search.fusion import normalise, ranks, reciprocal_rank, weighted
from palace_retrievers.terms import stem, terms


def test_terms_drop_stop_words_and_stem() -> None:
    assert terms("When did Caroline go to the support groups?") == [
        "caroline",
        "go",
        "support",
        "group",
    ]
    assert terms("She painted the sunrises", stemming=False) == ["painted", "sunrises"]
    assert terms("the a of", stop_words=False, stemming=False) == ["the", "a", "of"]


@pytest.mark.parametrize(
    ("word", "expected"),
    [("cats", "cat"), ("studies", "study"), ("painted", "paint"), ("running", "run"),
     ("class", "class"), ("bus", "bus"), ("is", "is"), ("quickly", "quick")],
)  # fmt: skip
def test_stem(word: str, expected: str) -> None:
    assert stem(word) == expected


def test_chinese_terms_are_bigrams_cut_at_stop_characters() -> None:
    assert terms("我们在北京") == ["北京"]
    assert terms("人工智能") == ["人工", "工智", "智能"]
    assert "alice" in terms("Alice在北京")


def test_normalise() -> None:
    assert normalise([2.0, 1.0, 0.0], "max") == [1.0, 0.5, 0.0]
    assert normalise([0.0, 0.0], "max") == [0.0, 0.0]
    assert normalise([3.0, 1.0, 2.0], "minmax") == [1.0, 0.0, 0.5]
    z = normalise([1.0, 2.0, 3.0], "zscore")
    assert z[1] == pytest.approx(0.5)
    assert z[0] < 0.5 < z[2]
    assert z[2] == pytest.approx(1 / (1 + math.exp(-math.sqrt(1.5))))
    assert normalise([], "max") == []
    with pytest.raises(ValueError, match="unknown"):
        normalise([1.0], "softmax")


def test_weighted_fusion_matches_hand_computation() -> None:
    vector = {"a": 0.8, "b": 0.4, "c": 0.2}
    bm25 = {"a": 0.0, "b": 5.0, "c": 10.0}
    parts = weighted(vector, bm25, vector_weight=0.6, bm25_weight=0.4, method="max")
    assert parts["a"] == pytest.approx((0.6, 0.0))
    assert parts["b"] == pytest.approx((0.3, 0.2))
    assert parts["c"] == pytest.approx((0.15, 0.4))
    fused = {k: sum(v) for k, v in parts.items()}
    assert sorted(fused, key=lambda k: -fused[k]) == ["a", "c", "b"]


def test_reciprocal_rank_fusion() -> None:
    vector = {"a": 0.9, "b": 0.5, "c": 0.1}
    bm25 = {"a": 0.0, "b": 3.0, "c": 1.0}
    parts = reciprocal_rank(vector, bm25, vector_weight=0.6, bm25_weight=0.4, k=60)
    scale = 61 / 1.0
    assert parts["a"] == pytest.approx((scale * 0.6 / 61, 0.0))  # no term: no bm25 part
    assert parts["b"] == pytest.approx((scale * 0.6 / 62, scale * 0.4 / 61))
    assert parts["c"] == pytest.approx((scale * 0.6 / 63, scale * 0.4 / 62))
    assert ranks({"x": 1.0, "y": 1.0, "z": 2.0}) == {"z": 1, "x": 2, "y": 3}


def test_bm25_prefers_the_document_with_the_rare_term() -> None:
    docs = [terms(t) for t in ("a red apple", "a green apple", "the quarterly zebra report")]
    scores = bm25_scores(terms("zebra apple"), docs, k1=1.5, b=0.75)
    assert scores[2] > scores[0] > 0
    assert bm25_scores([], docs, k1=1.5, b=0.75) == [0.0, 0.0, 0.0]
    assert bm25_scores(["x"], [[], []], k1=1.5, b=0.75) == [0.0, 0.0]


def test_bm25_equals_rank_bm25_okapi_with_lucene_idf() -> None:
    """The fast BM25 gives exactly rank-bm25's Okapi scores with Lucene's idf."""
    from rank_bm25 import BM25Okapi

    class LuceneIdf(BM25Okapi):  # type: ignore[misc]
        def _calc_idf(self, nd: dict[str, int]) -> None:
            n = self.corpus_size
            self.idf = {w: math.log(1 + (n - f + 0.5) / (f + 0.5)) for w, f in nd.items()}

    texts = [
        "Alice adopted a grey cat; the cat sleeps all day",
        "Bob moved billing to PostgreSQL 15 in March",
        "",
        "cat cat cat dog",
        "the quarterly report about cats and dogs and billing",
    ]
    docs = [terms(t) for t in texts]
    for query in ("cat billing", "dog march zebra", "cats cats report"):
        query_terms = terms(query)
        reference = LuceneIdf([d or [""] for d in docs], k1=1.2, b=0.6).get_scores(query_terms)
        assert bm25_scores(query_terms, docs, k1=1.2, b=0.6) == pytest.approx(list(reference))


def test_closet_line_fits_and_keeps_every_pointer() -> None:
    entry = ClosetEntry(
        topic="cats | dogs", entities=tuple(f"entity {i}" for i in range(500)), drawer_ids=("d1",)
    )
    line, text = render_line(entry, max_chars=200)
    assert len(line) <= 200
    assert line.endswith("|→d1")
    assert line.startswith("cats dogs|entity 0; entity 1")
    assert text == line.rsplit("|", 1)[0]
    with pytest.raises(PluginError, match="drawers_per_closet"):
        render_line(ClosetEntry("t", (), tuple(f"d{i:04}" for i in range(400))), max_chars=200)


@pytest.mark.parametrize(
    "bad",
    [
        {"closet_boosts": [0.4, 1.5]},
        {"closet_boosts": [-0.1]},
        {"vector_weight": 0.0, "bm25_weight": 0.0},
        {"fusion": "max"},
        {"normalisation": "l2"},
        {"grep_scope": "wing"},
        {"overfetch": 0},
        {"context_weight": 1.5},
        {"context_window": -1},
        {"speaker_weight": -0.1},
    ],
)
def test_search_config_is_validated(bad: dict[str, object]) -> None:
    with pytest.raises(ConfigError, match="search\\."):
        SearchConfig(**bad)  # type: ignore[arg-type]
