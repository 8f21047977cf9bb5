"""A reader whose Chroma collection was empty when it opened it answers from Chroma once
another process has written to it.

Embedded Chroma keeps, per process, what it learnt of a collection's HNSW segment: a
reader that looked at a collection while it was empty (the palace's health check at open
counts it) and that another process has written to since fails every query with
``Error creating hnsw segment reader: Nothing found on disk`` until the segment is loaded
again. The backend does that at once and asks again, so the reader answers from its
index, not from the exact scan of a degraded one.

Real Chroma, real SQLite, two real processes (the writer is ``palace_driver.py``). The
FAKE embedder: this is about the index files, not meaning. ``exact_below = 0`` sends every
query to Chroma's HNSW (with the in-memory catalog on, so few records would never reach
it).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from palace_retrievers import Palace
from palace_retrievers.records import Filter

DRIVER = Path(__file__).resolve().parent / "palace_driver.py"
CONFIG = {"backends": {"chroma": {"exact_below": 0}}}


def _drive(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(DRIVER), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _nearest_in_ledger(palace: Palace, collection: str, vector: np.ndarray, k: int) -> list[str]:
    """The ``k`` nearest ids by exact cosine over the ledger's vectors (unowned ones)."""
    scored = [
        (float(np.dot(e.vector, vector) / np.linalg.norm(e.vector) / np.linalg.norm(vector)), e.id)
        for batch in palace.ledger.iter_entries(collection)
        for e in batch
        if e.user_id == ""
    ]
    return [i for _, i in sorted(scored, key=lambda s: (-s[0], s[1]))[:k]]


def test_a_reader_opened_on_an_empty_palace_answers_from_chroma_after_another_process_writes(
    open_palace: Callable[..., Palace], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    palace_dir = tmp_path / "palace"
    reader = open_palace(palace_dir, backend="chroma", config=CONFIG)
    assert reader.indexes.degraded == {}
    corpus = tmp_path / "notes"
    corpus.mkdir()
    for n in range(4):
        (corpus / f"note{n}.md").write_text(
            f"Note {n}: the lantern by the harbour signals the orbit of moon {n}.\n",
            encoding="utf-8",
        )
    _drive("mine", str(palace_dir), str(corpus), "--backend", "chroma")
    _drive("cli", "--palace", str(palace_dir), "remember", "The harbour lantern is blue")

    caplog.set_level(logging.WARNING, logger="palace_retrievers.search.indexes")
    vector = reader.embedder.embed_query("harbour lantern orbit")
    for collection in ("drawers", "closets", "memories"):
        k = min(3, reader.ledger.count_vectors(collection))
        assert k > 0, collection  # the other process wrote to every collection
        found = reader.indexes.query(collection, vector=vector, k=k, where=Filter())
        assert reader.indexes.degraded == {}, collection  # Chroma answered, not the scan
        assert [m.id for m in found] == _nearest_in_ledger(reader, collection, vector, k)
    assert "degraded" not in caplog.text
    assert reader.search("harbour lantern", k=3)
    assert reader.indexes.degraded == {}
