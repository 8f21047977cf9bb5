"""``palace sync``: the drawers of deleted or newly ignored files go, and nothing else.

FAKE embedder throughout (this is bookkeeping); the exact ``sqlite`` backend, and Chroma
where the vector index itself must lose the entries.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from palace_retrievers import Palace
from palace_retrievers.ledger.sqlite import LEDGER_FILE

DRIVER = Path(__file__).resolve().parent / "palace_driver.py"


def write_tree(root: Path) -> Path:
    """Six notes in three folders, each with a word of its own (``<name>word``)."""
    for folder in ("alpha", "beta", "gamma"):
        for n in (1, 2):
            path = root / folder / f"{folder}{n}.md"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(
                f"# {folder} {n}\n\nThe {folder}{n}word note keeps a lantern by the harbour.\n",
                encoding="utf-8",
            )
    return root


def keys(palace: Palace, wing: str = "notes") -> set[str]:
    """The sources of ``wing`` that have drawers."""
    db = sqlite3.connect(palace.path / LEDGER_FILE)
    try:
        rows = db.execute("SELECT DISTINCT source_key FROM drawers WHERE wing = ?", (wing,))
        return {r[0] for r in rows}
    finally:
        db.close()


def consistent(palace: Palace) -> None:
    """Index counts match the ledger, no closet points nowhere, no journal is left."""
    for status in palace.stats().indexes:
        assert status.ok, status
        assert status.count == status.ledger_count, status
    db = sqlite3.connect(palace.path / LEDGER_FILE)
    try:
        assert db.execute("SELECT count(*) FROM index_pending").fetchone() == (0,)
        orphans = db.execute(
            "SELECT count(*) FROM closets c WHERE NOT EXISTS "
            "(SELECT 1 FROM closet_drawers l WHERE l.closet_id = c.id)"
        ).fetchone()
        assert orphans == (0,)
    finally:
        db.close()


@pytest.fixture
def mined(open_palace: Callable[..., Palace], tmp_path: Path) -> tuple[Palace, Path]:
    tree = write_tree(tmp_path / "notes")
    palace = open_palace(tmp_path / "palace", backend="chroma")
    report = palace.mine(tree, wing="notes", progress=False)
    assert report.mined == 6
    return palace, tree


def test_deleted_files_lose_their_drawers(mined: tuple[Palace, Path]) -> None:
    palace, tree = mined
    (tree / "alpha" / "alpha1.md").unlink()
    shutil.rmtree(tree / "gamma")
    before = palace.stats().ledger
    report = palace.sync()
    assert report.sources_removed == 3
    assert report.drawers_removed == before.drawers - palace.stats().ledger.drawers > 0
    assert [r.root for r in report.roots] == [str(tree.resolve())]
    assert keys(palace) == {"alpha/alpha2.md", "beta/beta1.md", "beta/beta2.md"}
    assert all("gamma" not in h.source for h in palace.search("gamma1word", k=5))
    consistent(palace)
    assert palace.sync().sources_removed == 0  # nothing more to do


def test_newly_ignored_files_go_too(mined: tuple[Palace, Path]) -> None:
    palace, tree = mined
    (tree / ".gitignore").write_text("beta/\nalpha2.md\n", encoding="utf-8")
    assert palace.sync().sources_removed == 3
    assert keys(palace) == {"alpha/alpha1.md", "gamma/gamma1.md", "gamma/gamma2.md"}
    consistent(palace)


def test_a_dry_run_removes_nothing(mined: tuple[Palace, Path]) -> None:
    palace, tree = mined
    (tree / "beta" / "beta1.md").unlink()
    drawers = palace.stats().ledger.drawers
    report = palace.sync(dry_run=True)
    assert (report.dry_run, report.sources_removed) == (True, 1)
    assert report.drawers_removed > 0
    assert palace.stats().ledger.drawers == drawers
    assert palace.sync().drawers_removed == report.drawers_removed


def test_a_path_limits_what_is_checked(mined: tuple[Palace, Path], tmp_path: Path) -> None:
    palace, tree = mined
    other = write_tree(tmp_path / "other")
    palace.mine(other, wing="other", progress=False)
    for root in (tree, other):
        (root / "alpha" / "alpha1.md").unlink()
        (root / "beta" / "beta1.md").unlink()

    report = palace.sync(tree / "alpha")  # a folder inside a mined root
    assert report.sources_removed == 1
    assert "alpha/alpha1.md" not in keys(palace)
    assert "beta/beta1.md" in keys(palace)

    report = palace.sync(other)  # one whole root
    assert [(r.wing, sorted(r.gone)) for r in report.roots] == [
        ("other", ["alpha/alpha1.md", "beta/beta1.md"])
    ]
    assert "alpha/alpha1.md" not in keys(palace, "other")
    assert "beta/beta1.md" in keys(palace)  # the first tree was not asked about
    assert palace.sync().sources_removed == 1  # what is left: beta1 of the first tree
    consistent(palace)


def test_a_root_that_vanished_is_kept_unless_named(mined: tuple[Palace, Path]) -> None:
    palace, tree = mined
    drawers = palace.stats().ledger.drawers
    shutil.rmtree(tree)
    report = palace.sync()
    assert report.sources_removed == 0
    (root,) = report.roots
    assert "no longer exists" in (root.note or "")
    assert palace.stats().ledger.drawers == drawers

    report = palace.sync(tree)
    assert report.sources_removed == 6
    assert palace.stats().ledger.drawers == 0
    consistent(palace)


def test_what_cannot_be_checked_is_kept(mined: tuple[Palace, Path]) -> None:
    palace, tree = mined
    # A mined file replaced by a symlink: the source lists it as skipped, not as gone.
    target = tree / "alpha" / "alpha1.md"
    target.rename(tree / "alpha1.bak")
    target.symlink_to(tree / "alpha1.bak")
    assert palace.sync().sources_removed == 0

    # A root mined with a plugin that is no longer installed.
    with sqlite3.connect(palace.path / LEDGER_FILE) as db:
        db.execute("UPDATE sources SET plugin = 'gone-plugin'")
    shutil.rmtree(tree / "beta")
    report = palace.sync()
    assert report.sources_removed == 0
    assert "gone-plugin" in (report.roots[0].note or "")
    assert len(keys(palace)) == 6


def test_texts_added_directly_are_never_synced_away(mined: tuple[Palace, Path]) -> None:
    palace, tree = mined
    palace.add_texts(["a note with no file behind it"], ids=["loose"])
    shutil.rmtree(tree / "alpha")
    palace.sync()
    assert [d.id for d in palace.get(["loose"])] == ["loose"]


def test_a_mine_tells_of_sources_gone(mined: tuple[Palace, Path]) -> None:
    palace, tree = mined
    (tree / "beta" / "beta2.md").unlink()
    report = palace.mine(tree, wing="notes", progress=False)
    assert (report.unchanged, report.gone) == (5, 1)
    assert "beta/beta2.md" in keys(palace)  # mining never deletes; sync does


def test_the_cli(tmp_path: Path) -> None:
    tree = write_tree(tmp_path / "notes")
    palace = tmp_path / "palace"

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(DRIVER), "cli", "--palace", str(palace), *args],
            capture_output=True,
            text=True,
            env={
                **os.environ,
                "ANONYMIZED_TELEMETRY": "False",
                "PALACE_EMBEDDER": "fake",
                "PALACE_BACKEND": "sqlite",
            },
            timeout=120,
        )

    assert cli("mine", str(tree)).returncode == 0
    (tree / "gamma" / "gamma1.md").unlink()
    mined = cli("mine", str(tree))
    assert "1 sources mined from" in mined.stdout
    assert "`palace sync` removes their drawers" in mined.stdout
    dry = cli("sync", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.startswith("would remove 1 drawers of 1 sources no longer found")
    done = cli("sync", str(tree))
    assert done.stdout.startswith("removed 1 drawers of 1 sources no longer found")
    assert "removed notes: gamma/gamma1.md" in done.stdout
    assert cli("sync").stdout.startswith("removed 0 drawers of 0 sources")
    # An owner's source is told by its own key and its owner (not the key it is recorded
    # under, which names the owner).
    assert cli("mine", "--user", "alice", str(tree)).returncode == 0
    (tree / "beta" / "beta1.md").unlink()
    done = cli("sync", str(tree))
    assert "removed notes: beta/beta1.md (user alice)" in done.stdout, done.stdout
    assert "\x1e" not in done.stdout
