"""Embedding ahead (issue #5): the next batch is embedded while the one before is filed.

:class:`~palace_retrievers.ingest.mining.Miner` takes the palace's write path in two steps
(``embed_drawers``): the embedding runs in a background thread, the filing it returns in
the caller's thread, which holds the writer lock. These tests check that the two really
overlap, and that nothing else changes: the same palace as a mine without it, one ledger
transaction per batch, errors of either step raised to the caller with what was filed
before kept, no thread left behind, memories extracted under the writer lock.

The palace's filing offers the two steps (``Filing.embed_sources``); the baseline mine
without embedding ahead is ``_PlainMiner``. The
real ``Palace`` API and SQLite ledger throughout, the exact ``sqlite`` backend and Chroma;
the FAKE deterministic embedder stands in for the model (the vectors do not matter here,
the order of calls and threads does).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

import palace_retrievers.facade.drawers as drawers_module
from palace_retrievers import Palace
from palace_retrievers.embedder import Vectors
from palace_retrievers.ingest.mining import Miner, StorageFullError
from palace_retrievers.ledger.sqlite import LEDGER_FILE, SQLiteLedger

WING = "tree"
CONFIG = {"mining": {"batch_size": 8}}  # a few drawers per file: several batches
NO_MEMORIES = {**CONFIG, "memory": {"extractor": ""}}


class _PlainMiner(Miner):
    """A miner that files each batch as it embeds it (no embedding ahead): the baseline."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**{**kwargs, "embed_drawers": None})


@pytest.fixture
def ahead(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Mines embed ahead (the palace's own two steps); no embedding thread is left."""
    yield
    assert not [t for t in threading.enumerate() if t.name.startswith("palace-embed")]


def write_tree(root: Path, files: int = 12, version: int = 1) -> Path:
    for n in range(files):
        path = root / f"part{n % 3}" / f"note{n:02d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        paragraphs = [
            f"Note {n} paragraph {p} version {version}: the lantern{n} keeps watch over "
            f"harbour {p} while the copper kettle{n} sings." * 3
            for p in range(4)
        ]
        path.write_text("\n\n".join(paragraphs) + "\n", encoding="utf-8")
    return root


def snapshot(palace: Palace) -> dict[str, Any]:
    """Everything a mine leaves in the ledger, without times."""
    db = sqlite3.connect(palace.path / LEDGER_FILE)
    try:
        return {
            "drawers": db.execute(
                "SELECT id, text, source_key, chunk_index, user_id, embedding FROM drawers "
                "ORDER BY id"
            ).fetchall(),
            "sources": db.execute(
                "SELECT source_key, content_hash, drawer_count FROM sources ORDER BY source_key"
            ).fetchall(),
            "closets": db.execute("SELECT id, line FROM closets ORDER BY id").fetchall(),
            "pointers": db.execute("SELECT * FROM closet_drawers ORDER BY 1, 2").fetchall(),
            "memories": db.execute("SELECT text, status FROM memories ORDER BY 1").fetchall(),
            "pending": db.execute("SELECT count(*) FROM index_pending").fetchone(),
        }
    finally:
        db.close()


def _mine_twice(palace: Palace, tree: Path) -> dict[str, Any]:
    palace.mine(tree, wing=WING, user_id="alice")
    write_tree(tree, version=2)
    for extra in (tree / "part0/note00.md", tree / "part1/note01.md"):
        extra.write_text("short now\n", encoding="utf-8")
    palace.mine(tree, wing=WING, user_id="alice")
    return snapshot(palace)


def test_embedding_ahead_leaves_the_same_palace(
    open_palace: Callable[..., Palace], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = tmp_path / "tree"  # one path for both: closets name their drawers' sources
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(drawers_module, "Miner", _PlainMiner)
        plain = open_palace(tmp_path / "plain", backend="sqlite", config=CONFIG)
        expected = _mine_twice(plain, write_tree(tree))
    assert len(expected["drawers"]) > 2 * CONFIG["mining"]["batch_size"]
    pipelined = open_palace(tmp_path / "ahead", backend="sqlite", config=CONFIG)
    assert _mine_twice(pipelined, write_tree(tree)) == expected


def test_the_next_batch_embeds_while_the_one_before_is_filed(
    open_palace: Callable[..., Palace], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ahead: None
) -> None:
    palace = open_palace(tmp_path / "palace", config=NO_MEMORIES)  # Chroma
    caller = threading.get_ident()
    embedding_started = threading.Event()
    seen: dict[str, Any] = {"embeds": 0, "files": 0, "overlapped": False, "threads": set()}
    embed = palace.embedder.embed_documents
    file_sources = SQLiteLedger.file_sources

    def embedding(texts: Sequence[str]) -> Vectors:
        seen["embeds"] += 1
        seen["threads"].add(threading.get_ident())
        if seen["embeds"] == 2:
            embedding_started.set()
        return embed(texts)

    def filing(self: SQLiteLedger, *args: Any, **kwargs: Any) -> list[str]:
        assert threading.get_ident() == caller  # filed in the thread holding the lock
        assert palace._writer.held
        seen["files"] += 1
        if seen["files"] == 1:  # the second batch is being embedded meanwhile
            seen["overlapped"] = embedding_started.wait(timeout=30)
        return file_sources(self, *args, **kwargs)

    monkeypatch.setattr(palace.embedder, "embed_documents", embedding)
    monkeypatch.setattr(SQLiteLedger, "file_sources", filing)
    report = palace.mine(write_tree(tmp_path / "tree"), wing=WING)
    assert seen["overlapped"]
    assert seen["files"] == seen["embeds"] >= 3
    assert seen["threads"]
    assert caller not in seen["threads"]
    for status in palace.stats().indexes:
        assert status.ok, status
        assert status.count == status.ledger_count, status
    assert report.drawers_added == len(palace.ledger.drawer_ids())


def test_an_embedding_error_reaches_the_caller_and_the_mine_resumes(
    open_palace: Callable[..., Palace], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ahead: None
) -> None:
    tree = write_tree(tmp_path / "tree")
    clean = open_palace(tmp_path / "clean", backend="sqlite", config=NO_MEMORIES)
    clean.mine(tree, wing=WING)
    palace = open_palace(tmp_path / "palace", backend="sqlite", config=NO_MEMORIES)
    calls = {"n": 0}
    embed = palace.embedder.embed_documents

    def failing(texts: Sequence[str]) -> Vectors:
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("the model fell over")
        return embed(texts)

    monkeypatch.setattr(palace.embedder, "embed_documents", failing)
    with pytest.raises(RuntimeError, match="the model fell over"):
        palace.mine(tree, wing=WING)
    filed = snapshot(palace)
    assert 0 < len(filed["drawers"]) < len(snapshot(clean)["drawers"])  # two batches kept
    monkeypatch.undo()
    assert not palace._writer.held
    report = palace.mine(tree, wing=WING)
    assert report.mined > 0
    assert snapshot(palace) == snapshot(clean)


def test_a_filing_error_reaches_the_caller(
    open_palace: Callable[..., Palace], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ahead: None
) -> None:
    tree = write_tree(tmp_path / "tree")
    palace = open_palace(tmp_path / "palace", backend="sqlite", config=CONFIG)
    original = SQLiteLedger.file_sources
    calls = {"n": 0}

    def full(self: SQLiteLedger, *args: Any, **kwargs: Any) -> list[str]:
        calls["n"] += 1
        if calls["n"] == 2:
            raise sqlite3.OperationalError("database or disk is full")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(SQLiteLedger, "file_sources", full)
    with pytest.raises(StorageFullError, match="disk is full"):
        palace.mine(tree, wing=WING)
    assert calls["n"] == 2  # nothing filed after the error
    kept = snapshot(palace)
    monkeypatch.undo()
    assert kept["drawers"]
    assert palace.mine(tree, wing=WING).mined > 0
    assert len(snapshot(palace)["sources"]) == 12


def test_memories_are_extracted_under_the_writer_lock(
    open_palace: Callable[..., Palace], tmp_path: Path, ahead: None
) -> None:
    chat = tmp_path / "chat"
    chat.mkdir()
    lines = []
    for n in range(30):
        lines.append(f"User: I live in Lisbon{n} and my favourite tea is lapsang{n}.")
        lines.append(f"Assistant: Noted, Lisbon{n} and lapsang{n}.")
    (chat / "talk.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    config = {"mining": {"batch_size": 4}, "memory": {"extractor": "rules"}}
    palace = open_palace(tmp_path / "palace", backend="sqlite", config=config)
    report = palace.mine(chat, wing="chat", source="text", user_id="alice")
    assert report.drawers_added > 4
    assert palace.memories(user_id="alice")
