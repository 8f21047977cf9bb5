"""``palace reindex`` is never seen half done: searches from another process during a
reindex all get the full, right answer.

The finding: while one machine ran ``palace reindex``, another machine's
``search_by_vector`` got a wrong or empty top hit 41 times in 5,731 calls (the rebuild
cleared each index, then filled it). Now a backend with ``capabilities.atomic_rebuild``
builds the new index beside the old one and swaps it in. Here one process (this one)
reindexes its palace over and over while a reader in a child process
(``tests/reindex_reader.py``) searches the same palace: the vector floor with and without
a filter, the whole search pipeline, and the memories' index; every answer must be the
one it got before any reindex.

- pgvector: two "machines", each a palace folder of its own on one PostgreSQL schema and
  one pgvector namespace (the session's real PostgreSQL 16, ``tests/services.py``).
- chroma: two processes on one palace folder (embedded Chroma), and two "machines" on
  one ``chroma run`` server and one PostgreSQL schema.

The FAKE embedder (``tests/fakes.py``) is used throughout: these tests are about the
bookkeeping of a rebuild, not about meaning. The default run makes 1,000 calls per
backend; the ``long`` run (``make test-slow``) makes the 10,000 of the figure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from fakes import FAKE_PLUGIN, HashingEmbedder
from pg_palace import open_postgres_palace

from palace_retrievers import Palace

if TYPE_CHECKING:
    from services import ChromaServer, PostgresService

pytest_plugins = ["services"]

READER = Path(__file__).resolve().parent / "reindex_reader.py"
CALLS = 1_000
LONG_CALLS = 10_000
CONFIG: dict[str, Any] = {"chunking": {"size": 400, "overlap": 0}}
#: The probes the reader asks about, each near a few of the drawers.
PROBES = [
    "lantern harbour signal 7",
    "orbit keeper ledger 42",
    "granite bridge tide 113",
    "copper kettle north 250",
]


def fill(palace: Palace) -> None:
    """300 drawers in two wings and a few memories."""
    words = ("lantern", "harbour", "signal", "orbit", "keeper", "ledger", "granite", "tide")
    for wing, parity in (("even", 0), ("odd", 1)):
        texts = [
            f"{words[i % 8]} {words[(i * 3) % 8]} {['bridge', 'kettle', 'north'][i % 3]} {i}"
            for i in range(parity, 300, 2)
        ]
        palace.add_texts(texts, wing=wing)
    for text in (
        "The harbour lantern is serviced on Fridays",
        "The orbit keeper signs the ledger at noon",
        "The copper kettle stays by the north door",
    ):
        palace.remember(text)


def run_reader(reindex: Callable[[], object], arguments: dict[str, Any]) -> dict[str, Any]:
    """Start the reader, reindex over and over until it has made its calls, and return
    its report (with ``reindexes``: how many reindexes ran meanwhile)."""
    child = subprocess.Popen(
        [sys.executable, str(READER), json.dumps({"probes": PROBES, **arguments})],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
    )
    assert child.stdin is not None
    assert child.stdout is not None
    stop = threading.Event()
    count = [0]
    failure: list[BaseException] = []

    def reindexing() -> None:
        try:
            while not stop.is_set():
                reindex()
                count[0] += 1
        except BaseException as exc:
            failure.append(exc)

    worker = threading.Thread(target=reindexing)
    try:
        ready = child.stdout.readline()
        assert ready.strip() == "ready", ready + (child.stderr.read() if child.stderr else "")
        worker.start()
        stop.wait(0.05)  # the first reindex is under way when the reader starts
        child.stdin.write("go\n")
        child.stdin.flush()
        out, err = child.communicate(timeout=900)
    finally:
        stop.set()
        if child.poll() is None:
            child.kill()
        if worker.is_alive():
            worker.join()
    assert not failure, failure
    assert child.returncode == 0, err
    report: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    report["reindexes"] = count[0]
    return report


def check(report: dict[str, Any], calls: int) -> None:
    assert report["empty_before"] == []
    assert report["calls"] == calls
    assert report["wrong"] == 0, json.dumps(report)
    assert report["reindexes"] >= 2, report
    assert report["degraded"] == {}, report


# -- pgvector: two machines, one PostgreSQL schema -------------------------------------


@pytest.fixture
def pg_machines(postgres: PostgresService, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """The settings of two palace folders on one schema and one pgvector namespace."""
    token = uuid.uuid4().hex[:8]
    shared = {
        "url": postgres.url,
        "schema": f"reindex_{token}",
        "backend": "pgvector",
        "backend_options": {"url": postgres.url, "namespace": f"swap_{token}"},
    }
    yield shared
    postgres.sql(f"DROP SCHEMA IF EXISTS {shared['schema']} CASCADE")
    for collection in ("drawers", "closets", "memories"):
        for suffix in ("", "_next"):
            postgres.sql(f"DROP TABLE IF EXISTS swap_{token}_{collection}{suffix}")


def _pgvector_reindex_seen_whole(settings: dict[str, Any], tmp_path: Path, calls: int) -> None:
    with open_postgres_palace(
        tmp_path / "machine-a",
        url=settings["url"],
        schema=settings["schema"],
        embedder=HashingEmbedder(),
        backend="pgvector",
        backend_options=settings["backend_options"],
        plugins=(FAKE_PLUGIN,),
    ) as palace:
        fill(palace)
        report = run_reader(
            palace.reindex, {**settings, "path": str(tmp_path / "machine-b"), "calls": calls}
        )
        assert palace.indexes.degraded == {}
    check(report, calls)


def test_pgvector_reindex_is_never_seen_half_done_by_another_machine(
    pg_machines: dict[str, Any], tmp_path: Path
) -> None:
    """1,000 searches by machine B while machine A reindexes the pgvector tables they
    share: every answer is full and right."""
    _pgvector_reindex_seen_whole(pg_machines, tmp_path, CALLS)


@pytest.mark.long
def test_pgvector_reindex_is_never_seen_half_done_10000(
    pg_machines: dict[str, Any], tmp_path: Path
) -> None:
    """The figure: 10,000 searches by machine B during machine A's reindexes."""
    _pgvector_reindex_seen_whole(pg_machines, tmp_path, LONG_CALLS)


# -- chroma: two processes on one folder; two machines on one server --------------------


def _chroma_reindex_seen_whole(tmp_path: Path, calls: int) -> None:
    path = tmp_path / "palace"
    with Palace.open(
        path, backend="chroma", embedder=HashingEmbedder(), plugins=[FAKE_PLUGIN], config=CONFIG
    ) as palace:
        fill(palace)
        report = run_reader(
            palace.reindex,
            {"path": str(path), "backend": "chroma", "config": CONFIG, "calls": calls},
        )
        assert palace.indexes.degraded == {}
    check(report, calls)


def test_chroma_reindex_is_never_seen_half_done_by_another_process(tmp_path: Path) -> None:
    """1,000 searches by another process on the same folder while this one reindexes
    embedded Chroma: every answer is full and right."""
    _chroma_reindex_seen_whole(tmp_path, CALLS)


@pytest.mark.long
def test_chroma_reindex_is_never_seen_half_done_10000(tmp_path: Path) -> None:
    """The figure: 10,000 searches by another process during this one's reindexes."""
    _chroma_reindex_seen_whole(tmp_path, LONG_CALLS)


def test_chroma_server_reindex_is_never_seen_half_done_by_another_machine(
    pg_machines: dict[str, Any], chroma_server: ChromaServer, tmp_path: Path
) -> None:
    """Two machines on one ``chroma run`` server (one namespace) and one PostgreSQL
    schema: 1,000 searches by machine B while machine A reindexes."""
    settings = {
        **pg_machines,
        "backend": "chroma",
        "backend_options": {
            "url": chroma_server.url,
            "namespace": pg_machines["backend_options"]["namespace"],
        },
    }
    with open_postgres_palace(
        tmp_path / "machine-a",
        url=settings["url"],
        schema=settings["schema"],
        embedder=HashingEmbedder(),
        backend="chroma",
        backend_options=settings["backend_options"],
        plugins=(FAKE_PLUGIN,),
    ) as palace:
        fill(palace)
        report = run_reader(
            palace.reindex, {**settings, "path": str(tmp_path / "machine-b"), "calls": CALLS}
        )
        assert palace.indexes.degraded == {}
    check(report, CALLS)
