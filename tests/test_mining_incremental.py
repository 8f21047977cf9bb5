"""A second mine of an unchanged tree embeds nothing, reads no file and writes nothing;
a touched but unchanged file is read, not embedded. (How long that takes is measured by
``benchmarks/mine.py``, not asserted here.)"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from fakes import HashingEmbedder

from palace_retrievers import Palace
from palace_retrievers.embedder import Vectors


class CountingEmbedder(HashingEmbedder):
    """The FAKE embedder, counting the texts it is asked to embed."""

    def __init__(self) -> None:
        self.calls = 0
        self.texts = 0

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        self.calls += 1
        self.texts += len(texts)
        return super().embed_documents(texts)


def write_tree(root: Path, files: int) -> None:
    for n in range(files):
        path = root / f"part{n % 5}" / f"note{n:03d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            f"# Note {n}\n\n" + f"Line {n} about the harbour lantern and its keeper.\n" * 30
        )


@pytest.fixture
def mined(
    open_palace: Callable[..., Palace], tmp_path: Path
) -> tuple[Palace, CountingEmbedder, Path]:
    tree = tmp_path / "tree"
    write_tree(tree, 120)
    embedder = CountingEmbedder()
    palace = open_palace(tmp_path / "palace", fake=False, embedder=embedder, backend="sqlite")
    report = palace.mine(tree, wing="tree", progress=False)
    assert report.mined == 120
    assert embedder.texts >= report.drawers_added > 120  # drawers (and closets) embedded
    return palace, embedder, tree


def test_a_second_mine_of_an_unchanged_tree_does_nothing(
    mined: tuple[Palace, CountingEmbedder, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    palace, embedder, tree = mined
    calls, generation = embedder.calls, palace.ledger.generation()
    opened: list[Path] = []
    real_open = Path.open

    def watching_open(self: Path, *args: object, **kwargs: object) -> object:
        if self.suffix == ".md":
            opened.append(self)
        return real_open(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "open", watching_open)
    report = palace.mine(tree, wing="tree", progress=False)
    assert (report.seen, report.unchanged, report.mined, report.drawers_added) == (120, 120, 0, 0)
    assert embedder.calls == calls  # no embedding at all
    assert opened == []  # no file read
    assert palace.ledger.generation() == generation  # no drawer or closet written


def test_a_touched_file_is_read_but_not_embedded(
    mined: tuple[Palace, CountingEmbedder, Path],
) -> None:
    palace, embedder, tree = mined
    touched = tree / "part3" / "note003.md"
    os.utime(touched, (touched.stat().st_mtime + 60,) * 2)
    texts = embedder.texts
    report = palace.mine(tree, wing="tree", progress=False)
    assert (report.unchanged, report.mined) == (120, 0)
    assert embedder.texts == texts
    state = palace.ledger.source_state("tree", "part3/note003.md")
    assert state is not None
    assert state.mtime == touched.stat().st_mtime  # recorded, so the next mine skips it unread


def test_only_what_changed_is_embedded(mined: tuple[Palace, CountingEmbedder, Path]) -> None:
    palace, embedder, tree = mined
    changed = tree / "part1" / "note001.md"
    changed.write_text("# Note 1\n\nA single new line about the copper kettle.\n")
    os.utime(changed, (changed.stat().st_mtime + 60,) * 2)
    texts = embedder.texts
    report = palace.mine(tree, wing="tree", progress=False)
    assert (report.mined, report.drawers_added) == (1, 1)
    assert embedder.texts - texts <= 2  # its one drawer (and its closet)
    assert report.drawers_removed > 0
