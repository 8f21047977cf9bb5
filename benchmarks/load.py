"""Load: 4 readers search while 1 process mines and 1 remembers, on one palace.

A palace of ``--drawers`` drawers (default 50,000; generated texts of
``backend_corpus.py``, ten wings of five rooms, owned half by ``u0`` and half by ``u1``,
in documents of 16 drawers, 8 per owner) is built once under ``--palace`` (``base/``)
and copied to ``run/`` for each run, so every run starts from the same palace. The base
palace has no closets unless ``--build-closets`` (a closet's text is new, so the model
must embed it: some 40 minutes for 50,000 drawers on a shared 2-core machine); the runs
use the defaults, closets on, so the miner files closets as usual.
Then, in separate processes (``spawn``):

- **readers** (``--readers``, default 4): ``Palace.search`` in a loop, ``k = 10``, with
  queries drawn from 200 generated questions, for ``u0`` or ``u1``, a third of them
  filtered to a wing. First for ``--idle-seconds`` alone (the idle latency, same
  processes, same run), then for ``--seconds`` while the writers write (under load).
- **miner**: ``Palace.mine`` (the ``files`` source, wing ``mined``, owner ``u0``) of one
  folder that gets ``--mine-files`` new one-text files before each round (as a notes
  folder mined again and again), in a loop, waiting up to ``--mine-wait`` seconds for the
  writer lock; every file of a mine that returned is recorded.
- **rememberer**: ``Palace.remember`` of a new generated statement in a loop, for ``u0``
  and ``u1`` in turn (the palace's default ``mining.lock_timeout`` wait for the lock);
  every memory id returned is recorded.

Every exception counts as an error of its process. Afterwards a fresh process checks for
**lost writes**: every mined file must be a drawer of its source in the ledger, every
remembered id a memory of its owner, and each must be found in the vector index by its own
vector (``k = 10``, filtered to its owner; a memory superseded since is not indexed, by
design, and counted apart); and the index must hold as many vectors as the ledger.

Embeddings: the real all-MiniLM-L6-v2 throughout, through an embedder that returns the
*cached* vector of a text the model already embedded (``backend_corpus.py``'s cache of
drawer and question vectors: the same model, the same vectors) and calls the model for
any other text (closets, mined chunks not cached, remembered statements). So building the
palace costs no embedding, and a reader's latency counts no query embedding (about 10 ms
more on an idle CPU; ``--embed-queries`` embeds them for real).

Results are printed, never asserted. Not run by ``make test``::

    .venv/bin/python benchmarks/load.py --palace /tmp/load-palace            # 50,000
    .venv/bin/python benchmarks/load.py --palace /tmp/load-small --drawers 2000 --seconds 20
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import random
import shutil
import sqlite3
import subprocess
import time
import traceback
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from backend_corpus import DEFAULT_CACHE, cached_vectors, embedded_prefix, query_texts, texts

from palace_retrievers import Filter, Palace
from palace_retrievers.embedder import Embedder, Vectors, unit_rows

MODEL = "sentence-transformers/all-MiniLM-L6-v2"
USERS = ("u0", "u1")
WINGS = 10
ROOMS = 5
K = 10
BUILD_BATCH = 1024
DOC = 16
MINED_WING = "mined"


class CachedEmbedder(Embedder):
    """The real MiniLM, answering from a cache of its own vectors when it can.

    A text whose vector the model computed before (``backend_corpus.py``'s cache) gets
    that vector back; any other text is embedded by the model, loaded on first need.
    """

    def __init__(self, cache: dict[str, Vectors], *, use_cache: bool = True) -> None:
        self._cache = cache
        self._use_cache = use_cache
        self._model: Embedder | None = None
        self.hits = 0
        self.misses = 0

    @property
    def model_name(self) -> str:
        return MODEL

    @property
    def dimension(self) -> int:
        return 384

    def model(self) -> Embedder:
        if self._model is None:
            from palace_plugins.builtin.embedders.sentence_transformers import (
                SentenceTransformerEmbedder,
            )

            self._model = SentenceTransformerEmbedder()
        return self._model

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        missing = [i for i, t in enumerate(texts) if not self._use_cache or t not in self._cache]
        for i, text in enumerate(texts):
            if self._use_cache and text in self._cache:
                out[i] = self._cache[text]
        if missing:
            out[missing] = self.model().embed_documents([texts[i] for i in missing])
        self.hits += len(texts) - len(missing)
        self.misses += len(missing)
        return unit_rows(out, dimension=self.dimension, count=len(texts))


def load_cache(
    args: argparse.Namespace, corpus: list[str], queries: list[str]
) -> dict[str, Vectors]:
    """Text → real MiniLM vector, for every text ``backend_corpus.py`` has cached."""
    cache: dict[str, Vectors] = {}
    for label, items in (("drawers", corpus), ("queries", queries)):
        have = embedded_prefix(items, cache=args.cache, label=label)
        if have:
            vectors = cached_vectors(items, cache=args.cache, label=label, limit=have)
            cache.update(zip(items[:have], vectors, strict=True))
    return cache


def open_palace(path: Path, embedder: Embedder, **config: Any) -> Palace:
    return Palace.open(path, embedder=embedder, backend="chroma", config=config or None)


# -- building -----------------------------------------------------------------------------


def build(args: argparse.Namespace, corpus: list[str], cache: dict[str, Vectors]) -> Path:
    """The base palace of ``args.drawers`` drawers, built once (``base/built.json``)."""
    base = args.palace / "base"
    marker = base / "built.json"
    wanted = {"drawers": args.drawers, "closets": args.build_closets, "layout": DOC}
    if marker.exists() and {k: json.loads(marker.read_text()).get(k) for k in wanted} == wanted:
        print(f"reusing the palace built in {base}: {wanted}")
        return base
    shutil.rmtree(base, ignore_errors=True)
    embedder = CachedEmbedder(cache)
    started = time.perf_counter()
    closets = {} if args.build_closets else {"closets": {"extractor": ""}}
    with open_palace(base, embedder, **closets) as palace:
        for start in range(0, args.drawers, BUILD_BATCH):
            for user in range(len(USERS)):
                rows = range(start + user, min(start + BUILD_BATCH, args.drawers), len(USERS))
                palace.add_texts(
                    [corpus[i] for i in rows],
                    metadatas=[layout(i) for i in rows],
                    user_id=USERS[user],
                )
            done = min(start + BUILD_BATCH, args.drawers)
            rate = done / (time.perf_counter() - started)
            print(f"  built {done:,}/{args.drawers:,} drawers ({rate:.0f}/s)", flush=True)
    seconds = time.perf_counter() - started
    print(
        f"built in {seconds:.0f} s; vectors from the cache: {embedder.hits:,}, "
        f"embedded by the model: {embedder.misses:,} (closets, uncached texts)"
    )
    (base / "palace.toml").unlink()  # the runs use the defaults (closets on)
    marker.write_text(json.dumps({**wanted, "seconds": seconds}))
    return base


def layout(i: int) -> dict[str, Any]:
    """Where drawer ``i`` goes: documents of 16 drawers (8 per owner, in chunk order), each
    in one wing and room, so that neighbours and sources are as in a mined palace."""
    doc = i // DOC
    return {
        "wing": f"w{doc % WINGS}",
        "room": f"r{doc % ROOMS}",
        "source": f"doc-{doc:05d}",
        "chunk_index": (i % DOC) // len(USERS),
    }


# -- the processes ------------------------------------------------------------------------


def worker(role: str, number: int, args: argparse.Namespace, barrier: Any, out: Any) -> None:
    """One process: open the palace, warm up, wait for the others, then work."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    result: dict[str, Any] = {"role": role, "number": number, "errors": Counter()}
    try:
        corpus = texts(args.drawers + args.extra, seed=args.seed)
        queries = query_texts(200, seed=args.seed)
        cache = load_cache(args, corpus, queries)
        embedder = CachedEmbedder(cache, use_cache=not (role == "reader" and args.embed_queries))
        palace = open_palace(args.palace / "run", embedder)
        run = {"reader": read, "miner": mine, "rememberer": remember}[role]
        work = run(palace, args, number, corpus, queries, result)  # warm up, then ready
        barrier.wait()
        if args.profile and role == "reader" and number == 0:
            import cProfile

            cProfile.runctx("work(time.time())", globals(), locals(), str(args.profile))
        else:
            work(time.time())
        palace.close()
        result["cache_hits"], result["cache_misses"] = embedder.hits, embedder.misses
    except Exception as exc:
        result["errors"][f"setup {type(exc).__name__}: {exc}"] += 1
        traceback.print_exc()
        barrier.abort()
    out.put(result)


def note_error(result: dict[str, Any], exc: Exception) -> None:
    result["errors"][f"{type(exc).__name__}: {str(exc)[:160]}"] += 1


def read(
    palace: Palace,
    args: argparse.Namespace,
    number: int,
    corpus: list[str],
    queries: list[str],
    result: dict[str, Any],
) -> Callable[[float], None]:
    rng = random.Random(args.seed * 1000 + number)

    def one() -> tuple[float, bool]:
        q = rng.randrange(len(queries))
        wing = f"w{q % WINGS}" if rng.random() < 1 / 3 else None
        started = time.perf_counter()
        hits = palace.search(queries[q], K, wing=wing, user_id=USERS[rng.randrange(len(USERS))])
        return time.perf_counter() - started, any(h.is_memory for h in hits)

    for _ in range(5):
        one()

    def work(start: float) -> None:
        for phase, begin, end in (
            ("idle", start, start + args.idle_seconds),
            ("load", start + args.idle_seconds, start + args.idle_seconds + args.seconds),
        ):
            latencies: list[float] = []
            with_memories: list[float] = []  # a search that returns memories also writes
            while time.time() < begin:
                time.sleep(0.01)
            while time.time() < end:
                try:
                    seconds, recalled = one()
                    latencies.append(seconds)
                    if recalled:
                        with_memories.append(seconds)
                except Exception as exc:
                    note_error(result, exc)
                    result.setdefault(f"{phase}_errors", 0)
                    result[f"{phase}_errors"] += 1
            result[phase] = latencies
            result[f"{phase}_with_memories"] = with_memories
            result[f"{phase}_degraded"] = sorted(palace.indexes.degraded)
        if number == 0:
            time.sleep(3.0)  # let the writers' last calls land
            result["stale"] = seen_by(palace)

    return work


def seen_by(palace: Palace) -> dict[str, int]:
    """What this palace, opened before the writes, fails to find of what was written."""
    mined = palace.ledger.drawer_ids(Filter(wing=MINED_WING, user_id=USERS[0]))
    memories = [(m.id, u) for u in USERS for m in palace.memories(user_id=u, limit=100_000)]
    lost = _unfindable(palace, "drawers", mined, wing=MINED_WING)
    for user in USERS:
        lost += _unfindable(palace, "memories", [i for i, u in memories if u == user], user=user)
    return {"written": len(mined) + len(memories), "not_found": len(lost)}


def mine(
    palace: Palace,
    args: argparse.Namespace,
    number: int,
    corpus: list[str],
    queries: list[str],
    result: dict[str, Any],
) -> Callable[[float], None]:
    root = args.palace / "mine-input"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    extra = corpus[args.drawers :]
    mined: list[tuple[str, str]] = []
    result["mined"] = mined
    result["rounds"] = []
    palace.embedder.embed_documents(["warm up"])  # load the model before the clock starts

    def work(start: float) -> None:
        begin, end = start + args.idle_seconds, start + args.idle_seconds + args.seconds
        while time.time() < begin:
            time.sleep(0.01)
        round_ = 0
        while time.time() < end:
            files = []
            for i in range(args.mine_files):
                text = extra[(round_ * args.mine_files + i) % len(extra)]
                path = root / f"note-{round_:04d}-{i:04d}.txt"
                path.write_text(text, encoding="utf-8")
                files.append((str(path), text))
            round_ += 1
            started = time.perf_counter()
            try:
                report = palace.mine(root, wing=MINED_WING, user_id=USERS[0], wait=args.mine_wait)
            except Exception as exc:
                note_error(result, exc)
                continue
            result["rounds"].append((time.perf_counter() - started, report.drawers_added))
            mined.extend(files)

    return work


def remember(
    palace: Palace,
    args: argparse.Namespace,
    number: int,
    corpus: list[str],
    queries: list[str],
    result: dict[str, Any],
) -> Callable[[float], None]:
    statements = texts(20_000, seed=args.seed + 77)
    remembered: list[tuple[str, str, str]] = []
    result["remembered"] = remembered
    result["latencies"] = []
    palace.embedder.embed_documents(["warm up"])  # load the model before the clock starts

    def work(start: float) -> None:
        begin, end = start + args.idle_seconds, start + args.idle_seconds + args.seconds
        while time.time() < begin:
            time.sleep(0.01)
        i = 0
        while time.time() < end:
            user = USERS[i % len(USERS)]
            started = time.perf_counter()
            try:
                got = palace.remember(statements[i % len(statements)], user_id=user)
            except Exception as exc:
                note_error(result, exc)
            else:
                result["latencies"].append(time.perf_counter() - started)
                remembered.append((got.memory.id, user, got.action))
            i += 1

    return work


# -- checking -----------------------------------------------------------------------------


def lost_writes(path: Path, miner: dict[str, Any], rememberer: dict[str, Any]) -> dict[str, Any]:
    """What the writers were told was written, looked for in the ledger and the index."""
    with open_palace(path, CachedEmbedder({})) as palace:
        ledger = palace.ledger
        by_source: dict[str, set[str]] = {}
        for batch in ledger.iter_drawers(batch_size=2048):
            for d in batch:
                if d.wing == MINED_WING:
                    by_source.setdefault(d.source, set()).add(d.text.strip())
        mined: list[tuple[str, str]] = miner.get("mined", [])
        missing_drawers = [p for p, t in mined if not _filed(by_source, p, t.strip())]
        mined_ids = ledger.drawer_ids(Filter(wing=MINED_WING, user_id=USERS[0]))
        unindexed_drawers = _unfindable(palace, "drawers", mined_ids, wing=MINED_WING)
        missing_memories, superseded, active = [], 0, []
        for memory_id, user, _ in rememberer.get("remembered", []):
            try:
                memory = palace.memory(memory_id, user_id=user)
            except Exception:
                missing_memories.append(memory_id)
                continue
            if memory.status == "active":
                active.append((memory_id, user))
            else:
                superseded += 1
        unindexed_memories = []
        for user in USERS:
            ids = [m for m, u in active if u == user]
            unindexed_memories += _unfindable(palace, "memories", ids, user=user)
        counts = {s.collection: (s.count, s.ledger_count) for s in palace.stats().indexes}
        pending = {c: len(ledger.pending_index(c)) for c in counts}
    return {
        "mined_files": len(mined),
        "mined_drawers_in_ledger": len(mined_ids),
        "files_missing_from_ledger": len(missing_drawers),
        "mined_drawers_not_found_in_index": len(unindexed_drawers),
        "memories_returned": len(rememberer.get("remembered", [])),
        "memories_missing_from_ledger": len(missing_memories),
        "memories_superseded_since": superseded,
        "active_memories_not_found_in_index": len(unindexed_memories),
        "index_vs_ledger": counts,
        "journal_pending": pending,
    }


def _filed(by_source: dict[str, set[str]], path: str, text: str) -> bool:
    for source, found in by_source.items():
        if (path == source or path.endswith("/" + source)) and text in found:
            return True
    return False


def _unfindable(
    palace: Palace, collection: str, ids: list[str], *, wing: str | None = None, user: str = "u0"
) -> list[str]:
    """The ids the index does not return among the 10 nearest their own vector."""
    lost = []
    for start in range(0, len(ids), 512):
        for entry in palace.ledger.index_entries(collection, ids[start : start + 512]):
            where = Filter(wing=wing, user_id=entry.user_id or user)
            matches = palace.indexes.query(collection, vector=entry.vector, k=K, where=where)
            if entry.id not in {m.id for m in matches}:
                lost.append(entry.id)
    return lost


# -- reporting ----------------------------------------------------------------------------


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) * 1000 if values else float("nan")


def report(args: argparse.Namespace, results: list[dict[str, Any]], lost: dict[str, Any]) -> None:
    readers = [r for r in results if r["role"] == "reader"]
    closets = "with" if args.build_closets else "without"
    print(
        f"\n{args.drawers:,} drawers (built {closets} closets), {len(readers)} readers, "
        f"{args.idle_seconds:g} s idle then {args.seconds:g} s under load"
    )
    print(f"load average (1, 5, 15 min) before: {args.load_before}, after: {os.getloadavg()}")
    print(
        f"code: {args.commit}"
        + (" + an index on drawers (wing, source)" if args.source_index else "")
    )
    print("\n| phase | queries | queries/s | p50 ms | p99 ms | errors |")
    print("|---|---|---|---|---|---|")
    p99 = {}
    for phase, seconds in (("idle", args.idle_seconds), ("load", args.seconds)):
        latencies = [x for r in readers for x in r.get(phase, [])]
        errors = sum(r.get(f"{phase}_errors", 0) for r in readers)
        p99[phase] = pct(latencies, 99)
        print(
            f"| {phase} | {len(latencies):,} | {len(latencies) / seconds:.1f} | "
            f"{pct(latencies, 50):.1f} | {p99[phase]:.1f} | {errors} |"
        )
    print(f"\np99 under load / idle p99: {p99['load'] / p99['idle']:.2f} (target < 10)")
    for phase in ("idle", "load"):
        recalled = [x for r in readers for x in r.get(f"{phase}_with_memories", [])]
        print(
            f"  {phase}: {len(recalled):,} searches returned memories (and so wrote their "
            f"recall counts): p50 {pct(recalled, 50):.1f} ms, p99 {pct(recalled, 99):.1f} ms"
        )
    print("\n| process | operations | p50 ms | p99 ms | errors |")
    print("|---|---|---|---|---|")
    for r in results:
        if r["role"] == "reader":
            ops = [*r.get("idle", []), *r.get("load", [])]
            p50, p99_ = pct(ops, 50), pct(ops, 99)
        elif r["role"] == "miner":
            ops = [s for s, _ in r.get("rounds", [])]
            p50, p99_ = pct(ops, 50), pct(ops, 99)
        else:
            ops = r.get("latencies", [])
            p50, p99_ = pct(ops, 50), pct(ops, 99)
        name = f"{r['role']} {r['number']}" if r["role"] == "reader" else r["role"]
        print(f"| {name} | {len(ops):,} | {p50:.1f} | {p99_:.1f} | {sum(r['errors'].values())} |")
    for r in results:
        for message, count in r["errors"].most_common(5):
            print(f"  {r['role']} {r['number']}: {count} x {message}")
    miner = next(r for r in results if r["role"] == "miner")
    added = sum(n for _, n in miner.get("rounds", []))
    print(f"\nminer: {len(miner.get('rounds', []))} mines, {added:,} drawers filed")
    actions = Counter(a for r in results for _, _, a in r.get("remembered", []))
    print(f"rememberer: {dict(actions)}")
    hits = sum(r.get("cache_hits", 0) for r in results)
    misses = sum(r.get("cache_misses", 0) for r in results)
    print(f"vectors from the MiniLM cache: {hits:,}; embedded by MiniLM during the run: {misses:,}")
    stale = next((r["stale"] for r in results if "stale" in r), None)
    print(f"reader 0 (opened before the writes) by vector, after the run: {stale}")
    for r in results:
        for phase in ("idle", "load"):
            if r.get(f"{phase}_degraded"):
                print(f"  reader {r['number']} {phase}: degraded {r[f'{phase}_degraded']}")
    print("\nlost writes (target: all zero):")
    for key, value in lost.items():
        print(f"  {key}: {value}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--palace", type=Path, required=True)
    parser.add_argument("--drawers", type=int, default=50_000)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--idle-seconds", type=float, default=20.0)
    parser.add_argument("--readers", type=int, default=4)
    parser.add_argument("--mine-files", type=int, default=100)
    parser.add_argument("--mine-wait", type=float, default=10.0)
    parser.add_argument("--extra", type=int, default=20_000, help="corpus texts kept to mine")
    parser.add_argument("--embed-queries", action="store_true")
    parser.add_argument(
        "--build-closets",
        action="store_true",
        help="build the base palace with closets (the model embeds each one: slow)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--profile", type=Path, help="cProfile reader 0 into this file")
    parser.add_argument(
        "--source-index",
        action="store_true",
        help="add an index on drawers (wing, source, chunk_index) to the run's ledger "
        "(a proposed fix: the ledger has none, and the neighbour stage looks drawers up so)",
    )
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    args = parser.parse_args()
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

    corpus = texts(args.drawers + args.extra, seed=args.seed)
    cache = load_cache(args, corpus, query_texts(200, seed=args.seed))
    print(f"cached MiniLM vectors: {len(cache):,} texts ({args.cache})")
    base = build(args, corpus, cache)
    run = args.palace / "run"
    shutil.rmtree(run, ignore_errors=True)
    shutil.copytree(base, run)
    if args.source_index:  # the proposed fix of the neighbour stage's look-up by source
        with sqlite3.connect(run / "ledger.sqlite3") as db:
            db.execute("CREATE INDEX drawers_wing_source ON drawers (wing, source, chunk_index)")

    args.load_before = tuple(round(x, 2) for x in os.getloadavg())
    args.commit = subprocess.run(
        ["git", "describe", "--always", "--dirty"],
        capture_output=True,
        text=True,
        cwd=Path(__file__).parent,
        check=False,
    ).stdout.strip()
    ctx = mp.get_context("spawn")
    roles = [("reader", i) for i in range(args.readers)] + [("miner", 0), ("rememberer", 0)]
    barrier = ctx.Barrier(len(roles))
    out = ctx.Queue()
    processes = [ctx.Process(target=worker, args=(*role, args, barrier, out)) for role in roles]
    for process in processes:
        process.start()
    results = [out.get() for _ in processes]
    for process in processes:
        process.join()
    results.sort(key=lambda r: (["reader", "miner", "rememberer"].index(r["role"]), r["number"]))
    miner = next(r for r in results if r["role"] == "miner")
    rememberer = next(r for r in results if r["role"] == "rememberer")
    lost = lost_writes(run, miner, rememberer)
    report(args, results, lost)


if __name__ == "__main__":
    main()
