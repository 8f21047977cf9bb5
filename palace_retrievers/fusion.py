"""Fusing two score lists over the same candidates: weighted sum or reciprocal rank.

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
