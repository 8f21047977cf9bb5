"""Cold start: the wall time of one-shot ``palace search`` and ``palace status`` processes.

Builds once (kept in ``--palace``, reused when it is there) a palace of 10,000 drawers
with the default configuration (Chroma, all-MiniLM-L6-v2): the texts of
``backend_corpus.texts`` (people, topics, places, dates, numbers), filed as documents of
20 chunks across 20 wings, their vectors made by the real model (and cached by
``backend_corpus``). Then it starts the ``palace`` console script as a user does, once
per run, and times each process from start to exit:

- ``palace --palace DIR search "<query>"`` (a new query each run, the model loaded and the
  query embedded inside the timing),
- ``palace --palace DIR status``.

It prints the median and p90 over ``--runs`` runs (after one unmeasured run that warms
the disk cache and writes the bytecode cache), with the machine's load average, which
says how busy it was, and the median CPU time of the process (user + system, all its
threads), which says what the wall time would be on an idle machine as long as the
process keeps to one core. When
MemPalace's ``mempalace`` command is installed, it builds a MemPalace palace of the same
texts (``--mempalace`` folder) and times ``mempalace search`` alike; when it is not, it
says so and skips it.

    .venv/bin/python benchmarks/cold_start.py --palace /tmp/cold-start-palace

On a shared machine the wall times follow the load more than the code. ``--baseline DIR``
(another checkout of the engine, e.g. ``git archive <rev> | tar -x -C DIR``) times that
checkout's commands in turns with this one's, run by run, both as ``python -m
palace_retrievers.cli`` started in their own folder, and prints the ratio of their
medians: a comparison both sides of which saw the same load.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import backend_corpus

from palace_retrievers import Palace

SIZE = 10_000
CHUNKS_PER_DOCUMENT = 20
WINGS = 20
BATCH = 1_000


def build(path: Path, size: int, cache: Path) -> None:
    """File ``size`` generated drawers into a new palace at ``path`` (unless it has them)."""
    with Palace.open(path) as palace:
        have = palace.stats().ledger.drawers
        if have >= size:
            print(f"reusing {path}: {have:,} drawers")
            return
        texts = backend_corpus.texts(size, seed=0)
        vectors = backend_corpus.cached_vectors(texts, cache=cache, label="drawers")
        start = time.perf_counter()
        for first in range(0, size, BATCH):
            numbers = range(first, min(first + BATCH, size))
            palace.add_texts(
                [texts[n] for n in numbers],
                metadatas=[
                    {
                        "wing": f"notes-{(n // CHUNKS_PER_DOCUMENT) % WINGS:02d}",
                        "source": f"doc-{n // CHUNKS_PER_DOCUMENT:05d}",
                        "chunk_index": n % CHUNKS_PER_DOCUMENT,
                    }
                    for n in numbers
                ],
                ids=[f"gen-{n:06d}" for n in numbers],
                vectors=vectors[first : first + len(numbers)],
            )
            print(f"  filed {first + len(numbers):,}/{size:,}", flush=True)
        print(f"built {path} in {time.perf_counter() - start:.0f} s")


#: The processes run as a user's do: with Python's bytecode cache. Without it
#: (``PYTHONDONTWRITEBYTECODE`` set, as in some sandboxes, over an editable install that
#: ships no ``.pyc``) each process compiles the engine's modules again, which costs it
#: about 0.25 s of CPU that no installed copy pays.
CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def timed(command: Sequence[str], cwd: Path | None = None) -> tuple[float, float]:
    """Wall and CPU seconds from starting ``command`` (in ``cwd``) to its exit (which
    must be 0)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        command, capture_output=True, text=True, check=False, env=CHILD_ENV, cwd=cwd
    )
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr}")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return seconds, cpu


def report(label: str, runs: Sequence[tuple[float, float]]) -> None:
    """Print the median and p90 wall time of ``runs`` and their median CPU time."""
    walls = [wall for wall, _ in runs]
    ordered = sorted(walls)
    p90 = ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]
    cpu = statistics.median(cpu for _, cpu in runs)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"{label:<20} wall median {statistics.median(ordered):.2f} s  p90 {p90:.2f} s  "
        f"CPU median {cpu:.2f} s  (walls: {' '.join(f'{s:.2f}' for s in walls)}; "
        f"load average {load})",
        flush=True,
    )


def measure(label: str, commands: Sequence[Sequence[str]]) -> None:
    """Run the first command unmeasured (it warms the disk cache), then time the others."""
    timed(commands[0])
    report(label, [timed(command) for command in commands[1:]])


def measure_pair(
    label: str, arguments: Sequence[Sequence[str]], here: Path, baseline: Path
) -> None:
    """Time ``python -m palace_retrievers.cli ARGUMENTS`` from this checkout and from
    ``baseline`` in turns (after one unmeasured run of each), and the ratio of medians."""
    runs: dict[Path, list[tuple[float, float]]] = {here: [], baseline: []}
    for number, words in enumerate(arguments):
        for folder, times in runs.items():
            result = timed([sys.executable, "-m", "palace_retrievers.cli", *words], cwd=folder)
            if number:
                times.append(result)
    report(f"{label} (this)", runs[here])
    report(f"{label} (baseline)", runs[baseline])
    this, base = runs[here], runs[baseline]
    wall, cpu = (
        statistics.median(r[i] for r in this) / statistics.median(r[i] for r in base)
        for i in (0, 1)
    )
    print(f"{label:<20} this / baseline: wall {wall:.2f}, CPU {cpu:.2f}", flush=True)


def mempalace(folder: Path, texts: Sequence[str], queries: Sequence[str]) -> None:
    """Time ``mempalace search`` on a MemPalace palace of the same texts, if installed."""
    command = shutil.which("mempalace")
    if command is None:
        print("mempalace: not installed (pip install mempalace), so not measured")
        return
    notes = folder / "notes"
    if not notes.exists():
        notes.mkdir(parents=True)
        for first in range(0, len(texts), CHUNKS_PER_DOCUMENT):
            chunk = texts[first : first + CHUNKS_PER_DOCUMENT]
            document = notes / f"doc-{first // CHUNKS_PER_DOCUMENT:05d}.txt"
            document.write_text("\n\n".join(chunk) + "\n", encoding="utf-8")
        env = {**os.environ, "MEMPALACE_PALACE_PATH": str(folder / "palace")}
        subprocess.run([command, "init", str(notes), "--yes"], env=env, check=False)
        subprocess.run([command, "mine", str(notes)], env=env, check=False)
    measure(
        "mempalace search",
        [[command, "--palace", str(folder / "palace"), "search", q] for q in queries],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--palace", type=Path, required=True, help="Where the palace is kept.")
    parser.add_argument("--size", type=int, default=SIZE)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--cache", type=Path, default=backend_corpus.DEFAULT_CACHE)
    parser.add_argument(
        "--mempalace", type=Path, help="Where MemPalace's palace is kept (default: beside)."
    )
    parser.add_argument(
        "--baseline", type=Path, help="Another checkout to time in turns with this one."
    )
    args = parser.parse_args()
    args.palace = args.palace.resolve()
    build(args.palace, args.size, args.cache)
    if args.baseline is not None:
        here = Path(__file__).resolve().parents[1]
        queries = backend_corpus.query_texts(args.runs + 1, seed=0)
        print(f"{os.cpu_count()} cores; {args.runs} runs each, after one unmeasured run")
        where = ["--palace", str(args.palace)]
        searches = [[*where, "search", q] for q in queries]
        measure_pair("palace search", searches, here, args.baseline.resolve())
        statuses = [[*where, "status"]] * (args.runs + 1)
        measure_pair("palace status", statuses, here, args.baseline.resolve())
        return
    palace = shutil.which("palace", path=str(Path(sys.executable).parent)) or "palace"
    queries = backend_corpus.query_texts(args.runs + 1, seed=0)
    print(f"{os.cpu_count()} cores; {args.runs} runs each, after one unmeasured run")
    measure(
        "palace search",
        [[palace, "--palace", str(args.palace), "search", q] for q in queries],
    )
    measure("palace status", [[palace, "--palace", str(args.palace), "status"]] * (args.runs + 1))
    folder = args.mempalace or args.palace.with_name(args.palace.name + "-mempalace")
    mempalace(folder, backend_corpus.texts(args.size, seed=0), queries)


if __name__ == "__main__":
    main()
