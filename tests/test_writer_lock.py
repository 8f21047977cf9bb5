"""One writer at a time, with real processes: a second mine is turned away with the first
one's pid (or waits, with ``--wait``), a short write waits a little then gives up, the lock
dies with its holder, and readers never block while a mine runs.

The mining process is ``palace_driver.py`` with the FAKE embedder, slowed down so that
it holds the lock for a few seconds.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes import FAKE_PLUGIN
from palace_driver import CONFIG

from palace_retrievers import Palace, PalaceBusyError
from palace_retrievers.writer_lock import HOLDER_FILE, WriterLock

DRIVER = Path(__file__).resolve().parent / "palace_driver.py"


def write_corpus(root: Path, files: int, tag: str) -> Path:
    root.mkdir(parents=True)
    for n in range(files):
        body = "\n\n".join(
            f"{tag} paragraph {p} of note {n}: the lantern by the harbour signals the orbit."
            for p in range(6)
        )
        (root / f"{tag}{n:02d}.md").write_text(body + "\n", encoding="utf-8")
    return root


def driver(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(DRIVER), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
    )


def wait_for_holder(palace_dir: Path, pid: int, timeout: float = 60.0) -> None:
    """Until process ``pid`` has recorded that it holds the palace's writer lock."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if json.loads((palace_dir / HOLDER_FILE).read_text())["pid"] == pid:
                return
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.05)
    raise AssertionError(f"process {pid} never took the writer lock")


@pytest.fixture
def slow_mine(
    tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[tuple[Path, subprocess.Popen[str]]]:
    """A palace, and a child process mining into it slowly (it holds the lock for seconds).
    The backend is ``sqlite`` unless the test asks for another (indirect parameter)."""
    backend = getattr(request, "param", "sqlite")
    palace_dir = tmp_path / "palace"
    Palace.open(
        palace_dir, backend=backend, embedder="fake", plugins=[FAKE_PLUGIN], config=CONFIG
    ).close()
    corpus = write_corpus(tmp_path / "first", 8, "alpha")
    # 8 files at 1 s each: the lock is held long enough for a second process to start
    # (and import torch) even on a loaded 2-core machine.
    process = driver("mine", str(palace_dir), str(corpus), "--backend", backend, "--slow", "1.0")
    wait_for_holder(palace_dir, process.pid)
    yield palace_dir, process
    if process.poll() is None:
        process.kill()
    process.communicate(timeout=60)


def test_a_second_mine_is_turned_away_then_waits(
    slow_mine: tuple[Path, subprocess.Popen[str]], tmp_path: Path
) -> None:
    palace_dir, first = slow_mine
    other = write_corpus(tmp_path / "second", 3, "beta")

    refused = driver("cli", "--palace", str(palace_dir), "mine", str(other))
    _, stderr = refused.communicate(timeout=60)
    assert refused.returncode == 1
    assert stderr.count("\n") == 1, stderr
    assert stderr.startswith(f"error: another mine is running on {palace_dir} (pid {first.pid}")
    assert first.poll() is None  # the first mine was not disturbed

    waiting = driver("cli", "--palace", str(palace_dir), "mine", str(other), "--wait", "60")
    stdout, stderr = waiting.communicate(timeout=90)
    assert waiting.returncode == 0, stderr
    assert first.wait(timeout=60) == 0  # it finished first: the second one waited for it
    assert "mined 3 of 3 sources" in stdout

    with Palace.open(palace_dir, plugins=[FAKE_PLUGIN], create=False) as palace:
        assert palace.stats().ledger.sources == 8 + 3


@pytest.mark.parametrize("slow_mine", ["sqlite", "chroma"], indirect=True)
def test_readers_never_wait_for_a_mine(slow_mine: tuple[Path, subprocess.Popen[str]]) -> None:
    """A reader opened during a mine searches throughout it, and never fails. (An
    embedded Chroma being written by another process can fail a query: the reader then
    answers by exact scan over the ledger.)"""
    palace_dir, first = slow_mine
    with Palace.open(palace_dir, plugins=[FAKE_PLUGIN], create=False) as palace:
        seen = 0
        while first.poll() is None:
            started = time.monotonic()
            hits = palace.search("the lantern by the harbour", k=3)
            by_vector = palace.search_by_vector(palace.embedder.embed_query("lantern"), k=3)
            stats = palace.stats()
            assert time.monotonic() - started < 2.0
            assert all(h.text for h in [*hits, *by_vector])
            assert stats.ledger.drawers >= seen  # a reader sees whole batches, growing
            assert stats.ledger.drawers % 6 == 0  # whole files: 6 drawers each
            seen = stats.ledger.drawers
        assert first.returncode == 0
        assert [h.text for h in palace.search("paragraph 5 of note 7", k=1)]
    status = driver("cli", "--palace", str(palace_dir), "status")
    stdout, stderr = status.communicate(timeout=60)
    assert status.returncode == 0, stderr
    assert "DEGRADED" not in stdout


def test_a_short_write_waits_a_little_then_gives_up(
    slow_mine: tuple[Path, subprocess.Popen[str]],
) -> None:
    palace_dir, first = slow_mine
    config = {**CONFIG, "mining": {**CONFIG["mining"], "lock_timeout": 0.3}}
    with Palace.open(palace_dir, plugins=[FAKE_PLUGIN], config=config, create=False) as palace:
        started = time.monotonic()
        with pytest.raises(PalaceBusyError) as caught:
            palace.add_texts(["a note written during the mine"])
        assert time.monotonic() - started >= 0.3
        message = str(caught.value)
        assert f"another mine is running on {palace_dir} (pid {first.pid}" in message
        assert "gave up after waiting 0.3 s" in message
        assert first.wait(timeout=60) == 0
        assert palace.add_texts(["a note written after the mine"])  # free again


def test_the_lock_dies_with_its_holder(slow_mine: tuple[Path, subprocess.Popen[str]]) -> None:
    palace_dir, first = slow_mine
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=30)
    lock = WriterLock(palace_dir)
    assert lock.holder() is None  # the dead pid is not reported as a holder
    with lock.hold("mine"):  # no stale lock to clean up
        assert lock.held


def test_threads_of_one_process_take_turns(tmp_path: Path) -> None:
    import threading

    lock = WriterLock(tmp_path)
    order: list[str] = []
    with lock.hold("mine"):
        with lock.hold("add_texts"):  # re-entrant in the holding thread
            assert lock.held

        def other() -> None:
            with pytest.raises(PalaceBusyError), lock.hold("delete", timeout=0.1):
                pass
            order.append("refused")

        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
    assert order == ["refused"]
    assert not lock.held


def test_a_reader_whose_index_query_failed_goes_back_to_it_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A query that fails (another process rewriting an embedded index) is answered by
    exact scan; the index is checked again later and used once it agrees with the ledger."""
    from fakes import make_plugin

    from palace_plugins.builtin.backends.exact import ExactIndex
    from palace_retrievers.search import indexes

    failures = [1]

    class Flaky(ExactIndex):
        def query(self, **kwargs: Any) -> Any:
            if failures and self._collection == "drawers":
                failures.pop()
                raise RuntimeError("Error finding id")
            return super().query(**kwargs)

    plugin = make_plugin(
        "flaky", palace_register_backends=lambda register: register("flaky", Flaky)
    )
    monkeypatch.setattr(indexes, "QUERY_RETRY_SECONDS", 3600.0)
    with Palace.open(
        tmp_path / "p", backend="flaky", embedder="fake", plugins=[FAKE_PLUGIN, plugin]
    ) as palace:
        palace.add_texts(["the lantern by the harbour"], ids=["lantern"])
        assert [h.id for h in palace.search("lantern", k=1)] == ["lantern"]  # by exact scan
        assert "drawers" in palace.indexes.degraded
        assert [h.id for h in palace.search("lantern", k=1)] == ["lantern"]
        assert "drawers" in palace.indexes.degraded  # not retried before its time
        monkeypatch.setattr(indexes, "QUERY_RETRY_SECONDS", 0.0)
        assert [h.id for h in palace.search("lantern", k=1)] == ["lantern"]
        assert palace.indexes.degraded == {}  # back on its own index
