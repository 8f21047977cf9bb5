"""PalaceVectorStore against a real palace: upserts, filters, MMR, retrievers, users."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.documents import Document
from palace_retrievers import EmbedderMismatchError, InvalidQueryError, Palace

from langchain_palace import LangChainEmbedder, PalaceEmbeddings, PalaceVectorStore

from .conftest import WordEmbeddings

TEXTS = [
    ("pg", "we moved the database to postgres", {"topic": "db", "year": 2026}),
    ("pg2", "the database is postgres now", {"topic": "db", "year": 2025}),
    ("redis", "redis caches the session tokens", {"topic": "cache", "year": 2024}),
    ("cat", "alice adopted a grey cat", {"topic": "pets", "year": 2023}),
]


@pytest.fixture
def store(palace_path: Path) -> Iterator[PalaceVectorStore]:
    with PalaceVectorStore(palace_path, embedding=WordEmbeddings(), wing="notes") as store:
        store.add_texts(
            [text for _, text, _ in TEXTS],
            metadatas=[meta for _, _, meta in TEXTS],
            ids=[i for i, _, _ in TEXTS],
        )
        yield store


def ids(docs: list[Document]) -> list[str | None]:
    return [d.id for d in docs]


def test_metadata_comes_back_as_added(store: PalaceVectorStore) -> None:
    (doc,) = store.get_by_ids(["redis"])
    assert doc == Document(
        id="redis", page_content="redis caches the session tokens", metadata=TEXTS[2][2]
    )
    assert store.palace.get(["redis"])[0].wing == "notes"


def test_get_by_ids_keeps_the_order_asked(store: PalaceVectorStore) -> None:
    assert ids(store.get_by_ids(["cat", "missing", "pg"])) == ["cat", "pg"]


def test_document_ids_are_upserts(store: PalaceVectorStore) -> None:
    store.add_documents([Document(id="cat", page_content="alice adopted two cats")])
    assert store.get_by_ids(["cat"])[0].page_content == "alice adopted two cats"
    assert store.palace.stats().ledger.drawers == len(TEXTS)


def test_the_same_text_without_an_id_is_filed_once(store: PalaceVectorStore) -> None:
    first = store.add_texts(["a note without an id"])
    second = store.add_documents([Document(page_content="a note without an id")])
    assert first == second
    assert store.palace.stats().ledger.drawers == len(TEXTS) + 1


def test_palace_fields_in_metadata_set_the_drawer(store: PalaceVectorStore) -> None:
    (new_id,) = store.add_texts(["standup at nine"], metadatas=[{"room": "meetings"}])
    assert store.palace.get([new_id])[0].room == "meetings"
    assert store.get_by_ids([new_id])[0].metadata == {"room": "meetings"}
    assert ids(store.similarity_search("standup", k=5, filter={"room": "meetings"})) == [new_id]


def test_similarity_search_goes_through_palace_search(store: PalaceVectorStore) -> None:
    query = "which database do we use"
    expected = [h.id for h in store.palace.search(query, k=3)]
    assert ids(store.similarity_search(query, k=3)) == expected
    scored = store.similarity_search_with_score(query, k=3)
    assert [s for _, s in scored] == sorted((s for _, s in scored), reverse=True)


def test_search_by_vector(store: PalaceVectorStore) -> None:
    vector = WordEmbeddings().embed_query("alice adopted a grey cat")
    assert ids(store.similarity_search_by_vector(vector, k=1)) == ["cat"]
    ((doc, score),) = store.similarity_search_with_score_by_vector(vector, k=1)
    assert doc.id == "cat"
    assert score == pytest.approx(1.0, abs=1e-5)


def test_filter_dict(store: PalaceVectorStore) -> None:
    query = "database postgres redis cat"
    assert set(ids(store.similarity_search(query, k=10, filter={"topic": "db"}))) == {"pg", "pg2"}
    recent = store.similarity_search(query, k=10, filter={"year": {"$gte": 2025}})
    assert set(ids(recent)) == {"pg", "pg2"}
    either = {"$or": [{"topic": "pets"}, {"year": {"$in": [2024]}}]}
    assert set(ids(store.similarity_search(query, k=10, filter=either))) == {"cat", "redis"}
    assert store.similarity_search(query, k=10, filter={"wing": "elsewhere"}) == []
    assert len(store.similarity_search(query, k=10, filter={"wing": "notes"})) == 4


def test_a_filter_never_shortens_the_answer(palace_path: Path) -> None:
    with PalaceVectorStore(palace_path, embedding=WordEmbeddings()) as store:
        texts = [f"note number {i} about databases" for i in range(60)]
        store.add_texts(texts, metadatas=[{"even": i % 2 == 0, "i": i} for i in range(60)])
        rare = store.similarity_search("databases", k=3, filter={"i": {"$gte": 57}})
        assert sorted(d.metadata["i"] for d in rare) == [57, 58, 59]


def test_unsupported_filters_and_keywords_are_errors(store: PalaceVectorStore) -> None:
    with pytest.raises(InvalidQueryError, match="unknown filter operator"):
        store.similarity_search("cat", filter={"year": {"$like": "20%"}})
    with pytest.raises(InvalidQueryError, match="does not take"):
        store.similarity_search("cat", wing="notes")


def test_mmr_prefers_diverse_documents(store: PalaceVectorStore) -> None:
    query = "the database is postgres"
    assert ids(store.similarity_search(query, k=2)) == ["pg2", "pg"]
    diverse = store.max_marginal_relevance_search(query, k=2, fetch_k=4, lambda_mult=0.1)
    assert ids(diverse)[0] == "pg2"
    assert ids(diverse)[1] != "pg"
    vector = WordEmbeddings().embed_query(query)
    by_vector = store.max_marginal_relevance_search_by_vector(vector, k=2, lambda_mult=0.1)
    assert ids(by_vector) == ids(diverse)
    filtered = store.max_marginal_relevance_search(query, k=2, filter={"topic": "db"})
    assert set(ids(filtered)) == {"pg", "pg2"}


def test_as_retriever_search_types(store: PalaceVectorStore) -> None:
    query = "the database is postgres"
    similarity = store.as_retriever(search_kwargs={"k": 2})
    assert ids(similarity.invoke(query)) == ["pg2", "pg"]
    threshold = store.as_retriever(
        search_type="similarity_score_threshold",
        search_kwargs={"k": 4, "score_threshold": 0.5},
    )
    kept = threshold.invoke(query)
    assert "pg2" in ids(kept)
    assert "cat" not in ids(kept)
    mmr = store.as_retriever(search_type="mmr", search_kwargs={"k": 2, "lambda_mult": 0.1})
    assert ids(mmr.invoke(query))[1] != "pg"
    filtered = store.as_retriever(search_kwargs={"k": 4, "filter": {"topic": "pets"}})
    assert ids(filtered.invoke(query)) == ["cat"]


def test_relevance_scores_are_between_0_and_1(store: PalaceVectorStore) -> None:
    scored = store.similarity_search_with_relevance_scores("alice adopted a grey cat", k=4)
    assert scored[0][0].id == "cat"
    assert scored[0][1] == pytest.approx(1.0, abs=1e-5)
    assert all(0.0 <= score <= 1.0 for _, score in scored)


async def test_async_methods(store: PalaceVectorStore) -> None:
    query = "the database is postgres"
    assert ids(await store.asimilarity_search(query, k=2)) == ["pg2", "pg"]
    assert ids(await store.amax_marginal_relevance_search(query, k=2, lambda_mult=0.1)) == ids(
        store.max_marginal_relevance_search(query, k=2, lambda_mult=0.1)
    )
    retriever = store.as_retriever(
        search_type="similarity_score_threshold", search_kwargs={"score_threshold": 0.5}
    )
    assert "pg2" in ids(await retriever.ainvoke(query))
    await store.adelete(["pg2"])
    assert await store.aget_by_ids(["pg2"]) == []


def test_delete_needs_ids(store: PalaceVectorStore) -> None:
    with pytest.raises(InvalidQueryError, match="needs the ids"):
        store.delete()
    assert store.delete(["pg", "missing"]) is True
    assert ids(store.get_by_ids(["pg", "pg2"])) == ["pg2"]


def test_users_never_cross(palace_path: Path) -> None:
    embeddings = WordEmbeddings()
    with Palace.open(palace_path, embedder=LangChainEmbedder(embeddings)) as palace:
        u1 = PalaceVectorStore(palace, embedding=embeddings, user_id="u1")
        u2 = PalaceVectorStore(palace, embedding=embeddings, user_id="u2")
        u1.add_texts(["u1 keeps a secret"], ids=["s1"])
        u2.add_texts(["u2 keeps a secret"], ids=["s2"])
        assert ids(u1.similarity_search("secret", k=5)) == ["s1"]
        assert ids(u2.similarity_search_by_vector(embeddings.embed_query("secret"), k=5)) == ["s2"]
        assert ids(u1.max_marginal_relevance_search("secret", k=5)) == ["s1"]
        assert u2.get_by_ids(["s1"]) == []
        u2.delete(["s1"])
        assert ids(u1.get_by_ids(["s1"])) == ["s1"]
        with pytest.raises(InvalidQueryError, match="another owner"):
            u2.add_texts(["u2 overwrites"], ids=["s1"])
        with pytest.raises(InvalidQueryError, match="user_id='u2'"):
            u1.add_texts(["sneaky"], metadatas=[{"user_id": "u2"}])
        with pytest.raises(InvalidQueryError, match="cannot read user_id='u1'"):
            u2.similarity_search("secret", filter={"user_id": "u1"})
        unowned = PalaceVectorStore(palace, embedding=embeddings)
        assert unowned.similarity_search("secret", k=5) == []


def test_from_texts_and_embeddings_need_a_named_palace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("PALACE_PATH", raising=False)
    with pytest.raises(ValueError, match="from_texts needs palace="):
        PalaceVectorStore.from_texts(["a note"], WordEmbeddings())
    with pytest.raises(ValueError, match="from_texts needs palace="):
        PalaceVectorStore.from_documents([Document(page_content="a note")], WordEmbeddings())
    with pytest.raises(ValueError, match="needs palace="):
        PalaceVectorStore(embedding=WordEmbeddings())
    assert not (tmp_path / ".palace").exists()  # nothing filed, no palace bound


def test_from_texts(palace_path: Path) -> None:
    store = PalaceVectorStore.from_texts(
        ["alpha note", "beta note"],
        WordEmbeddings(),
        metadatas=[{"n": 1}, {"n": 2}],
        ids=["a", None],
        palace=palace_path,
        wing="letters",
    )
    try:
        assert ids(store.similarity_search("alpha", k=1)) == ["a"]
        assert {d.metadata["n"] for d in store.similarity_search("note", k=5)} == {1, 2}
        assert store.palace.get(["a"])[0].wing == "letters"
    finally:
        store.close()


def test_embeddings_and_the_palace_model(palace_path: Path) -> None:
    embeddings = WordEmbeddings()
    with PalaceVectorStore(palace_path, embedding=embeddings) as store:
        assert store.embeddings is embeddings
        store.add_texts(["one text"])
        assert store.palace.stats().model == "langchain/WordEmbeddings:words-64"
    with pytest.raises(EmbedderMismatchError):
        PalaceVectorStore(palace_path)
    with (
        Palace.open(palace_path, embedder=LangChainEmbedder(embeddings)) as palace,
        pytest.raises(ValueError, match="not with the embedding given"),
    ):
        PalaceVectorStore(palace, embedding=WordEmbeddings())


@pytest.mark.slow
def test_default_embedder_is_the_palace_model(corpus_palace: Palace) -> None:
    store = PalaceVectorStore(corpus_palace)
    assert isinstance(store.embeddings, PalaceEmbeddings)
    assert store.embeddings.model == "sentence-transformers/all-MiniLM-L6-v2"
    vector = store.embeddings.embed_query("who adopted a cat?")
    assert len(vector) == 384
    docs = store.similarity_search_by_vector(vector, k=1)
    assert ids(docs) == ["cat"]
    assert docs[0].metadata["wing"] == "home"  # differs from the store's default
    assert ids(store.similarity_search("who adopted a cat?", k=1)) == ["cat"]


def test_a_wing_is_a_collection(palace_path: Path) -> None:
    embeddings = WordEmbeddings()
    with Palace.open(palace_path, embedder=LangChainEmbedder(embeddings)) as palace:
        notes = PalaceVectorStore(palace, embedding=embeddings, wing="notes")
        chats = PalaceVectorStore(palace, embedding=embeddings, wing="chats")
        everything = PalaceVectorStore(palace, embedding=embeddings)
        notes.add_texts(["a note about cats"], ids=["n"])
        chats.add_texts(["a chat about cats"], ids=["c"])
        everything.add_texts(["a default text about cats"], ids=["d"])
        assert ids(notes.similarity_search("cats", k=5)) == ["n"]
        assert ids(chats.similarity_search_by_vector(embeddings.embed_query("cats"), k=5)) == ["c"]
        assert chats.get_by_ids(["n", "c"]) == [Document(id="c", page_content="a chat about cats")]
        assert set(ids(everything.similarity_search("cats", k=5))) == {"n", "c", "d"}
        assert everything.get_by_ids(["n"])[0].metadata == {"wing": "notes"}
        assert notes.similarity_search("cats", k=5, filter={"wing": "chats"}) == []
        chats.delete(["n"])
        assert ids(notes.get_by_ids(["n"])) == ["n"]


@pytest.fixture
def remembering(palace_path: Path) -> Iterator[tuple[Palace, WordEmbeddings]]:
    """A palace with drawers in two wings, and memories filed in no wing and in one."""
    embeddings = WordEmbeddings()
    with Palace.open(palace_path, embedder=LangChainEmbedder(embeddings)) as palace:
        notes = PalaceVectorStore(palace, embedding=embeddings, wing="notes", user_id="u1")
        notes.add_texts(["a note about cats"], ids=["n"])
        chats = PalaceVectorStore(palace, embedding=embeddings, wing="chats", user_id="u1")
        chats.add_texts(["a chat about cats"], ids=["c"])
        palace.remember("my cats are called Miso and Tofu", user_id="u1")
        palace.remember("the chats wing has cats in it", user_id="u1", wing="chats")
        yield palace, embeddings


def test_a_store_returns_only_what_it_holds(remembering: tuple[Palace, WordEmbeddings]) -> None:
    palace, embeddings = remembering
    notes = PalaceVectorStore(palace, embedding=embeddings, wing="notes", user_id="u1")
    chats = PalaceVectorStore(palace, embedding=embeddings, wing="chats", user_id="u1")
    everything = PalaceVectorStore(palace, embedding=embeddings, user_id="u1")
    query = "cats"
    assert ids(notes.similarity_search(query, k=5)) == ["n"]
    assert ids(chats.similarity_search(query, k=5)) == ["c"]
    assert set(ids(everything.similarity_search(query, k=5))) == {"n", "c"}
    for store in (notes, chats, everything):
        found = [
            *store.similarity_search(query, k=5),
            *store.max_marginal_relevance_search(query, k=5),
            *store.as_retriever(search_kwargs={"k": 5}).invoke(query),
            *(doc for doc, _ in store.similarity_search_with_relevance_scores(query, k=5)),
        ]
        assert found
        assert ids(store.get_by_ids(ids(found))) == ids(found)  # each can be fetched
    everything.delete(ids(everything.similarity_search(query, k=5)))
    assert everything.similarity_search(query, k=5) == []
    assert len(palace.memories(user_id="u1")) == 2  # the memories are not the store's


def test_as_retriever_keeps_the_scores(store: PalaceVectorStore) -> None:
    query = "the database is postgres"
    for search_type, kwargs in [
        ("similarity", {"k": 2}),
        ("similarity_score_threshold", {"k": 2, "score_threshold": 0.1}),
        ("mmr", {"k": 2}),
    ]:
        docs = store.as_retriever(search_type=search_type, search_kwargs=kwargs).invoke(query)
        assert docs
        for doc in docs:
            assert doc.metadata["score"] == doc.metadata["scores"]["final"]
            assert "vector" in doc.metadata["scores"]
            assert doc.metadata["topic"] == store.get_by_ids([doc.id])[0].metadata["topic"]
    with pytest.raises(InvalidQueryError, match="does not take"):
        store.as_retriever(search_kwargs={"wing": "notes"}).invoke(query)
