"""Bad input and a hostile place on the command line: one line on stderr, exit 1.

A count beyond any palace (``--limit 100000000000000000000``), a palace path under a
file, a ``palace.toml`` that is a folder, a disk that fills up while a memory is written
and a palace that cannot be written: each ends with one ``error:`` line (or, for a
count, a clamp), never a traceback, and nothing stored is lost. A read-only palace can
still be searched.

These test the command line's plumbing, not the quality of memory decisions, so they run
on the FAKE hashing embedder (registered into the CLI's ``Palace.open``, as in
``test_cli_memory.py``; ``palace_driver.py`` does the same in a child process) with real
SQLite, and real Chroma where the backend matters.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from fakes import FAKE_PLUGIN

from palace_retrievers import Palace
from palace_retrievers.cli import cli
from palace_retrievers.errors import StorageFullError
from palace_retrievers.ledger.sqlite import LEDGER_FILE, SQLiteLedger

Run = Callable[..., tuple[int, str, str]]

DRIVER = Path(__file__).resolve().parent / "palace_driver.py"
HUGE = "100000000000000000000"  # 10**20: beyond SQLite's 64-bit integers


@pytest.fixture
def fake_cli(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every ``Palace.open`` of the CLI also registers the FAKE embedder plugin."""
    original = Palace.open.__func__  # type: ignore[attr-defined]

    def open_with_fake(cls: type[Palace], /, path: Any = None, **kwargs: Any) -> Palace:
        kwargs["plugins"] = [FAKE_PLUGIN, *kwargs.get("plugins", ())]
        palace: Palace = original(cls, path, **kwargs)
        return palace

    monkeypatch.setattr(Palace, "open", classmethod(open_with_fake))


def invoke(palace: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["--palace", str(palace), *args])
    return result.exit_code, result.stdout, result.stderr


def one_error_line(code: int, err: str, *, starts: str = "error: ") -> None:
    assert code == 1, err
    assert err.startswith(starts), err
    assert err.count("\n") == 1, err
    assert "Traceback" not in err


@pytest.fixture
def palace(tmp_path: Path, fake_cli: None) -> Path:
    """A palace on the exact sqlite backend holding two memories."""
    path = tmp_path / "palace"
    code, _, err = invoke(path, "init", "--embedder", "fake", "--backend", "sqlite")
    assert code == 0, err
    for text in ("Standup is at nine", "The office plants need water on Fridays"):
        assert invoke(path, "remember", text)[0] == 0
    return path


def texts(palace: Path) -> list[str]:
    code, out, err = invoke(palace, "memories", "list", "--status", "all", "--json")
    assert code == 0, err
    return sorted(m["text"] for m in json.loads(out))


# -- counts beyond any palace ---------------------------------------------------------


def test_a_huge_limit_or_offset_is_a_clamp_not_an_overflow(palace: Path) -> None:
    """``--limit`` / ``--offset`` beyond SQLite's integers mean "all" / "none"."""
    code, out, err = invoke(palace, "memories", "list", "--limit", HUGE, "--json")
    assert code == 0, err
    assert len(json.loads(out)) == 2
    code, out, err = invoke(palace, "memories", "list", "--offset", HUGE)
    assert code == 0, err
    assert out == "no memories\n"
    code, out, err = invoke(palace, "memories", "list", "--offset", HUGE, "--limit", HUGE)
    assert (code, out) == (0, "no memories\n"), err


def test_a_huge_k_or_token_budget_is_a_clamp(palace: Path) -> None:
    """``search -k`` and ``context -k/--max-tokens`` beyond any palace: every hit."""
    code, out, err = invoke(palace, "search", "standup nine", "-k", HUGE, "--json")
    assert code == 0, err
    assert "Standup is at nine" in [hit["text"] for hit in json.loads(out)]
    code, out, err = invoke(palace, "context", "standup", "-k", HUGE, "--max-tokens", HUGE)
    assert code == 0, err


def test_a_ttl_no_date_can_hold_is_a_usage_error(palace: Path) -> None:
    """``--ttl`` past the year 9999 is refused as bad usage (exit 2), not an
    OverflowError, and nothing is remembered."""
    for ttl in (f"{HUGE}w", "999999999d"):
        code, _, err = invoke(palace, "remember", "A memory for the ages", "--ttl", ttl)
        assert code == 2, err
        assert "longer than any duration" in err
        assert "Traceback" not in err
    assert "A memory for the ages" not in texts(palace)


# -- where the palace is ----------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [("init",), ("remember", "hello"), ("search", "hello"), ("status",), ("memories", "list")],
    ids=lambda args: args[0],
)
@pytest.mark.parametrize("below", ["", "sub", "sub/deeper"])
def test_a_palace_under_a_file_is_one_line(
    tmp_path: Path, fake_cli: None, args: tuple[str, ...], below: str
) -> None:
    """``palace --palace FILE/sub init`` (and any command): one line naming the file;
    the file is left as it was."""
    blocker = tmp_path / "notes.txt"
    blocker.write_text("my notes\n", encoding="utf-8")
    code, _, err = invoke(blocker / below if below else blocker, *args)
    one_error_line(code, err)
    assert f"{blocker} is a file, not a folder" in err
    assert blocker.read_text(encoding="utf-8") == "my notes\n"


@pytest.mark.parametrize("args", [("init",), ("search", "hello"), ("remember", "hello")])
def test_a_palace_toml_that_is_a_folder_is_one_line(palace: Path, args: tuple[str, ...]) -> None:
    """``palace.toml`` replaced by a folder: one line naming it; the ledger is kept."""
    config = palace / "palace.toml"
    saved = config.read_text(encoding="utf-8")
    config.unlink()
    config.mkdir()
    code, _, err = invoke(palace, *args)
    one_error_line(code, err)
    assert f"cannot read {config}" in err
    config.rmdir()
    config.write_text(saved, encoding="utf-8")
    assert texts(palace) == ["Standup is at nine", "The office plants need water on Fridays"]


# -- a full disk ----------------------------------------------------------------------


@pytest.fixture
def full_ledger() -> Iterator[Callable[[], None]]:
    """Every ledger opened from now on may not grow by a page: SQLite's SQLITE_FULL, as
    ``test_faults.py`` makes it with a page limit. Calling the fixture's value makes
    room again."""
    original = SQLiteLedger.__init__

    def init(self: SQLiteLedger, path: Path) -> None:
        original(self, path)
        (pages,) = self._db.execute("PRAGMA page_count").fetchone()
        self._db.execute(f"PRAGMA max_page_count = {pages}")

    patch = pytest.MonkeyPatch()  # its own: undoing it leaves the FAKE embedder in
    patch.setattr(SQLiteLedger, "__init__", init)
    yield patch.undo
    patch.undo()


#: A memory under the 10,000 characters one may hold, with 800 words no page holds yet.
BIG = "We paid " + " ".join(f"supplier{i}" for i in range(800))


def test_a_full_disk_while_remembering_is_one_line_and_writes_nothing(
    palace: Path, full_ledger: Callable[[], None]
) -> None:
    """SQLITE_FULL while a memory (or a triple) is written: ``StorageFullError``, one
    line and exit 1 on the command line, the transaction rolled back whole."""
    code, _, err = invoke(palace, "remember", BIG)
    one_error_line(code, err, starts="error: the disk is full")
    assert "database or disk is full" in err
    code, _, err = invoke(palace, "kg", "add", "Alice", "wrote", BIG)
    one_error_line(code, err, starts="error: the disk is full")
    with (
        Palace.open(palace, create=False) as opened,
        pytest.raises(StorageFullError, match="rolled back whole"),
    ):
        opened.remember(BIG)


def test_after_a_full_disk_the_palace_is_whole(
    palace: Path, full_ledger: Callable[[], None]
) -> None:
    """What a full disk stopped left no trace, and the palace works once there is room."""
    before = texts(palace)
    assert invoke(palace, "remember", BIG)[0] == 1
    full_ledger()  # room again
    assert texts(palace) == before
    code, out, err = invoke(palace, "status", "--json")
    assert code == 0, err
    assert all(index["ok"] for index in json.loads(out)["indexes"])
    assert invoke(palace, "remember", BIG)[0] == 0
    assert texts(palace) == sorted([*before, BIG])


# -- a read-only palace ---------------------------------------------------------------


_DROP_WRITE_OVERRIDE = textwrap.dedent(
    """\
    import ctypes, os, sys
    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
        if libc.prctl(24, capability, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            sys.exit(f"cannot drop capability {capability}: errno {ctypes.get_errno()}")
    os.execv(sys.executable, [sys.executable, *sys.argv[1:]])
    """
)


def _can_drop_write_override() -> bool:
    """Whether a child can run without root's right to write read-only files."""
    if os.geteuid() != 0:
        return True
    if not sys.platform.startswith("linux"):
        return False
    done = subprocess.run(
        [sys.executable, "-c", _DROP_WRITE_OVERRIDE, "-c", "pass"], capture_output=True
    )
    return done.returncode == 0


def palace_cli(palace: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The ``palace`` command line in a child that chmod binds: as root, the child gives
    up CAP_DAC_OVERRIDE first (root writes read-only files otherwise)."""
    command = [str(DRIVER), "cli", "--palace", str(palace), *args]
    if os.geteuid() == 0:
        command = ["-c", _DROP_WRITE_OVERRIDE, *command]
    return subprocess.run(
        [sys.executable, *command],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
    )


def _chmod_tree(root: Path, *, writable: bool) -> None:
    for path in [root, *root.rglob("*")]:
        mode = path.stat().st_mode
        write = stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH
        path.chmod(mode | stat.S_IWUSR if writable else mode & ~write)


@pytest.fixture
def read_only(tmp_path: Path, fake_plugin: Any) -> Iterator[Callable[[str], Path]]:
    """``read_only(backend)``: a palace with a memory and a mined note, then chmod a-w.

    Skipped only where no child can be kept from writing (root without the right to
    drop CAP_DAC_OVERRIDE, or not Linux)."""
    if not _can_drop_write_override():
        pytest.skip("running as root and cannot drop CAP_DAC_OVERRIDE: chmod binds no one")
    made: list[Path] = []

    def make(backend: str) -> Path:
        path = tmp_path / f"palace-{backend}"
        notes = tmp_path / f"notes-{backend}"
        notes.mkdir()
        (notes / "plants.md").write_text("The ficus by the window needs water on Fridays.\n")
        with Palace.open(path, plugins=[fake_plugin], embedder="fake", backend=backend) as p:
            p.remember("Standup is at nine")
            p.mine(notes, wing="notes")
        _chmod_tree(path, writable=False)
        made.append(path)
        return path

    yield make
    for path in made:
        _chmod_tree(path, writable=True)


@pytest.mark.parametrize("backend", ["sqlite", "chroma"])
def test_a_read_only_palace_can_be_searched(
    read_only: Callable[[str], Path], backend: str, fake_plugin: Any
) -> None:
    """chmod a-w on the palace: ``search``, ``memories list`` and ``status`` work (they
    only read), ``status`` says the palace is read-only, and nothing is lost."""
    palace = read_only(backend)
    done = palace_cli(palace, "search", "ficus water fridays", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "not a palace ledger" not in done.stderr
    assert any("ficus" in hit["text"] for hit in json.loads(done.stdout))
    done = palace_cli(palace, "memories", "list", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Standup is at nine" in [m["text"] for m in json.loads(done.stdout)]
    done = palace_cli(palace, "status", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["read_only"] is True
    assert not list(palace.glob(f"{LEDGER_FILE}-*"))  # no -wal or -shm was left behind
    _chmod_tree(palace, writable=True)
    with Palace.open(palace, plugins=[fake_plugin], create=False) as reopened:
        assert "Standup is at nine" in [m.text for m in reopened.memories()]
        assert reopened.stats().ledger.drawers == 1


@pytest.mark.parametrize(
    "args",
    [("remember", "Lunch is at noon"), ("kg", "add", "Alice", "likes", "tea"), ("delete",)],
    ids=lambda args: args[0],
)
def test_writing_to_a_read_only_palace_is_one_line(
    read_only: Callable[[str], Path], args: tuple[str, ...]
) -> None:
    """A write to a read-only palace (its writer lock or its ledger refusing): one line
    that says so, exit 1."""
    palace = read_only("sqlite")
    if args == ("delete",):
        listed = palace_cli(palace, "memories", "list", "--json")
        args = ("memories", "delete", json.loads(listed.stdout)[0]["id"])
    done = palace_cli(palace, *args)
    one_error_line(done.returncode, done.stderr)
    assert "read-only" in done.stderr, done.stderr


def test_an_unreadable_ledger_is_one_line(read_only: Callable[[str], Path]) -> None:
    """A ledger that cannot even be read (chmod 000): one line naming it, exit 1."""
    palace = read_only("sqlite")
    ledger = palace / LEDGER_FILE
    mode = ledger.stat().st_mode
    ledger.chmod(0)
    try:
        done = palace_cli(palace, "search", "ficus")
    finally:
        ledger.chmod(mode)
    one_error_line(done.returncode, done.stderr)
    assert f"{ledger} cannot be written, nor opened to be read" in done.stderr
