"""Mining speed: drawers per second, and how close a mine comes to the embedder alone.

Two workloads, each mined into a fresh palace (real all-MiniLM-L6-v2, the configured
backend, regex closets on: the defaults):

- **files**: a generated tree of ``--files`` markdown/code-like files (300–2,500
  characters, 50 folders, a ``.gitignore``), mined with the ``files`` source; then mined
  a second time, unchanged, which must embed nothing.
- **locomo**: the LoCoMo dev conversations (``--locomo``, read in place, never copied),
  converted in memory to the generic chat JSONL of the ``text`` source
  (``{session, speaker, text, time, id}``, one file per conversation, written to a
  temporary folder that is deleted afterwards) and mined with ``source="text"``.

For each: the mine's wall and CPU time; the time the embedder alone takes on exactly the
texts the mine embedded (drawers and closets), in the same calls; their **ratio** (the
rest of the pipeline, reading, chunking, closets, ledger, index, is what makes it exceed
1); the same against the drawers' texts only (what closets cost on top; always for
LoCoMo, with ``--drawers-only`` for the files); drawers (and LoCoMo turns) per second; and
a second mine of the unchanged input. The CPU ratio is the steadier figure on a machine
shared with other work. ``--sweep`` times the embedder on one thread (CPU time) on the
LoCoMo chunks for several ``mining.batch_size`` and encode batch sizes, with the padding
each leaves: how the defaults were chosen.

Results are printed, never asserted. Not run by ``make test``::

    .venv/bin/python benchmarks/mine.py --files 10000 \\
        --locomo ../shared/data/locomo/locomo_dev.json [--backend sqlite] [--sweep]
    .venv/bin/python benchmarks/mine.py --files 0        # LoCoMo only (a minute)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from palace_plugins.builtin.embedders.sentence_transformers import SentenceTransformerEmbedder
from palace_retrievers import Palace
from palace_retrievers.embedder import Embedder, Vectors

DEFAULT_LOCOMO = Path(__file__).resolve().parents[2] / "shared/data/locomo/locomo_dev.json"
_WORDS = [
    "the",
    "a",
    "of",
    "to",
    "and",
    "in",
    "is",
    "it",
    "for",
    "on",
    "with",
    "as",
    "was",
    "at",
    "by",
    "an",
    "be",
    "this",
    "that",
    "from",
    "or",
    "not",
    "but",
    "ledger",
    "drawer",
    "closet",
    "wing",
    "room",
    "harbour",
    "lantern",
    "copper",
    "meadow",
    "signal",
    "orbit",
    "river",
    "falcon",
    "quartz",
    "ember",
    "willow",
    "saddle",
    "beacon",
    "def",
    "class",
    "return",
    "import",
    "self",
    "value",
    "index",
    "config",
    "request",
    "response",
    "user",
    "session",
    "cache",
    "token",
    "parser",
    "schema",
    "migration",
    "release",
]


@dataclass
class Recording(Embedder):
    """The real embedder (or none), recording each call's texts and the time spent in it.

    With ``inner=None`` it returns constant vectors at once: a mine with no embedding
    cost, to see what the rest of the pipeline costs, or which calls a batch size makes.
    """

    inner: Embedder | None
    calls: list[list[str]] = field(default_factory=list)
    seconds: float = 0.0
    off_main_thread: bool = False
    """Whether a call came from a thread other than the main one (a mine embedding ahead)."""

    @property
    def model_name(self) -> str:
        return self.inner.model_name if self.inner else "none/384"

    @property
    def dimension(self) -> int:
        return self.inner.dimension if self.inner else 384

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        started = time.perf_counter()
        if threading.current_thread() is not threading.main_thread():
            self.off_main_thread = True
        try:
            if self.inner is None:
                return np.full((len(texts), 384), 384**-0.5, dtype=np.float32)
            return self.inner.embed_documents(texts)
        finally:
            self.seconds += time.perf_counter() - started
            if texts:
                self.calls.append(list(texts))


def generate_tree(root: Path, files: int, seed: int = 7) -> None:
    """``files`` text files in 50 folders, markdown and code-like, 300–2,500 characters."""
    rng = random.Random(seed)
    (root / ".gitignore").parent.mkdir(parents=True, exist_ok=True)
    (root / ".gitignore").write_text("*.tmp\nbuild/\n")
    for n in range(files):
        suffix = rng.choice([".md", ".md", ".txt", ".py", ".ts"])
        path = root / f"part{n % 50:02d}" / f"file{n:05d}{suffix}"
        path.parent.mkdir(exist_ok=True)
        length = rng.randint(300, 2500)
        lines: list[str] = [f"# {rng.choice(_WORDS)} {rng.choice(_WORDS)} {n}", ""]
        size = 0
        while size < length:
            line = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(4, 14)))
            if suffix in (".py", ".ts"):
                line = "    " + line.replace(" ", "_", 2) + "()"
            lines.append(line)
            size += len(line) + 1
            if rng.random() < 0.15:
                lines.append("")
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _locomo_time(value: str) -> str | None:
    try:
        return datetime.strptime(value, "%I:%M %p on %d %B, %Y").isoformat()
    except ValueError:
        return None


def write_locomo_jsonl(data: Path, folder: Path) -> int:
    """The conversations as generic chat JSONL, one file per conversation; returns turns."""
    turns = 0
    for sample in json.loads(data.read_text(encoding="utf-8")):
        conv = sample["conversation"]
        lines = []
        numbers = sorted(
            int(k.split("_")[1])
            for k in conv
            if k.startswith("session_") and k.split("_")[1].isdigit() and "date" not in k
        )
        for number in numbers:
            when = _locomo_time(conv.get(f"session_{number}_date_time", ""))
            for turn in conv.get(f"session_{number}") or []:
                record: dict[str, Any] = {
                    "session": f"session_{number}",
                    "speaker": turn["speaker"],
                    "text": turn["text"],
                    "id": turn["dia_id"],
                }
                if when:
                    record["time"] = when
                lines.append(json.dumps(record, ensure_ascii=False))
                turns += 1
        (folder / f"{sample['sample_id']}.jsonl").write_text("\n".join(lines) + "\n")
    return turns


def embed_alone(
    embedder: Embedder, calls: list[list[str]], *, in_thread: bool = False
) -> tuple[float, float]:
    """Wall and CPU seconds the embedder takes on ``calls``, one after the other.

    With ``in_thread``, the calls are made from one worker thread, as a mine that embeds
    ahead makes them: on a loaded machine, the same encode ran several times faster (and
    took a third of the CPU) in a worker thread than in the main thread, so the two are
    compared on the same kind of thread.
    """

    def calling() -> tuple[float, float]:
        wall, cpu = time.perf_counter(), time.process_time()
        for texts in calls:
            embedder.embed_documents(texts)
        return time.perf_counter() - wall, time.process_time() - cpu

    if not in_thread:
        return calling()
    with ThreadPoolExecutor(max_workers=1) as worker:
        return worker.submit(calling).result()


def run(
    name: str,
    target: Path,
    *,
    source: str,
    embedder: Embedder,
    backend: str,
    workdir: Path,
    turns: int | None = None,
    drawers_only: bool = True,
) -> list[str]:
    """Mine ``target`` into a fresh palace and time it against the embedder alone."""
    recording = Recording(embedder)
    with Palace.open(workdir / f"palace-{name}", embedder=recording, backend=backend) as palace:
        wall, cpu = time.perf_counter(), time.process_time()
        report = palace.mine(target, source=source, wing=name, progress=None)
        mine_wall, mine_cpu = time.perf_counter() - wall, time.process_time() - cpu
        closets = palace.stats().ledger.closets
        drawer_texts = {d.text for batch in palace.ledger.iter_drawers() for d in batch}
        texts = sum(len(c) for c in recording.calls)
        started = time.perf_counter()
        again = palace.mine(target, source=source, wing=name, progress=False)
        second = time.perf_counter() - started
        embedded_again = sum(len(c) for c in recording.calls) - texts
    threaded = recording.off_main_thread
    alone_wall, alone_cpu = embed_alone(embedder, recording.calls, in_thread=threaded)
    inside = recording.seconds
    out = [
        f"## {name}: {report.seen} sources, {report.drawers_added} drawers, {closets} closets "
        f"({texts} texts embedded in {len(recording.calls)} calls)",
        f"mine            {mine_wall:8.1f} s wall {mine_cpu:8.1f} s CPU   "
        f"{report.drawers_added / mine_wall:7.1f} drawers/s",
        f"  of which in the embedder {inside:.1f} s; the rest of the pipeline "
        f"{mine_wall - inside:.1f} s ({(mine_wall - inside) / mine_wall:.1%})",
        f"embedder alone  {alone_wall:8.1f} s wall {alone_cpu:8.1f} s CPU   "
        f"(the same texts in the same calls, {'a worker' if threaded else 'the main'} thread)",
        f"ratio mine / embedder alone: {mine_wall / alone_wall:.3f} wall, "
        f"{mine_cpu / alone_cpu:.3f} CPU",
    ]
    if turns is not None:
        out.insert(2, f"{'':50}{turns / mine_wall:7.1f} turns/s ({turns} turns)")
    if drawers_only:
        only_wall, only_cpu = embed_alone(
            embedder,
            [[t for t in call if t in drawer_texts] for call in recording.calls],
            in_thread=threaded,
        )
        out.append(
            f"  against the drawers' texts only (no closets: {only_wall:.1f} s wall): "
            f"{mine_wall / only_wall:.3f} wall, {mine_cpu / only_cpu:.3f} CPU"
        )
    out.append(
        f"second mine, unchanged: {second:.2f} s ({1000 * second / max(again.seen, 1):.3f} s "
        f"per 1,000 sources), {again.unchanged} unchanged, {embedded_again} texts embedded"
    )
    return out


def sweep(target: Path, source: str, workdir: Path) -> list[str]:
    """Texts embedded per CPU-second (one thread, so other load on the machine does not
    blur it) and padding, for several ``mining.batch_size`` and encode batch sizes, with
    the PyTorch runtime (whose threads this can pin to one)."""
    import torch
    from transformers import AutoTokenizer

    from palace_plugins.builtin.embedders.sentence_transformers import _default_model_path

    tokenizer = AutoTokenizer.from_pretrained(str(_default_model_path()))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    out = [f"## batch sizes, {target.name}: texts per CPU-second on one thread, padding"]
    try:
        for mining_batch in (64, 256, 512):
            recording = Recording(None)
            config = {"mining": {"batch_size": mining_batch}}
            folder = workdir / f"sweep-{mining_batch}"
            with Palace.open(folder, embedder=recording, backend="sqlite", config=config) as p:
                p.mine(target, source=source, wing="sweep", progress=False)
            shutil.rmtree(folder)
            lengths = [
                [min(len(tokenizer(t)["input_ids"]), 256) for t in call] for call in recording.calls
            ]
            tokens = sum(map(sum, lengths))
            texts = sum(map(len, lengths))
            for encode_batch in (8, 16, 32, 64):
                padded = 0
                for call in lengths:
                    ordered = sorted(call, reverse=True)
                    for i in range(0, len(ordered), encode_batch):
                        padded += ordered[i] * len(ordered[i : i + encode_batch])
                embedder = SentenceTransformerEmbedder(
                    options={"batch_size": encode_batch, "runtime": "torch"}
                )
                embedder.embed_documents(["warm up"] * 4)
                _, cpu = embed_alone(embedder, recording.calls)
                out.append(
                    f"mining.batch_size {mining_batch:4d}, encode batch {encode_batch:3d}: "
                    f"{texts / cpu:6.1f} texts per CPU-second, padding {padded / tokens - 1:6.1%}"
                )
    finally:
        torch.set_num_threads(threads)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=10_000, help="files in the tree (0: none)")
    parser.add_argument("--locomo", type=Path, default=DEFAULT_LOCOMO)
    parser.add_argument("--no-locomo", action="store_true")
    parser.add_argument("--backend", default="chroma")
    parser.add_argument("--sweep", action="store_true", help="also time batch sizes (LoCoMo)")
    parser.add_argument(
        "--drawers-only",
        action="store_true",
        help="also time the embedder on the files' drawer texts alone (no closets)",
    )
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it")
    parser.add_argument(
        "--runtime",
        choices=["onnx", "torch"],
        default="onnx",
        help="the embedder's runtime, for the mine and for the embedder alone (default onnx)",
    )
    args = parser.parse_args()

    workdir = args.keep or Path(tempfile.mkdtemp(prefix="palace-mine-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    embedder = SentenceTransformerEmbedder(options={"runtime": args.runtime})
    embedder.embed_documents(["warm up the model"] * 8)
    threads = "one run per core"
    if embedder.runtime == "torch":
        threads = f"torch threads {_torch_threads()}"
    lines = [
        f"# benchmarks/mine.py: {os.cpu_count()} CPUs, backend {args.backend}, "
        f"{embedder.model_name}, runtime {embedder.runtime} ({threads})"
    ]
    try:
        if not args.no_locomo:
            folder = workdir / "locomo-jsonl"
            folder.mkdir(exist_ok=True)
            turns = write_locomo_jsonl(args.locomo, folder)
            lines += run(
                "locomo",
                folder,
                source="text",
                embedder=embedder,
                backend=args.backend,
                workdir=workdir,
                turns=turns,
            )
            print("\n".join(lines), flush=True)
            if args.sweep:
                lines += sweep(folder, "text", workdir)
        if args.files:
            tree = workdir / "tree"
            started = time.perf_counter()
            generate_tree(tree, args.files)
            print(f"(generated {args.files} files in {time.perf_counter() - started:.1f} s)")
            lines += run(
                "files",
                tree,
                source="files",
                embedder=embedder,
                backend=args.backend,
                workdir=workdir,
                drawers_only=args.drawers_only,
            )
    finally:
        if args.keep is None:
            shutil.rmtree(workdir, ignore_errors=True)
    print("\n".join(lines))


def _torch_threads() -> int:
    import torch

    return int(torch.get_num_threads())


if __name__ == "__main__":
    main()
