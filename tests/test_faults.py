"""Faults that really kill and break things: the palace loses nothing and keeps answering.

- **SIGKILL at 20 seeded random points.** A clean mine (fresh, and over an older version
  of the corpus) is instrumented to count every point a kill can land on (each embedding
  call, batch commit, index upsert, journal clear and ledger transaction); 20 of those
  points are drawn with a seeded generator (``KILL_SEED``; ``KILL_POINTS``
  for more). At each, a mine in a child process kills itself there; the mine is run again
  and the ledger must hold exactly the drawers of a clean mine (same ids, same text), with
  Chroma and FTS agreeing with it.
- **Power cut.** The palace directory is copied while a writer is inside a transaction
  whose pages already reached the WAL file: the copy opens, with the last committed state,
  its indexes agreeing, and a mine in it finishes the job.
- **Lost or damaged indexes.** The Chroma folder removed, an HNSW file deleted, truncated
  or zeroed, the FTS tables emptied or dropped: the palace opens, search answers (a child
  process does the first search, since a damaged native index could crash it), and
  ``palace reindex`` (the command line) restores the full results.
- **Disk full.** SQLite's own "database or disk is full" (a page limit on the ledger's
  connection) and an ``OSError(ENOSPC)`` from the vector index: a ``StorageFullError``
  (a ``PalaceError``), no source filed half-way, and the next mine finishes.

The FAKE embedder is used throughout (these are about bookkeeping, not meaning), with
real SQLite, real Chroma and real processes.
"""

from __future__ import annotations

import errno
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from test_mining_resume import (
    DRIVER,
    SEED,
    WING,
    check_agreement,
    mine_here,
    open_palace,
    run_driver,
    snapshot,
    write_corpus,
)

from palace_retrievers import PalaceError
from palace_retrievers.cli import cli
from palace_retrievers.ingest.mining import StorageFullError
from palace_retrievers.ledger.sqlite import LEDGER_FILE, SQLiteLedger
from palace_retrievers.records import Filter
from palace_retrievers.search.indexes import IndexSet

FILES = 8
POINTS = int(os.environ.get("KILL_POINTS", "20"))
#: Which points are drawn. (Not a ``PALACE_*`` variable: those are palace settings, and
#: the module-scoped palaces here are opened before the per-test fixture clears them.)
KILL_SEED = int(os.environ.get("KILL_SEED", str(SEED)))


# -- SIGKILL at random points -----------------------------------------------------------


def _counting(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Count, in this process, every point ``palace_driver.py --kill-at`` can kill at."""
    from fakes import HashingEmbedder

    counts = dict.fromkeys(("embed", "commit", "upsert", "clear", "write"), 0)

    def counted(owner: type, name: str, point: str) -> None:
        original = getattr(owner, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            counts[point] += 1
            return original(*args, **kwargs)

        monkeypatch.setattr(owner, name, wrapper)

    counted(HashingEmbedder, "embed_documents", "embed")
    counted(SQLiteLedger, "file_sources", "commit")
    counted(IndexSet, "upsert", "upsert")
    counted(SQLiteLedger, "clear_pending", "clear")
    original = SQLiteLedger._write

    def write(self: SQLiteLedger, **kwargs: Any) -> Any:
        context = original(self, **kwargs)

        class Counting:
            def __enter__(self) -> Any:
                return context.__enter__()

            def __exit__(self, *exc: Any) -> Any:
                out = context.__exit__(*exc)
                counts["write"] += 1
                return out

        return Counting()

    monkeypatch.setattr(SQLiteLedger, "_write", write)
    return counts


@pytest.fixture(scope="module")
def killing(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The corpus (version 2 over a palace of version 1), the clean result, the kill points.

    Every case mines the same corpus folder (so the recorded roots match), into a fresh
    palace or into a copy of the palace that mined version 1.
    """
    root = tmp_path_factory.mktemp("killing")
    corpus = root / "corpus"
    write_corpus(corpus, files=FILES, version=1, seed=SEED)
    mine_here(root / "v1", corpus)
    write_corpus(corpus, files=FILES, version=2, seed=SEED)
    events: list[tuple[str, str, int]] = []
    with pytest.MonkeyPatch.context() as monkeypatch:
        counts = _counting(monkeypatch)
        mine_here(root / "clean", corpus)
        events += [("fresh", p, n) for p, c in counts.items() for n in range(1, c + 1)]
        shutil.copytree(root / "v1", root / "edited")
        for point in counts:
            counts[point] = 0
        mine_here(root / "edited", corpus)
        events += [("edit", p, n) for p, c in counts.items() for n in range(1, c + 1)]
    clean = snapshot(root / "clean")
    assert snapshot(root / "edited") == clean
    assert len(clean["drawers"]) > 30
    cases = random.Random(KILL_SEED).sample(events, min(POINTS, len(events)))
    return {"root": root, "corpus": corpus, "clean": clean, "cases": cases}


@pytest.mark.long
@pytest.mark.parametrize("case", range(POINTS))
def test_killed_at_a_random_point_then_mined_again_equals_a_clean_mine(
    killing: dict[str, Any], tmp_path: Path, case: int
) -> None:
    scenario, point, nth = killing["cases"][case]
    palace_dir = tmp_path / "palace"
    if scenario == "edit":
        shutil.copytree(killing["root"] / "v1", palace_dir)
    killed = run_driver(
        "mine", str(palace_dir), str(killing["corpus"]), "--kill-at", f"{point}:{nth}"
    )
    assert killed.returncode == -signal.SIGKILL, (scenario, point, nth, killed.stderr[-2000:])

    mine_here(palace_dir, killing["corpus"])  # the restart
    assert snapshot(palace_dir) == killing["clean"], (scenario, point, nth)
    check_agreement(palace_dir)


# -- power cut --------------------------------------------------------------------------


def test_a_copy_taken_mid_transaction_opens_with_the_last_committed_state(
    tmp_path: Path, killing: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    palace_dir, copy = tmp_path / "palace", tmp_path / "copy"
    shutil.copytree(killing["root"] / "v1", palace_dir)
    taken: dict[str, Any] = {}
    original = SQLiteLedger._replace_closets

    def cut_power(self: SQLiteLedger, db: sqlite3.Connection, *args: Any) -> Any:
        out = original(self, db, *args)  # drawers and closets written, not yet committed
        if not taken:
            assert db.in_transaction
            wal = palace_dir / f"{LEDGER_FILE}-wal"
            taken["wal"] = wal.stat().st_size
            taken["committed"] = snapshot(palace_dir)  # what another reader sees now
            shutil.copytree(palace_dir, copy)
        return out

    monkeypatch.setattr(SQLiteLedger, "_replace_closets", cut_power)
    with open_palace(palace_dir) as palace:
        # A tiny page cache: the open transaction's pages spill into the WAL file, so the
        # copy really holds uncommitted frames that recovery must ignore.
        palace.ledger._db.execute("PRAGMA cache_size = 1")
        size_before = (palace_dir / f"{LEDGER_FILE}-wal").stat().st_size
        palace.mine(killing["corpus"], wing=WING, progress=False)
    monkeypatch.undo()
    assert taken["wal"] > size_before, "no uncommitted page reached the WAL file"
    assert taken["committed"] != killing["clean"]

    with open_palace(copy) as palace:  # opens, recovers the WAL, sees the committed state
        statuses = palace.stats().indexes
        assert all(s.ok and s.count == s.ledger_count for s in statuses), statuses
        assert palace.search("ledger drawer", k=3, wing=WING)
    assert snapshot(copy) == taken["committed"]
    db = sqlite3.connect(copy / LEDGER_FILE)
    try:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        for table in ("drawers_fts", "drawers_trigram"):
            db.execute(f"INSERT INTO {table} ({table}, rank) VALUES ('integrity-check', 1)")
    finally:
        db.close()
    mine_here(copy, killing["corpus"])
    assert snapshot(copy) == killing["clean"]
    check_agreement(copy)


# -- lost or damaged indexes ------------------------------------------------------------


def _cli(palace_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``palace --palace DIR ARGS...`` in a child process, with the FAKE embedder."""
    return subprocess.run(
        [sys.executable, str(DRIVER), "cli", "--palace", str(palace_dir), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "ANONYMIZED_TELEMETRY": "False", "PALACE_EMBEDDER": "fake"},
    )


#: Searches in a child process (a damaged native index could crash it): each query is the
#: text of one record spread over the palace, so full results find each record first.
_SEARCHES = """
import json, sys
sys.path.insert(0, {tests!r})
from palace_driver import install_fake_embedder
install_fake_embedder()
from palace_retrievers import Palace
with Palace.open({palace!r}, embedder="fake") as palace:
    queries = json.loads(sys.stdin.read())
    found = [palace.search(q, k=3, memories=False) for q in queries]
    nearest = [palace.search_by_vector(palace.embedder.embed_query(q), k=3) for q in queries]
    print(json.dumps(sorted(palace.indexes.degraded)))
    print(json.dumps([[h[0].id if h else None for h in hits] for hits in (found, nearest)]))
"""


def _first_hits(
    palace_dir: Path, queries: list[str], *, degraded: list[str] | None = None
) -> list[list[str | None]]:
    """The first hit of each query, by the whole search and by the vector index alone
    (``search_by_vector``), found by a child process that must not crash; ``degraded``
    (if given) receives the collections whose index the palace noticed to be broken."""
    code = _SEARCHES.format(tests=str(DRIVER.parent), palace=str(palace_dir))
    done = subprocess.run(
        [sys.executable, "-c", code],
        input=json.dumps(queries),
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.strip().splitlines()
    if degraded is not None:
        degraded.extend(json.loads(lines[-2]))
    found: list[list[str | None]] = json.loads(lines[-1])
    return found


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A palace big enough for Chroma to write its HNSW files, and a query per record
    spread over it (the record's own text)."""
    palace_dir = tmp_path_factory.mktemp("indexed") / "palace"
    rng = random.Random(SEED)
    vocabulary = [f"w{rng.getrandbits(40):x}" for _ in range(600)]
    texts = {
        f"r{n:04d}": " ".join(rng.choice(vocabulary) for _ in range(10)) + f" record {n}"
        for n in range(1200)
    }
    with open_palace(palace_dir) as palace:
        palace.add_texts(list(texts.values()), ids=list(texts))
    assert _hnsw(palace_dir).joinpath("data_level0.bin").exists()
    probes = {ident: texts[ident] for ident in sorted(texts)[::100]}
    assert _first_hits(palace_dir, list(probes.values())) == [list(probes)] * 2
    return palace_dir, probes


def _hnsw(palace_dir: Path) -> Path:
    """The folder of the drawers' HNSW index (the largest one)."""
    folders = [p for p in (palace_dir / "index" / "chroma").iterdir() if p.is_dir()]
    return max(folders, key=lambda p: sum(f.stat().st_size for f in p.iterdir()))


def _truncate(path: Path) -> None:
    os.truncate(path, path.stat().st_size // 3)


def _zero(path: Path) -> None:
    path.write_bytes(bytes(path.stat().st_size))


def _ledger(palace_dir: Path, sql: str) -> None:
    db = sqlite3.connect(palace_dir / LEDGER_FILE)
    try:
        db.executescript(sql)
    finally:
        db.close()


DAMAGE: dict[str, Callable[[Path], None]] = {
    "chroma-folder-removed": lambda p: shutil.rmtree(p / "index" / "chroma"),
    "hnsw-data-deleted": lambda p: (_hnsw(p) / "data_level0.bin").unlink(),
    "hnsw-data-truncated": lambda p: _truncate(_hnsw(p) / "data_level0.bin"),
    "hnsw-header-truncated": lambda p: _truncate(_hnsw(p) / "header.bin"),
    "hnsw-length-truncated": lambda p: _truncate(_hnsw(p) / "length.bin"),
    "hnsw-links-truncated": lambda p: _truncate(_hnsw(p) / "link_lists.bin"),
    "hnsw-data-zeroed": lambda p: _zero(_hnsw(p) / "data_level0.bin"),
    "fts-emptied": lambda p: _ledger(
        p,
        "INSERT INTO drawers_fts (drawers_fts) VALUES ('delete-all');"
        "INSERT INTO drawers_trigram (drawers_trigram) VALUES ('delete-all');",
    ),
    "fts-dropped": lambda p: _ledger(p, "DROP TABLE drawers_fts; DROP TABLE drawers_trigram;"),
}
#: Damage to the vector index that the palace must notice on open (the index degraded,
#: searches answered by the exact scan), without ever letting Chroma load the damaged
#: files: Chroma answers from a truncated HNSW data file without an error (wrong
#: neighbours), and a query on some damaged files crashes the process (SIGSEGV). The
#: backend checks the HNSW files' structure on disk (palace_plugins/builtin/backends/hnsw_files.py).
#: (An emptied or dropped FTS table is noticed by Ledger.lexical_problem and rebuilt by
#: the next write and by `palace reindex`.)
NOTICED = {name for name in DAMAGE if name.startswith(("chroma-", "hnsw-"))}


#: Variants left to ``make test-slow``: each is like another that ``make test`` runs.
LONG = {
    "hnsw-header-truncated",
    "hnsw-length-truncated",
    "hnsw-links-truncated",
    "hnsw-data-zeroed",
    "fts-emptied",
}


def _damage_param(name: str) -> Any:
    return pytest.param(name, marks=[pytest.mark.long] if name in LONG else [])


@pytest.mark.parametrize("damage", [_damage_param(name) for name in DAMAGE])
def test_a_damaged_index_is_survived_and_reindex_restores_full_results(
    indexed: tuple[Path, dict[str, str]],
    tmp_path: Path,
    damage: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    template, probes = indexed
    palace_dir = tmp_path / "palace"
    shutil.copytree(template, palace_dir)
    DAMAGE[damage](palace_dir)
    queries, expected = list(probes.values()), list(probes)

    # Opens, notices a damaged index, and answers in full, through the whole search and
    # the vector floor alone.
    degraded: list[str] = []
    assert _first_hits(palace_dir, queries, degraded=degraded) == [expected, expected]
    if damage in NOTICED:
        assert "drawers" in degraded
        status = _cli(palace_dir, "status")
        assert status.returncode == 0, status.stderr[-2000:]
        assert "chroma/drawers: DEGRADED (run `palace reindex`)" in status.stdout
        if damage.startswith("hnsw-"):
            assert "HNSW files in" in status.stdout, status.stdout

    install_fake_embedder(monkeypatch)
    done = CliRunner().invoke(
        cli, ["--palace", str(palace_dir), "reindex"], env={"PALACE_EMBEDDER": "fake"}
    )
    assert done.exit_code == 0, done.output
    assert "reindexed" in done.output
    monkeypatch.undo()
    with open_palace(palace_dir) as palace:
        assert all(s.ok and s.count == s.ledger_count for s in palace.stats().indexes)
        for ident, text in probes.items():
            assert palace.search(text, k=1, memories=False)[0].id == ident
            vector = palace.embedder.embed_query(text)
            assert palace.search_by_vector(vector, k=1)[0].id == ident
        assert len(palace.ledger.lexical("record", where=Filter(), limit=2000)) == 1200


def install_fake_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every plugin manager of this process offers the FAKE embedder (as in the driver)."""
    from fakes import FAKE_PLUGIN

    from palace_plugins import manager

    original = manager.PluginManager.__init__

    def init(self: manager.PluginManager, **kwargs: Any) -> None:
        kwargs["plugins"] = [FAKE_PLUGIN, *kwargs.get("plugins", ())]
        original(self, **kwargs)

    monkeypatch.setattr(manager.PluginManager, "__init__", init)


# -- disk full --------------------------------------------------------------------------


def _whole_sources(palace_dir: Path) -> None:
    """Every source in the ledger has exactly the drawers it records, and no drawer of a
    mined source lacks its source record: nothing was filed half-way."""
    db = sqlite3.connect(palace_dir / LEDGER_FILE)
    try:
        rows = db.execute(
            "SELECT s.source_key, s.drawer_count, count(d.id) FROM sources s "
            "LEFT JOIN drawers d ON d.wing = s.wing AND d.source_key = s.source_key "
            "GROUP BY s.wing, s.source_key"
        ).fetchall()
        assert all(recorded == found for _, recorded, found in rows), rows
        (orphans,) = db.execute(
            "SELECT count(*) FROM drawers d WHERE d.source_key IS NOT NULL AND NOT EXISTS "
            "(SELECT 1 FROM sources s WHERE s.wing = d.wing AND s.source_key = d.source_key)"
        ).fetchone()
        assert orphans == 0
    finally:
        db.close()


def _pages(palace_dir: Path) -> int:
    db = sqlite3.connect(palace_dir / LEDGER_FILE)
    try:
        return int(db.execute("PRAGMA page_count").fetchone()[0])
    finally:
        db.close()


@pytest.fixture
def finishes(killing: dict[str, Any], tmp_path: Path) -> Iterator[Path]:
    """Where a test lets a mine fail on a full disk; afterwards, no source may be filed
    half-way, and the next mine (with room again) must finish the job."""
    palace_dir = tmp_path / "palace"
    yield palace_dir
    _whole_sources(palace_dir)
    mine_here(palace_dir, killing["corpus"])
    assert snapshot(palace_dir) == killing["clean"]
    check_agreement(palace_dir)


def test_sqlite_running_out_of_room_mid_mine(finishes: Path, killing: dict[str, Any]) -> None:
    """SQLite's real SQLITE_FULL path: the ledger may grow by half of what the mine needs."""
    with open_palace(finishes) as palace:
        start = _pages(finishes)
        limit = start + (_pages(killing["root"] / "clean") - start) // 2
        palace.ledger._db.execute(f"PRAGMA max_page_count = {limit}")
        with pytest.raises(StorageFullError) as caught:
            palace.mine(killing["corpus"], wing=WING, progress=False)
        assert isinstance(caught.value, PalaceError)
        message = str(caught.value)
        assert message.startswith("the disk is full")
        assert "database or disk is full" in message  # SQLite's own words, not the rollback's
        assert "\n" not in message
        statuses = palace.stats().indexes
        assert all(s.ok and s.count == s.ledger_count for s in statuses), statuses
        filed = palace.stats().ledger.drawers
    assert 0 < filed < len(killing["clean"]["drawers"])  # it filled up half-way through


def test_the_vector_index_out_of_room_mid_mine(
    finishes: Path, killing: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``OSError(ENOSPC)`` from Chroma after the ledger committed a batch: the journal
    keeps what the index missed, and the next mine replays it."""
    from palace_plugins.builtin.backends.chroma import ChromaIndex

    calls = {"n": 0}
    original = ChromaIndex.upsert

    def upsert(self: ChromaIndex, **kwargs: Any) -> None:
        calls["n"] += 1
        if calls["n"] == 3:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        original(self, **kwargs)

    shutil.copytree(killing["root"] / "v1", finishes)
    monkeypatch.setattr(ChromaIndex, "upsert", upsert)
    with open_palace(finishes) as palace, pytest.raises(StorageFullError) as caught:
        palace.mine(killing["corpus"], wing=WING, progress=False)
    monkeypatch.undo()
    assert "No space left on device" in str(caught.value)
    db = sqlite3.connect(finishes / LEDGER_FILE)
    try:
        (pending,) = db.execute("SELECT count(*) FROM index_pending").fetchone()
    finally:
        db.close()
    assert pending > 0  # the index lags the ledger, and the journal says by what


def test_a_full_disk_is_one_line_on_the_command_line(
    killing: dict[str, Any], tmp_path: Path
) -> None:
    """``palace mine`` with an ENOSPC injected in the child: exit 1, one line, no trace."""
    palace_dir = tmp_path / "palace"
    shutil.copytree(killing["root"] / "v1", palace_dir)
    script = (
        "import errno, os, runpy, sys\n"
        "from palace_retrievers.ledger.sqlite import SQLiteLedger\n"
        "def full(*a, **k):\n"
        "    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))\n"
        "SQLiteLedger.file_sources = full\n"
        f"sys.argv = [{str(DRIVER)!r}, 'cli', *sys.argv[1:]]\n"
        f"runpy.run_path({str(DRIVER)!r}, run_name='__main__')\n"
    )
    args = ["--palace", str(palace_dir), "mine", str(killing["corpus"]), "--wing", WING]
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "ANONYMIZED_TELEMETRY": "False", "PALACE_EMBEDDER": "fake"},
    )
    assert done.returncode == 1, done.stderr[-2000:]
    assert done.stderr.startswith("error: the disk is full"), done.stderr[-2000:]
    assert done.stderr.count("\n") == 1
    assert "Traceback" not in done.stderr
    _whole_sources(palace_dir)
    assert snapshot(palace_dir)["drawers"] == snapshot(killing["root"] / "v1")["drawers"]
