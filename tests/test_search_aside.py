"""The full-text stage runs beside the query embedding; the answer is the same.

``Palace.search`` asks the full-text candidates in a worker thread while the query is
embedded (on a machine with two cores or more) and inline on one core. These tests check
that both ways give the same hits and scores, that the full-text candidates really reach
the pipeline (a drawer found by its rare word only), that a failing full-text index
still leaves the vector floor, and that closing the palace stops the worker. The FAKE
hashing embedder and the exact ``sqlite`` backend are enough: nothing here depends on
meaning.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from palace_retrievers import Palace

TEXTS = [
    "The orders service writes every order to the orders database at night.",
    "Lunch on Friday was pizza with the whole team.",
    "Backups of the orders database run every six hours.",
    "Alice adopted a cat called Miso last spring.",
    "The invoice QX-7741 was paid twice by mistake.",
]


@pytest.fixture
def palace(open_palace: Callable[..., Palace], tmp_path: Path) -> Palace:
    palace = open_palace(tmp_path / "palace", backend="sqlite")
    palace.add_texts(TEXTS, ids=[f"d{n}" for n in range(len(TEXTS))], wing="work")
    return palace


def _answer(palace: Palace, query: str) -> list[tuple[str, dict[str, float]]]:
    return [(h.id, h.scores) for h in palace.search(query, k=5, wing="work")]


def test_beside_and_inline_give_the_same_hits(
    palace: Palace, monkeypatch: pytest.MonkeyPatch
) -> None:
    queries = ["orders database backups", "invoice qx-7741", "who adopted Miso", "pizza"]
    beside = [_answer(palace, q) for q in queries]
    assert palace._searching._aside is not None  # the worker ran (this machine has two cores)
    monkeypatch.setattr("palace_retrievers.palace.os.cpu_count", lambda: 1)
    inline = [_answer(palace, q) for q in queries]
    assert beside == inline


def test_the_full_text_candidates_reach_the_pipeline(palace: Palace) -> None:
    asked: list[str] = []
    real = palace._pipeline.lexical

    def spy(query: str, where: Any) -> list[str]:
        asked.append(threading.current_thread().name)
        return real(query, where)

    palace._pipeline.lexical = spy  # type: ignore[method-assign]
    hits = palace.search("QX-7741", k=1, wing="work")
    assert [h.id for h in hits] == ["d4"]
    assert hits[0].scores["bm25"] > 0
    assert asked
    assert asked[0].startswith("palace-fts")


def test_a_failing_full_text_stage_leaves_the_vector_floor(
    palace: Palace, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> list[tuple[str, float]]:
        raise RuntimeError("fts5 is gone")

    monkeypatch.setattr(palace.ledger, "lexical", broken)
    hits = palace.search("orders database", k=5, wing="work")
    assert len(hits) == 5
    assert all(h.scores["bm25"] >= 0 for h in hits)


def test_close_stops_the_worker(palace: Palace) -> None:
    palace.search("pizza", k=1)
    worker = palace._searching._aside
    assert worker is not None
    palace.close()
    assert palace._searching._aside is None
    with pytest.raises(RuntimeError):
        worker.submit(print)


def test_the_full_text_query_does_not_wait_for_the_shared_connection(palace: Palace) -> None:
    """The full-text query has a connection of its own per thread: while another
    thread holds the ledger's shared connection, it still answers."""
    from palace_retrievers.ledger.sqlite import SQLiteLedger
    from palace_retrievers.records import Filter

    ledger = palace.ledger
    assert isinstance(ledger, SQLiteLedger)
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with ledger._lock:
            holding.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert holding.wait(5)
        answered: list[list[tuple[str, float]]] = []
        asker = threading.Thread(
            target=lambda: answered.append(ledger.lexical("invoice", where=Filter(), limit=5))
        )
        asker.start()
        asker.join(5)
        assert not asker.is_alive()
        assert [i for i, _ in answered[0]] == ["d4"]
    finally:
        release.set()
        holder.join()
    sides = list(ledger._side_dbs)
    assert sides
    palace.close()
    with pytest.raises(sqlite3.ProgrammingError):
        sides[0].execute("SELECT 1")


def test_searches_from_several_threads_at_once_answer_as_one_by_one(palace: Palace) -> None:
    from concurrent.futures import ThreadPoolExecutor

    queries = ["orders database backups", "invoice qx-7741", "who adopted Miso", "pizza"] * 5
    one_by_one = [_answer(palace, q) for q in queries]
    with ThreadPoolExecutor(max_workers=4) as pool:
        together = list(pool.map(lambda q: _answer(palace, q), queries))
    assert together == one_by_one
