"""Mining bookkeeping, with the FAKE embedder: wings, rooms, owners, ids, batches, progress.

What is tested here is which drawers get filed, replaced or left alone, not how well
they are found, so the fast fake embedder stands in for the model.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from sample_corpus import SAMPLE_CORPUS

from palace_retrievers import Palace
from palace_retrievers.records import Filter


def notes(root: Path) -> Path:
    (root / "ops").mkdir(parents=True)
    (root / "ops" / "deploy.md").write_text("# Deploy\n\nBlue/green switch on lk-prod.\n")
    (root / "pets.txt").write_text("Alice adopted a grey cat called Miso.\n")
    return root


def bump_mtime(path: Path, seconds: int = 60) -> None:
    mtime = path.stat().st_mtime + seconds
    os.utime(path, (mtime, mtime))


def test_wing_defaults_to_the_folder_name_and_rooms_to_subfolders(
    fake_palace: Palace, tmp_path: Path
) -> None:
    report = fake_palace.mine(notes(tmp_path / "my-notes"))
    assert report.wing == "my-notes"
    assert (report.seen, report.mined, report.drawers_added) == (2, 2, 2)
    rooms = {
        d.source.rsplit("/", 1)[1]: d.room for d in fake_palace.get(fake_palace.ledger.drawer_ids())
    }
    assert rooms == {"deploy.md": "ops", "pets.txt": "general"}


def test_room_and_owner_overrides(fake_palace: Palace, tmp_path: Path) -> None:
    fake_palace.mine(notes(tmp_path / "n"), wing="w", room="inbox", user_id="u1")
    assert fake_palace.search("Alice cat", k=5) == []  # owned by u1, not unowned
    hits = fake_palace.search("Alice cat", k=5, user_id="u1")
    assert {h.room for h in hits} == {"inbox"}
    assert {h.drawer.user_id for h in hits} == {"u1"}
    assert fake_palace.search("Alice cat", k=5, user_id="u1", room="ops") == []


def test_ids_do_not_depend_on_where_the_corpus_lies(
    open_palace: Callable[..., Palace], tmp_path: Path
) -> None:
    first = open_palace(tmp_path / "p1", backend="sqlite")
    second = open_palace(tmp_path / "p2", backend="sqlite")
    first.mine(notes(tmp_path / "a" / "notes"), wing="w")
    shutil.copytree(tmp_path / "a" / "notes", tmp_path / "b" / "elsewhere")
    second.mine(tmp_path / "b" / "elsewhere", wing="w")
    assert sorted(first.ledger.drawer_ids()) == sorted(second.ledger.drawer_ids())


def test_the_same_files_in_two_wings_are_two_sets_of_drawers(
    fake_palace: Palace, tmp_path: Path
) -> None:
    corpus = notes(tmp_path / "n")
    fake_palace.mine(corpus, wing="one")
    fake_palace.mine(corpus, wing="two")
    one = set(fake_palace.ledger.drawer_ids(Filter(wing="one")))
    two = set(fake_palace.ledger.drawer_ids(Filter(wing="two")))
    assert len(one) == len(two) == 2
    assert not one & two
    assert fake_palace.stats().ledger.sources == 4


def test_batches_smaller_than_the_corpus(
    open_palace: Callable[..., Palace], tmp_path: Path
) -> None:
    corpus = tmp_path / "many"
    corpus.mkdir()
    for i in range(23):
        (corpus / f"note{i:02d}.txt").write_text(f"note number {i} about topic {i % 4}\n")
    palace = open_palace(tmp_path / "p", backend="chroma", config={"mining": {"batch_size": 4}})
    report = palace.mine(corpus)
    assert (report.mined, report.drawers_added) == (23, 23)
    status = {s.collection: s for s in palace.stats().indexes}["drawers"]
    assert status.ok
    assert status.count == status.ledger_count == 23
    assert palace.mine(corpus).unchanged == 23


def test_the_sample_corpus_with_small_chunks(
    open_palace: Callable[..., Palace], tmp_path: Path
) -> None:
    palace = open_palace(
        tmp_path / "p", backend="sqlite", config={"chunking": {"size": 300, "overlap": 40}}
    )
    report = palace.mine(SAMPLE_CORPUS, wing="larkspur")
    assert report.mined == report.seen == 15
    drawers = palace.get(palace.ledger.drawer_ids())
    assert all(len(d.text) <= 300 for d in drawers)
    for drawer in drawers:
        source = Path(drawer.source).read_text(encoding="utf-8")
        assert drawer.text in source  # verbatim
        assert drawer.line_start is not None
        assert drawer.line_end is not None
        lines = source.splitlines(keepends=True)
        assert drawer.text.rstrip("\n") in "".join(lines[drawer.line_start - 1 : drawer.line_end])


def test_a_file_emptied_loses_its_drawers(fake_palace: Palace, tmp_path: Path) -> None:
    corpus = notes(tmp_path / "n")
    fake_palace.mine(corpus, wing="w")
    pets = corpus / "pets.txt"
    pets.write_text("   \n\n")
    bump_mtime(pets)
    report = fake_palace.mine(corpus, wing="w")
    assert (report.mined, report.drawers_added, report.drawers_removed) == (1, 0, 1)
    assert [h.source.endswith("pets.txt") for h in fake_palace.search("Alice cat", k=5)] == [False]


def test_a_changed_file_keeps_the_ids_of_unchanged_chunks(
    fake_palace: Palace, tmp_path: Path
) -> None:
    corpus = tmp_path / "n"
    corpus.mkdir()
    paragraphs = [f"Paragraph {i}. " + "words " * 120 + "\n\n" for i in range(6)]
    doc = corpus / "long.md"
    doc.write_text("".join(paragraphs))
    fake_palace.mine(corpus, wing="w")
    before = set(fake_palace.ledger.drawer_ids())
    doc.write_text("".join(paragraphs[:-1]) + "Paragraph 5 was rewritten.\n")
    bump_mtime(doc)
    report = fake_palace.mine(corpus, wing="w")
    after = set(fake_palace.ledger.drawer_ids())
    assert report.drawers_removed == len(before - after) > 0
    assert before & after  # the untouched beginning keeps its ids


def test_progress_bar_is_quiet_off_a_terminal(
    fake_palace: Palace, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    fake_palace.mine(notes(tmp_path / "n"))
    assert capfd.readouterr().err == ""
    fake_palace.mine(notes(tmp_path / "m"), progress=True)
    assert "mining m" in capfd.readouterr().err


def test_a_single_file(fake_palace: Palace, tmp_path: Path) -> None:
    corpus = notes(tmp_path / "n")
    report = fake_palace.mine(corpus / "pets.txt", wing="w")
    assert (report.seen, report.mined) == (1, 1)
    (hit,) = fake_palace.search("Alice cat", k=1, wing="w")
    assert hit.room == "general"
    assert hit.source == str((corpus / "pets.txt").resolve())
