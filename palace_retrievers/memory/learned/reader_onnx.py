"""The pair reader's forward pass through ONNX Runtime: the same numbers, a fraction of the time.

``remember`` asks the pair reader (:mod:`.pair_reader`) about each of a new memory's
shortlisted candidates, and that forward pass was the largest part of a ``remember``
(benchmarks/README.md, "Speed"). PyTorch runs it with a thread per core that spins while
it waits; on a machine whose two cores are busy with something else, one pair took over a
second. ONNX Runtime runs the same graph on one thread that sleeps when it waits.

How it stays the same reader (the way the embedder's ONNX path does it):

* The loaded reader -- base weights with the file's deltas added and the spare tokens'
  embeddings in place -- is exported once per reader file and base model into the cache
  folder (``$XDG_CACHE_HOME/palace-retrievers/onnx``, else ``~/.cache/...``), written
  aside and renamed into place.
* Before a fresh export is kept, probe pairs (English, Chinese with spare tokens, one
  longer than the reader's input limit) are read both ways, one by one and as a padded
  batch; it is kept only if every probability agrees with PyTorch's to 1e-4.
* A missing ``onnx`` / ``onnxruntime`` package, a failed export or a disagreement leaves
  the reader on PyTorch (logged once).

The tokenizer (and its spare-token mapping) stays in :func:`.pair_reader.encode`; only
the forward pass moves.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from palace_retrievers.errors import OnnxUnsupportedError

#: Bumped when the export changes in a way that makes older files unusable.
FORMAT = 1
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
EMBEDS = "inputs_embeds"
TOLERANCE = 1e-4
PROBES = (
    ("Team stand-up is every weekday at 9:30", "The team stand-up moves to 10:30"),
    ("宽带用的是电信，每月一百二", "宽带改用联通了"),
    ("User lives in Lisbon", "I moved to Porto " + "and the flat is lovely " * 60),
)


def cache_dir() -> Path:
    """Where exported graphs are kept (beside the embedders')."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "palace-retrievers" / "onnx"


def graph_path(reader_file: Path, base_file: Path) -> Path:
    """The cache file of the reader in ``reader_file`` on the base weights in
    ``base_file``: named by a hash of both files' names, sizes and times."""
    digest = hashlib.sha256(f"reader format {FORMAT}".encode())
    for path in (reader_file, base_file):
        stat = path.stat()
        digest.update(f"{path.resolve()}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return cache_dir() / f"pair-reader-{digest.hexdigest()[:24]}.onnx"


class OnnxReader:
    """Runs an exported reader: token ids in, label probabilities out. With ``words`` (a
    graph exported without its word embeddings) each token's row of ``words`` is looked
    up here and fed as ``inputs_embeds``."""

    def __init__(self, path: Path, words: npt.NDArray[np.float32] | None = None) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        self._session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self._inputs = [i.name for i in self._session.get_inputs()]
        self._words = words

    def probabilities(self, batch: Mapping[str, Any]) -> npt.NDArray[np.float64]:
        """Softmax of the logits for ``batch`` (the tokenizer's tensors), one row a pair."""
        feeds: dict[str, npt.NDArray[Any]] = {
            name: np.asarray(batch[name], dtype=np.int64) for name in self._inputs if name != EMBEDS
        }
        if self._words is not None:
            feeds[EMBEDS] = self._words[np.asarray(batch["input_ids"], dtype=np.int64)]
        logits = np.asarray(self._session.run(None, feeds)[0], dtype=np.float64)
        logits -= logits.max(axis=1, keepdims=True)
        exp: npt.NDArray[np.float64] = np.exp(logits)
        out: npt.NDArray[np.float64] = exp / exp.sum(axis=1, keepdims=True)
        return out


def export(model: Any, batch: Mapping[str, Any], target: Path, *, embeds: bool = False) -> None:
    """Write the sequence classifier ``model`` to ``target`` as ONNX, traced on ``batch``;
    with ``embeds`` the graph reads ``inputs_embeds`` in place of ``input_ids`` (its word
    embeddings are left out of the file)."""
    import torch

    names = [n for n in INPUTS if n in batch]
    if embeds:
        words = model.get_input_embeddings()
        batch = {**batch, EMBEDS: words(batch["input_ids"]).detach()}
        names = [EMBEDS if n == "input_ids" else n for n in names]

    class Graph(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *tensors: Any) -> Any:
            return self.model(**dict(zip(names, tensors, strict=True))).logits

    axes = {name: {0: "batch", 1: "tokens"} for name in names} | {"logits": {0: "batch"}}
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, aside = tempfile.mkstemp(prefix=target.name, suffix=".part", dir=target.parent)
    os.close(handle)
    try:
        with torch.inference_mode(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the tracer's constant-shape notes; load() checks
            torch.onnx.export(
                Graph().eval(),
                tuple(batch[n] for n in names),
                aside,
                input_names=names,
                output_names=["logits"],
                dynamic_axes=axes,
                opset_version=17,
                dynamo=False,
            )
        os.replace(aside, target)
    finally:
        Path(aside).unlink(missing_ok=True)


def load(
    path: Path,
    *,
    encode: Callable[[Sequence[tuple[str, str]]], Mapping[str, Any]],
    torch_probabilities: Callable[[Mapping[str, Any]], npt.NDArray[np.float64]],
    torch_model: Any,
    words: npt.NDArray[np.float32] | None = None,
) -> OnnxReader:
    """The ONNX reader cached at ``path``, exported first if it is not there yet.

    Args:
        path: The cache file (:func:`graph_path`).
        encode: The reader's tokenizer step (pairs to tensors).
        torch_probabilities: The PyTorch forward pass (for the check of a fresh export).
        torch_model: The loaded PyTorch reader (only exported when the file is missing).
        words: The reader's word embeddings, to be looked up beside a graph that leaves
            them out (None: the graph holds them).

    Raises:
        OnnxUnsupportedError: the packages, the export or its check.
    """
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        raise OnnxUnsupportedError("onnxruntime is not installed") from None
    fresh = not path.is_file()
    if fresh:
        try:
            import onnx  # noqa: F401
        except ImportError:
            raise OnnxUnsupportedError("onnx (to export the graph) is not installed") from None
        try:
            export(torch_model, encode(PROBES[:2]), path, embeds=words is not None)
        except Exception as exc:
            raise OnnxUnsupportedError(f"the export failed ({type(exc).__name__}: {exc})") from None
    try:
        reader = OnnxReader(path, words)
    except Exception as exc:
        path.unlink(missing_ok=True)
        raise OnnxUnsupportedError(f"the exported graph does not load ({exc})") from None
    if fresh:
        batch = encode(PROBES)
        expected = torch_probabilities(batch)
        one_by_one = np.vstack([reader.probabilities(encode([pair])) for pair in PROBES])
        batched = reader.probabilities(batch)
        gap = max(float(np.abs(expected - got).max()) for got in (one_by_one, batched))
        if not gap <= TOLERANCE:
            path.unlink(missing_ok=True)
            raise OnnxUnsupportedError(f"the exported reader differs from PyTorch by {gap:.2g}")
    return reader
