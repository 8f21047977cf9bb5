"""Vector backends compared: insert rate, query latency, and recall@10 against exact search.

For each corpus size (default 10,000 and 100,000 drawers) one ledger (SQLite) is filled
with generated drawers and their real all-MiniLM-L6-v2 vectors (``backend_corpus.py``:
embedded once and cached). Then each backend gets an empty index over that ledger and:

- **insert**: every vector upserted in batches of 512 (what ``palace reindex`` sends),
  then ``health()`` (which is when ``pgvector`` builds its HNSW index after a bulk load);
  the rate counts both.
- **query**: the same query vectors (real MiniLM vectors of generated questions, given to
  the backend: no embedding is timed), ``k = 10``, with no filter, a wing filter (10% of
  the drawers) and a wing + room filter (2%); median and p95 latency, after a warm-up.
- **recall@10**: the share of the exact top 10 (the ``sqlite`` backend: a numpy scan of
  the ledger's vectors) that the backend returns, for the same query and filter.
- **memory**: how much this process's resident memory grew from opening the backend to
  the end of its queries (for an embedded engine, its index in memory; for a server, the
  client only).

Every drawer vector is the real MiniLM vector of its own text: a size the cache does not
cover is embedded first, or, with ``--cached-only``, skipped (and the run says so). Nothing
is ever made up to fill a size.

Results are printed, never asserted. Not run by ``make test``::

    .venv/bin/python benchmarks/backends.py                       # 10k and 100k, all
    .venv/bin/python benchmarks/backends.py --sizes 10000 --backends chroma pgvector
    .venv/bin/python benchmarks/backends.py --pg-url postgresql://me@db/palace

PostgreSQL: ``--pg-url``, else a private server from ``pgserver`` in a temporary folder.
``chroma-server``: a ``chroma run`` server started on a free loopback port.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from backend_corpus import DEFAULT_CACHE, cached_vectors, embedded_prefix, query_texts, texts

from palace_plugins import PluginManager
from palace_retrievers.index import BackendContext, VectorIndex
from palace_retrievers.ledger.sqlite import LEDGER_FILE, SQLiteLedger
from palace_retrievers.records import Drawer, Filter

Vectors = npt.NDArray[np.float32]
WINGS = 10
ROOMS = 5
BATCH = 512
K = 10
MODEL = "sentence-transformers/all-MiniLM-L6-v2"
FILTERS: dict[str, Callable[[int], Filter]] = {
    "none": lambda q: Filter(),
    "wing": lambda q: Filter(wing=f"w{q % WINGS}"),
    "wing+room": lambda q: Filter(wing=f"w{q % WINGS}", room=f"r{q % ROOMS}"),
}
ALL_BACKENDS = ("sqlite", "chroma", "chroma-server", "qdrant", "pgvector")
#: Variants run only when named: ``chroma-hnsw`` is embedded Chroma answering every filter
#: from its HNSW index (``exact_below = 1``: no exact scan of the few records passing).
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {"chroma-hnsw": ("chroma", {"exact_below": 1})}


@dataclasses.dataclass
class Result:
    backend: str
    size: int
    insert_s: float = 0.0
    ready_s: float = 0.0
    latencies: dict[str, list[float]] = dataclasses.field(default_factory=dict)
    recall: dict[str, float] = dataclasses.field(default_factory=dict)
    memory_mb: float = 0.0


def resident_mb() -> float:
    """This process's resident memory (Linux ``/proc``), in MB; 0 where unknown."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return 0.0
    return pages * os.sysconf("SC_PAGE_SIZE") / 1e6


def corpus_vectors(size: int, *, largest: int, cache: Path, seed: int) -> Vectors:
    """The real MiniLM vectors of the first ``size`` texts of the corpus of ``largest``
    (its cached chunks; embedding what is not cached)."""
    vectors = cached_vectors(texts(largest, seed=seed), cache=cache, label="drawers", limit=size)
    if len(vectors) != size:
        raise RuntimeError(f"{len(vectors)} vectors for {size} texts")
    return vectors


def fill_ledger(palace_dir: Path, vectors: Vectors, *, seed: int) -> SQLiteLedger:
    corpus = texts(len(vectors), seed=seed)
    ledger = SQLiteLedger(palace_dir / LEDGER_FILE)
    start = datetime(2025, 1, 1, tzinfo=UTC).timestamp()
    for begin in range(0, len(vectors), 2048):
        drawers = [
            Drawer(
                id=f"d{i:06d}",
                text=corpus[i],
                wing=f"w{i % WINGS}",
                room=f"r{(i // WINGS) % ROOMS}",
                source=f"bench://{i // 20}",
                chunk_index=i % 20,
                content_date=datetime.fromtimestamp(start + i * 300.0, UTC),
            )
            for i in range(begin, min(begin + 2048, len(vectors)))
        ]
        ledger.upsert_drawers(drawers, vectors[begin : begin + len(drawers)], model=MODEL)
    return ledger


@contextmanager
def services(names: list[str], pg_url: str | None) -> Iterator[dict[str, dict[str, Any]]]:
    """Options per backend, starting the servers the chosen backends need."""
    options: dict[str, dict[str, Any]] = {name: {} for name in names}
    with ExitStack() as stack:
        root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="palace-bench-")))
        if "pgvector" in names:
            if pg_url is None:
                import pgserver
                import psycopg

                server = pgserver.get_server(root / "pg", cleanup_mode="delete")
                stack.callback(server.cleanup)
                # PostgreSQL's default 128 MB of shared buffers holds neither a 100,000-row
                # table of 384-d vectors nor its HNSW index; any server sized for the data
                # would have more. Restart with 1 GB.
                with psycopg.connect(server.get_uri(), autocommit=True) as conn:
                    conn.execute("ALTER SYSTEM SET shared_buffers = '1GB'")
                pgserver.pg_ctl(
                    ["-w", "-m", "fast", "stop"], pgdata=server.pgdata, user=server.system_user
                )
                server.ensure_postgres_running()
                pg_url = server.get_uri()
            options["pgvector"] = {"url": pg_url}
        if "chroma-server" in names:
            sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
            from services import ChromaServer, free_port

            chroma = ChromaServer(
                host="127.0.0.1", port=free_port(), path=root / "chroma", log=root / "chroma.log"
            )
            chroma.start()
            stack.callback(chroma.stop)
            options["chroma-server"] = {"url": chroma.url}
        yield options


def run_backend(
    name: str,
    options: dict[str, Any],
    *,
    palace_dir: Path,
    ledger: SQLiteLedger,
    queries: Vectors,
    truth: dict[str, list[list[str]]],
    budget: float,
) -> Result:
    plugin, extra = VARIANTS.get(name, ("chroma" if name == "chroma-server" else name, {}))
    options = {**options, **extra}
    factory = PluginManager().backend(plugin)
    context = BackendContext(
        palace_dir=palace_dir / name,
        collection="drawers",
        dimension=queries.shape[1],
        ledger=ledger,
        options=options,
    )
    context.palace_dir.mkdir(parents=True, exist_ok=True)
    before = resident_mb()
    index: VectorIndex = factory(context)
    result = Result(backend=name, size=ledger.count_vectors("drawers"))
    try:
        index.clear()
        start = time.perf_counter()
        for batch in ledger.iter_entries("drawers", batch_size=BATCH):
            index.upsert(entries=batch)
        result.insert_s = time.perf_counter() - start
        health = index.health()
        result.ready_s = time.perf_counter() - start
        if not health.ok or health.count != result.size:
            raise RuntimeError(f"{name} is not ready after the load: {health}")
        for mode, where_of in FILTERS.items():
            for q in range(min(5, len(queries))):  # warm-up
                index.query(vector=queries[q], k=K, where=where_of(q))
            times: list[float] = []
            found = expected = 0
            deadline = time.perf_counter() + budget
            for q, vector in enumerate(queries):
                where = where_of(q)
                begin = time.perf_counter()
                matches = index.query(vector=vector, k=K, where=where)
                times.append(time.perf_counter() - begin)
                exact = truth[mode][q]
                found += len({m.id for m in matches} & set(exact))
                expected += len(exact)
                if time.perf_counter() > deadline and q >= 20:
                    break
            result.latencies[mode] = times
            result.recall[mode] = found / expected if expected else 1.0
        result.memory_mb = resident_mb() - before
    finally:
        index.close()
    return result


def exact_answers(ledger: SQLiteLedger, palace_dir: Path, queries: Vectors) -> dict[str, Any]:
    factory = PluginManager().backend("sqlite")
    exact = factory(
        BackendContext(
            palace_dir=palace_dir,
            collection="drawers",
            dimension=queries.shape[1],
            ledger=ledger,
        )
    )
    return {
        mode: [
            [m.id for m in exact.query(vector=v, k=K, where=where_of(q))]
            for q, v in enumerate(queries)
        ]
        for mode, where_of in FILTERS.items()
    }


def ms(values: list[float], quantile: float) -> str:
    if not values:
        return "-"
    ordered = sorted(values)
    at = ordered[min(len(ordered) - 1, round(quantile * (len(ordered) - 1)))]
    return f"{at * 1000:.1f}"


def report(results: list[Result]) -> None:
    print(
        "| backend | drawers | insert/s | ready (s) | "
        + " | ".join(f"{m} median / p95 ms | {m} R@10" for m in FILTERS)
        + " | queries | memory (MB) |"
    )
    print("|---" * (6 + 2 * len(FILTERS)) + "|")
    for r in results:
        cells = [
            r.backend,
            f"{r.size:,}",
            "(ledger)" if r.backend == "sqlite" else f"{r.size / r.ready_s:,.0f}",
            "-" if r.backend == "sqlite" else f"{r.ready_s:.1f}",
        ]
        for mode in FILTERS:
            values = r.latencies.get(mode, [])
            median = statistics.median(values) * 1000 if values else float("nan")
            cells.append(f"{median:.1f} / {ms(values, 0.95)}")
            cells.append(f"{r.recall.get(mode, float('nan')):.3f}")
        cells.append(str(min((len(v) for v in r.latencies.values()), default=0)))
        cells.append(f"{r.memory_mb:,.0f}")
        print("| " + " | ".join(cells) + " |")
    sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument(
        "--backends", nargs="+", default=list(ALL_BACKENDS), choices=[*ALL_BACKENDS, *VARIANTS]
    )
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument(
        "--budget", type=float, default=60.0, help="seconds of queries per backend and filter"
    )
    parser.add_argument(
        "--cached-only",
        action="store_true",
        help="embed nothing: skip the sizes whose vectors the cache does not hold in full",
    )
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument(
        "--corpus",
        type=int,
        default=100_000,
        help="the corpus size backend_corpus.py embedded (--size): its cached chunks are used",
    )
    parser.add_argument("--pg-url", default=None)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    # Vectors are cached in chunks of the corpus backend_corpus.py embedded (--size, 100,000
    # by default); every size is a prefix of it.
    largest = max(*args.sizes, args.corpus)
    available = embedded_prefix(texts(largest, seed=args.seed), cache=args.cache, label="drawers")
    sizes = sorted(args.sizes)
    if args.cached_only:
        skipped = [size for size in sizes if size > available]
        sizes = [size for size in sizes if size <= available]
        for size in skipped:
            print(f"skipping {size:,} drawers: the cache holds {available:,} real vectors")
    queries = cached_vectors(
        query_texts(args.queries, seed=args.seed), cache=args.cache, label="queries"
    )
    print(f"cache {args.cache}: {available:,} drawer vectors embedded; queries {len(queries)}")
    if any(name.startswith("chroma") for name in args.backends):
        # Imported before any backend opens, so that its memory is not counted as the
        # first chroma backend's.
        import chromadb  # noqa: F401

    with services(args.backends, args.pg_url) as options:
        for size in sizes:
            vectors = corpus_vectors(size, largest=largest, cache=args.cache, seed=args.seed)
            print(f"\n## {size:,} drawers (every vector the real MiniLM vector of its text)")
            with tempfile.TemporaryDirectory(prefix="palace-bench-") as folder:
                palace_dir = Path(folder)
                ledger = fill_ledger(palace_dir, vectors, seed=args.seed)
                truth = exact_answers(ledger, palace_dir, queries)
                results = []
                for name in args.backends:
                    print(f"  {name} ...", flush=True)
                    results.append(
                        run_backend(
                            name,
                            options[name],
                            palace_dir=palace_dir,
                            ledger=ledger,
                            queries=queries,
                            truth=truth,
                            budget=args.budget,
                        )
                    )
                    report(results[-1:])
                print()
                report(results)
                ledger.close()


if __name__ == "__main__":
    main()
