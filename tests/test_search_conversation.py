"""Search over conversational memory: speaker awareness, neighbour and source smoothing,
contextual scoring and closets ranked by term matches.

Quality is the point of the first tests, so they use the real all-MiniLM-L6-v2. The
arithmetic tests (how the parts add up, what a broken closet index changes) use the FAKE
embedder: its vectors mean nothing, only the sums are checked.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from palace_retrievers import Palace
from palace_retrievers.embedder import Embedder
from palace_retrievers.records import Hit

# Two sessions of a chat between Ana and Ben; turn order matters.
SESSIONS = {
    "s1": [
        ("Ana", "I finally went hiking at Mount Tamalpais on Saturday."),
        ("Ben", "Nice! I spent the weekend painting the garage door blue."),
        ("Ana", "How long did the painting take you?"),
        ("Ben", "About six hours, my arms still hurt."),
    ],
    "s2": [
        ("Ben", "Have you picked a name for the puppy yet?"),
        ("Ana", "Yes, we named her Pickle."),
        ("Ben", "I adopted a kitten last month, she is called Nori."),
        ("Ana", "We should introduce Pickle and Nori sometime."),
    ],
}
PARTS = ("vector_part", "bm25_part", "closet", "neighbours", "speaker")


def add_chat(palace: Palace) -> None:
    texts, metas, ids = [], [], []
    for source, turns in SESSIONS.items():
        for position, (speaker, text) in enumerate(turns):
            texts.append(f"{speaker}: {text}")
            metas.append({"source": source, "chunk_index": position, "speaker": speaker})
            ids.append(f"{source}:{position}")
    palace.add_texts(texts, metadatas=metas, ids=ids, wing="chat")


@pytest.fixture
def chat(
    open_palace: Callable[..., Palace], tmp_path: Path, real_embedder: Embedder
) -> Callable[..., Palace]:
    """``chat(**search)``: a palace (real model) holding :data:`SESSIONS`."""
    counter = iter(range(100))

    def make(**search: Any) -> Palace:
        palace = open_palace(
            tmp_path / f"p{next(counter)}",
            fake=False,
            embedder=real_embedder,
            backend="sqlite",
            config={"search": search},
        )
        add_chat(palace)
        return palace

    return make


@pytest.fixture
def fake_chat(open_palace: Callable[..., Palace], tmp_path: Path) -> Callable[..., Palace]:
    """``fake_chat(**search)``: the same chat with the FAKE embedder (arithmetic only)."""
    counter = iter(range(100))

    def make(**search: Any) -> Palace:
        palace = open_palace(
            tmp_path / f"f{next(counter)}", backend="sqlite", config={"search": search}
        )
        add_chat(palace)
        return palace

    return make


def ranking(hits: list[Hit]) -> list[tuple[str, float]]:
    return [(h.id, round(h.score, 6)) for h in hits]


@pytest.mark.slow
def test_a_question_naming_a_speaker_favours_that_speakers_turns(
    chat: Callable[..., Palace],
) -> None:
    question = "What did Ben adopt?"
    hits = chat(speaker_weight=0.1).search(question, k=8, wing="chat")
    assert hits[0].id == "s2:2"
    for hit in hits:
        named = hit.drawer.metadata["speaker"] == "Ben"
        assert hit.scores["speaker"] == (0.1 if named else 0.0)
    plain = chat(speaker_weight=0.0).search(question, k=8, wing="chat")
    assert all(h.scores["speaker"] == 0.0 for h in plain)
    # A question naming nobody is not changed by speaker awareness.
    other = "How long did the painting take?"
    assert ranking(chat(speaker_weight=0.1).search(other, k=8, wing="chat")) == ranking(
        chat(speaker_weight=0.0).search(other, k=8, wing="chat")
    )


@pytest.mark.slow
def test_an_answer_next_to_its_question_is_lifted_by_its_neighbour(
    chat: Callable[..., Palace],
) -> None:
    """ "How long did the painting take?" is asked in one turn and answered in the next,
    whose own words ("six hours") share nothing with the question."""
    question = "How many hours did the garage painting take?"

    def rank_of_answer(**search: Any) -> int:
        hits = chat(closets=False, speaker_weight=0.0, **search).search(question, k=8, wing="chat")
        return [h.id for h in hits].index("s1:3")

    assert rank_of_answer(neighbour_weight=0.35) <= rank_of_answer(neighbour_weight=0.0)
    hit = next(
        h for h in chat(neighbour_weight=0.35).search(question, k=8, wing="chat") if h.id == "s1:3"
    )
    assert hit.scores["neighbours"] > 0


def test_the_parts_add_up_with_every_stage_on(fake_chat: Callable[..., Palace]) -> None:
    palace = fake_chat(
        speaker_weight=0.1, neighbour_weight=0.3, source_weight=0.1, context_weight=0.3
    )
    for question in ("What did Ben adopt?", "Ana hiking", "Pickle"):
        hits = palace.search(question, k=8, wing="chat")
        assert len(hits) == 8
        for hit in hits:
            assert hit.score == pytest.approx(sum(hit.scores[p] for p in PARTS))
            assert hit.scores["final"] == hit.score


def test_smoothing_and_speakers_only_raise(fake_chat: Callable[..., Palace]) -> None:
    """Each smoothing stage adds a non-negative part; none hides a drawer."""
    on = fake_chat(closets=False, speaker_weight=0.1, neighbour_weight=0.3, source_weight=0.1)
    off = fake_chat(closets=False, speaker_weight=0.0, neighbour_weight=0.0, source_weight=0.0)
    question = "What did Ben adopt?"
    raised = {h.id: h for h in on.search(question, k=8, wing="chat")}
    plain = {h.id: h for h in off.search(question, k=8, wing="chat")}
    assert set(raised) == set(plain)
    for drawer_id, hit in raised.items():
        assert hit.score >= plain[drawer_id].score - 1e-9


def test_context_weight_zero_is_the_plain_vector_score(fake_chat: Callable[..., Palace]) -> None:
    hits = fake_chat(context_weight=0.0).search("Pickle", k=8, wing="chat")
    assert all(h.scores["context"] == h.scores["vector"] for h in hits)
    palace = fake_chat(context_weight=0.5, closets=False, bm25_weight=0.0, lexical=False)
    for hit in palace.search("Pickle", k=8, wing="chat"):
        assert hit.scores["context"] >= -1.0  # the best neighbour's cosine, or its own


@pytest.mark.parametrize("closet_match", [False, True])
def test_broken_closets_equal_the_pipeline_without_them(
    fake_chat: Callable[..., Palace], monkeypatch: pytest.MonkeyPatch, closet_match: bool
) -> None:
    reference = fake_chat(closets=False, closet_match=closet_match)
    palace = fake_chat(closet_match=closet_match)
    real = palace.indexes.query

    def query(collection: str, **kwargs: Any) -> Any:
        if collection == "closets":
            raise RuntimeError("closet index is corrupt")
        return real(collection, **kwargs)

    monkeypatch.setattr(palace.indexes, "query", query)
    for question in ("What did Ben adopt?", "Pickle and Nori"):
        assert ranking(palace.search(question, k=8, wing="chat")) == ranking(
            reference.search(question, k=8, wing="chat")
        )


def test_closets_ranked_by_matches_boost_only_those_naming_a_query_term(
    fake_chat: Callable[..., Palace],
) -> None:
    """With ``closet_match`` a closet that names none of the query's terms boosts nothing,
    and the closet naming the rare term ("Tamalpais") gets the first boost."""
    boosts = [0.3, 0.2, 0.1]
    palace = fake_chat(closet_match=True, closet_boosts=boosts, grep=False)
    hits = {h.id: h for h in palace.search("Tamalpais", k=8, wing="chat")}
    boosted = {i for i, h in hits.items() if h.scores["closet"] > 0}
    assert boosted
    assert all(i.startswith("s1:") for i in boosted)
    assert max(h.scores["closet"] for h in hits.values()) == boosts[0]
    nothing = palace.search("zzzz qqqq", k=8, wing="chat")
    assert all(h.scores["closet"] == 0.0 for h in nothing)


def test_a_mined_conversations_speakers_list_is_read(
    open_palace: Callable[..., Palace], tmp_path: Path
) -> None:
    """A mined conversation names its speakers in ``speakers`` (a turn also in
    ``speaker``): a drawer of one speaker is that speaker's, and a drawer of several gets
    the share of them the question names (FAKE embedder: only the parts are checked)."""
    palace = open_palace(
        tmp_path / "p", backend="sqlite", config={"search": {"speaker_weight": 0.1}}
    )
    palace.add_texts(
        ["Ben: I adopted a kitten.", "Ana: Ben adopted a kitten?\n\nBen: Yes, Nori.", "Ana: hi"],
        metadatas=[{"speakers": ["Ben"]}, {"speakers": ["Ana", "Ben"]}, {"speakers": ["Ana"]}],
        ids=["turn", "exchange", "other"],
        wing="chat",
    )
    parts = {
        h.id: h.scores["speaker"] for h in palace.search("What did Ben adopt?", k=3, wing="chat")
    }
    assert parts == {"turn": 0.1, "exchange": 0.05, "other": 0.0}
