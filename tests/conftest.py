"""Fixtures shared by the engine's tests.

Every test runs with its own ``$HOME`` and without any ``PALACE_*`` variable, so neither
the developer's palace nor their environment can leak in.

Two embedders are on offer:

- ``real_embedder`` (session-scoped): the real sentence-transformers all-MiniLM-L6-v2, for
  everything that is about search quality or the real write path.
- ``fake_plugin``: a FAKE embedder registered as ``"fake"``. It hashes a bag of words into
  64 dimensions; it knows nothing of meaning and exists only so that pure-logic tests
  (config, plugins, mining bookkeeping, filters) run in milliseconds. Open a palace with
  it through ``Palace.open(path, plugins=[fake_plugin], embedder="fake")``.
"""

from __future__ import annotations

import os
import shutil
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes import FAKE_PLUGIN
from sample_corpus import SAMPLE_CORPUS, SAMPLE_WING

from palace_retrievers import Palace
from palace_retrievers.embedder import Embedder

# -- isolation ------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh ``$HOME`` and no ``PALACE_*`` variables, for every test.

    ``$XDG_CACHE_HOME`` is one folder for the whole session (outside every ``$HOME``):
    the query graph the embedder exports there once (``onnx_queries``) serves every test
    and every process a test starts, as the user's cache would.
    """
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "xdg-cache"))
    monkeypatch.setenv("ANONYMIZED_TELEMETRY", "False")
    for name in list(os.environ):
        if name.startswith("PALACE_"):
            monkeypatch.delenv(name)
    return home


# -- embedders ------------------------------------------------------------------------


@pytest.fixture(scope="session")
def real_embedder() -> Embedder:
    """The real all-MiniLM-L6-v2, loaded once for the whole session."""
    from palace_plugins.builtin.embedders.sentence_transformers import SentenceTransformerEmbedder

    # Larger batches than the default: the short sentences of the equivalence test
    # embed markedly faster this way on a small CPU.
    embedder = SentenceTransformerEmbedder(options={"batch_size": 256})
    embedder.embed_documents(["warm up"])
    return embedder


@pytest.fixture
def fake_plugin() -> types.ModuleType:
    """The plugin that registers the FAKE ``"fake"`` embedder."""
    return FAKE_PLUGIN


# -- palaces --------------------------------------------------------------------------


@pytest.fixture
def open_palace(request: pytest.FixtureRequest) -> Iterator[Callable[..., Palace]]:
    """``open_palace(path, **kwargs)``: ``Palace.open`` that closes the palace afterwards.

    With ``fake=True`` (the default) the FAKE embedder is used. With ``fake=False`` the
    real model is used: the session's already loaded instance, unless ``embedder`` is
    given (``Palace.open`` builds the default one itself in ``mined_sample``).
    """
    opened: list[Palace] = []

    def open_(path: Path, *, fake: bool = True, **kwargs: Any) -> Palace:
        if fake:
            kwargs.setdefault("embedder", "fake")
            kwargs["plugins"] = [FAKE_PLUGIN, *kwargs.get("plugins", ())]
        elif "embedder" not in kwargs and "model" not in kwargs:
            kwargs["embedder"] = request.getfixturevalue("real_embedder")
        palace = Palace.open(path, **kwargs)
        opened.append(palace)
        return palace

    yield open_
    for palace in reversed(opened):
        palace.close()


@pytest.fixture
def fake_palace(open_palace: Callable[..., Palace], tmp_path: Path) -> Palace:
    """An empty palace with the FAKE embedder and the exact ``sqlite`` backend."""
    return open_palace(tmp_path / "palace", backend="sqlite")


@pytest.fixture(scope="session")
def mined_sample(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A palace (real model, Chroma) with the sample corpus mined, built once.

    Returns ``(palace_dir, corpus_dir)``; tests copy both with :func:`copy_sample`.
    """
    root = tmp_path_factory.mktemp("sample")
    corpus = root / "corpus"
    shutil.copytree(SAMPLE_CORPUS, corpus)
    palace_dir = root / "palace"
    with Palace.open(palace_dir) as palace:
        report = palace.mine(corpus, wing=SAMPLE_WING)
        assert report.mined == report.seen > 10, report
    return palace_dir, corpus


@pytest.fixture
def sample_copy(mined_sample: tuple[Path, Path], tmp_path: Path) -> tuple[Path, Path]:
    """A private copy of the mined sample palace and its corpus (mtimes kept)."""
    palace_dir, corpus = mined_sample
    palace_copy = tmp_path / "palace"
    corpus_copy = tmp_path / "corpus"
    shutil.copytree(palace_dir, palace_copy)
    shutil.copytree(corpus, corpus_copy)
    return palace_copy, corpus_copy


@pytest.fixture
def sample_palace(open_palace: Callable[..., Palace], sample_copy: tuple[Path, Path]) -> Palace:
    """The mined sample palace (real model, real Chroma), private to the test."""
    return open_palace(sample_copy[0], fake=False)
