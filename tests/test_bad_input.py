"""Bad input gets a clear error (a PalaceError subclass), and nothing stored is lost.

Each test runs against a copy of the mined sample palace (real model, real Chroma) and
checks afterwards that every drawer is still there and still found.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from palace_retrievers import (
    ConfigError,
    EmbedderMismatchError,
    Filter,
    InvalidQueryError,
    Palace,
    PalaceError,
    PalaceNotFoundError,
    PluginNotFoundError,
    SchemaError,
    SourceError,
)
from palace_retrievers.ledger.sqlite.schema import SCHEMA_VERSION

pytestmark = pytest.mark.slow

QUERY = "who owns the iOS release?"


@pytest.fixture
def palace(sample_palace: Palace) -> Iterator[Palace]:
    """The sample palace; after the test, everything it held must still be there."""
    before = sample_palace.stats().ledger
    top = [h.id for h in sample_palace.search(QUERY, k=3)]
    yield sample_palace
    assert sample_palace.stats().ledger == before
    assert [h.id for h in sample_palace.search(QUERY, k=3)] == top


def one_line(error: BaseException) -> str:
    message = str(error)
    assert message
    assert "\n" not in message
    assert isinstance(error, PalaceError)
    return message


# -- mining ---------------------------------------------------------------------------


def test_missing_path(palace: Palace, tmp_path: Path) -> None:
    with pytest.raises(SourceError) as caught:
        palace.mine(tmp_path / "no-such-notes")
    message = one_line(caught.value)
    assert "no-such-notes" in message
    assert "no such file or directory" in message


def test_dangling_symlink(palace: Palace, tmp_path: Path) -> None:
    link = tmp_path / "notes.md"
    link.symlink_to(tmp_path / "deleted.md")
    with pytest.raises(SourceError) as caught:
        palace.mine(link)
    assert "notes.md" in one_line(caught.value)


def test_a_fifo_is_not_a_file_to_mine(palace: Palace, tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(SourceError) as caught:
        palace.mine(fifo)
    assert "pipe" in one_line(caught.value)


def test_unreadable_file(palace: Palace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests run as root, who reads even a mode-000 file, so the denial is simulated."""
    secret = tmp_path / "secret.md"
    secret.write_text("top secret")
    secret.chmod(0)
    real_access = os.access

    def access(path: object, mode: int, **kwargs: object) -> bool:
        if Path(str(path)).resolve() == secret.resolve():
            return False
        return real_access(path, mode, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "access", access)
    with pytest.raises(SourceError) as caught:
        palace.mine(secret)
    message = one_line(caught.value)
    assert "secret.md" in message
    assert "permission denied" in message


def test_binary_file(palace: Palace, tmp_path: Path) -> None:
    blob = tmp_path / "photo.txt"
    blob.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 4)
    with pytest.raises(SourceError) as caught:
        palace.mine(blob)
    assert "binary" in one_line(caught.value)


def test_file_over_the_size_limit(
    open_palace: Callable[..., Palace], sample_copy: tuple[Path, Path], tmp_path: Path
) -> None:
    palace = open_palace(sample_copy[0], fake=False, config={"mining": {"max_file_bytes": 100}})
    big = tmp_path / "big.md"
    big.write_text("word " * 100)
    with pytest.raises(SourceError, match="limit") as caught:
        palace.mine(big)
    one_line(caught.value)


def test_bad_files_inside_a_folder_are_skipped_not_fatal(palace: Palace, tmp_path: Path) -> None:
    folder = tmp_path / "mixed"
    folder.mkdir()
    (folder / "photo.png").write_bytes(b"\x89PNG\x00")
    (folder / "data.txt").write_bytes(b"text\x00with a NUL")
    (folder / "gone.md").symlink_to(folder / "deleted.md")
    report = palace.mine(folder, wing="mixed-test")
    assert report.mined == 0
    skipped = {Path(s.location).name: s.reason for s in report.skipped}
    assert set(skipped) == {"photo.png", "data.txt", "gone.md"}
    assert "binary" in skipped["data.txt"]
    palace.delete(palace.ledger.drawer_ids(Filter(wing="mixed-test")))


def test_empty_folder(palace: Palace, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    report = palace.mine(tmp_path / "empty")
    assert (report.seen, report.mined) == (0, 0)


# -- queries --------------------------------------------------------------------------


@pytest.mark.parametrize("query", ["", " ", "\n\t  \n"])
def test_empty_query(palace: Palace, query: str) -> None:
    with pytest.raises(InvalidQueryError, match="empty") as caught:
        palace.search(query)
    one_line(caught.value)


def test_query_that_is_not_a_string(palace: Palace) -> None:
    with pytest.raises(InvalidQueryError, match="string"):
        palace.search(None)  # type: ignore[arg-type]
    with pytest.raises(InvalidQueryError, match="string"):
        palace.search(["a", "list"])  # type: ignore[arg-type]


def test_overlong_query(palace: Palace) -> None:
    with pytest.raises(InvalidQueryError, match="max_query_chars"):
        palace.search("x" * 100_001)


@pytest.mark.parametrize("k", [0, -1, -100, 2.5, True, "3", None])
def test_bad_k(palace: Palace, k: object) -> None:
    with pytest.raises(InvalidQueryError, match="k must be a positive integer") as caught:
        palace.search(QUERY, k=k)  # type: ignore[arg-type]
    one_line(caught.value)


def test_unknown_filter_key() -> None:
    with pytest.raises(InvalidQueryError, match="'colour'") as caught:
        Filter.from_mapping({"wing": "w", "colour": "red"})
    message = one_line(caught.value)
    assert "wing" in message  # the message lists the filters there are
    assert Filter.from_mapping({"wing": "w"}) == Filter(wing="w")


@pytest.mark.parametrize(
    "filters",
    [
        {"since": "yesterday"},
        {"until": "2026-13-45"},
        {"since": "2026-03-01", "until": "2026-02-01"},
        {"wing": 3},
    ],
)
def test_bad_filter_values(palace: Palace, filters: dict[str, object]) -> None:
    with pytest.raises(InvalidQueryError) as caught:
        palace.search(QUERY, **filters)  # type: ignore[arg-type]
    one_line(caught.value)


def test_bad_add_texts(palace: Palace) -> None:
    with pytest.raises(InvalidQueryError, match="empty"):
        palace.add_texts(["fine", "  "])
    with pytest.raises(InvalidQueryError, match="same length"):
        palace.add_texts(["a", "b"], ids=["only-one"])
    with pytest.raises(InvalidQueryError, match="same id"):
        palace.add_texts(["a", "b"], ids=["x", "x"])
    with pytest.raises(InvalidQueryError):
        palace.add_texts(["a"], metadatas=[{"content_date": "not a date"}])
    assert palace.add_texts([]) == []


# -- opening --------------------------------------------------------------------------


def test_unknown_backend(sample_copy: tuple[Path, Path]) -> None:
    with pytest.raises(PluginNotFoundError) as caught:
        Palace.open(sample_copy[0], backend="qdrantt")
    message = one_line(caught.value)
    assert "'qdrantt'" in message
    assert "chroma" in message
    assert "sqlite" in message


def test_unknown_config_key(sample_copy: tuple[Path, Path]) -> None:
    with pytest.raises(ConfigError, match="'chunk_size'"):
        Palace.open(sample_copy[0], config={"chunk_size": 3})


def test_missing_palace_without_create(tmp_path: Path) -> None:
    with pytest.raises(PalaceNotFoundError, match="palace init") as caught:
        Palace.open(tmp_path / "nowhere", create=False)
    one_line(caught.value)
    assert not (tmp_path / "nowhere").exists()


def test_palace_path_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(PalaceNotFoundError, match="is a file"):
        Palace.open(tmp_path / "file")


def test_newer_schema(sample_copy: tuple[Path, Path], open_palace: Callable[..., Palace]) -> None:
    palace_dir = sample_copy[0]
    ledger_file = palace_dir / "ledger.sqlite3"
    with sqlite3.connect(ledger_file) as db:
        db.execute("INSERT INTO schema_version VALUES (?, 'later')", (SCHEMA_VERSION + 1,))
        drawers = db.execute("SELECT count(*) FROM drawers").fetchone()[0]
    with pytest.raises(SchemaError, match="newer palace-retrievers") as caught:
        Palace.open(palace_dir)
    one_line(caught.value)
    with sqlite3.connect(ledger_file) as db:
        assert db.execute("SELECT count(*) FROM drawers").fetchone()[0] == drawers
        db.execute("DELETE FROM schema_version WHERE version = ?", (SCHEMA_VERSION + 1,))
    # Nothing was lost: with the newer version gone again, the palace opens and answers.
    palace = open_palace(palace_dir, fake=False)
    assert palace.search(QUERY, k=3)


def test_ledger_that_is_not_sqlite(tmp_path: Path) -> None:
    palace_dir = tmp_path / "p"
    palace_dir.mkdir()
    (palace_dir / "ledger.sqlite3").write_bytes(b"garbage, not a database " * 200)
    with pytest.raises(SchemaError, match="not a palace ledger") as caught:
        Palace.open(palace_dir)
    one_line(caught.value)


def test_another_embedding_model(
    sample_copy: tuple[Path, Path], open_palace: Callable[..., Palace], fake_plugin: object
) -> None:
    palace_dir = sample_copy[0]
    with pytest.raises(EmbedderMismatchError) as caught:
        Palace.open(palace_dir, embedder="fake", plugins=[fake_plugin])
    message = one_line(caught.value)
    assert "palace reindex" in message
    assert "all-MiniLM-L6-v2" in message
    assert "fake/" in message
    # Nothing changed: the palace still opens with its own model.
    palace = open_palace(palace_dir, fake=False)
    assert palace.stats().model == "sentence-transformers/all-MiniLM-L6-v2"
    assert palace.search(QUERY, k=3)


def test_a_text_with_a_lone_surrogate_is_stored_with_a_replacement(fake_palace: Palace) -> None:
    # UTF-8 (and so SQLite) cannot hold a lone surrogate: it becomes U+FFFD, as in mining,
    # instead of a UnicodeEncodeError from deep inside the ledger. (FAKE embedder: the
    # text's meaning does not matter here.)
    palace = fake_palace
    (drawer_id,) = palace.add_texts(["half a pair \ud800 here"])
    (drawer,) = palace.get([drawer_id])
    assert drawer.text == "half a pair \ufffd here"
