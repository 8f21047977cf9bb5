"""The ``qdrant`` backend in qdrant-client's local mode (real files, no server needed).

Server mode runs the same code with a ``QdrantClient(url=...)`` instead of
``QdrantClient(path=...)``; no Qdrant server ships on PyPI, so here server mode is tested
only for what happens when the server cannot be reached (the palace degrades to its
exact scan).
"""

from __future__ import annotations

import dataclasses
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from degraded_palace import QUERY, TEXTS, cli_status, palace_config
from qdrant_client import models

from palace_plugins.builtin.backends.qdrant import QdrantIndex, point_id, qdrant_filter
from palace_plugins.testing import BackendTests, IndexFactory, entry, synthetic_vectors
from palace_retrievers import Palace
from palace_retrievers.errors import ConfigError, IndexUnavailableError
from palace_retrievers.index import BackendContext
from palace_retrievers.ledger.sqlite import LEDGER_FILE, SQLiteLedger
from palace_retrievers.records import Filter


class TestQdrantLocalBackend(BackendTests):
    @pytest.fixture
    def index_factory(self) -> IndexFactory:
        return QdrantIndex


def _context(palace_dir: Path, **options: Any) -> BackendContext:
    ledger = SQLiteLedger(palace_dir / LEDGER_FILE)
    ledger.close()  # the qdrant backend never reads the ledger
    return BackendContext(
        palace_dir=palace_dir, collection="drawers", dimension=8, ledger=ledger, options=options
    )


def closed_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_point_ids_are_stable_uuids() -> None:
    assert point_id("e1") == point_id("e1")
    assert point_id("e1") != point_id("e2")
    assert len(point_id("emoji-🦜")) == 36


def test_the_filter_holds_every_condition() -> None:
    where = Filter(user_id="u1", wing="w", room="r", kind="memory")
    built = qdrant_filter(where)
    keys = [c.key for c in built.must]
    assert keys == ["user_id", "wing", "room", "kind"]
    assert built.must[0].match == models.MatchValue(value="u1")
    assert qdrant_filter(Filter()).must[0].match == models.MatchValue(value="")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"nope": 1}, "unknown option 'nope'"),
        ({"ef_search": 0}, "ef_search must be a number >= 1"),
        ({"url": 6333}, "url must be a string"),
        ({"url": "http://127.0.0.1:1", "namespace": "Bad Name"}, "namespace must be"),
    ],
)
def test_bad_options_are_config_errors(
    tmp_path: Path, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        QdrantIndex(_context(tmp_path, **options))


def test_an_unreachable_server_is_index_unavailable(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    with pytest.raises(IndexUnavailableError, match=r"Qdrant.*palace reindex"):
        QdrantIndex(_context(tmp_path, url=url, timeout=2))


def test_the_collections_of_a_palace_share_one_local_folder(tmp_path: Path) -> None:
    drawers = QdrantIndex(_context(tmp_path))
    closets = QdrantIndex(dataclasses.replace(_context(tmp_path), collection="closets"))
    again = QdrantIndex(_context(tmp_path))  # a second palace on the same folder, same process
    try:
        vectors = synthetic_vectors(3, dimension=8)
        drawers.upsert(entries=[entry(f"e{i}", v) for i, v in enumerate(vectors)])
        assert (drawers.count(), closets.count(), again.count()) == (3, 0, 3)
    finally:
        for index in (drawers, closets, again):
            index.close()
    reopened = QdrantIndex(_context(tmp_path))  # every client closed: the folder is free
    assert reopened.count() == 3
    reopened.close()


def test_a_palace_on_local_qdrant_with_damaged_files_degrades_then_reindex_restores(
    tmp_path: Path, open_palace: Callable[..., Palace], caplog: pytest.LogCaptureFixture
) -> None:
    palace_dir = tmp_path / "palace"
    palace_config(palace_dir, "qdrant")
    palace = open_palace(palace_dir, fake=False)
    palace.add_texts(list(TEXTS.values()), ids=list(TEXTS))
    assert all(s.ok for s in palace.stats().indexes)
    expected = [h.id for h in palace.search(QUERY, k=3)]
    assert expected[0] == "cat"
    palace.close()

    storage = palace_dir / "index" / "qdrant" / "collection" / "palace_drawers" / "storage.sqlite"
    assert storage.exists()
    storage.write_bytes(b"this is not a sqlite database " * 1000)

    palace = open_palace(palace_dir, fake=False)
    drawers = {s.collection: s for s in palace.stats().indexes}["drawers"]
    assert not drawers.ok
    assert "palace reindex" in caplog.text
    assert [h.id for h in palace.search(QUERY, k=3)] == expected  # the exact scan
    palace.close()
    assert "DEGRADED (run `palace reindex`)" in cli_status(palace_dir)

    palace = open_palace(palace_dir, fake=False)
    assert palace.reindex() == sum(s.ledger_count for s in palace.stats().indexes)
    assert all(s.ok for s in palace.stats().indexes)
    assert [h.id for h in palace.search(QUERY, k=3)] == expected


def test_a_palace_whose_qdrant_server_is_down_answers_by_exact_scan(
    tmp_path: Path, open_palace: Callable[..., Palace], caplog: pytest.LogCaptureFixture
) -> None:
    palace_dir = tmp_path / "palace"
    palace_config(palace_dir, "qdrant", url=f"http://127.0.0.1:{closed_port()}", timeout=2)
    palace = open_palace(palace_dir, fake=False)
    assert all(not s.ok for s in palace.stats().indexes)
    assert "palace reindex" in caplog.text
    palace.add_texts(list(TEXTS.values()), ids=list(TEXTS))
    assert [h.id for h in palace.search(QUERY, k=1)] == ["cat"]
    assert "DEGRADED (run `palace reindex`)" in cli_status(palace_dir)
