"""Real palaces (Chroma and SQLite) in temporary directories.

``corpus_palace`` embeds with the palace's default model (MiniLM, loaded once per
session); ``WordEmbeddings`` is a small deterministic LangChain embedding for the tests
that only need vectors that behave (texts sharing words lie close together).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.embeddings import Embeddings
from palace_retrievers import Palace

#: (id, text, wing, room, user_id, content_date)
CORPUS = [
    (
        "db",
        "We moved the main database to PostgreSQL 15 in March.",
        "work",
        "decisions",
        None,
        "2026-03-02",
    ),
    (
        "deploy",
        "Deploys go out with a blue/green switch on the lk-prod-blue cluster.",
        "work",
        "ops",
        None,
        "2026-02-10",
    ),
    (
        "oncall",
        "The on-call rota changes every Monday at 09:00.",
        "work",
        "ops",
        None,
        "2026-01-05",
    ),
    (
        "cache",
        "Redis caches the session tokens for twelve hours.",
        "work",
        "decisions",
        None,
        "2025-11-20",
    ),
    ("cat", "Alice adopted a grey cat called Miso in May.", "home", "pets", None, "2025-05-14"),
    (
        "garden",
        "The tomatoes in the garden need water every evening.",
        "home",
        "garden",
        None,
        "2025-07-01",
    ),
    (
        "u1-db",
        "I prefer SQLite for small tools because it needs no server.",
        "me",
        "opinions",
        "u1",
        "2026-01-15",
    ),
    (
        "u2-db",
        "My team runs MySQL 8 for the billing service.",
        "me",
        "opinions",
        "u2",
        "2026-01-16",
    ),
]


def fill(palace: Palace) -> None:
    for drawer_id, text, wing, room, user_id, date in CORPUS:
        palace.add_texts(
            [text],
            metadatas=[{"content_date": date, "topic": room}],
            ids=[drawer_id],
            wing=wing,
            room=room,
            user_id=user_id,
        )


@pytest.fixture(scope="session")
def corpus_palace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Palace]:
    """A palace with :data:`CORPUS`, embedded with the default model."""
    with Palace.open(tmp_path_factory.mktemp("corpus") / "palace") as palace:
        fill(palace)
        yield palace


class WordEmbeddings(Embeddings):
    """Bag of words hashed onto 64 axes: deterministic, and texts sharing words are close."""

    model = "words-64"

    def _embed(self, text: str) -> list[float]:
        vector = [0.0] * 64
        for word in text.lower().replace(".", " ").replace("!", " ").split():
            vector[hashlib.sha256(word.encode()).digest()[0] % 64] += 1.0
        vector[0] += 1e-3
        return vector

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._embed(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._embed(text)


@pytest.fixture
def palace_path(tmp_path: Path) -> Path:
    return tmp_path / "palace"
