"""Syncing: find the mined sources that are gone from the paths they were mined from.

Every source the miner files records its *root* (the path given to ``palace mine``,
absolute) and the source plugin that read it. :func:`find_gone` lists each root again
with that plugin and compares: a recorded source the plugin no longer lists was deleted
or is now ignored (``.gitignore``), and its drawers are to be removed. What cannot be
checked is kept, with a note saying why: a root that no longer exists (it may be an
unmounted disk) unless the caller named it, a plugin that is not installed, a root the
plugin cannot list, and any source the plugin listed as skipped (unreadable, malformed):
bad input never costs the palace what it already holds.

Sources are compared by the key their plugin lists, whoever owns them (the ledger
records an owner's sources under keys naming the owner, :func:`split_source_key` reads it
back), and each recorded source is checked against the root it was itself mined from: a
file deleted from alice's copy of a tree costs alice her drawers of it, never bob his
drawers of his copy, even when both were filed in one wing under one relative path. A
root mined into a wing beside another has its keys start with its label (see
:mod:`palace_retrievers.ingest.mining`); each owner's records of a root are compared with the
listing under the prefix they carry (:func:`root_prefix`), so a root is checked against
its own sources only, and a sync of one root never removes another's.

A sync may be for one owner (``user_id``, as :meth:`~palace_retrievers.Palace.mine`
takes it: a user, or ``None`` for the unowned sources): it checks only the roots that
owner mined and removes only that owner's sources. By default (:data:`EVERY_OWNER`) it
checks every owner's.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from palace_retrievers.errors import PluginNotFoundError, SourceError
from palace_retrievers.ids import root_prefix, split_source_key
from palace_retrievers.ingest.mining import storable
from palace_retrievers.ledger import Ledger, SourceState
from palace_retrievers.sources import Skipped, Source


class _Owners(enum.Enum):
    EVERY = "every owner"


#: The owner a sync is for when none is named: every one (and the unowned sources).
EVERY_OWNER = _Owners.EVERY
#: Whose sources a sync checks: a user, ``None`` (the unowned ones) or :data:`EVERY_OWNER`.
Owner = str | None | Literal[_Owners.EVERY]


@dataclass(slots=True)
class RootCheck:
    """One mined root, checked again.

    Attributes:
        wing: The wing its sources were filed in.
        root: The path that was mined.
        plugin: The source plugin that mined it.
        sources: Sources recorded from it.
        gone: Recorded keys of the sources no longer there, with their drawer counts
            (an owned source's key names its owner: :func:`split_source_key`).
        note: Why (some of) it was kept without being checked, if it was.
    """

    wing: str
    root: str
    plugin: str
    sources: int
    gone: dict[str, int] = field(default_factory=dict)
    note: str | None = None


@dataclass(slots=True)
class SyncReport:
    """What a sync found (and, unless ``dry_run``, removed)."""

    path: str | None
    dry_run: bool = False
    roots: list[RootCheck] = field(default_factory=list)
    drawers_removed: int = 0

    @property
    def sources_removed(self) -> int:
        """Sources gone (removed, or to be removed in a dry run)."""
        return sum(len(r.gone) for r in self.roots)


def _within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _prefixes(root: str, recorded: dict[str, SourceState]) -> dict[str | None, str]:
    """The prefix of each owner's keys recorded from ``root`` (``None``: unowned)."""
    keys: dict[str | None, list[str]] = {}
    for key in recorded:
        owner, bare = split_source_key(key)
        keys.setdefault(owner, []).append(bare)
    return {owner: root_prefix(root, bare) for owner, bare in keys.items()}


def find_gone(
    ledger: Ledger,
    target: Path | None,
    *,
    source: Callable[[str], Source],
    dry_run: bool = False,
    user_id: Owner = EVERY_OWNER,
) -> SyncReport:
    """Check every mined root at, under or above ``target`` (all when ``None``).

    Args:
        ledger: Where the sources and their roots are recorded.
        target: An absolute, resolved path, or ``None``.
        source: Makes the source plugin of a given name.
        dry_run: Recorded on the report; nothing is removed here in any case.
        user_id: Only the roots this owner mined, and only their sources (``None``: the
            unowned ones); :data:`EVERY_OWNER` by default.
    """
    report = SyncReport(path=None if target is None else str(target), dry_run=dry_run)
    states: dict[str, dict[str, SourceState]] = {}
    for mined in ledger.mined_roots():
        root = Path(mined.root)
        if target is not None and not (_within(root, target) or _within(target, root)):
            continue
        if mined.wing not in states:
            states[mined.wing] = {
                key: state
                for key, state in ledger.source_states(mined.wing).items()
                if user_id is EVERY_OWNER or split_source_key(key)[0] == (user_id or None)
            }
        recorded = {k: s for k, s in states[mined.wing].items() if s.root == mined.root}
        if not recorded:
            continue  # none of the owner's sources came from this root
        count = mined.sources if user_id is EVERY_OWNER else len(recorded)
        check = RootCheck(mined.wing, mined.root, mined.plugin, count)
        report.roots.append(check)
        named = target is not None and _within(root, target)
        listed: set[str] = set()
        skipped: set[str] = set()
        if not os.path.lexists(root):
            if not named:
                check.note = (
                    f"{root} no longer exists; its drawers are kept "
                    f"(`palace sync {root}` removes them)"
                )
                continue
        else:
            try:
                for entry in source(mined.plugin).scan(root):
                    if isinstance(entry, Skipped):
                        skipped.add(storable(entry.location))
                    else:
                        listed.add(storable(entry.key))  # as the miner read it
            except (PluginNotFoundError, SourceError) as exc:
                check.note = f"not checked, its drawers are kept: {exc}"
                continue
        prefixes = _prefixes(mined.root, recorded)
        for key, state in sorted(recorded.items()):
            if state.location in skipped:
                continue
            owner, bare = split_source_key(key)
            prefix = prefixes[owner]
            if bare.startswith(prefix) and bare[len(prefix) :] in listed:
                continue
            if not named and target is not None and not _within(Path(state.location), target):
                continue  # outside the folder asked about
            check.gone[key] = state.drawer_count
    if dry_run:
        report.drawers_removed = sum(sum(r.gone.values()) for r in report.roots)
    return report
