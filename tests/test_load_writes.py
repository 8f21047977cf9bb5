"""``remember`` while another process mines: a queued write, not a wait.

A mine holds the palace's writer lock from its first batch to its last. A memory write
made meanwhile from another process does not wait for it (nor fail after
``mining.lock_timeout``): it commits to the ledger, whose journal records the change for
the vector index in the same transaction, and the mine applies the journal after its
next batch, or after it lets the lock go (``Palace.writing``). So a remember during a
mine returns at once, is found by full text at once, and is in the vector index by the
time the mine is done. Any other write still waits for the lock and is refused, naming
the mine, after ``mining.lock_timeout``.

The mining process is ``palace_driver.py`` with the FAKE embedder, each embedding call
slowed by a second (8 files, some 10 batches: the lock is held for 10 s or more).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes import FAKE_PLUGIN
from palace_driver import CONFIG

from palace_retrievers import Palace, PalaceBusyError
from palace_retrievers.writer_lock import HOLDER_FILE

DRIVER = Path(__file__).resolve().parent / "palace_driver.py"


def _corpus(root: Path, files: int) -> Path:
    root.mkdir(parents=True)
    for n in range(files):
        body = "\n\n".join(
            f"Paragraph {p} of note {n}: the lantern by the harbour signals the orbit."
            for p in range(6)
        )
        (root / f"note{n:02d}.md").write_text(body + "\n", encoding="utf-8")
    return root


def _open(palace_dir: Path, lock_timeout: float) -> Palace:
    config = {**CONFIG, "mining": {**CONFIG["mining"], "lock_timeout": lock_timeout}}
    return Palace.open(
        palace_dir, backend="sqlite", embedder="fake", plugins=[FAKE_PLUGIN], config=config
    )


@pytest.fixture
def mining(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[str]]]:
    """A palace, and another process mining 8 files into it slowly (holding the lock)."""
    palace_dir = tmp_path / "palace"
    _open(palace_dir, 10.0).close()
    corpus = _corpus(tmp_path / "notes", 8)
    process = subprocess.Popen(
        [sys.executable, str(DRIVER), "mine", str(palace_dir), str(corpus), "--slow", "1.0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if json.loads((palace_dir / HOLDER_FILE).read_text())["pid"] == process.pid:
                break
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.05)
    else:
        pytest.fail("the mining process never took the writer lock")
    yield palace_dir, process
    if process.poll() is None:
        process.kill()
    process.communicate(timeout=60)


def test_a_remember_during_a_mine_is_queued_and_indexed_by_the_mine(
    mining: tuple[Path, subprocess.Popen[str]],
) -> None:
    palace_dir, miner = mining
    with _open(palace_dir, 0.5) as palace:
        started = time.monotonic()
        got = palace.remember("The harbour lantern is serviced on Fridays", user_id="alice")
        assert got.action == "added"
        assert time.monotonic() - started < 5.0  # no wait for the mine (10 s or more)
        assert miner.poll() is None  # filed while the mine still ran
        assert [m.id for m in palace.memories(user_id="alice")] == [got.memory.id]
        # Journalled for the index: the mine applies it, not this process.
        assert got.memory.id in palace.ledger.pending_index("memories", limit=1000)
        hits = palace.search("harbour lantern serviced", user_id="alice", k=3)
        assert got.memory.id in [h.id for h in hits]  # found at once (full text)
        assert miner.wait(timeout=120) == 0, miner.stderr
        assert palace.ledger.pending_index("memories", limit=1000) == []
        entries = palace.ledger.index_entries("memories", [got.memory.id])
        assert [e.id for e in entries] == [got.memory.id]
        hits = palace.search("harbour lantern serviced", user_id="alice", k=3)
        assert hits[0].id == got.memory.id
        bobs = palace.search("harbour lantern serviced", user_id="bob", k=3)
        assert got.memory.id not in [h.id for h in bobs]


def test_another_write_during_a_mine_is_refused_clearly_and_files_nothing(
    mining: tuple[Path, subprocess.Popen[str]],
) -> None:
    palace_dir, miner = mining
    with _open(palace_dir, 0.5) as palace:
        with pytest.raises(PalaceBusyError) as caught:
            palace.add_texts(["The harbour lantern is serviced on Fridays"], wing="notes")
        message = str(caught.value)
        assert f"another mine is running on {palace_dir} (pid {miner.pid}" in message
        assert "this add_texts gave up after waiting 0.5 s" in message
        assert miner.poll() is None  # refused while the mine still ran
        assert miner.wait(timeout=120) == 0, miner.stderr
        hits = palace.search("harbour lantern serviced on Fridays", k=50)
        assert hits  # the mined notes
        assert all("serviced on Fridays" not in h.text for h in hits)


@pytest.mark.parametrize("writes", [pytest.param(1, id="one"), pytest.param(5, id="a-stream")])
def test_a_memory_queued_as_a_mine_starts_does_not_make_it_rebuild_the_indexes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writes: int
) -> None:
    """A mine starting compares each index's count with the ledger's; a memory queued by
    another process just before that reads as a count that disagrees, and must not make
    the mine rebuild every index (``benchmarks/load.py`` at 50,000 drawers: a rebuild of
    354 s under the lock, and every reader's Chroma collections gone). ``writes``: how
    many checks in a row find a new memory queued just before them."""
    palace_dir = tmp_path / "palace"
    config = {**CONFIG, "mining": {**CONFIG["mining"], "lock_timeout": 10.0}}
    with Palace.open(
        palace_dir, backend="chroma", embedder="fake", plugins=[FAKE_PLUGIN], config=config
    ) as palace:
        palace.add_texts(["The lantern by the harbour signals the orbit"], wing="notes")
        queued: list[str] = []
        rebuilt: list[bool] = []
        check, rebuild = palace.indexes.check, palace.indexes.rebuild

        def check_after_a_queued_write() -> dict[str, str]:
            if len(queued) < writes:  # another process remembers now, while this one holds the lock
                text = f"The harbour lantern number {len(queued)} is serviced on Fridays"
                remember = ["remember", text, "--json"]
                done = subprocess.run(
                    [sys.executable, str(DRIVER), "cli", "--palace", str(palace_dir), *remember],
                    capture_output=True,
                    text=True,
                    timeout=120,
                    env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
                    check=False,
                )
                assert done.returncode == 0, done.stderr
                queued.append(json.loads(done.stdout)["memory"]["id"])
            return check()

        def recorded_rebuild(**kwargs: object) -> int:
            rebuilt.append(True)
            return rebuild(**kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(palace.indexes, "check", check_after_a_queued_write)
        monkeypatch.setattr(palace.indexes, "rebuild", recorded_rebuild)
        palace.mine(_corpus(tmp_path / "notes", 2), wing="notes")
        assert queued  # the memory was written while the mine held the lock
        assert sorted(m.id for m in palace.memories(status=None)) == sorted(queued)
        assert palace.ledger.pending_index("memories", limit=10) == []  # the mine applied it
        assert rebuilt == []  # ... without rebuilding every index for it


def test_a_reader_finds_its_index_again_after_another_process_rebuilds_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rebuild (``palace reindex``, or a mine that found an index damaged) makes the
    Chroma collections anew; a reader open meanwhile answers from the exact scan while its
    handles are stale, and must come back to the index at its next check."""
    from palace_retrievers.search import indexes

    monkeypatch.setattr(indexes, "QUERY_RETRY_SECONDS", 0.2)
    palace_dir = tmp_path / "palace"
    with Palace.open(
        palace_dir, backend="chroma", embedder="fake", plugins=[FAKE_PLUGIN], config=CONFIG
    ) as reader:
        reader.add_texts([f"Lantern {i} by the harbour signals the orbit" for i in range(20)])
        reader.remember("The harbour lantern is serviced on Fridays")
        assert reader.search("lantern harbour orbit", k=3)
        assert reader.indexes.degraded == {}
        done = subprocess.run(
            [sys.executable, str(DRIVER), "cli", "--palace", str(palace_dir), "reindex"],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
            check=False,
        )
        assert done.returncode == 0, done.stderr
        for _ in range(4):
            assert reader.search("lantern harbour orbit", k=3)  # never an error
            time.sleep(0.3)
        assert reader.indexes.degraded == {}
        hits = reader.search_by_vector(reader.embedder.embed_query("Lantern 7 by the harbour"))
        assert hits[0].text == "Lantern 7 by the harbour signals the orbit"
