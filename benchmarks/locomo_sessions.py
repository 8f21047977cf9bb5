"""Session recall on LoCoMo: re-ranking the pipeline's candidates, tried offline (#21.3).

``locomo.py`` ranks a question's sessions by their best turn (the k = 10 hits first, then
the k = 50 ones). This reopens a palace built by ``locomo.py`` (any door), scores every
candidate of each question with the real pipeline (the floor of k = 10 and of k = 50, all
candidates kept with their ``Hit.scores``), and re-ranks them without searching again:

- ``best``: the pipeline's order (reproduces ``locomo.py``'s figures on ``sqlite``);
- ``spread:W``: hits picked one by one, best first; a candidate whose source (LoCoMo:
  session) has no pick yet gets ``W`` added (``spread:W,N``: a pick covers only the
  chunks within ``N`` positions of it), so more sessions come before more turns of one;
- ``top:M,W``: sessions ranked by their best hit plus ``W`` × each of their next
  ``M - 1`` best scores before smoothing (``final - neighbours``); turns as ``best``;
- ``lse:T``: sessions ranked by ``T × log Σ exp(score / T)`` of their hits' scores before
  smoothing; turns as ``best``.

Printed as ``locomo_expansion.py`` prints: turn R / all / session R at 10, overall and
per category. Query vectors are cached in the palace folder as ``locomo_sweep.py`` does.

    .venv/bin/python benchmarks/locomo.py --palace /tmp/lp --no-baselines
    .venv/bin/python benchmarks/locomo_sessions.py --palace /tmp/lp/turns best spread:0.05 top:3,0.5
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence
from pathlib import Path

import locomo
import numpy as np
import numpy.typing as npt
from locomo_context import query_vectors, turns_of
from locomo_expansion import line

from palace_retrievers import Palace
from palace_retrievers.records import Filter, Hit
from palace_retrievers.search.pipeline import SearchPipeline

#: Re-ranks one question's candidates (best first as the pipeline gave them): the turn
#: ranking of the k = 10 list, of the k = 50 list, and (or None) a session order.
Ranked = tuple[list[str], list[str], list[str] | None]
Variant = Callable[[list[Hit], list[Hit]], Ranked]


def flat(hits: Sequence[Hit]) -> list[str]:
    return locomo.ranked(hits, lambda h: turns_of(h.drawer))


def best(ten: list[Hit], fifty: list[Hit]) -> Ranked:
    return flat(ten), flat(fifty), None


def spread(weight: float, window: int) -> Variant:
    def pick(hits: list[Hit], k: int) -> list[Hit]:
        order = {h.id: n for n, h in enumerate(hits)}
        left, picks = list(hits), list[Hit]()
        placed: dict[tuple[str, str], list[int]] = {}
        while left and len(picks) < k:

            def score(h: Hit) -> float:
                taken = placed.get((h.drawer.wing, h.drawer.source), [])
                near = any(window <= 0 or abs(h.drawer.chunk_index - p) <= window for p in taken)
                return h.score + (0.0 if near else weight)

            chosen = max(left, key=lambda h: (score(h), -order[h.id]))
            left.remove(chosen)
            picks.append(chosen)
            placed.setdefault((chosen.drawer.wing, chosen.drawer.source), []).append(
                chosen.drawer.chunk_index
            )
        return picks

    return lambda ten, fifty: (flat(pick(ten, 10)), flat(pick(fifty, locomo.CURVE_K)), None)


def sessions_by(aggregate: Callable[[list[float]], float]) -> Variant:
    def rank(ten: list[Hit], fifty: list[Hit]) -> Ranked:
        scores: dict[str, list[float]] = {}
        for h in fifty:
            for session in dict.fromkeys(locomo.session_of(t) for t in turns_of(h.drawer)):
                scores.setdefault(session, []).append(h.score - h.scores["neighbours"])
        value = {s: aggregate(sorted(v, reverse=True)) for s, v in scores.items()}
        first = locomo.sessions(flat(ten)[:10])
        rest = sorted((s for s in value if s not in first), key=lambda s: -value[s])
        return flat(ten), flat(fifty), first + rest

    return rank


def top(m: int, weight: float) -> Variant:
    return sessions_by(lambda v: v[0] + weight * sum(v[1:m]))


def lse(t: float) -> Variant:
    return sessions_by(lambda v: t * math.log(sum(math.exp(x / t) for x in v)))


def make(variant: str) -> Variant:
    kind, _, raw = variant.partition(":")
    values = [float(x) for x in raw.split(",")] if raw else []
    if kind == "best":
        return best
    if kind == "spread":
        return spread(values[0], int(values[1]) if len(values) > 1 else 0)
    if kind == "top":
        return top(int(values[0]), values[1])
    if kind == "lse":
        return lse(values[0])
    raise SystemExit(f"unknown variant {variant!r}")


def candidates(
    pipe: SearchPipeline,
    q: locomo.Question,
    vector: npt.NDArray[np.float32],
    k: int,
    signals: dict[str, float] | None = None,
) -> list[Hit]:
    """Every candidate of a search for ``k`` hits, ranked, with its scores (``signals``:
    the pipeline's outside boosts, as ``locomo_hop.py`` hands them)."""
    floor = pipe.candidates(k)
    real = pipe.candidates
    pipe.candidates = lambda k: floor  # type: ignore[method-assign]
    try:
        return pipe.run(
            q.text, k=100_000, where=Filter(wing=q.wing), vector=vector, signals=signals
        )
    finally:
        pipe.candidates = real  # type: ignore[method-assign]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=locomo.DEFAULT_DATA)
    parser.add_argument("--palace", type=Path, required=True, help="a door built by locomo.py")
    parser.add_argument("variants", nargs="+", help="best, spread:W[,N], top:M,W or lse:T")
    args = parser.parse_args(argv)
    variants = {v: make(v) for v in args.variants}
    _, questions = locomo.load(args.data)
    systems = {v: locomo.System(v) for v in variants}
    with Palace.open(args.palace, backend="sqlite", create=False) as palace:
        pipe: SearchPipeline = palace._pipeline
        queries = query_vectors(palace, questions, args.palace)
        for n, q in enumerate(questions):
            vector = queries(n)
            ten = candidates(pipe, q, vector, 10)
            fifty = candidates(pipe, q, vector, locomo.CURVE_K)
            for name, variant in variants.items():
                turns10, turns50, order = variant(ten, fifty)
                head = turns10[:10]
                ranking = locomo.ranking(head, turns50)
                if order is not None:  # sessions in this order: each one's first turn
                    firsts: dict[str, str] = {}
                    for turn in turns50:
                        firsts.setdefault(locomo.session_of(turn), turn)
                    tail = [firsts[s] for s in order if firsts[s] not in head]
                    ranking = head + tail
                systems[name].rankings.append(ranking)
    print("variant | all questions | multi-hop | temporal | open-domain | single-hop")
    for name, system in systems.items():
        print(line(name, system, questions))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
