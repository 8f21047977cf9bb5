"""PalaceVectorStore: LlamaIndex's class check, then behaviour against a real palace."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from llama_index.core import Document, MockEmbedding, StorageContext, VectorStoreIndex
from llama_index.core.schema import (
    BaseNode,
    MetadataMode,
    NodeRelationship,
    ObjectType,
    RelatedNodeInfo,
    TextNode,
)
from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore,
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
    VectorStoreQueryResult,
)
from palace_retrievers import Drawer, Hit, InvalidQueryError, Palace

from llama_index.vector_stores.palace import PalaceEmbedding, PalaceVectorStore
from llama_index.vector_stores.palace.filters import FETCH_LIMIT, fetch


def test_class() -> None:
    names_of_base_classes = [b.__name__ for b in PalaceVectorStore.__mro__]
    assert BasePydanticVectorStore.__name__ in names_of_base_classes


def node(node_id: str, text: str, doc: str, **metadata: object) -> TextNode:
    return TextNode(
        id_=node_id,
        text=text,
        metadata=metadata,
        relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=doc)},
    )


NODES = [
    node("pg", "we moved the database to postgres", "doc-db", topic="db", year=2026),
    node("pg2", "the database is postgres now", "doc-db", topic="db", year=2025),
    node("redis", "redis caches the session tokens", "doc-cache", topic="cache", year=2024),
    node(
        "cat",
        "alice adopted a grey cat",
        "doc-home",
        topic="pets",
        year=2023,
        tags=["cat", "alice"],
    ),
]


@pytest.fixture
def store(palace: Palace) -> PalaceVectorStore:
    store = PalaceVectorStore(palace, wing="notes")
    store.add(NODES)
    return store


def ids(result: VectorStoreQueryResult | list[BaseNode]) -> list[str]:
    if isinstance(result, VectorStoreQueryResult):
        return list(result.ids or [])
    return [n.node_id for n in result]


def filters(*items: MetadataFilter | MetadataFilters, condition: str = "and") -> MetadataFilters:
    return MetadataFilters(filters=list(items), condition=FilterCondition(condition))


def f(key: str, value: object, op: str = "==") -> MetadataFilter:
    return MetadataFilter(key=key, value=value, operator=FilterOperator(op))


def query(text: str, k: int = 10, **kwargs: object) -> VectorStoreQuery:
    return VectorStoreQuery(query_str=text, similarity_top_k=k, **kwargs)  # type: ignore[arg-type]


def test_nodes_come_back_as_they_were_added(store: PalaceVectorStore) -> None:
    (cat,) = store.get_nodes(node_ids=["cat"])
    assert isinstance(cat, TextNode)
    assert cat.node_id == "cat"
    assert cat.text == "alice adopted a grey cat"
    assert cat.metadata == NODES[3].metadata
    assert cat.ref_doc_id == "doc-home"
    drawer = store.palace.get(["cat"])[0]
    assert drawer.text == "alice adopted a grey cat"
    assert drawer.wing == "notes"


def test_add_is_an_upsert(store: PalaceVectorStore) -> None:
    store.add([node("cat", "alice adopted two cats", "doc-home", topic="pets")])
    (cat,) = store.get_nodes(node_ids=["cat"])
    assert cat.get_content() == "alice adopted two cats"
    assert len(store.get_nodes()) == len(NODES)


def test_query_by_text_runs_the_palace_search(store: PalaceVectorStore) -> None:
    result = store.query(query("the database is postgres", k=2))
    assert ids(result) == [h.id for h in store.palace.search("the database is postgres", k=2)]
    assert ids(result)[0] == "pg2"
    assert result.similarities == sorted(result.similarities or [], reverse=True)
    assert result.nodes is not None
    assert result.nodes[0].ref_doc_id == "doc-db"


def test_query_by_embedding_alone(store: PalaceVectorStore) -> None:
    vector = store.embed_model.get_query_embedding("alice adopted a grey cat")
    result = store.query(VectorStoreQuery(query_embedding=vector, similarity_top_k=1))
    assert ids(result) == ["cat"]
    assert (result.similarities or [0])[0] == pytest.approx(1.0, abs=1e-5)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (filters(f("topic", "db")), {"pg", "pg2"}),
        (filters(f("topic", "db", "!=")), {"redis", "cat"}),
        (filters(f("year", 2024, ">")), {"pg", "pg2"}),
        (filters(f("year", 2025, ">=")), {"pg", "pg2"}),
        (filters(f("year", 2024, "<")), {"cat"}),
        (filters(f("year", 2024, "<=")), {"cat", "redis"}),
        (filters(f("topic", ["db", "pets"], "in")), {"pg", "pg2", "cat"}),
        (filters(f("topic", ["db", "pets"], "nin")), {"redis"}),
        (filters(f("tags", "alice", "contains")), {"cat"}),
        (filters(f("topic", "db"), f("year", 2026)), {"pg"}),
        (filters(f("topic", "pets"), f("year", 2024), condition="or"), {"cat", "redis"}),
        (filters(f("topic", "db"), condition="not"), {"redis", "cat"}),
        (
            filters(
                f("year", 2025, ">="),
                filters(f("topic", "cache"), f("topic", "pets"), condition="or"),
                condition="or",
            ),
            {"pg", "pg2", "redis", "cat"},
        ),
        (filters(f("wing", "notes"), f("topic", "cache")), {"redis"}),
        (filters(f("wing", "elsewhere")), set()),
        (filters(f("doc_id", "doc-db")), {"pg", "pg2"}),
    ],
)
def test_metadata_filters(
    store: PalaceVectorStore, spec: MetadataFilters, expected: set[str]
) -> None:
    assert set(ids(store.query(query("database cat redis", filters=spec)))) == expected
    assert {n.node_id for n in store.get_nodes(filters=spec)} == expected


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (filters(f("topic", "data", "text_match")), "put the words in the query"),
        (filters(f("topic", "DB", "text_match_insensitive")), "put the words in the query"),
        (filters(f("topic", "db", "in")), "takes a list"),
        (filters(f("user_id", "u2")), "cannot read other users"),
        (filters(f("user_id", None, "!=")), "cannot read other users"),
    ],
)
def test_what_the_palace_cannot_honour_is_an_error(
    store: PalaceVectorStore, spec: MetadataFilters, message: str
) -> None:
    with pytest.raises(InvalidQueryError, match=message):
        store.query(query("cat", filters=spec))


def test_unsupported_modes_and_empty_queries_are_errors(store: PalaceVectorStore) -> None:
    with pytest.raises(ValueError, match="'sparse'"):
        store.query(query("cat", mode=VectorStoreQueryMode.SPARSE))
    with pytest.raises(InvalidQueryError, match="query_str or a query_embedding"):
        store.query(VectorStoreQuery(similarity_top_k=1))


def test_query_restricted_to_documents_and_nodes(store: PalaceVectorStore) -> None:
    assert set(ids(store.query(query("postgres cat", doc_ids=["doc-home"])))) == {"cat"}
    assert ids(store.query(query("postgres", node_ids=["redis", "pg"]))) == ["pg", "redis"]


def test_a_filter_never_shortens_the_answer(palace: Palace) -> None:
    store = PalaceVectorStore(palace)
    store.add([node(f"n{i}", f"note number {i} about databases", "d", i=i) for i in range(60)])
    result = store.query(query("databases", k=3, filters=filters(f("i", 57, ">="))))
    assert sorted(ids(result)) == ["n57", "n58", "n59"]


def test_delete_by_ref_doc_id(store: PalaceVectorStore) -> None:
    store.delete("doc-db")
    assert {n.node_id for n in store.get_nodes()} == {"redis", "cat"}


def test_delete_nodes(store: PalaceVectorStore) -> None:
    store.delete_nodes(node_ids=["cat"])
    store.delete_nodes(filters=filters(f("year", 2026)))
    assert {n.node_id for n in store.get_nodes()} == {"pg2", "redis"}
    with pytest.raises(InvalidQueryError, match="clear"):
        store.delete_nodes()


def test_clear_empties_only_this_store(palace: Palace, store: PalaceVectorStore) -> None:
    other_wing = PalaceVectorStore(palace, wing="other")
    other_wing.add([node("o1", "a note elsewhere", "doc-o")])
    other_user = PalaceVectorStore(palace, wing="notes", user_id="u1")
    other_user.add([node("u1", "a note of u1", "doc-u")])
    store.clear()
    assert store.get_nodes() == []
    assert ids(other_wing.get_nodes()) == ["o1"]
    assert ids(other_user.get_nodes()) == ["u1"]


def test_users_never_cross(palace: Palace) -> None:
    u1 = PalaceVectorStore(palace, user_id="u1")
    u2 = PalaceVectorStore(palace, user_id="u2")
    u1.add([node("s1", "u1 keeps a secret", "d1")])
    u2.add([node("s2", "u2 keeps a secret", "d2")])
    assert ids(u1.query(query("secret"))) == ["s1"]
    vector = u2.embed_model.get_query_embedding("secret")
    assert ids(u2.query(VectorStoreQuery(query_embedding=vector, similarity_top_k=5))) == ["s2"]
    assert u2.get_nodes(node_ids=["s1"]) == []
    u2.delete_nodes(node_ids=["s1"])
    u2.delete("d1")
    u2.clear()
    assert ids(u1.get_nodes()) == ["s1"]
    with pytest.raises(InvalidQueryError, match="another owner"):
        u2.add([node("s1", "u2 overwrites", "d2")])
    with pytest.raises(InvalidQueryError, match="user_id='u2'"):
        u1.add([node("x", "sneaky", "d", user_id="u2")])
    assert PalaceVectorStore(palace).query(query("secret")).ids == []


def test_mined_drawers_are_text_nodes_with_their_fields(palace: Palace) -> None:
    palace.add_texts(["filed without LlamaIndex"], ids=["plain"], wing="notes", room="misc")
    (plain,) = PalaceVectorStore(palace).get_nodes(node_ids=["plain"])
    assert isinstance(plain, TextNode)
    assert plain.text == "filed without LlamaIndex"
    assert plain.metadata["wing"] == "notes"
    assert plain.metadata["room"] == "misc"
    assert "filed_at" not in plain.get_metadata_str(MetadataMode.LLM)


def test_embedding_model(store: PalaceVectorStore) -> None:
    embed_model = store.embed_model
    assert isinstance(embed_model, PalaceEmbedding)
    assert embed_model.model_name == "test/words-64"
    assert len(embed_model.get_text_embedding_batch(["a", "b"])) == 2


async def test_async_methods(store: PalaceVectorStore) -> None:
    result = await store.aquery(query("the database is postgres", k=1))
    assert ids(result) == ["pg2"]
    await store.async_add([node("new", "a new note", "doc-new")])
    assert ids(await store.aget_nodes(node_ids=["new"])) == ["new"]
    await store.adelete("doc-new")
    await store.adelete_nodes(node_ids=["cat"])
    assert {n.node_id for n in await store.aget_nodes()} == {"pg", "pg2", "redis"}
    await store.aclear()
    assert await store.aget_nodes() == []


def test_a_store_returns_only_what_it_holds(palace: Palace) -> None:
    """The palace recalls a user's memories with every search; a store holds nodes."""
    notes = PalaceVectorStore(palace, wing="notes", user_id="u1")
    notes.add([node("n", "a note about cats", "doc-n")])
    chats = PalaceVectorStore(palace, wing="chats", user_id="u1")
    chats.add([node("c", "a chat about cats", "doc-c")])
    palace.remember("my cats are called Miso and Tofu", user_id="u1")
    palace.remember("the notes wing has cats in it", user_id="u1", wing="notes")
    everything = PalaceVectorStore(palace, user_id="u1")
    assert ids(notes.query(query("cats"))) == ["n"]
    assert ids(chats.query(query("cats"))) == ["c"]
    assert set(ids(everything.query(query("cats")))) == {"n", "c"}
    for store in (notes, chats, everything):
        for mode in (VectorStoreQueryMode.DEFAULT, VectorStoreQueryMode.MMR):
            found = ids(store.query(query("cats", mode=mode)))
            assert found
            assert ids(store.get_nodes(node_ids=found)) == found  # each can be fetched
    everything.delete_nodes(node_ids=ids(everything.query(query("cats"))))
    assert ids(everything.query(query("cats"))) == []
    assert len(palace.memories(user_id="u1")) == 2  # the memories are not the store's


def test_mmr_picks_relevant_and_diverse_nodes(store: PalaceVectorStore) -> None:
    text = "the database is postgres"
    relevant = ids(store.query(query(text, k=2)))
    assert relevant == ["pg2", "pg"]
    by_relevance = store.query(query(text, k=2, mode=VectorStoreQueryMode.MMR), mmr_threshold=1.0)
    assert ids(by_relevance) == relevant
    diverse = store.query(query(text, k=2, mode=VectorStoreQueryMode.MMR), mmr_threshold=0.1)
    assert ids(diverse)[0] == "pg2"
    assert ids(diverse)[1] != "pg"
    assert diverse.nodes is not None
    assert len(diverse.similarities or []) == 2
    narrow = store.query(
        query(text, k=2, mode=VectorStoreQueryMode.MMR, filters=filters(f("topic", "db"))),
        mmr_threshold=0.1,
    )
    assert set(ids(narrow)) == {"pg", "pg2"}
    few = store.query(query(text, k=1, mode=VectorStoreQueryMode.MMR), mmr_prefetch_k=1)
    assert ids(few) == ["pg2"]
    index = VectorStoreIndex.from_vector_store(store, embed_model=store.embed_model)
    retriever = index.as_retriever(
        similarity_top_k=2,
        vector_store_query_mode="mmr",
        vector_store_kwargs={"mmr_threshold": 0.1},
    )
    assert [n.node.node_id for n in retriever.retrieve(text)] == ids(diverse)


def test_mined_chunks_know_their_source_and_neighbours(palace: Palace, tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    paragraphs = [f"Paragraph {i}: " + " ".join(["word"] * 150) for i in range(4)]
    (folder / "long.md").write_text("\n\n".join(paragraphs), encoding="utf-8")
    (folder / "short.md").write_text("A short note about cats.", encoding="utf-8")
    palace.mine(folder, wing="notes", progress=False)
    store = PalaceVectorStore(palace, wing="notes")
    long_md, short_md = str(folder / "long.md"), str(folder / "short.md")
    chunks = {n.node_id: n for n in store.get_nodes() if n.ref_doc_id == long_md}
    assert len(chunks) >= 3
    (first,) = [n for n in chunks.values() if n.prev_node is None]
    chain = [first]
    while chain[-1].next_node is not None:
        after = chunks[chain[-1].next_node.node_id]
        assert after.prev_node is not None
        assert after.prev_node.node_id == chain[-1].node_id
        chain.append(after)
    assert len(chain) == len(chunks)  # one chain through every chunk, in order
    assert chain[0].get_content().startswith("Paragraph 0")
    assert chain[0].source_node is not None
    assert chain[0].source_node.node_type == ObjectType.DOCUMENT
    (short,) = store.query(query("a short note about cats", k=1)).nodes or []
    assert short.ref_doc_id == short_md
    assert short.prev_node is None
    assert short.next_node is None
    hit = store.query(query(paragraphs[1], k=1)).nodes or []
    assert hit[0].ref_doc_id == long_md
    assert hit[0].prev_node is not None or hit[0].next_node is not None
    store.delete(long_md)  # the document's nodes go, as with any ref_doc_id
    assert {n.ref_doc_id for n in store.get_nodes()} == {short_md}
    palace.add_texts(["filed as plain text"], ids=["plain"], wing="notes")
    (plain,) = store.get_nodes(node_ids=["plain"])
    assert plain.source_node is None  # a text of its own, from no document


def test_the_index_embeds_each_node_once(palace: Palace, monkeypatch: pytest.MonkeyPatch) -> None:
    embedded: list[str] = []
    embed = palace.embedder.embed_documents

    def recorded(texts: Sequence[str]) -> Any:
        embedded.extend(texts)
        return embed(texts)

    monkeypatch.setattr(palace.embedder, "embed_documents", recorded)
    store = PalaceVectorStore(palace, wing="docs")
    documents = [Document(text="alice adopted a grey cat", id_="cat", metadata={"n": 1})]
    VectorStoreIndex.from_documents(
        documents,
        storage_context=StorageContext.from_defaults(vector_store=store),
        embed_model=store.embed_model,
    )
    drawer_texts = [t for t in embedded if "|" not in t]  # not the closets' pointer lines
    assert drawer_texts == ["n: 1\n\nalice adopted a grey cat"]  # LlamaIndex's, once
    (stored,) = store.get_nodes()
    vector = store.embed_model.get_text_embedding(stored.get_content(MetadataMode.EMBED))
    ((cat, similarity),) = [(h.id, h.score) for h in palace.search_by_vector(vector, k=1)]
    assert (cat, similarity) == (stored.node_id, pytest.approx(1.0, abs=1e-5))
    embedded.clear()
    own = PalaceVectorStore(palace, wing="own")
    VectorStoreIndex.from_documents(  # a PalaceEmbedding of one's own does as well
        [Document(text="carol adopted a parrot", id_="parrot")],
        storage_context=StorageContext.from_defaults(vector_store=own),
        embed_model=PalaceEmbedding(palace),
    )
    assert [t for t in embedded if "|" not in t] == ["carol adopted a parrot"]
    embedded.clear()
    elsewhere = PalaceVectorStore(palace, wing="mock")
    VectorStoreIndex.from_documents(  # another model's vectors are never filed as they are
        [Document(text="bob adopted a dog", id_="dog")],
        storage_context=StorageContext.from_defaults(vector_store=elsewhere),
        embed_model=MockEmbedding(embed_dim=64),
    )
    assert [t for t in embedded if "|" not in t] == ["bob adopted a dog"]  # by the palace


def test_post_filtering_asks_for_a_bounded_number_of_hits(caplog: pytest.LogCaptureFixture) -> None:
    """A filter that almost nothing passes stops at FETCH_LIMIT hits, with a warning."""
    asked: list[int] = []

    def run(n: int) -> list[Hit]:  # a palace of 100,000 drawers; only the last passes
        asked.append(n)
        return [
            Hit(
                drawer=Drawer(id=str(i), text="t", wing="w", room="r", source="s"),
                score=1.0,
                scores={},
            )
            for i in range(min(n, 100_000))
        ]

    assert fetch(run, 3, lambda d: d.id == "99999") == []
    assert asked == [12, 48, 192, 768, FETCH_LIMIT]
    assert "only 0 of the best 1024 hits pass the filters (3 wanted)" in caplog.text
