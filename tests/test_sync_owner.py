"""A sync for one owner (``Palace.sync(user_id=...)``, ``palace sync --user``) checks only
the roots that owner mined and never removes another owner's drawers, even of a tree
both mined; ``user_id=None`` is the unowned sources, as for ``mine``; left out, a sync
checks every owner's, as before.

Real SQLite ledger and exact backend; the FAKE embedder (this is bookkeeping, not
meaning).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from fakes import FAKE_PLUGIN
from helpers_tree import write_tree

from palace_plugins import manager
from palace_retrievers import Palace
from palace_retrievers.cli import cli
from palace_retrievers.errors import InvalidQueryError
from palace_retrievers.ledger.sqlite import LEDGER_FILE

WING = "notes"
SHARED = "shared"  # another wing: one owner's two folders of one layout in one wing clash
NOTES = {
    "alpha/one.md": "# One\n\nThe harbour lantern burns amber every night.\n",
    "alpha/two.md": "# Two\n\nA kettle of lapsang tea waits by the window.\n",
    "beta/three.md": "# Three\n\nThe orchard ladder leans on the old pear tree.\n",
}
OWNERS = ("alice", "bob", None)


def drawers(palace_dir: Path, wing: str = WING) -> dict[str | None, set[str]]:
    """Each owner's drawer texts in the wing, read from the ledger itself."""
    with sqlite3.connect(palace_dir / LEDGER_FILE) as db:
        rows = db.execute("SELECT user_id, text FROM drawers WHERE wing = ?", (wing,)).fetchall()
    out: dict[str | None, set[str]] = {owner: set() for owner in OWNERS}
    for owner, text in rows:
        out[owner or None].add(text)
    return out


def lantern(texts: set[str]) -> bool:
    return any("harbour lantern" in t for t in texts)


@pytest.fixture
def palace(open_palace: Callable[..., Palace], tmp_path: Path) -> Palace:
    return open_palace(tmp_path / "palace", backend="sqlite")


def test_a_sync_for_one_owner_removes_only_that_owners_drawers(
    palace: Palace, tmp_path: Path
) -> None:
    trees = {owner: write_tree(tmp_path / (owner or "unowned"), NOTES) for owner in OWNERS}
    shared = write_tree(tmp_path / "shared", NOTES)  # alice and bob both mined this one
    for owner, tree in trees.items():
        palace.mine(tree, wing=WING, user_id=owner)
    for owner in ("alice", "bob"):
        palace.mine(shared, wing=SHARED, user_id=owner)
    for tree in (*trees.values(), shared):
        (tree / "alpha/one.md").unlink()

    dry = palace.sync(dry_run=True, user_id="alice")
    assert dry.sources_removed == 2  # her own tree's note and the shared tree's
    assert {r.root for r in dry.roots} == {str(trees["alice"]), str(shared)}

    report = palace.sync(user_id="alice")
    assert report.sources_removed == 2
    after, both = drawers(palace.path), drawers(palace.path, SHARED)
    assert not lantern(after["alice"])
    assert not lantern(both["alice"])
    assert lantern(after["bob"])
    assert lantern(after[None])
    assert lantern(both["bob"])  # bob's drawers of the tree both mined stay

    report = palace.sync(user_id=None)  # the unowned sources, as `mine` means None
    assert report.sources_removed == 1
    assert {r.root for r in report.roots} == {str(trees[None])}
    after = drawers(palace.path)
    assert not lantern(after[None])
    assert lantern(after["bob"])

    assert palace.sync(shared, user_id="bob").sources_removed == 1  # a path and an owner
    assert not lantern(drawers(palace.path, SHARED)["bob"])
    assert lantern(drawers(palace.path)["bob"])  # his own tree is not under that path
    assert palace.sync(user_id="carol").roots == []  # mined nothing: nothing checked
    assert palace.sync().sources_removed == 1  # every owner: bob's own tree is left
    assert not any(lantern(texts) for texts in drawers(palace.path).values())


def test_a_bad_owner_is_refused(palace: Palace) -> None:
    with pytest.raises(InvalidQueryError, match="user_id"):
        palace.sync(user_id=5)  # type: ignore[arg-type]


@pytest.fixture
def fake_cli(monkeypatch: pytest.MonkeyPatch) -> None:
    """The command line's palaces get the FAKE embedder too."""
    original = manager.PluginManager.__init__

    def init(self: manager.PluginManager, **kwargs: Any) -> None:
        kwargs["plugins"] = [FAKE_PLUGIN, *kwargs.get("plugins", ())]
        original(self, **kwargs)

    monkeypatch.setattr(manager.PluginManager, "__init__", init)


def test_palace_sync_user(palace: Palace, tmp_path: Path, fake_cli: None) -> None:
    trees = {owner: write_tree(tmp_path / (owner or "unowned"), NOTES) for owner in OWNERS}
    for owner, tree in trees.items():
        palace.mine(tree, wing=WING, user_id=owner)
        (tree / "alpha/one.md").unlink()
    palace.close()

    def sync(*args: str) -> dict[str, Any]:
        result = CliRunner().invoke(cli, ["--palace", str(palace.path), "sync", *args, "--json"])
        assert result.exit_code == 0, result.output
        report: dict[str, Any] = json.loads(result.output)
        return report

    assert sync("--user", "bob")["sources_removed"] == 1
    after = drawers(palace.path)
    assert not lantern(after["bob"])
    assert lantern(after["alice"])
    assert lantern(after[None])
    assert sync()["sources_removed"] == 2  # no --user: every owner's, as before
    assert not any(lantern(texts) for texts in drawers(palace.path).values())
