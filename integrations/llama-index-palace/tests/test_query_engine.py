"""The store and the retriever inside LlamaIndex's own index and query engine.

These use the palace's default model (MiniLM) and LlamaIndex's ``MockLLM``: every model
is passed explicitly, so LlamaIndex never reaches for its OpenAI defaults (that package
is not even installed).
"""

from __future__ import annotations

import pytest
from llama_index.core import Document, StorageContext, VectorStoreIndex
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from palace_retrievers import Palace

from llama_index.retrievers.palace import PalaceRetriever
from llama_index.vector_stores.palace import PalaceVectorStore

pytestmark = pytest.mark.slow

DOCUMENTS = [
    Document(text="We moved the main database to PostgreSQL 15 in March.", id_="decisions"),
    Document(text="Alice adopted a grey cat called Miso in May.", id_="pets"),
    Document(text="Deploys go out with a blue/green switch on lk-prod-blue.", id_="ops"),
]


@pytest.fixture(scope="module")
def store(minilm_palace: Palace) -> PalaceVectorStore:
    store = PalaceVectorStore(minilm_palace, wing="llama")
    VectorStoreIndex.from_documents(
        DOCUMENTS,
        storage_context=StorageContext.from_defaults(vector_store=store),
        embed_model=store.embed_model,
    )
    return store


def test_documents_are_filed_through_the_index(store: PalaceVectorStore) -> None:
    nodes = store.get_nodes()
    assert {n.ref_doc_id for n in nodes} == {"decisions", "pets", "ops"}
    assert {d.wing for d in store.palace.get([n.node_id for n in nodes])} == {"llama"}


def test_index_from_vector_store_as_query_engine(store: PalaceVectorStore) -> None:
    index = VectorStoreIndex.from_vector_store(store, embed_model=store.embed_model)
    engine = index.as_query_engine(llm=MockLLM(), similarity_top_k=1)
    response = engine.query("Which database do we use?")
    assert [n.node.ref_doc_id for n in response.source_nodes] == ["decisions"]
    assert "PostgreSQL 15" in response.source_nodes[0].node.get_content()


def test_retriever_query_engine(store: PalaceVectorStore) -> None:
    retriever = PalaceRetriever(store.palace, similarity_top_k=1, wing="llama")
    engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM())
    response = engine.query("Who adopted a cat?")
    assert [n.node.ref_doc_id for n in response.source_nodes] == ["pets"]


async def test_async_query_engine(store: PalaceVectorStore) -> None:
    index = VectorStoreIndex.from_vector_store(store, embed_model=store.embed_model)
    engine = index.as_query_engine(llm=MockLLM(), similarity_top_k=1)
    response = await engine.aquery("How do we deploy?")
    assert [n.node.ref_doc_id for n in response.source_nodes] == ["ops"]


def test_refreshing_a_document_replaces_its_nodes(store: PalaceVectorStore) -> None:
    index = VectorStoreIndex.from_vector_store(store, embed_model=store.embed_model)
    index.delete_ref_doc("pets")
    index.insert(Document(text="Alice now has two cats, Miso and Tofu.", id_="pets"))
    retriever = index.as_retriever(similarity_top_k=1)
    (hit,) = retriever.retrieve("How many cats does Alice have?")
    assert "Tofu" in hit.node.get_content()
    assert len([n for n in store.get_nodes() if n.ref_doc_id == "pets"]) == 1
