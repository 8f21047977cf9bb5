"""The full-text reads' per-thread SQLite connections do not outlive their threads.

``SQLiteLedger`` gives each thread that asks a full-text query a connection of its own
(``_side_read``). A server answering each request in a new thread would otherwise keep
one open connection (and file handle) per request ever served. These tests run the reads
from many short-lived threads, one after another and a few at a time, and check that the
open side connections stay at most the live threads plus one, that the ended threads'
connections are really closed, and that every thread still gets the right answer. Real
SQLite; the FAKE embedder for the palace-level test (the vectors do not matter here).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from palace_retrievers import Palace
from palace_retrievers.ledger.sqlite import LEDGER_FILE, SQLiteLedger
from palace_retrievers.records import Drawer, Filter

WORDS = ["heron", "sandpiper", "kingfisher", "lapwing", "curlew", "plover"]


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[SQLiteLedger]:
    ledger = SQLiteLedger(tmp_path / LEDGER_FILE)
    drawers = [
        Drawer(id=word, text=f"the {word} feeds by the lake", wing="w", room="r", source="t")
        for word in WORDS
    ]
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(len(drawers), 8)).astype(np.float32)
    ledger.upsert_drawers(drawers, vectors, model="m")
    yield ledger
    ledger.close()


def _found(ledger: SQLiteLedger, word: str) -> list[str]:
    return [i for i, _ in ledger.lexical(word, where=Filter(), limit=5)]


def _open(db: sqlite3.Connection) -> bool:
    try:
        db.execute("SELECT 1")
    except sqlite3.ProgrammingError:  # "Cannot operate on a closed database."
        return False
    return True


def _in_thread(work: Callable[[], None]) -> None:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as error:  # re-raised in the test's thread
            errors.append(error)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if errors:
        raise errors[0]


def test_threads_one_after_another_leave_no_connections_behind(ledger: SQLiteLedger) -> None:
    assert _found(ledger, "heron") == ["heron"]  # the test's own thread has one too
    mine = ledger._side.db
    answers: list[list[str]] = []
    connections: list[sqlite3.Connection] = []
    for n in range(30):
        word = WORDS[n % len(WORDS)]

        def work(word: str = word) -> None:
            answers.append(_found(ledger, word))
            connections.append(ledger._side.db)

        _in_thread(work)
        assert len(ledger._side_dbs) <= threading.active_count() + 1
        assert len(ledger._side_dbs) <= 2  # the test's thread's and the one just ended
    assert answers == [[WORDS[n % len(WORDS)]] for n in range(30)]
    assert len(set(map(id, connections))) == 30  # each thread had a connection of its own
    assert [_open(db) for db in connections] == [False] * 29 + [True]
    assert _open(mine)  # a live thread's connection stays
    assert _found(ledger, "curlew") == ["curlew"]
    ledger.close()
    assert not _open(connections[-1])
    assert not _open(mine)


def test_threads_a_few_at_a_time_stay_bounded(ledger: SQLiteLedger) -> None:
    width = 4
    seen: list[tuple[int, int]] = []  # (open side connections, live threads), in a thread
    answers: list[tuple[str, list[str]]] = []
    lock = threading.Lock()
    for _ in range(8):
        barrier = threading.Barrier(width)

        def work(word: str, barrier: threading.Barrier) -> None:
            found = _found(ledger, word)
            with lock:
                answers.append((word, found))
                seen.append((len(ledger._side_dbs), threading.active_count()))
            barrier.wait()  # none of the round ends before all have read

        threads = [threading.Thread(target=work, args=(w, barrier)) for w in WORDS[:width]]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(ledger._side_dbs) <= width  # only this round's: the others were closed
    assert len(answers) == 8 * width
    assert all(found == [word] for word, found in answers)
    assert all(opened <= live + 1 for opened, live in seen)
    assert all(opened <= width for opened, _ in seen)


@pytest.mark.parametrize("cores", [1, None], ids=["inline", "beside"])
def test_palace_searches_from_short_lived_threads(
    open_palace: Callable[..., Palace],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    cores: int | None,
) -> None:
    """One core: the full-text query runs in the searching thread itself (as in a server
    answering each request in a thread of its own); more: in the palace's workers."""
    if cores is not None:
        monkeypatch.setattr("palace_retrievers.palace.os.cpu_count", lambda: cores)
    palace = open_palace(tmp_path / "palace", backend="sqlite")
    texts = [f"The {word} was seen by the lake." for word in WORDS]
    palace.add_texts(texts, ids=WORDS, wing="birds")
    ledger = palace.ledger
    assert isinstance(ledger, SQLiteLedger)
    expected = {w: [h.id for h in palace.search(w, k=3, wing="birds")] for w in WORDS}
    assert all(ids[0] == w for w, ids in expected.items())
    got: list[tuple[str, list[str]]] = []
    for n in range(24):
        word = WORDS[n % len(WORDS)]

        def work(word: str = word) -> None:
            got.append((word, [h.id for h in palace.search(word, k=3, wing="birds")]))

        _in_thread(work)
        assert len(ledger._side_dbs) <= threading.active_count() + 1
    assert got == [(w, expected[w]) for w, _ in got]
    assert len(got) == 24
