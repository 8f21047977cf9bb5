"""The chroma backend's health checks its HNSW files on disk (``hnsw_files``) without
loading them: each file truncated, the data zeroed, the header's version or shape changed,
a file or the folder removed: ``health()`` says what is wrong and never crashes; the files
as Chroma writes them pass, through upserts and deletes.

Real Chroma; synthetic unit vectors (a FAKE set): this is about the files, not meaning.
"""

from __future__ import annotations

import os
import shutil
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from palace_plugins.builtin.backends import hnsw_files
from palace_plugins.builtin.backends.chroma import ChromaIndex
from palace_plugins.testing import BackendTests
from palace_plugins.testing.backends import DIMENSION, entry, synthetic_vectors
from palace_retrievers.index import BackendContext
from palace_retrievers.ledger.sqlite import LEDGER_FILE, SQLiteLedger

RECORDS = 2500  # past Chroma's sync threshold (1,000): the files hold the graph


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    palace_dir = tmp_path_factory.mktemp("hnsw") / "palace"
    palace_dir.mkdir()
    ledger = SQLiteLedger(palace_dir / LEDGER_FILE)
    index = open_chroma(palace_dir, ledger)
    entries = [entry(f"e{i:05d}", v) for i, v in enumerate(synthetic_vectors(RECORDS, seed=9))]
    BackendTests.put(ledger, index, entries)
    BackendTests.remove(ledger, index, [e.id for e in entries[::10]])
    health = index.health()
    index.close()
    ledger.close()
    assert health.ok, health.detail
    return palace_dir


def open_chroma(palace_dir: Path, ledger: SQLiteLedger) -> ChromaIndex:
    context = BackendContext(
        palace_dir=palace_dir, collection="drawers", dimension=DIMENSION, ledger=ledger
    )
    return ChromaIndex(context)


def hnsw_folder(palace_dir: Path) -> Path:
    folders = [p for p in (palace_dir / "index" / "chroma").iterdir() if p.is_dir()]
    assert len(folders) == 1
    return folders[0]


def cut(name: str, keep: float) -> Callable[[Path], None]:
    def damage(folder: Path) -> None:
        path = folder / name
        os.truncate(path, int(path.stat().st_size * keep))

    return damage


def zero(name: str) -> Callable[[Path], None]:
    def damage(folder: Path) -> None:
        path = folder / name
        path.write_bytes(bytes(path.stat().st_size))

    return damage


def header_field(index: int, value: int) -> Callable[[Path], None]:
    def damage(folder: Path) -> None:
        path = folder / "header.bin"
        fields = list(hnsw_files.HEADER.unpack(path.read_bytes()[: hnsw_files.HEADER.size]))
        fields[index] = value
        path.write_bytes(hnsw_files.HEADER.pack(*fields))

    return damage


DAMAGE: dict[str, tuple[Callable[[Path], None], str]] = {
    "header-truncated": (cut("header.bin", 0.5), "header.bin holds 50 bytes"),
    "data-truncated": (cut("data_level0.bin", 0.9), "data_level0.bin holds"),
    "length-truncated": (cut("length.bin", 0.5), "length.bin holds"),
    "links-truncated": (cut("link_lists.bin", 0.8), "link_lists.bin"),
    "links-emptied": (cut("link_lists.bin", 0.0), "link_lists.bin ends at element 0"),
    "data-zeroed": (zero("data_level0.bin"), "sampled labels repeat"),
    "data-deleted": (lambda f: (f / "data_level0.bin").unlink(), "data_level0.bin is missing"),
    "folder-removed": (shutil.rmtree, "is missing"),
    "wrong-version": (header_field(0, 7), "format version 7"),
    "count-past-capacity": (header_field(3, 10**9), "inconsistent"),
    "links-too-many-levels": (header_field(7, 0), "link_lists.bin gives element"),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_damaged_hnsw_files_make_the_index_unhealthy(
    template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str
) -> None:
    monkeypatch.setattr(hnsw_files, "PAUSE", 0.01)
    palace_dir = tmp_path / "palace"
    shutil.copytree(template, palace_dir)
    do, says = DAMAGE[damage]
    do(hnsw_folder(palace_dir))
    ledger = SQLiteLedger(palace_dir / LEDGER_FILE)
    try:
        index = open_chroma(palace_dir, ledger)
        try:
            health = index.health()  # never loads the damaged graph
        finally:
            index.close()
    finally:
        ledger.close()
    assert not health.ok
    assert says in health.detail


def test_a_problem_that_goes_away_is_not_reported(
    template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer mid-flush (the header already counts elements the data file does not hold
    yet) is not damage: the check looks again before it reports."""
    folder = tmp_path / "hnsw"
    shutil.copytree(hnsw_folder(template), folder)
    data = folder / "data_level0.bin"
    whole = data.read_bytes()
    data.write_bytes(whole[: len(whole) // 2])
    sleeps: list[float] = []

    def finish_the_flush(seconds: float) -> None:
        sleeps.append(seconds)
        data.write_bytes(whole)

    monkeypatch.setattr(hnsw_files.time, "sleep", finish_the_flush)
    assert hnsw_files.hnsw_problem(folder) is None
    assert sleeps == [hnsw_files.PAUSE]


def test_the_header_is_what_hnswlib_writes() -> None:
    assert hnsw_files.HEADER.size == 100  # int32 + 6 uint64 + int32 + uint32 + 3 uint64 + ...
    assert struct.calcsize("<i6QiI3QdQ") == 100
