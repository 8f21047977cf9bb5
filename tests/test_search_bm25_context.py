"""BM25 over a chunk and its neighbours (``bm25_context_window``, ``bm25_context_weight``).

The arithmetic tests need no embedder. The pipeline tests use the FAKE embedder (its
vectors mean nothing; only the BM25 scores, which do not depend on it, are checked),
except the last one, which is about quality and uses the real all-MiniLM-L6-v2.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from palace_retrievers import ConfigError, Palace
from palace_retrievers.config import SearchConfig
from palace_retrievers.embedder import Embedder
from palace_retrievers.records import Drawer
from palace_retrievers.search import bm25_scores
from palace_retrievers.search.bm25_context import TermCounts, scores
from palace_retrievers.terms import terms


def drawer(drawer_id: str, text: str, position: int = 0) -> Drawer:
    return Drawer(id=drawer_id, text=text, wing="w", room="r", source="s", chunk_index=position)


def context_scores(
    query: str, texts: Sequence[str], windows: Sequence[Sequence[int]], **kw: Any
) -> list[float]:
    """:func:`scores` of the drawers ``texts``; ``windows[i]`` lists the indices of the
    drawers whose terms count for drawer ``i`` (drawers outside ``texts`` too: index
    ``len(texts) + j`` names ``kw["outside"][j]``)."""
    outside = [drawer(f"o{j}", t) for j, t in enumerate(kw.pop("outside", []))]
    drawers = [drawer(f"d{i}", t) for i, t in enumerate(texts)]
    every = drawers + outside
    params: dict[str, Any] = {"weight": 0.5, "k1": 1.5, "b": 0.75} | kw
    return scores(
        terms(query),
        drawers,
        [[every[j] for j in window] for window in windows],
        TermCounts(terms),
        **params,
    )


TEXTS = [
    "Gina: have you thought about social media for the store?",
    "Jon: not yet, I only sell in person.",
    "Gina: I could run your Instagram page for you.",
    "Jon: my dance class starts at noon on Sunday.",
    "Gina: the weather was lovely for the picnic.",
]


def test_without_neighbours_it_is_plain_bm25() -> None:
    """No window (or weight 0): exactly :func:`bm25_scores` of the candidates."""
    docs = [terms(t) for t in TEXTS]
    for query in ("social media offer", "dance class Sunday", "zebra"):
        plain = bm25_scores(terms(query), docs, k1=1.5, b=0.75)
        assert context_scores(query, TEXTS, [[] for _ in TEXTS]) == pytest.approx(plain)
        near = [[j for j in (i - 1, i + 1) if 0 <= j < len(TEXTS)] for i in range(len(TEXTS))]
        assert context_scores(query, TEXTS, near, weight=0.0) == pytest.approx(plain)


def test_weight_one_is_bm25_over_the_joined_texts() -> None:
    """With weight 1, a drawer's document is its text and its neighbours' texts joined:
    the scores are those of rank-bm25's Okapi (Lucene's idf) over the joined texts."""
    from rank_bm25 import BM25Okapi

    class LuceneIdf(BM25Okapi):  # type: ignore[misc]
        def _calc_idf(self, nd: dict[str, int]) -> None:
            n = self.corpus_size
            self.idf = {w: math.log(1 + (n - f + 0.5) / (f + 0.5)) for w, f in nd.items()}

    near = [[j for j in (i - 2, i - 1, i + 1, i + 2) if 0 <= j < len(TEXTS)] for i in range(5)]
    joined = [terms(" ".join([TEXTS[i]] + [TEXTS[j] for j in near[i]])) for i in range(5)]
    for query in ("social media offer", "Instagram Sunday noon", "picnic weather zebra"):
        reference = LuceneIdf(joined, k1=1.2, b=0.6).get_scores(terms(query))
        found = context_scores(query, TEXTS, near, weight=1.0, k1=1.2, b=0.6)
        assert found == pytest.approx(list(reference))


def test_hand_computed_scores() -> None:
    """One query term, ``cat``; three candidates, the second of which has a neighbour
    outside the candidates. tf = own + w × neighbours; length likewise."""
    texts = ["cat cat", "dog", "bird"]
    windows = [[], [3], []]  # index 3: the drawer "outside", "cat dog fish"
    found = context_scores(
        "cat", texts, windows, outside=["cat dog fish"], weight=0.5, k1=1.0, b=1.0
    )
    tf = [2.0, 0.5, 0.0]
    length = [2.0, 1 + 0.5 * 3, 1.0]
    mean = sum(length) / 3
    idf = math.log(1 + (3 - 2 + 0.5) / (2 + 0.5))  # found in two of three documents
    expected = [idf * f * 2 / (f + 1.0 * length[i] / mean) for i, f in enumerate(tf)]
    assert found == pytest.approx(expected)


def test_a_turn_is_lifted_by_the_words_of_the_turn_before_it() -> None:
    """The answer ("I could run your Instagram") names nothing of the question; the turn
    before it names social media. With the window it outranks turns that name nothing,
    and stays below the turn that names the words itself."""
    near = [[j for j in (i - 1, i + 1) if 0 <= j < len(TEXTS)] for i in range(len(TEXTS))]
    query = "What did Gina offer Jon about social media?"
    alone = context_scores(query, TEXTS, [[] for _ in TEXTS])
    together = context_scores(query, TEXTS, near)
    speaker_only = alone[4]  # "Gina" only
    assert alone[2] == speaker_only  # the answer: no better than any Gina turn
    assert together[2] > together[4]
    assert together[2] > together[3]
    assert together[0] > together[2]
    order = sorted(range(5), key=lambda i: -together[i])
    assert order[:3] == [0, 1, 2] or order[:3] == [0, 2, 1]


def test_edge_cases() -> None:
    assert context_scores("cat", [], []) == []
    assert context_scores("", TEXTS[:2], [[], []]) == [0.0, 0.0]
    assert context_scores("zebra", TEXTS[:2], [[1], [0]]) == [0.0, 0.0]
    with pytest.raises(ValueError, match="one window per drawer"):
        context_scores("cat", TEXTS[:2], [[]])


def test_term_counts_are_cut_once_per_text() -> None:
    calls: list[str] = []

    def cut(text: str) -> list[str]:
        calls.append(text)
        return terms(text)

    counts = TermCounts(cut, limit=2)
    a = drawer("a", "cats and more cats")
    assert counts.of(a) == ({"cat": 2}, 2)
    counts.of(a)
    assert calls == ["cats and more cats"]
    counts.of(drawer("a", "a grey dog"))  # same id, new text: cut again
    assert counts.of(drawer("a", "a grey dog")) == ({"grey": 1, "dog": 1}, 2)
    assert len(calls) == 2
    counts.of(drawer("b", "bird"))  # past the limit: dropped whole, still right
    assert counts.of(a) == ({"cat": 2}, 2)


def test_config_is_validated() -> None:
    assert SearchConfig().bm25_context_window == 2
    assert SearchConfig().bm25_context_weight == 0.5
    with pytest.raises(ConfigError, match="bm25_context_window"):
        SearchConfig(bm25_context_window=-1)
    for bad in (-0.1, 1.5):
        with pytest.raises(ConfigError, match="bm25_context_weight"):
            SearchConfig(bm25_context_weight=bad)


# -- through the pipeline -------------------------------------------------------------


def add_chat(palace: Palace, *, user_id: str | None = None, texts: Sequence[str] = TEXTS) -> None:
    palace.add_texts(
        list(texts),
        metadatas=[{"source": "shop", "chunk_index": i} for i in range(len(texts))],
        ids=[f"{user_id or 'none'}:{i}" for i in range(len(texts))],
        wing="chat",
        user_id=user_id,
    )


@pytest.fixture
def fake_chat(open_palace: Callable[..., Palace], tmp_path: Path) -> Callable[..., Palace]:
    """``fake_chat(**search)``: :data:`TEXTS` in one source, FAKE embedder."""
    counter = iter(range(100))

    def make(**search: Any) -> Palace:
        palace = open_palace(
            tmp_path / f"f{next(counter)}",
            backend="sqlite",
            config={"search": {"closets": False, **search}},
        )
        add_chat(palace)
        return palace

    return make


QUESTION = "What did Gina offer Jon about social media?"


def test_the_pipeline_scores_a_turn_with_its_neighbours(
    fake_chat: Callable[..., Palace],
) -> None:
    plain = {h.id: h for h in fake_chat(bm25_context_window=0).search(QUESTION, k=5, wing="chat")}
    near = {
        h.id: h
        for h in fake_chat(bm25_context_window=1, bm25_context_weight=0.5).search(
            QUESTION, k=5, wing="chat"
        )
    }
    assert set(plain) == set(near)  # a signal: it adds no drawer and hides none
    # Without the window, BM25 is that of each text alone.
    k1, b = SearchConfig().bm25_k1, SearchConfig().bm25_b
    alone = bm25_scores(terms(QUESTION), [terms(t) for t in TEXTS], k1=k1, b=b)
    for i in range(5):
        assert plain[f"none:{i}"].scores["bm25"] == pytest.approx(alone[i])
    # With a window of 1, the answer (turn 2) counts half of the words of turns 1 and 3
    # (both name Jon) and now outranks turn 4, which only names Gina.
    expected = context_scores(
        QUESTION, TEXTS, [[j for j in (i - 1, i + 1) if 0 <= j < 5] for i in range(5)], k1=k1, b=b
    )
    for i in range(5):
        assert near[f"none:{i}"].scores["bm25"] == pytest.approx(expected[i])
    assert near["none:2"].scores["bm25"] > near["none:4"].scores["bm25"]
    assert plain["none:2"].scores["bm25"] == plain["none:4"].scores["bm25"]


def test_weight_zero_is_todays_ranking(fake_chat: Callable[..., Palace]) -> None:
    def ranking(palace: Palace) -> list[tuple[str, float]]:
        return [(h.id, h.score) for h in palace.search(QUESTION, k=5, wing="chat")]

    off = ranking(fake_chat(bm25_context_window=0))
    assert ranking(fake_chat(bm25_context_window=3, bm25_context_weight=0.0)) == off


def test_a_neighbour_the_filter_hides_counts_for_nothing(
    open_palace: Callable[..., Palace], tmp_path: Path
) -> None:
    """Another owner's turns sit at the same positions of a source of the same name;
    they never enter a user's scores (the window is read through the query's filter)."""
    palace = open_palace(
        tmp_path / "owners",
        backend="sqlite",
        config={"search": {"closets": False, "bm25_context_window": 2}},
    )
    mine = ["Ana: hello there", "Ana: I could run your page", "Ana: bye now"]
    theirs = ["Bo: social media offer", "Bo: social media", "Bo: social media offer"]
    add_chat(palace, user_id="u1", texts=mine)
    add_chat(palace, user_id="u2", texts=theirs)
    hits = palace.search("social media offer", k=3, wing="chat", user_id="u1")
    assert {h.id for h in hits} == {"u1:0", "u1:1", "u1:2"}
    assert all(h.scores["bm25"] == 0.0 for h in hits)


@pytest.mark.slow
def test_the_real_model_ranks_the_answer_higher_with_its_neighbours(
    open_palace: Callable[..., Palace], tmp_path: Path, real_embedder: Embedder
) -> None:
    """Quality, with the real model: the answer turn (``s1:3``), whose words miss the
    question, climbs above turns of another session that name "offer", "media", Gina and
    Jon, once the words of the turns around it count for it."""
    sessions = {
        "s1": [
            "Jon: Business at the dance studio is slow this month.",
            "Gina: Have you tried promoting the studio on social media?",
            "Jon: Not really, I'm not good with that stuff.",
            "Gina: I could make you an Instagram account and post videos of your classes!",
            "Jon: That would be amazing, thanks.",
        ],
        "s2": [
            "Gina: Jon, my store is offering a discount on winter coats.",
            "Jon: Nice, Gina! I might get one for my sister.",
            "Gina: I made banana bread this weekend, want the recipe?",
            "Jon: I went to the beach with my family on Saturday.",
            "Gina: The media coverage of the fashion show was great.",
            "Jon: Gina, what did you think of the offer from the landlord?",
        ],
    }

    def rank_of_answer(window: int) -> int:
        palace = open_palace(
            tmp_path / f"real{window}",
            fake=False,
            embedder=real_embedder,
            backend="sqlite",
            config={"search": {"bm25_context_window": window}},
        )
        for source, turns in sessions.items():
            palace.add_texts(
                turns,
                metadatas=[{"source": source, "chunk_index": i} for i in range(len(turns))],
                ids=[f"{source}:{i}" for i in range(len(turns))],
                wing="chat",
            )
        hits = palace.search("What did Gina offer Jon regarding social media?", k=11, wing="chat")
        return [h.id for h in hits].index("s1:3")

    assert rank_of_answer(2) < rank_of_answer(0)
