"""Real palaces (Chroma and SQLite) in temporary directories.

Most tests embed with :class:`HashEmbedder`, a small deterministic palace embedder
(texts sharing words lie close together); the query-engine tests use the palace's
default model (MiniLM), loaded once per session.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest
from palace_retrievers import Palace
from palace_retrievers.embedder import Embedder, Vectors


class HashEmbedder(Embedder):
    """Bag of words hashed onto 64 axes."""

    @property
    def model_name(self) -> str:
        return "test/words-64"

    @property
    def dimension(self) -> int:
        return 64

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        out = np.zeros((len(texts), 64), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().replace(".", " ").replace("?", " ").split():
                out[row, hashlib.sha256(word.encode()).digest()[0] % 64] += 1.0
        out[:, 0] += 1e-3
        return out


@pytest.fixture
def palace(tmp_path: Path) -> Iterator[Palace]:
    with Palace.open(tmp_path / "palace", embedder=HashEmbedder()) as palace:
        yield palace


@pytest.fixture(scope="session")
def minilm_palace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Palace]:
    """An empty palace with the default model, shared by the slow tests."""
    with Palace.open(tmp_path_factory.mktemp("minilm") / "palace") as palace:
        yield palace
