"""LangChain's order and grouping conventions, read by PalaceVectorStore (``ordering.py``).

The documents carry the metadata LangChain's own loaders and splitters write (a PDF
loader's ``source`` and ``page``, a splitter's ``start_index``, a JSON loader's
``seq_num``); the palace is real and embeds with ``WordEmbeddings``, since only where
each text is filed is checked (and one search that uses it).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.documents import Document

from langchain_palace import PalaceVectorStore
from langchain_palace.ordering import order_key, with_positions

from .conftest import WordEmbeddings


@pytest.fixture
def store(palace_path: Path) -> Iterator[PalaceVectorStore]:
    with PalaceVectorStore(palace_path, embedding=WordEmbeddings(), wing="docs") as store:
        yield store


def filed(store: PalaceVectorStore, source: str) -> list[str]:
    return [d.text for d in store.palace.source_drawers(source, wing="docs")]


def test_a_pdf_split_in_pages_and_chunks_is_filed_in_reading_order(
    store: PalaceVectorStore,
) -> None:
    pages = [(page, start) for page in range(3) for start in (0, 120, 240)]
    docs = [
        Document(
            page_content=f"page {page} chunk at {start}",
            metadata={"source": "report.pdf", "page": page, "start_index": start},
        )
        for page, start in pages
    ]
    shuffled = docs[:]
    random.Random(3).shuffle(shuffled)
    other = Document(page_content="a note from elsewhere", metadata={"source": "notes.txt"})
    store.add_documents([*shuffled, other])
    assert filed(store, "report.pdf") == [d.page_content for d in docs]
    assert filed(store, "notes.txt") == ["a note from elsewhere"]


def test_json_records_follow_seq_num(store: PalaceVectorStore) -> None:
    docs = [
        Document(page_content=f"record {n}", metadata={"source": "log.jsonl", "seq_num": n})
        for n in (3, 1, 2)
    ]
    store.add_documents(docs)
    assert filed(store, "log.jsonl") == ["record 1", "record 2", "record 3"]


def test_texts_without_a_source_form_the_source_of_their_call(
    store: PalaceVectorStore,
) -> None:
    turns = ["alice: hi", "bob: hello alice", "alice: did you adopt the cat?", "bob: yes"]
    ids = store.add_texts(turns)
    drawers = store.palace.get(ids)
    (source,) = {d.source for d in drawers}
    assert [d.chunk_index for d in drawers] == [0, 1, 2, 3]
    assert filed(store, source) == turns
    # What a vector store user reads back is what they added: no made-up source.
    assert all("source" not in d.metadata for d in store.get_by_ids(ids))


def test_a_given_chunk_index_is_kept(store: PalaceVectorStore) -> None:
    store.add_texts(
        ["second", "first"],
        metadatas=[
            {"source": "s.md", "chunk_index": 1, "page": 0},
            {"source": "s.md", "chunk_index": 0, "page": 9},
        ],
    )
    assert filed(store, "s.md") == ["first", "second"]


def test_keys_that_are_not_numbers_count_as_missing() -> None:
    assert order_key({"page": "iv", "seq_num": True, "start_index": 5}) == (
        float("-inf"),
        float("-inf"),
        5.0,
    )
    given = [{"source": "a", "start_index": 9}, {"source": "a", "start_index": 2}]
    assert [m["chunk_index"] for m in with_positions(given, "w")] == [1, 0]
    assert "chunk_index" not in given[0]  # the caller's dicts are left alone
