"""LlamaIndex's order and grouping conventions, read by PalaceVectorStore (``ordering.py``).

Nodes come from LlamaIndex's own ``SentenceSplitter`` (``ref_doc_id`` and
``PREVIOUS``/``NEXT`` set as every node parser sets them); the palace is real and embeds
with ``HashEmbedder``, since only where each node is filed is checked.
"""

from __future__ import annotations

import random
from itertools import pairwise

from llama_index.core import Document, StorageContext, VectorStoreIndex
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import BaseNode, NodeRelationship, RelatedNodeInfo, TextNode
from palace_retrievers import Palace

from llama_index.vector_stores.palace import PalaceVectorStore
from llama_index.vector_stores.palace.ordering import chain_ranks

STORY = " ".join(
    f"Sentence {n} of the first story tells what happened on day {n}." for n in range(60)
)


def parsed(doc_id: str, text: str = STORY) -> list[BaseNode]:
    splitter = SentenceSplitter(chunk_size=64, chunk_overlap=0)
    nodes = splitter.get_nodes_from_documents([Document(text=text, id_=doc_id)])
    assert len(nodes) > 4
    return nodes


def filed(palace: Palace, source: str) -> list[str]:
    return [d.id for d in palace.source_drawers(source, wing="docs")]


def test_nodes_are_filed_in_their_documents_order(palace: Palace) -> None:
    story, other = parsed("story.txt"), parsed("other.txt", STORY.replace("first", "other"))
    mixed = story + other
    random.Random(5).shuffle(mixed)
    PalaceVectorStore(palace=palace, wing="docs").add(mixed)
    assert filed(palace, "story.txt") == [n.node_id for n in story]
    assert filed(palace, "other.txt") == [n.node_id for n in other]
    # The nodes come back as they were, relationships included.
    (back,) = PalaceVectorStore(palace=palace, wing="docs").get_nodes([story[1].node_id])
    assert back.prev_node is not None
    assert back.prev_node.node_id == story[0].node_id


def test_an_index_inserting_in_batches_continues_the_source(palace: Palace) -> None:
    story = parsed("story.txt")
    store = PalaceVectorStore(palace=palace, wing="docs")
    store.add(story[:3])
    store.add(story[3:])
    assert filed(palace, "story.txt") == [n.node_id for n in story]
    chunks = [d.chunk_index for d in palace.source_drawers("story.txt", wing="docs")]
    assert chunks == list(range(len(story)))


def test_an_index_built_from_documents_files_them_in_order(palace: Palace) -> None:
    """The whole LlamaIndex path: reader documents, a node parser, an index inserting in
    batches of four nodes (each batch one ``add``)."""
    store = PalaceVectorStore(palace=palace, wing="docs")
    documents = [
        Document(text=STORY, id_="first.txt"),
        Document(text=STORY.replace("first", "second"), id_="second.txt"),
    ]
    index = VectorStoreIndex.from_documents(
        documents,
        storage_context=StorageContext.from_defaults(vector_store=store),
        embed_model=store.embed_model,
        transformations=[SentenceSplitter(chunk_size=64, chunk_overlap=0)],
        insert_batch_size=4,
    )
    for doc in documents:
        drawers = palace.source_drawers(doc.doc_id, wing="docs")
        assert len(drawers) > 4
        assert [d.chunk_index for d in drawers] == list(range(len(drawers)))
        nodes = store.get_nodes([d.id for d in drawers])
        assert all(n.ref_doc_id == doc.doc_id for n in nodes)
        for before, after in pairwise(nodes):
            assert after.prev_node is not None
            assert after.prev_node.node_id == before.node_id
    assert index.index_id


def test_nodes_without_relationships_keep_the_calls_order(palace: Palace) -> None:
    nodes = [TextNode(id_=f"n{i}", text=f"a loose note number {i}") for i in range(3)]
    PalaceVectorStore(palace=palace, wing="docs").add(nodes)
    drawers = palace.get(["n0", "n1", "n2"])
    (source,) = {d.source for d in drawers}
    assert [d.chunk_index for d in drawers] == [0, 1, 2]
    assert filed(palace, source) == ["n0", "n1", "n2"]


def test_chains_are_read_from_either_end() -> None:
    def linked(node_id: str, prev: str | None, nxt: str | None) -> TextNode:
        relationships = {}
        if prev:
            relationships[NodeRelationship.PREVIOUS] = RelatedNodeInfo(node_id=prev)
        if nxt:
            relationships[NodeRelationship.NEXT] = RelatedNodeInfo(node_id=nxt)
        return TextNode(id_=node_id, text=node_id, relationships=relationships)

    # c only says what comes before it, a only what comes after it.
    nodes = [linked("c", "b", None), linked("a", None, "b"), linked("b", None, None)]
    assert chain_ranks(nodes) == [2, 0, 1]
    cycle = [linked("x", "y", "y"), linked("y", "x", "x")]
    assert sorted(chain_ranks(cycle)) == [0, 1]
