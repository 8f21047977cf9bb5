"""The ``files`` source: nested .gitignore files, the size limit, line ranges, encodings.

Pure logic, so the palace runs with the FAKE embedder (``fake_palace``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from palace_plugins.builtin.sources.files import FilesSource
from palace_retrievers import Filter, Palace, SourceError
from palace_retrievers.sources import Skipped, SourceEntry


def write(root: Path, files: dict[str, str | bytes]) -> None:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")


def keys(root: Path, **options: object) -> list[str]:
    return sorted(e.key for e in FilesSource(options).scan(root) if isinstance(e, SourceEntry))


def test_nested_gitignore_files_apply_to_their_own_folder(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            ".gitignore": "*.log\n",
            "app.log": "root log",
            "local.md": "not matched by app/.gitignore's anchored pattern",
            "notes.md": "kept",
            "app/.gitignore": "!keep.log\n/local.md\ncache/\n",
            "app/keep.log": "re-included by a deeper negation",
            "app/other.log": "still ignored by the root",
            "app/local.md": "ignored: anchored to app/",
            "app/deep/local.md": "kept: the anchored pattern is only app/local.md",
            "app/cache/x.md": "ignored folder",
            "app/deep/cache/y.md": "ignored folder at any depth below app/",
            "lib/cache/z.md": "kept: app's rules do not reach lib/",
        },
    )
    assert keys(tmp_path) == [
        "app/deep/local.md",
        "app/keep.log",
        "lib/cache/z.md",
        "local.md",
        "notes.md",
    ]


def test_nothing_comes_back_from_an_ignored_folder(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            ".gitignore": "vendor/\n",
            "vendor/.gitignore": "!*\n",
            "vendor/lib.md": "inside an ignored folder",
            "src/.gitignore": "*.tmp\n!important.tmp\n",
            "src/a.tmp": "ignored",
            "src/important.tmp": "re-included in the same file",
            "src/b.md": "kept",
        },
    )
    assert keys(tmp_path) == ["src/b.md", "src/important.tmp"]


def test_a_deeper_gitignore_can_ignore_what_the_root_keeps(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            ".gitignore": "!*.md\n",
            "docs/.gitignore": "draft-*.md\n",
            "docs/draft-1.md": "ignored",
            "docs/final.md": "kept",
        },
    )
    assert keys(tmp_path) == ["docs/final.md"]


def test_hidden_and_dependency_folders_are_left_out(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            ".git/config": "x",
            ".env": "SECRET=1",
            "node_modules/pkg/readme.md": "x",
            "src/__pycache__/m.md": "x",
            "src/m.py": "print('kept')",
        },
    )
    assert keys(tmp_path) == ["src/m.py"]


def test_size_limit_is_inclusive_and_reported_inside_a_folder(tmp_path: Path) -> None:
    write(tmp_path, {"at-limit.md": "x" * 100, "over.md": "x" * 101, "small.md": "x"})
    source = FilesSource({"max_file_bytes": 100})
    found = {Path(e.location).name: e for e in source.scan(tmp_path)}
    assert set(found) == {"at-limit.md", "over.md", "small.md"}  # scan stays cheap
    at_limit = found["at-limit.md"]
    over = found["over.md"]
    assert isinstance(at_limit, SourceEntry)
    assert isinstance(over, SourceEntry)
    assert at_limit.read().text == "x" * 100
    with pytest.raises(SourceError, match=r"over\.md is 101 bytes, over the 100-byte limit"):
        over.read()


def test_a_file_that_grows_past_the_limit_while_read_is_refused(tmp_path: Path) -> None:
    (tmp_path / "growing.md").write_text("x" * 50)
    source = FilesSource({"max_file_bytes": 100})
    (entry,) = source.scan(tmp_path)
    assert isinstance(entry, SourceEntry)
    (tmp_path / "growing.md").write_text("x" * 500)  # grows after the scan
    with pytest.raises(SourceError, match="limit"):
        entry.read()


def test_size_limit_from_the_palace_config(
    open_palace: Callable[..., Palace], tmp_path: Path
) -> None:
    corpus = tmp_path / "corpus"
    write(corpus, {"big.md": "word " * 100, "small.md": "a short note"})
    palace = open_palace(
        tmp_path / "palace", backend="sqlite", config={"mining": {"max_file_bytes": 200}}
    )
    report = palace.mine(corpus, wing="w")
    assert report.mined == 1
    assert [(Path(s.location).name, "limit" in s.reason) for s in report.skipped] == [
        ("big.md", True)
    ]
    drawers = palace.get(palace.ledger.drawer_ids(Filter(wing="w")))
    assert [d.text for d in drawers] == ["a short note"]


def test_drawers_record_the_line_ranges_of_their_chunks(
    fake_palace: Palace, tmp_path: Path
) -> None:
    corpus = tmp_path / "corpus"
    lines = [f"Line {n}: the quarterly report mentions item number {n}." for n in range(1, 81)]
    write(corpus, {"report.md": "\n".join(lines) + "\n"})
    fake_palace.mine(corpus, wing="w")
    drawers = sorted(
        fake_palace.get(fake_palace.ledger.drawer_ids(Filter(wing="w"))),
        key=lambda d: d.chunk_index,
    )
    assert len(drawers) > 3
    assert drawers[0].line_start == 1
    assert drawers[-1].line_end == 80
    for drawer in drawers:
        assert drawer.line_start is not None
        assert drawer.line_end is not None
        chunk_lines = [line for line in drawer.text.split("\n") if line]
        # Every full line of the chunk is a line of the file within the recorded range.
        inside = lines[drawer.line_start - 1 : drawer.line_end]
        assert all(any(line in full for full in inside) for line in chunk_lines)
        assert drawer.text.rstrip("\n").split("\n")[-1] in inside[-1]


def test_undecodable_bytes_are_replaced(fake_palace: Palace, tmp_path: Path) -> None:
    (tmp_path / "latin1.txt").write_bytes("café crème, déjà vu".encode("latin-1"))
    report = fake_palace.mine(tmp_path / "latin1.txt", wing="w")
    assert report.mined == 1
    (drawer,) = fake_palace.get(fake_palace.ledger.drawer_ids(Filter(wing="w")))
    assert drawer.text == "caf\ufffd cr\ufffdme, d\ufffdj\ufffd vu"


def test_symlinks_are_skipped_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    write(outside, {"secret.md": "outside the root"})
    root = tmp_path / "root"
    write(root, {"a.md": "inside"})
    (root / "link.md").symlink_to(outside / "secret.md")
    (root / "linked-dir").symlink_to(outside, target_is_directory=True)
    found = list(FilesSource({}).scan(root))
    assert [e.key for e in found if isinstance(e, SourceEntry)] == ["a.md"]
    assert [Path(s.location).name for s in found if isinstance(s, Skipped)] == ["link.md"]
