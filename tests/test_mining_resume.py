"""A mine killed at any point (SIGKILL) and run again finishes the job: no duplicate and
no missing drawer or closet, and the ledger, the vector index (Chroma) and the full-text
index all agree, exactly as after one clean mine.

Each case mines in a child process (``palace_driver.py``) that kills itself with SIGKILL
at a chosen point: the n-th embedding call, ledger commit, index upsert, journal clear or
ledger transaction, n drawn from a seeded generator (``PALACE_KILL_SEED`` to vary it).
The mine is then run again in this process and the palace compared with a clean mine of
the same tree. The FAKE embedder is used throughout: this is about bookkeeping.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from palace_driver import CONFIG

from palace_retrievers import Palace
from palace_retrievers.ledger.sqlite import LEDGER_FILE

DRIVER = Path(__file__).resolve().parent / "palace_driver.py"
SEED = int(os.environ.get("PALACE_KILL_SEED", "20261129"))
WING = "corpus"
WORDS = [
    "ledger",
    "drawer",
    "closet",
    "wing",
    "room",
    "lantern",
    "harbour",
    "copper",
    "meadow",
    "signal",
    "orbit",
    "river",
    "falcon",
    "quartz",
    "ember",
    "willow",
    "saddle",
    "beacon",
    "thistle",
    "glacier",
    "cinder",
    "marble",
    "hollow",
    "anchor",
    "velvet",
    "prairie",
    "summit",
    "canyon",
    "tundra",
]


def write_corpus(root: Path, *, files: int, version: int, seed: int) -> None:
    """``files`` text files of a few hundred words; ``version`` 2 edits some, adds two."""
    rng = random.Random(seed)
    root.mkdir(parents=True, exist_ok=True)
    count = files + (2 if version == 2 else 0)
    for n in range(count):
        words = [rng.choice(WORDS) for _ in range(rng.randint(60, 140))]
        paragraphs = [" ".join(words[i : i + 20]) + "." for i in range(0, len(words), 20)]
        edited = version == 2 and n % 3 == 0
        if edited:
            paragraphs[len(paragraphs) // 2] = f"edited paragraph number {n} in version two."
        body = f"# note {n} tag{n}word\n\n" + "\n\n".join(paragraphs) + "\n"
        path = root / f"dir{n % 3}" / f"note{n:02d}.md"
        path.parent.mkdir(exist_ok=True)
        path.write_text(body, encoding="utf-8")
        mtime = 1_700_000_000 + n + (1000 if edited else 0)
        os.utime(path, (mtime, mtime))


def open_palace(path: Path) -> Palace:
    from fakes import FAKE_PLUGIN

    return Palace.open(
        path, backend="chroma", embedder="fake", plugins=[FAKE_PLUGIN], config=CONFIG
    )


def mine_here(palace_dir: Path, corpus: Path) -> None:
    with open_palace(palace_dir) as palace:
        palace.mine(corpus, wing=WING, progress=False)


def run_driver(*args: str, kill_after: float | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ANONYMIZED_TELEMETRY": "False"}
    process = subprocess.Popen(
        [sys.executable, str(DRIVER), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    if kill_after is not None:
        try:
            process.wait(timeout=kill_after)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGKILL)
    stdout, stderr = process.communicate(timeout=120)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def snapshot(palace_dir: Path) -> dict[str, Any]:
    """Everything a mine leaves in the ledger, in a form two palaces can be compared by."""
    db = sqlite3.connect(palace_dir / LEDGER_FILE)
    try:

        def rows(sql: str) -> list[tuple[Any, ...]]:
            return sorted(db.execute(sql).fetchall())

        return {
            "drawers": rows(
                "SELECT id, text, wing, room, source_key, chunk_index, "
                "embedding IS NOT NULL FROM drawers"
            ),
            # A closet's id hashes its drawers' location (an absolute path), which differs
            # between the clean palace's corpus and the test's; its line does not.
            "closets": rows("SELECT line, embedding IS NOT NULL FROM closets"),
            "pointers": rows(
                "SELECT c.line, p.drawer_id FROM closet_drawers p JOIN closets c "
                "ON c.id = p.closet_id"
            ),
            "sources": rows(
                "SELECT wing, source_key, content_hash, mtime, drawer_count FROM sources"
            ),
        }
    finally:
        db.close()


def unfinished(palace_dir: Path, clean: dict[str, Any]) -> bool:
    """Whether the ledger lacks something, or the index has yet to hear of something."""
    db = sqlite3.connect(palace_dir / LEDGER_FILE)
    try:
        (pending,) = db.execute("SELECT count(*) FROM index_pending").fetchone()
    finally:
        db.close()
    return bool(pending) or snapshot(palace_dir) != clean


def check_agreement(palace_dir: Path) -> None:
    """The journal is empty; the Chroma index holds exactly the ledger's ids; FTS is whole."""
    with open_palace(palace_dir) as palace:
        statuses = palace.stats().indexes
        assert all(s.ok and s.count == s.ledger_count for s in statuses), statuses
    db = sqlite3.connect(palace_dir / LEDGER_FILE)
    try:
        assert db.execute("SELECT count(*) FROM index_pending").fetchone() == (0,)
        for table in ("drawers_fts", "drawers_trigram"):
            db.execute(f"INSERT INTO {table} ({table}, rank) VALUES ('integrity-check', 1)")
        ledger_ids = {
            c: {r[0] for r in db.execute(f"SELECT id FROM {c} WHERE embedding IS NOT NULL")}
            for c in ("drawers", "closets")
        }
        for n in range(3):  # every file's own word finds exactly its drawers
            key = f"dir{n % 3}/note{n:02d}.md"
            found = db.execute(
                "SELECT count(*) FROM drawers_fts JOIN drawers d ON d.rowid = drawers_fts.rowid "
                "WHERE drawers_fts MATCH ?",
                (f"tag{n}word",),
            ).fetchone()[0]
            assert found >= 1, key
    finally:
        db.close()
    import chromadb
    from chromadb.config import Settings

    from palace_plugins.builtin.backends.chroma import active_collection

    client = chromadb.PersistentClient(
        path=str(palace_dir / "index" / "chroma"), settings=Settings(anonymized_telemetry=False)
    )
    try:
        for collection, ids in ledger_ids.items():
            name = active_collection(client, f"palace_{collection}")
            stored = client.get_collection(name).get(include=[])["ids"]
            assert len(stored) == len(set(stored))
            assert set(stored) == ids, collection
    finally:
        client.close()


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> dict[int, dict[str, Any]]:
    """Snapshots of one clean, uninterrupted mine of version 1 and of version 2."""
    out = {}
    for version in (1, 2):
        root = tmp_path_factory.mktemp(f"clean{version}")
        write_corpus(root / "corpus", files=12, version=version, seed=SEED)
        mine_here(root / "palace", root / "corpus")
        out[version] = snapshot(root / "palace")
        assert len(out[version]["drawers"]) > 40
        assert out[version]["closets"]
    assert out[1]["drawers"] != out[2]["drawers"]
    return out


_rng = random.Random(SEED)
#: (kill point, n-th time, scenario): "fresh" mines version 2 into an empty palace;
#: "edit" mines version 1 fully, then version 2 (some drawers replaced, files added).
CASES = [
    ("commit", _rng.randint(1, 5), "fresh"),
    ("commit", _rng.randint(1, 3), "edit"),
    ("upsert", _rng.randint(1, 8), "edit"),
    ("clear", _rng.randint(1, 8), "fresh"),
    ("write", _rng.randint(3, 10), "edit"),
]


@pytest.mark.parametrize(
    ("point", "nth", "scenario"), CASES, ids=[f"{p}{n}-{s}" for p, n, s in CASES]
)
def test_a_mine_killed_and_run_again_equals_a_clean_mine(
    tmp_path: Path, clean: dict[int, dict[str, Any]], point: str, nth: int, scenario: str
) -> None:
    corpus, palace_dir = tmp_path / "corpus", tmp_path / "palace"
    if scenario == "edit":
        write_corpus(corpus, files=12, version=1, seed=SEED)
        mine_here(palace_dir, corpus)
    write_corpus(corpus, files=12, version=2, seed=SEED)

    killed = run_driver("mine", str(palace_dir), str(corpus), "--kill-at", f"{point}:{nth}")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert unfinished(palace_dir, clean[2])

    mine_here(palace_dir, corpus)
    assert snapshot(palace_dir) == clean[2]
    check_agreement(palace_dir)


def test_killed_twice_even_while_repairing(
    tmp_path: Path, clean: dict[int, dict[str, Any]]
) -> None:
    """The run that repairs a killed mine is itself killed while it replays the journal."""
    corpus, palace_dir = tmp_path / "corpus", tmp_path / "palace"
    write_corpus(corpus, files=12, version=1, seed=SEED)
    mine_here(palace_dir, corpus)
    write_corpus(corpus, files=12, version=2, seed=SEED)
    first = run_driver("mine", str(palace_dir), str(corpus), "--kill-at", "commit:2")
    assert first.returncode == -signal.SIGKILL, first.stderr[-2000:]
    second = run_driver("mine", str(palace_dir), str(corpus), "--kill-at", "upsert:1")
    assert second.returncode == -signal.SIGKILL, second.stderr[-2000:]
    mine_here(palace_dir, corpus)
    assert snapshot(palace_dir) == clean[2]
    check_agreement(palace_dir)


def test_killed_at_a_random_moment(tmp_path: Path, clean: dict[int, dict[str, Any]]) -> None:
    """SIGKILL from outside after a seeded random delay, wherever the mine then is."""
    corpus, palace_dir = tmp_path / "corpus", tmp_path / "palace"
    write_corpus(corpus, files=12, version=2, seed=SEED)
    delay = random.Random(SEED + 1).uniform(1.0, 3.0)
    started = time.monotonic()
    run = run_driver("mine", str(palace_dir), str(corpus), "--slow", "0.1", kill_after=delay)
    assert run.returncode in (0, -signal.SIGKILL), run.stderr[-2000:]
    assert time.monotonic() - started < 60
    mine_here(palace_dir, corpus)
    assert snapshot(palace_dir) == clean[2]
    check_agreement(palace_dir)


def test_a_lost_index_is_rebuilt_by_the_next_mine(
    tmp_path: Path, clean: dict[int, dict[str, Any]]
) -> None:
    """Damage the journal cannot account for (a deleted index folder) is rebuilt too."""
    corpus, palace_dir = tmp_path / "corpus", tmp_path / "palace"
    write_corpus(corpus, files=12, version=2, seed=SEED)
    mine_here(palace_dir, corpus)
    shutil.rmtree(palace_dir / "index" / "chroma")
    mine_here(palace_dir, corpus)
    assert snapshot(palace_dir) == clean[2]
    check_agreement(palace_dir)
