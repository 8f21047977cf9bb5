"""The palace hands its own settings to the sources that ask for them (fake embedder)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from palace_retrievers import Palace, SourceError


def _transcript(tmp_path: Path) -> Path:
    reply = " ".join(f"Step {i}: check the sync queue and the retry budget." for i in range(40))
    path = tmp_path / "chat.txt"
    path.write_text(f"User: how do I debug sync?\nAssistant: {reply}\n", encoding="utf-8")
    return path


def test_chunk_size_reaches_conversation_sources(
    open_palace: Callable[..., Palace], tmp_path: Path
) -> None:
    chat = _transcript(tmp_path)
    default = open_palace(tmp_path / "a", backend="sqlite")
    small = open_palace(
        tmp_path / "b", backend="sqlite", config={"chunking": {"size": 300, "overlap": 30}}
    )
    default.mine(chat, source="text", wing="w")
    small.mine(chat, source="text", wing="w")
    big = [d for batch in default.ledger.iter_drawers() for d in batch]
    cut = [d for batch in small.ledger.iter_drawers() for d in batch]
    assert len(cut) > len(big)
    assert max(len(d.text) for d in cut) <= 300 < max(len(d.text) for d in big)


def test_max_file_bytes_reaches_the_files_source(
    open_palace: Callable[..., Palace], tmp_path: Path
) -> None:
    chat = _transcript(tmp_path)
    palace = open_palace(
        tmp_path / "p", backend="sqlite", config={"mining": {"max_file_bytes": 100}}
    )
    with pytest.raises(SourceError, match="limit"):
        palace.mine(chat, source="files", wing="w")
