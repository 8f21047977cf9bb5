"""PalaceRetriever against a real palace: documents, filters, users, and async."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from palace_retrievers import Hit, InvalidQueryError, Palace, PalaceNotFoundError

from langchain_palace import PalaceRetriever


def test_documents_carry_id_metadata_and_scores(corpus_palace: Palace) -> None:
    docs = PalaceRetriever(palace=corpus_palace, k=2).invoke("which database do we use?")
    assert len(docs) == 2
    top = docs[0]
    assert top.id == "db"
    assert top.page_content.startswith("We moved the main database to PostgreSQL 15")
    assert top.metadata["wing"] == "work"
    assert top.metadata["room"] == "decisions"
    assert top.metadata["source"] == "text"
    assert top.metadata["topic"] == "decisions"
    assert top.metadata["content_date"].startswith("2026-03-02")
    assert top.metadata["score"] == top.metadata["scores"]["final"]
    assert "vector" in top.metadata["scores"]


def test_same_ranking_as_the_palace(corpus_palace: Palace) -> None:
    query = "what runs in production?"
    docs = PalaceRetriever(palace=corpus_palace, k=4).invoke(query)
    assert [d.id for d in docs] == [h.id for h in corpus_palace.search(query, k=4)]


def test_filters_as_fields_and_as_invoke_keywords(corpus_palace: Palace) -> None:
    retriever = PalaceRetriever(palace=corpus_palace, k=10, wing="work")
    assert {d.metadata["wing"] for d in retriever.invoke("anything about our setup")} == {"work"}
    ops = retriever.invoke("anything about our setup", room="ops", k=1)
    assert len(ops) == 1
    assert ops[0].metadata["room"] == "ops"
    home = retriever.invoke("anything", wing="home")
    assert {d.id for d in home} == {"cat", "garden"}


def test_time_range(corpus_palace: Palace) -> None:
    retriever = PalaceRetriever(palace=corpus_palace, k=10, since="2026-01-01")
    assert {d.id for d in retriever.invoke("work")} == {"db", "deploy", "oncall"}
    older = retriever.invoke("work", since="2025-01-01", until="2025-12-31")
    assert {d.id for d in older} == {"cache", "cat", "garden"}


def test_each_user_sees_only_their_drawers(corpus_palace: Palace) -> None:
    query = "which database do we prefer?"
    u1 = PalaceRetriever(palace=corpus_palace, k=10, user_id="u1").invoke(query)
    assert [d.id for d in u1] == ["u1-db"]
    u2 = PalaceRetriever(palace=corpus_palace, k=10).invoke(query, user_id="u2")
    assert [d.id for d in u2] == ["u2-db"]
    unowned = PalaceRetriever(palace=corpus_palace, k=10).invoke(query)
    assert not {"u1-db", "u2-db"} & {d.id for d in unowned}


def test_opens_a_palace_from_its_path(corpus_palace: Palace) -> None:
    retriever = PalaceRetriever(palace=str(corpus_palace.path), k=1)
    try:
        assert [d.id for d in retriever.invoke("grey cat")] == ["cat"]
    finally:
        retriever.palace.close()


def test_a_missing_palace_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(PalaceNotFoundError):
        PalaceRetriever(palace=tmp_path / "nowhere")
    assert not (tmp_path / "nowhere").exists()


def test_bad_input_is_a_clear_error(corpus_palace: Palace) -> None:
    retriever = PalaceRetriever(palace=corpus_palace)
    with pytest.raises(InvalidQueryError):
        retriever.invoke("   ")
    with pytest.raises(InvalidQueryError):
        retriever.invoke("cat", k=0)


async def test_ainvoke_matches_invoke(corpus_palace: Palace) -> None:
    retriever = PalaceRetriever(palace=corpus_palace, k=3)
    sync = retriever.invoke("who adopted a cat?", wing="home")
    assert await retriever.ainvoke("who adopted a cat?", wing="home") == sync


async def test_ainvoke_does_not_block_the_event_loop(
    corpus_palace: Palace, monkeypatch: pytest.MonkeyPatch
) -> None:
    search = corpus_palace.search
    threads: list[int] = []

    def slow_search(*args: Any, **kwargs: Any) -> list[Hit]:
        threads.append(threading.get_ident())
        time.sleep(0.3)
        return search(*args, **kwargs)

    monkeypatch.setattr(corpus_palace, "search", slow_search)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    task = asyncio.create_task(ticker())
    try:
        docs = await PalaceRetriever(palace=corpus_palace, k=1).ainvoke("grey cat")
    finally:
        task.cancel()
    assert [d.id for d in docs] == ["cat"]
    assert threads
    assert threads[0] != threading.get_ident()  # searched in a worker thread
    assert ticks >= 10  # the loop kept running while the search slept


async def test_concurrent_ainvokes(corpus_palace: Palace) -> None:
    retriever = PalaceRetriever(palace=corpus_palace, k=1)
    queries = ["grey cat", "tomatoes", "on-call rota", "session tokens"]
    results = await asyncio.gather(*(retriever.ainvoke(q) for q in queries))
    assert [docs[0].id for docs in results] == ["cat", "garden", "oncall", "cache"]
