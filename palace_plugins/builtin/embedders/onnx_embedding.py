"""Embedding through ONNX Runtime: the same model, the same vectors, in less time.

A search embeds one short query and waits for it. PyTorch spends about 20 ms on that for
all-MiniLM-L6-v2 on one core of this kind of machine (it is the largest stage of a
search); ONNX Runtime runs the same graph in about 10 ms, and a process that finds the
exported graph on disk never imports torch or sentence-transformers. Mining embeds
batches of chunks, where ONNX Runtime is also faster than PyTorch on two cores (see
``benchmarks/README.md``, "Mining speed").

How it stays the same model:

* The graph is exported from the loaded sentence-transformers model (``torch.onnx``), once
  per model and per state of its files, into the cache folder
  (``$XDG_CACHE_HOME/palace-retrievers/onnx``, else ``~/.cache/...``); the file is written
  aside and renamed into place, so two processes exporting at once do not clash.
* Before the file is kept, probe texts (English, Chinese, one longer than the model's
  input limit, so truncation is checked too) are embedded both ways, one by one and as
  one padded batch; the export is kept only if every vector agrees with PyTorch's to
  1e-4 (measured: about 1e-7).
* Only the layouts this module reproduces exactly are exported: a transformer followed by
  mean pooling, with or without a normalising step (all-MiniLM-L6-v2 and most
  sentence-transformers models). Anything else, or an export that fails or disagrees, or
  a missing ``onnx``/``onnxruntime`` package, leaves the embedder on PyTorch (logged
  once). Vectors of both paths agree to 1e-4, so drawers embedded one way and queries
  the other live in one vector space.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import threading
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from palace_retrievers.embedder import Vectors
from palace_retrievers.errors import OnnxUnsupportedError

log = logging.getLogger(__name__)

#: Bumped when the export changes in a way that makes older files unusable.
FORMAT = 1
#: Inputs a BERT-like graph may take; others are not exported.
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
#: How closely the exported graph must reproduce PyTorch's vectors to be kept.
TOLERANCE = 1e-4
PROBES = (
    "hello",
    "When did Caroline go to the LGBTQ support group?",
    "我们的周会改到周三上午十点了。",
    "The orders database moved from MySQL to PostgreSQL in March 2024 (ticket QX-7741). " * 40,
)

_sessions: dict[tuple[Path, int], Any] = {}
_sessions_lock = threading.Lock()


#: The error of a model this module cannot run (its old name; see
#: :class:`~palace_retrievers.errors.OnnxUnsupportedError`).
UnsupportedError = OnnxUnsupportedError


def cache_dir() -> Path:
    """Where exported graphs are kept."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "palace-retrievers" / "onnx"


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def max_length(model_dir: Path) -> int:
    """The model's input limit in tokens (``sentence_bert_config.json``, else 512)."""
    config = _read_json(model_dir / "sentence_bert_config.json") or {}
    return int(config.get("max_seq_length") or 512)


def check_layout(model_dir: Path) -> None:
    """Raise :class:`UnsupportedError` unless the model is a transformer + mean pooling
    (+ an optional normalising step), with a fast tokenizer file."""
    modules = _read_json(model_dir / "modules.json")
    if not isinstance(modules, list) or not modules:
        raise UnsupportedError("no modules.json")
    kinds = [str(m.get("type", "")).rsplit(".", 1)[-1] for m in modules]
    if kinds not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
        raise UnsupportedError(f"modules {kinds} (only Transformer, Pooling[, Normalize])")
    pooling = _read_json(model_dir / str(modules[1].get("path", "")) / "config.json") or {}
    modes = {k for k, v in pooling.items() if k.startswith("pooling_mode") and v}
    if modes != {"pooling_mode_mean_tokens"}:
        raise UnsupportedError(f"pooling {sorted(modes)} (only mean pooling)")
    if (_read_json(model_dir / "sentence_bert_config.json") or {}).get("do_lower_case"):
        raise UnsupportedError("do_lower_case is set")
    if not (model_dir / "tokenizer.json").is_file():
        raise UnsupportedError("no tokenizer.json")


def fingerprint(model_dir: Path) -> str:
    """Names the model's files as they are now (name, size and time of every file)."""
    digest = hashlib.sha256(f"format {FORMAT}".encode())
    for path in sorted(p for p in model_dir.rglob("*") if p.is_file()):
        stat = path.stat()
        rel = path.relative_to(model_dir).as_posix()
        digest.update(f"{rel}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:24]


class OnnxEncoder:
    """Embeds texts with ONNX Runtime, mean-pooled over real tokens and normalised.

    Args:
        session: An ``onnxruntime.InferenceSession`` of the model's transformer.
        model_dir: The sentence-transformers model folder (for ``tokenizer.json``).
    """

    def __init__(self, session: Any, model_dir: Path) -> None:
        from tokenizers import Tokenizer

        self._session = session
        self._inputs = [i.name for i in session.get_inputs()]
        if not set(self._inputs) <= set(INPUTS) or "input_ids" not in self._inputs:
            raise UnsupportedError(f"graph inputs {self._inputs}")
        self._tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self._tokenizer.enable_truncation(max_length(model_dir))
        self._tokenizer.enable_padding()  # to the longest text of a batch

    def embed(self, text: str) -> Vectors:
        """The unit-length vector of ``text``, shape ``(dimension,)``."""
        vector: Vectors = self.embed_batch([text])[0]
        return vector

    def embed_batch(self, texts: Sequence[str]) -> Vectors:
        """Unit-length vectors of ``texts`` run as one padded batch, one row each."""
        encodings = self._tokenizer.encode_batch(list(texts))
        ids = np.asarray([e.ids for e in encodings], dtype=np.int64)
        mask = np.asarray([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        hidden = self._session.run(None, {name: feeds[name] for name in self._inputs})[0]
        weights = mask.astype(np.float32)[:, :, None]
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1.0)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        vectors: Vectors = (pooled / np.where(norms > 0, norms, 1.0)).astype(np.float32)
        return vectors

    def embed_many(self, texts: Sequence[str], *, batch_size: int, workers: int = 1) -> Vectors:
        """Vectors of any number of texts, in order: sorted by length into batches of
        ``batch_size`` so that a batch pads little, as sentence-transformers does, and
        the batches shared among ``workers`` threads.

        Several single-threaded runs side by side use the cores better than one run
        split across them: no run waits for its other half, and when something else
        takes a core (a mine filing the batch before), only one worker slows. Measured
        on two cores with LoCoMo exchanges: 57 texts/s with one run of two threads, 71
        with two runs of one thread (35 and 48 with a busy Python thread beside them).
        """
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        chunks = [order[start : start + batch_size] for start in range(0, len(order), batch_size)]
        if not chunks:
            return np.zeros((0, 0), dtype=np.float32)

        def run(chunk: list[int]) -> Vectors:
            return self.embed_batch([texts[i] for i in chunk])

        if workers > 1 and len(chunks) > 1:
            with ThreadPoolExecutor(min(workers, len(chunks))) as pool:
                results = list(pool.map(run, chunks))
        else:
            results = [run(chunk) for chunk in chunks]
        out = np.zeros((len(texts), results[0].shape[1]), dtype=np.float32)
        for chunk, vectors in zip(chunks, results, strict=True):
            out[chunk] = vectors
        return out


def _session(path: Path, threads: int) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    # Threads that wait for work sleep instead of spinning: a mine files the batch
    # before on the other core meanwhile (measured a little faster with a busy thread).
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _export(torch_model: Any, target: Path) -> None:
    """Write the transformer of a loaded SentenceTransformer to ``target`` as ONNX."""
    import torch

    transformer = torch_model[0].auto_model
    prepare = getattr(torch_model, "preprocess", None) or torch_model.tokenize
    features = prepare(["an example query for the export"])
    names = [n for n in INPUTS if n in features]

    class Graph(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.transformer = transformer

        def forward(self, *tensors: Any) -> Any:
            return self.transformer(**dict(zip(names, tensors, strict=True))).last_hidden_state

    axes = {name: {0: "batch", 1: "tokens"} for name in [*names, "last_hidden_state"]}
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, aside = tempfile.mkstemp(prefix=target.name, suffix=".part", dir=target.parent)
    os.close(handle)
    try:
        # The tracer warns about shapes it takes as constants; the check in load() is
        # what tells whether the graph holds for other inputs.
        with torch.inference_mode(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                Graph().eval(),
                tuple(features[n] for n in names),
                aside,
                input_names=names,
                output_names=["last_hidden_state"],
                dynamic_axes=axes,
                opset_version=17,
                dynamo=False,
            )
        os.replace(aside, target)
    finally:
        Path(aside).unlink(missing_ok=True)


def load(
    model_dir: Path,
    *,
    threads: int,
    torch_embed: Callable[[Sequence[str]], Vectors],
    torch_model: Callable[[], Any],
) -> OnnxEncoder:
    """The ONNX encoder of ``model_dir``, exported first if the cache lacks it.

    Args:
        model_dir: The sentence-transformers model folder.
        threads: ONNX Runtime's intra-op threads (0: its default, every core).
        torch_embed: The PyTorch path (for the check of a fresh export).
        torch_model: Loads the SentenceTransformer (only when exporting).

    Raises:
        UnsupportedError: the model's layout, the packages, the export or its check.
    """
    check_layout(model_dir)
    path = cache_dir() / f"{model_dir.name}-{fingerprint(model_dir)}.onnx"
    with _sessions_lock:
        cached = _sessions.get((path, threads))
        if cached is not None:
            return OnnxEncoder(cached, model_dir)
        try:
            import onnxruntime  # noqa: F401
            import tokenizers  # noqa: F401
        except ImportError as exc:
            raise UnsupportedError(f"{exc.name} is not installed") from None
        fresh = not path.is_file()
        if fresh:
            try:
                import onnx  # noqa: F401
            except ImportError:
                raise UnsupportedError("onnx (to export the graph) is not installed") from None
            try:
                _export(torch_model(), path)
            except Exception as exc:
                raise UnsupportedError(f"the export failed ({type(exc).__name__}: {exc})") from None
        try:
            session = _session(path, threads)
            encoder = OnnxEncoder(session, model_dir)
        except UnsupportedError:
            raise
        except Exception as exc:
            path.unlink(missing_ok=True)
            raise UnsupportedError(f"the exported graph does not load ({exc})") from None
        if fresh:
            expected = torch_embed(PROBES)
            one_by_one = np.stack([encoder.embed(text) for text in PROBES])
            batched = encoder.embed_batch(PROBES)
            gap = max(float(np.abs(expected - got).max()) for got in (one_by_one, batched))
            if not gap <= TOLERANCE:
                path.unlink(missing_ok=True)
                raise UnsupportedError(f"the exported graph differs from PyTorch by {gap:.2g}")
            log.info("exported %s (max gap to PyTorch %.1g)", path.name, gap)
        _sessions[path, threads] = session
        return encoder
