"""Small trees of notes on disk, for tests that mine, re-mine or sync a folder."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path


def write_tree(root: Path, notes: Mapping[str, str]) -> Path:
    """Write each note under ``root``, making its folders.

    Args:
        root: The tree's folder (made if missing).
        notes: Each file's path relative to ``root`` (``"alpha/one.md"``) -> its text.

    Returns:
        ``root``, so that a test can write and name a tree in one line.
    """
    for name, text in notes.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root
