"""The score parts of a candidate and their fusion: BM25, then weighted sum or reciprocal rank.

:func:`bm25_scores` scores the candidates' words (Okapi BM25, the candidate set's own
statistics). The two score lists, vector and BM25, are then fused.

Weighted fusion scales each list first, so that cosine similarities (around 0.2-0.7)
and BM25 scores (0 to 20 or more) weigh what their weights say:

- ``max``: divide by the largest score (a list of zeros stays zeros);
- ``minmax``: map the lowest to 0 and the highest to 1;
- ``zscore``: subtract the mean, divide by the standard deviation, then squash into
  (0, 1) with the logistic function, so a boost added afterwards keeps its meaning.

Reciprocal-rank fusion ignores the scores' scale: ``w / (rrf_k + rank)``, rank from 1,
rescaled so that a candidate first in both lists scores 1.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from palace_retrievers.config import SearchConfig


def normalise(scores: Sequence[float], method: str) -> list[float]:
    """``scores`` scaled by ``method`` (``"max"``, ``"minmax"`` or ``"zscore"``).

    Raises:
        ValueError: ``method`` is not one of the three.
    """
    if not scores:
        return []
    if method == "max":
        top = max(scores)
        return [s / top if top > 0 else 0.0 for s in scores]
    if method == "minmax":
        low, high = min(scores), max(scores)
        if high - low <= 0:
            return [1.0 if high > 0 else 0.0 for _ in scores]
        return [(s - low) / (high - low) for s in scores]
    if method == "zscore":
        mean = sum(scores) / len(scores)
        std = math.sqrt(sum((s - mean) ** 2 for s in scores) / len(scores))
        if std <= 0:
            return [0.5 for _ in scores]
        return [1.0 / (1.0 + math.exp(-(s - mean) / std)) for s in scores]
    raise ValueError(f"unknown normalisation {method!r}")


def ranks(scores: Mapping[str, float]) -> dict[str, int]:
    """Rank of each id, from 1, best first; ties broken by id for determinism."""
    order = sorted(scores, key=lambda i: (-scores[i], i))
    return {item: rank for rank, item in enumerate(order, start=1)}


def weighted(
    vector: Mapping[str, float],
    bm25: Mapping[str, float],
    *,
    vector_weight: float,
    bm25_weight: float,
    method: str,
) -> dict[str, tuple[float, float]]:
    """Each id's ``(vector part, bm25 part)``: its weight times its normalised score.

    Both mappings must hold the same ids.
    """
    ids = list(vector)
    v = normalise([vector[i] for i in ids], method)
    b = normalise([bm25[i] for i in ids], method)
    return {i: (vector_weight * v[n], bm25_weight * b[n]) for n, i in enumerate(ids)}


def reciprocal_rank(
    vector: Mapping[str, float],
    bm25: Mapping[str, float],
    *,
    vector_weight: float,
    bm25_weight: float,
    k: int,
) -> dict[str, tuple[float, float]]:
    """Each id's ``(vector part, bm25 part)`` under reciprocal-rank fusion.

    A list where every score is zero (no query term matched) ranks nothing: its part is 0.
    """
    scale = (k + 1) / (vector_weight + bm25_weight)
    v_ranks, b_ranks = ranks(vector), ranks(bm25)
    b_live = any(s > 0 for s in bm25.values())
    return {
        i: (
            scale * vector_weight / (k + v_ranks[i]),
            scale * bm25_weight / (k + b_ranks[i]) if b_live and bm25[i] > 0 else 0.0,
        )
        for i in vector
    }


def fuse(
    vector: Mapping[str, float], bm25: Mapping[str, float], config: SearchConfig
) -> dict[str, tuple[float, float]]:
    """Each id's ``(vector part, bm25 part)`` as ``config`` fuses them (``fusion``,
    ``normalisation``, the two weights, ``rrf_k``). Both mappings hold the same ids."""
    if config.fusion == "rrf":
        return reciprocal_rank(
            vector,
            bm25,
            vector_weight=config.vector_weight,
            bm25_weight=config.bm25_weight,
            k=config.rrf_k,
        )
    return weighted(
        vector,
        bm25,
        vector_weight=config.vector_weight,
        bm25_weight=config.bm25_weight,
        method=config.normalisation,
    )


def bm25_scores(
    query_terms: Sequence[str], documents: Sequence[Sequence[str]], *, k1: float, b: float
) -> list[float]:
    """BM25 (Okapi, with Lucene's idf) of each tokenised document for ``query_terms``.

    The statistics (idf, average length) are those of ``documents``: the candidate set.
    The idf is ``log(1 + (N - n + 0.5) / (n + 0.5))``, always positive, so a term found
    in half of a small candidate set still counts. The scores are exactly those of
    rank-bm25's ``BM25Okapi`` with that idf (tested), computed for the query's terms only.
    """
    if not documents or not query_terms or not any(documents):
        return [0.0] * len(documents)
    wanted = set(query_terms)
    lengths = np.array([max(len(d), 1) for d in documents], dtype=np.float64)
    counts = {t: np.zeros(len(documents), dtype=np.float64) for t in wanted}
    for row, document in enumerate(documents):
        for term in document:
            if term in wanted:
                counts[term][row] += 1
    n = len(documents)
    norm = k1 * (1 - b + b * lengths / lengths.mean())
    scores = np.zeros(n, dtype=np.float64)
    for term in query_terms:
        tf = counts[term]
        found = int(np.count_nonzero(tf))
        if not found:
            continue
        idf = math.log(1 + (n - found + 0.5) / (found + 0.5))
        scores += idf * tf * (k1 + 1) / (tf + norm)
    return [max(0.0, float(s)) for s in scores]
