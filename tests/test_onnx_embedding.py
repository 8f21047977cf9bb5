"""Embedding through ONNX Runtime: the real all-MiniLM-L6-v2, the same vectors.

The sentence-transformers embedder exports its model's transformer to ONNX once (into
the session's shared ``$XDG_CACHE_HOME``, see ``conftest.py``) and embeds queries and
documents with ONNX Runtime. These tests hold it to PyTorch's vectors on varied texts,
one by one and in padded batches, check that a new process answers a query from the
cached graph without importing torch, and that every way the ONNX path can fail (a
layout it does not reproduce, a damaged file, an export that disagrees, a package
missing) leaves the embedder on PyTorch instead of breaking it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from palace_plugins.builtin.embedders import onnx_embedding
from palace_plugins.builtin.embedders.sentence_transformers import SentenceTransformerEmbedder
from palace_retrievers.embedder import Embedder
from palace_retrievers.errors import ConfigError

TEXTS = [
    "x",
    "?!",
    "When did Caroline go to the LGBTQ support group?",
    "What's the café's Wi-Fi password — did Zoë change it? 🙂",
    "我们的周会改到周三上午十点了。",
    "orders " * 400,  # far past the 256-token limit: truncation must agree too
    "  leading and trailing spaces  ",
]


@pytest.fixture(scope="module")
def embedder() -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder()


def test_queries_go_through_onnx_and_match_pytorch(embedder: SentenceTransformerEmbedder) -> None:
    assert embedder.runtime == "onnx"
    by_torch = embedder._torch_documents(TEXTS)
    for text, expected in zip(TEXTS, by_torch, strict=True):
        got = embedder.embed_query(text)
        assert got.dtype == np.float32
        assert got.shape == (384,)
        assert abs(float(np.linalg.norm(got)) - 1.0) < 1e-5
        assert float(np.abs(got - expected).max()) < 1e-4, text


def test_documents_in_padded_batches_match_pytorch_in_order(
    embedder: SentenceTransformerEmbedder,
) -> None:
    texts = [f"{n}: " + "the quick brown fox jumps over the lazy dog " * (n % 9) for n in range(41)]
    texts += TEXTS
    by_torch = embedder._torch_documents(texts)
    by_onnx = embedder.embed_documents(texts)  # batches of 16, sorted by length
    assert by_onnx.shape == (len(texts), 384)
    assert float(np.abs(by_onnx - by_torch).max()) < 1e-4
    assert embedder.embed_documents([]).shape == (0, 384)


def test_the_real_embedder_fixture_ranks_as_before(real_embedder: Embedder) -> None:
    docs = real_embedder.embed_documents(
        ["The standup is at 10am every weekday.", "I adopted a cat called Miso."]
    )
    query = real_embedder.embed_query("what time is the standup meeting")
    assert float(docs[0] @ query) > float(docs[1] @ query) + 0.2


def test_torch_runtime_on_request() -> None:
    torch_only = SentenceTransformerEmbedder(options={"runtime": "torch"})
    assert torch_only.runtime == "torch"
    assert torch_only._onnx == {}


@pytest.mark.parametrize(
    "options",
    [{"runtime": "tensorflow"}, {"query_threads": 0}, {"query_threads": "two"}],
)
def test_bad_query_options_are_config_errors(options: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        SentenceTransformerEmbedder(options=options)


def test_a_new_process_answers_from_the_cached_graph_without_torch(
    embedder: SentenceTransformerEmbedder,
) -> None:
    assert embedder.runtime == "onnx"  # exported (or found) in the shared cache
    script = (
        "import sys, json\n"
        "from palace_plugins.builtin.embedders.sentence_transformers import "
        "SentenceTransformerEmbedder\n"
        "e = SentenceTransformerEmbedder()\n"
        "v = e.embed_query(sys.argv[1])\n"
        "print(json.dumps({'runtime': e.runtime, 'torch': 'torch' in sys.modules,\n"
        "                  'st': 'sentence_transformers' in sys.modules, 'v': v.tolist()}))\n"
    )
    text = "where do I keep the backup keys?"
    done = subprocess.run(
        [sys.executable, "-c", script, text],
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ.copy(),
        check=True,
    )
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["runtime"] == "onnx"
    assert out["torch"] is False
    assert out["st"] is False
    expected = embedder._torch_documents([text])[0]
    assert float(np.abs(np.asarray(out["v"]) - expected).max()) < 1e-4


def _model_copy(tmp_path: Path) -> Path:
    source = onnx_embedding_model_dir()
    target = tmp_path / "minilm-copy"
    shutil.copytree(source, target)
    return target


def onnx_embedding_model_dir() -> Path:
    from palace_plugins.builtin.embedders.sentence_transformers import _default_model_path

    return _default_model_path()


def test_a_layout_it_does_not_reproduce_stays_on_pytorch(tmp_path: Path) -> None:
    model = _model_copy(tmp_path)
    pooling = model / "1_Pooling" / "config.json"
    config = json.loads(pooling.read_text())
    config.update(pooling_mode_mean_tokens=False, pooling_mode_cls_token=True)
    pooling.write_text(json.dumps(config))
    with pytest.raises(onnx_embedding.UnsupportedError, match="pooling"):
        onnx_embedding.check_layout(model)
    cls_model = SentenceTransformerEmbedder(model=str(model), options={"dimension": 384})
    assert cls_model.runtime == "torch"
    text = "what is the CLS token"
    vector = cls_model.embed_query(text)
    assert float(np.abs(vector - cls_model.embed_documents([text])[0]).max()) < 1e-6


def test_a_damaged_graph_file_falls_back_and_is_removed(tmp_path: Path) -> None:
    model = _model_copy(tmp_path)
    cached = onnx_embedding.cache_dir() / f"{model.name}-{onnx_embedding.fingerprint(model)}.onnx"
    cached.parent.mkdir(parents=True, exist_ok=True)
    cached.write_bytes(b"this is not an onnx graph")
    damaged = SentenceTransformerEmbedder(model=str(model), options={"dimension": 384})
    vector = damaged.embed_query("still answered")
    assert damaged.runtime == "torch"
    assert not cached.exists()
    assert float(np.abs(vector - damaged.embed_documents(["still answered"])[0]).max()) < 1e-6


def test_an_export_that_disagrees_with_pytorch_is_not_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = _model_copy(tmp_path)
    monkeypatch.setattr(onnx_embedding, "TOLERANCE", -1.0)  # nothing can agree this well
    strict = SentenceTransformerEmbedder(model=str(model), options={"dimension": 384})
    assert strict.runtime == "torch"
    assert not list(onnx_embedding.cache_dir().glob(f"{model.name}-*"))


def test_a_missing_package_leaves_queries_on_pytorch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import onnxruntime fails
    model = _model_copy(tmp_path)
    without = SentenceTransformerEmbedder(model=str(model), options={"dimension": 384})
    assert without.runtime == "torch"


def test_the_fingerprint_follows_the_model_files(tmp_path: Path) -> None:
    model = _model_copy(tmp_path)
    before = onnx_embedding.fingerprint(model)
    (model / "config.json").write_text((model / "config.json").read_text() + "\n")
    assert onnx_embedding.fingerprint(model) != before
