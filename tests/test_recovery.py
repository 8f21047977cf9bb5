"""The ledger is the system of record: a lost or corrupt index, or another embedding
model, is repaired by ``reindex`` and nothing is lost in between."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from palace_retrievers import EmbedderMismatchError, Hit, Palace

pytestmark = pytest.mark.slow

QUERY = "who owns the iOS release?"


def top_sources(hits: list[Hit]) -> list[str]:
    """The sources of the drawer hits (a memory mined from the corpus may share the list)."""
    return [h.source.split("corpus/", 1)[1] for h in hits if not h.is_memory]


def vectors(palace: Palace) -> int:
    """Vectors the ledger holds over every collection (drawers and closets)."""
    return sum(s.ledger_count for s in palace.stats().indexes)


def drawers_status(palace: Palace) -> tuple[bool, int | None, int, str]:
    status = {s.collection: s for s in palace.stats().indexes}["drawers"]
    return status.ok, status.count, status.ledger_count, status.detail


def corrupt(palace_dir: Path) -> None:
    target = palace_dir / "index" / "chroma" / "chroma.sqlite3"
    assert target.exists()
    target.write_bytes(b"this is not a sqlite database, it is garbage " * 2000)
    for extra in ("chroma.sqlite3-wal", "chroma.sqlite3-shm"):
        (target.parent / extra).unlink(missing_ok=True)


def remove(palace_dir: Path) -> None:
    shutil.rmtree(palace_dir / "index" / "chroma")


@pytest.mark.parametrize("damage", [corrupt, remove], ids=["corrupt", "missing"])
def test_a_damaged_chroma_index_degrades_then_reindex_restores_it(
    sample_copy: tuple[Path, Path],
    open_palace: Callable[..., Palace],
    damage: Callable[[Path], None],
    caplog: pytest.LogCaptureFixture,
) -> None:
    palace_dir, _ = sample_copy
    palace = open_palace(palace_dir, fake=False)
    expected = [h.id for h in palace.search(QUERY, k=5)]
    drawers = palace.stats().ledger.drawers
    palace.close()

    damage(palace_dir)

    palace = open_palace(palace_dir, fake=False)  # opens: the ledger holds everything
    ok, _, ledger_count, detail = drawers_status(palace)
    assert not ok
    assert detail
    assert ledger_count == drawers
    assert "palace reindex" in caplog.text
    hits = palace.search(QUERY, k=5)  # answered by the exact scan over the ledger
    assert "docs/onboarding.md" in top_sources(hits)[:3]
    assert [h.id for h in hits] == expected

    # Writes while degraded reach the ledger and are found.
    palace.add_texts(["The greenhouse thermostat is set to 21 degrees."], ids=["thermostat"])
    assert palace.search("what is the greenhouse thermostat set to?", k=1)[0].id == "thermostat"

    assert palace.reindex() == vectors(palace)
    assert drawers_status(palace)[:3] == (True, drawers + 1, drawers + 1)
    assert [h.id for h in palace.search(QUERY, k=5)] == expected
    palace.close()

    again = open_palace(palace_dir, fake=False)
    assert drawers_status(again)[:3] == (True, drawers + 1, drawers + 1)
    assert [h.id for h in again.search(QUERY, k=5)] == expected
    assert again.search("what is the greenhouse thermostat set to?", k=1)[0].id == "thermostat"


def test_chroma_removed_while_the_palace_is_open(
    sample_copy: tuple[Path, Path], open_palace: Callable[..., Palace]
) -> None:
    palace_dir, _ = sample_copy
    palace = open_palace(palace_dir, fake=False)
    expected = [h.id for h in palace.search(QUERY, k=5)]
    remove(palace_dir)
    drawers = palace.stats().ledger.drawers
    assert palace.reindex() == vectors(palace)
    assert drawers_status(palace)[:3] == (True, drawers, drawers)
    assert [h.id for h in palace.search(QUERY, k=5)] == expected


def test_another_embedding_model_then_reindex(
    sample_copy: tuple[Path, Path], open_palace: Callable[..., Palace], fake_plugin: object
) -> None:
    """The FAKE embedder plays "another model" here; the palace was built with MiniLM."""
    palace_dir, _ = sample_copy
    with pytest.raises(EmbedderMismatchError, match="palace reindex"):
        Palace.open(palace_dir, embedder="fake", plugins=[fake_plugin])

    # What `palace reindex` does: open without the check, re-embed, rebuild the index.
    palace = open_palace(palace_dir, check_model=False)
    drawers = palace.stats().ledger.drawers
    assert palace.reindex() == vectors(palace)
    stats = palace.stats()
    assert stats.model == "fake/hashing-bag-of-words-64"
    assert stats.dimension == 64
    assert drawers_status(palace)[:3] == (True, drawers, drawers)
    assert palace.search("Bashir Rahimi owns the iOS release", k=3)
    palace.close()

    again = open_palace(palace_dir)  # the fake model is now the palace's own
    assert again.stats().ledger.drawers == drawers
    assert again.search("Bashir Rahimi iOS release", k=1)
    again.close()
    # ... and the original model is now the other one.
    with pytest.raises(EmbedderMismatchError, match="palace reindex"):
        Palace.open(palace_dir)


def test_reindex_of_a_healthy_palace_changes_nothing(sample_palace: Palace) -> None:
    expected = [h.id for h in sample_palace.search(QUERY, k=5)]
    assert sample_palace.reindex() == vectors(sample_palace)
    assert all(s.ok for s in sample_palace.stats().indexes)
    assert [h.id for h in sample_palace.search(QUERY, k=5)] == expected
    assert sample_palace.stats().model == "sentence-transformers/all-MiniLM-L6-v2"
