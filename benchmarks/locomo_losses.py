"""Where the gold turns of LoCoMo questions are lost, stage by stage.

Reopens a palace built by ``locomo.py`` (the ``turns`` or ``plain`` door, whose drawers
are the turns) and, for every question, follows each gold turn through the search
pipeline's stages at k = 10: is it among the vector floor's candidates, the full-text
ones, the closets' boosted drawers, the neighbours the expansion adds, and where does it
rank in the end (the pipeline asked for every candidate)? Printed per category: the share
of gold turns each stage brings in, the share that reaches the candidates at all, and
how the candidates' ranks fall (top 10, 11-20, 21-50, beyond), plus the rank a gold turn
that never reaches the candidates has by plain cosine over its whole wing.

    .venv/bin/python benchmarks/locomo.py --palace /tmp/lp --door turns --no-baselines
    .venv/bin/python benchmarks/locomo_losses.py --palace /tmp/lp/turns
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import locomo
import numpy as np
import numpy.typing as npt

from palace_retrievers import Palace
from palace_retrievers.records import Filter
from palace_retrievers.search.pipeline import SearchPipeline

K = 10
STAGES = ("vector", "lexical", "closet", "expanded", "candidate")
BANDS = ((1, 10), (11, 20), (21, 50), (51, 10**9))


def stages(
    pipe: SearchPipeline, query: str, vector: npt.NDArray[np.float32], where: Filter
) -> dict[str, set[str]]:
    """The drawer ids each candidate stage brings in for ``query`` at k = 10 (the
    pipeline's own stages, called one by one)."""
    vec = np.asarray(vector, dtype=np.float32)
    matches = pipe._indexes.query("drawers", vector=vec, k=pipe.candidates(K), where=where)
    query_terms = pipe._terms(query)
    worded = pipe.lexical(query, where)
    boosts = pipe._closet_boosts(vec, set(query_terms), where)
    expand = pipe.config.expand_neighbours
    seeds = [m.id for m in matches[:expand]] + worded[:expand]
    near = pipe._adjacent(pipe._get_drawers(seeds), where) if expand else []
    return {
        "vector": {m.id for m in matches},
        "lexical": set(worded),
        "closet": set(boosts),
        "expanded": set(near),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=locomo.DEFAULT_DATA)
    parser.add_argument("--palace", type=Path, required=True, help="built by locomo.py")
    parser.add_argument("--backend", default="sqlite")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    _, questions = locomo.load(args.data)
    brought: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    bands: dict[int, list[int]] = defaultdict(lambda: [0] * len(BANDS))
    lost_rank: dict[int, list[int]] = defaultdict(list)
    gold_n: dict[int, int] = defaultdict(int)
    with Palace.open(args.palace, backend=args.backend, create=False) as palace:
        pipe: SearchPipeline = palace._pipeline
        floor = pipe.candidates(K)
        # Every candidate of a k = 10 search, ranked: the floor of k = 10, all hits kept.
        pipe.candidates = lambda k: floor  # type: ignore[method-assign]
        for q in questions:
            where = Filter(wing=q.wing)
            vector = np.asarray(palace.embedder.embed_query(q.text), dtype=np.float32)
            found = stages(pipe, q.text, vector, where)
            ranking = [h.id for h in pipe.run(q.text, k=100_000, where=where, vector=vector)]
            found["candidate"] = set(ranking)
            whole = None
            for gold in q.gold:
                gold_n[q.category] += 1
                for stage in STAGES:
                    brought[q.category][stage] += gold in found[stage]
                if gold in found["candidate"]:
                    rank = ranking.index(gold) + 1
                    band = next(n for n, (lo, hi) in enumerate(BANDS) if lo <= rank <= hi)
                    bands[q.category][band] += 1
                else:
                    if whole is None:
                        every = pipe._indexes.query("drawers", vector=vector, k=10_000, where=where)
                        whole = [m.id for m in every]
                    lost_rank[q.category].append(whole.index(gold) + 1 if gold in whole else -1)
    print(
        "category | gold turns | "
        + " | ".join(STAGES)
        + " | rank 1-10 | 11-20 | 21-50 | >50 | lost: median cosine rank in wing"
    )
    for category in sorted(gold_n):
        n = gold_n[category]
        shares = " | ".join(f"{brought[category][s] / n:.3f}" for s in STAGES)
        ranks = " | ".join(f"{b / n:.3f}" for b in bands[category])
        lost = sorted(lost_rank[category])
        median = lost[len(lost) // 2] if lost else 0
        print(f"{category} | {n} | {shares} | {ranks} | {median} (n={len(lost)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
