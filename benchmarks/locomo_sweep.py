"""Search-only variants of the LoCoMo benchmark over one palace built by ``locomo.py``.

Each variant is a set of ``palace.toml`` overrides; the palace is reopened with them (the
drawers, closets and vectors are not rebuilt) and every question is asked through
``PalaceRetriever.invoke``, as in ``locomo.py``. Query vectors are cached across variants
so a sweep measures ranking, not embedding; latency is therefore not reported here.

    .venv/bin/python benchmarks/locomo.py --palace /tmp/lp --door turns --no-baselines
    .venv/bin/python benchmarks/locomo_sweep.py --palace /tmp/lp/turns \\
        "search.closets=false" "search.neighbour_weight=0.2 search.normalisation=zscore"

The palace is one door's folder (``turns`` or ``plain``: their drawers are the turns).
Each argument is one variant: space-separated ``KEY=VALUE`` pairs (``-`` for the defaults).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import locomo
import numpy as np
from langchain_palace import PalaceRetriever

from palace_retrievers import Palace
from palace_retrievers.embedder import Embedder, Vectors


class CachedQueries(Embedder):
    """Wraps an embedder and remembers the vector of each query it has seen."""

    def __init__(self, inner: Embedder) -> None:
        self._inner = inner
        self._cache: dict[str, Vectors] = {}

    @property
    def model_name(self) -> str:
        return self._inner.model_name

    @property
    def dimension(self) -> int:
        return self._inner.dimension

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        return self._inner.embed_documents(texts)

    def preload(self, vectors: dict[str, Vectors]) -> None:
        self._cache.update(vectors)

    def embed_query(self, text: str) -> Vectors:
        if text not in self._cache:
            self._cache[text] = np.asarray(self._inner.embed_query(text))
        return self._cache[text]


def run(palace: Palace, questions: Sequence[locomo.Question]) -> locomo.System:
    system = locomo.System("palace")
    retriever = PalaceRetriever(palace=palace, k=10)
    for q in questions:
        ten = [str(d.id) for d in retriever.invoke(q.text, wing=q.wing)]
        curve = [str(d.id) for d in retriever.invoke(q.text, k=locomo.CURVE_K, wing=q.wing)]
        system.rankings.append(locomo.ranking(ten, curve))
    return system


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=locomo.DEFAULT_DATA)
    parser.add_argument("--palace", type=Path, required=True, help="built by locomo.py")
    parser.add_argument("--backend", default="sqlite", help="sqlite: exact and fastest")
    parser.add_argument("variants", nargs="+")
    args = parser.parse_args(argv)
    _, questions = locomo.load(args.data)
    with Palace.open(args.palace, backend=args.backend, create=False) as first:
        embedder = CachedQueries(first.embedder)
    cache = args.palace / "query_vectors.npz"  # a sweep's reruns skip embedding
    if cache.exists():
        stored = np.load(cache)
        embedder.preload({q.text: stored[str(n)] for n, q in enumerate(questions)})
    else:
        vectors = {str(n): embedder.embed_query(q.text) for n, q in enumerate(questions)}
        np.savez(cache, **vectors)  # type: ignore[arg-type]
    for variant in args.variants:
        pairs = [] if variant == "-" else variant.split()
        config = locomo.overrides(pairs)
        with Palace.open(
            args.palace, backend=args.backend, embedder=embedder, config=config, create=False
        ) as palace:
            system = run(palace, questions)
        cells = []
        for k in locomo.KS:
            m = locomo.metrics(system, questions, k)
            cells.append(f"@{k} {m['turn']:.3f}/{m['all']:.3f}/{m['session']:.3f}")
        per = []
        for category in locomo.CATEGORIES:
            picked = [i for i, q in enumerate(questions) if q.category == category]
            view = locomo.System("", [system.rankings[i] for i in picked])
            per.append(f"{locomo.metrics(view, [questions[i] for i in picked], 10)['turn']:.3f}")
        print(f"{'  '.join(cells)}  cats {' '.join(per)}  | {variant}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
