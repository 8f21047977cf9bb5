"""``Palace.search_by_vector`` and ``Palace.open(embedder=<Embedder>)``.

Both exist for the LangChain and LlamaIndex integrations: a vector store that embeds the
query itself, and a palace whose vectors come from an embedder object the caller built.
A small deterministic embedder keeps these fast; the palace around it is real (Chroma
and SQLite in a temporary directory).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from palace_retrievers import EmbedderMismatchError, InvalidQueryError, Palace
from palace_retrievers.embedder import Embedder, Vectors


class HashEmbedder(Embedder):
    """Each word hashed to one of 32 axes: texts sharing words lie close together."""

    @property
    def model_name(self) -> str:
        return "test/hash-32"

    @property
    def dimension(self) -> int:
        return 32

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        out = np.zeros((len(texts), 32), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().split():
                out[row, hashlib.sha256(word.encode()).digest()[0] % 32] += 1.0
        out[:, 0] += 1e-3  # no zero vector
        return out


@pytest.fixture
def palace(tmp_path: Path) -> Iterator[Palace]:
    with Palace.open(tmp_path / "palace", embedder=HashEmbedder()) as p:
        p.add_texts(["alice adopted a cat"], ids=["a"], user_id="u1", wing="pets")
        p.add_texts(["bob adopted a dog"], ids=["b"], user_id="u1", wing="pets")
        p.add_texts(["alice adopted a cat"], ids=["c"], user_id="u2", wing="pets")
        p.add_texts(["deploy with blue green"], ids=["d"], user_id="u1", wing="work")
        yield p


def test_open_uses_the_embedder_instance(palace: Palace) -> None:
    assert isinstance(palace.embedder, HashEmbedder)
    assert palace.stats().model == "test/hash-32"
    assert palace.stats().dimension == 32


def test_reopening_with_another_model_is_refused(palace: Palace, tmp_path: Path) -> None:
    palace.close()
    with pytest.raises(EmbedderMismatchError, match="test/hash-32"):
        Palace.open(tmp_path / "palace")


def test_nearest_first_with_vector_scores(palace: Palace) -> None:
    vector = palace.embedder.embed_query("alice adopted a cat")
    hits = palace.search_by_vector(vector, k=2, user_id="u1")
    assert [h.id for h in hits] == ["a", "b"]
    assert hits[0].score == pytest.approx(1.0, abs=1e-5)
    assert set(hits[0].scores) == {"vector", "final"}


def test_a_list_of_floats_is_accepted(palace: Palace) -> None:
    vector = [float(x) for x in palace.embedder.embed_query("deploy blue green")]
    assert [h.id for h in palace.search_by_vector(vector, k=1, user_id="u1")] == ["d"]


def test_filters_and_user_partition_apply(palace: Palace) -> None:
    vector = palace.embedder.embed_query("alice adopted a cat")
    assert [h.id for h in palace.search_by_vector(vector, k=5, user_id="u2")] == ["c"]
    assert palace.search_by_vector(vector, k=5) == []  # unowned: none
    work = palace.search_by_vector(vector, k=5, user_id="u1", wing="work")
    assert [h.id for h in work] == ["d"]


def test_bad_vector_or_k_is_a_clear_error(palace: Palace) -> None:
    with pytest.raises(InvalidQueryError, match="3 dimensions"):
        palace.search_by_vector([0.1, 0.2, 0.3], k=1)
    with pytest.raises(InvalidQueryError, match="positive integer"):
        palace.search_by_vector(palace.embedder.embed_query("cat"), k=0)
