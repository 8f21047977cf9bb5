"""A second hop for LoCoMo's multi-hop and open-domain questions, tried offline (#21.3).

Reopens a palace built by ``locomo.py`` (any door) and asks every question through the
search pipeline twice: the first hop as it is, then a second hop made from what the first
hop's best hits say that the question does not, merged at a lower weight. The second hop's
finds are handed to the pipeline as outside boosts (its ``signals``: each joins the
candidates and ``W`` × its second-hop score, 0 to 1, is added to its score), and the
pipeline is run again; with ``P`` > 0 the first hop's ``P`` best hits keep their places
at the top, so no second-hop find can push a strong first-hop hit down.

Second hops (``M``: how many of the first hop's best hits it reads):

- ``terms:M,T,W,P`` (pseudo-relevance feedback, RM3's relevance model): each of the
  ``M`` best hits weighs its share of their summed score; a term's weight is
  Σ share × (its count in the hit ÷ the hit's length) × its idf among the first hop's
  candidates; the ``T`` heaviest terms the question lacks (three letters or more, not all
  digits) are the second query, asked of the full-text index (its scores, over the best);
- ``names:M,T,W,P``: the same, but only words written with a capital inside a sentence
  (names, places, titles) and held by at most a fifth of the candidates;
- ``near:M,N,W,P``: the ``N`` drawers nearest each best hit's stored vector (their
  cosine × the hit's share over the best such), no embedding;
- ``text:M,N,W,P``: the question and the best hits' texts embedded as one query; the
  ``N`` drawers nearest it (cosine over the best);
- ``words:M,N,W,P``: the best hits' whole texts asked of the full-text index;
- ``shared:M,T,W,P``: the question's words that the best hits hold too (by stem), as both
  write them (``camped``, ``camping``), if at most a fifth of the candidates hold them; the
  ``T`` rarest, asked of the full-text index (which matches words, not stems).

A fifth value ``D`` (``near:3,20,0.1,10,10``) drops the finds within ``D`` chunks of one
of the first hop's ten best hits in its source, so that only evidence from elsewhere is
boosted. ``+`` adds the finds of two second hops (each with its own ``W``; the first's
``P`` and ``D``).

Printed as ``locomo_expansion.py`` prints: turn R / all / session R at 10, overall and per
category, with the median wall time of a question's both hops (two k = 10 searches, the
second hop's queries; the first hop alone on the first line). Searches run on the exact
``sqlite`` backend with the query vectors ``locomo_sweep.py`` caches.

    .venv/bin/python benchmarks/locomo.py --palace /tmp/lp --no-baselines
    .venv/bin/python benchmarks/locomo_hop.py --palace /tmp/lp/turns \\
        terms:3,5,0.1,5 names:3,5,0.1,5 near:2,20,0.1,5
"""

from __future__ import annotations

import argparse
import math
import re
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

import locomo
import numpy as np
import numpy.typing as npt
from locomo_context import query_vectors, turns_of
from locomo_expansion import line
from locomo_sessions import candidates

from palace_retrievers import Palace
from palace_retrievers.records import Filter, Hit
from palace_retrievers.search.pipeline import SearchPipeline
from palace_retrievers.terms import stem, terms

Vector = npt.NDArray[np.float32]
#: A second hop: (question, its vector, the first hop's candidates best first) -> drawer
#: id -> its second-hop score (0 to 1).
Second = Callable[[locomo.Question, Vector, list[Hit]], dict[str, float]]

_NAME = re.compile(r"(?<![.!?:\]\n]\s)(?<!^)\b[A-Z][a-z]{2,}\b")
_WORD = re.compile(r"[a-z][a-z']{2,}")


def shares(hits: Sequence[Hit]) -> list[float]:
    """Each hit's share of the hits' summed score (positive scores; equal shares else)."""
    scores = [max(h.score, 0.0) for h in hits]
    total = sum(scores)
    return [s / total for s in scores] if total > 0 else [1 / len(hits)] * len(hits)


def over_best(found: dict[str, float]) -> dict[str, float]:
    top = max(found.values(), default=0.0)
    return {i: s / top for i, s in found.items() if s > 0} if top > 0 else {}


def feedback_terms(
    q: locomo.Question, pool: list[Hit], m: int, count: int, names: bool
) -> list[str]:
    """The ``count`` heaviest words of the ``m`` best hits that the question lacks."""
    asked = set(terms(q.text, stemming=False))
    held = [set(terms(h.drawer.text, stemming=False)) for h in pool]
    df = Counter(w for words in held for w in words)
    n = len(pool)
    weight: dict[str, float] = {}
    for hit, share in zip(pool[:m], shares(pool[:m]), strict=True):
        if names:
            words = [w.lower() for w in _NAME.findall(hit.drawer.text)]
            words = [w for w in words if df[w] <= n / 5]
        else:
            words = [w for w in terms(hit.drawer.text, stemming=False) if _WORD.fullmatch(w)]
        length = max(len(words), 1)
        for word, c in Counter(words).items():
            if word in asked:
                continue
            idf = math.log(1 + (n - df[word] + 0.5) / (df[word] + 0.5))
            weight[word] = weight.get(word, 0.0) + share * c / length * idf
    return sorted(weight, key=lambda w: (-weight[w], w))[:count]


def lexical_hop(pipe: SearchPipeline, m: int, count: int, names: bool) -> Second:
    def hop(q: locomo.Question, vector: Vector, pool: list[Hit]) -> dict[str, float]:
        words = feedback_terms(q, pool, m, count, names)
        if not words:
            return {}
        found = pipe._ledger.lexical(" ".join(words), where=Filter(wing=q.wing), limit=50)
        return over_best(dict(found))

    return hop


def shared_words(q: locomo.Question, pool: list[Hit], m: int, count: int) -> list[str]:
    """The question's words that the ``m`` best hits hold too (by stem), as the hits and
    the question write them, if at most a fifth of the candidates hold them; the
    ``count`` rarest stems among the candidates."""
    asked = {stem(w): w for w in terms(q.text, stemming=False)}
    n = len(pool)
    df = Counter(s for h in pool for s in set(terms(h.drawer.text)))
    forms: dict[str, set[str]] = {}
    for hit in pool[:m]:
        for word in terms(hit.drawer.text, stemming=False):
            root = stem(word)
            if root in asked and df[root] <= n / 5:
                forms.setdefault(root, {asked[root]}).add(word)
    rarest = sorted(forms, key=lambda r: (df[r], r))[:count]
    return sorted(w for r in rarest for w in forms[r])


def shared_hop(pipe: SearchPipeline, m: int, count: int) -> Second:
    def hop(q: locomo.Question, vector: Vector, pool: list[Hit]) -> dict[str, float]:
        words = shared_words(q, pool, m, count)
        if not words:
            return {}
        found = pipe._ledger.lexical(" ".join(words), where=Filter(wing=q.wing), limit=50)
        return over_best(dict(found))

    return hop


def near_hop(pipe: SearchPipeline, m: int, n: int) -> Second:
    def hop(q: locomo.Question, vector: Vector, pool: list[Hit]) -> dict[str, float]:
        best = pool[:m]
        held = pipe._get_vectors([h.id for h in best])
        found: dict[str, float] = {}
        for hit, share in zip(best, shares(best), strict=True):
            if hit.id not in held:
                continue
            near = pipe._indexes.query(
                "drawers", vector=held[hit.id], k=n, where=Filter(wing=q.wing)
            )
            for x in near:
                found[x.id] = max(found.get(x.id, 0.0), share * x.similarity)
        return over_best(found)

    return hop


def text_hop(pipe: SearchPipeline, embed: Callable[[str], Vector], m: int, n: int) -> Second:
    def hop(q: locomo.Question, vector: Vector, pool: list[Hit]) -> dict[str, float]:
        asked = embed("\n".join([q.text, *(h.drawer.text for h in pool[:m])]))
        near = pipe._indexes.query("drawers", vector=asked, k=n, where=Filter(wing=q.wing))
        return over_best({x.id: x.similarity for x in near})

    return hop


def words_hop(pipe: SearchPipeline, m: int, n: int) -> Second:
    def hop(q: locomo.Question, vector: Vector, pool: list[Hit]) -> dict[str, float]:
        text = " ".join(h.drawer.text for h in pool[:m])
        words = list(dict.fromkeys(terms(text, stemming=False)))[:64]
        found = pipe._ledger.lexical(" ".join(words), where=Filter(wing=q.wing), limit=n)
        return over_best(dict(found))

    return hop


class Variant:
    """A second hop, its weight ``W`` and the first-hop places it keeps ``P``."""

    def __init__(
        self, name: str, parts: list[tuple[Second, float]], keep: int, away: int = 0
    ) -> None:
        self.name, self.parts, self.keep, self.away = name, parts, keep, away

    def signals(
        self, pipe: SearchPipeline, q: locomo.Question, vector: Vector, pool: list[Hit]
    ) -> dict[str, float]:
        out: dict[str, float] = {}
        for hop, weight in self.parts:
            for i, s in hop(q, vector, pool).items():
                out[i] = out.get(i, 0.0) + weight * s
        if self.away and out:
            placed = {(h.drawer.wing, h.drawer.source, h.drawer.chunk_index) for h in pool[:10]}
            for d in pipe._get_drawers(list(out)):
                if any(
                    (d.wing, d.source, d.chunk_index + step) in placed
                    for step in range(-self.away, self.away + 1)
                ):
                    del out[d.id]
        return out

    def merged(self, first: list[Hit], second: list[Hit], k: int) -> list[Hit]:
        kept = first[: min(self.keep, k)]
        held = {h.id for h in kept}
        return (kept + [h for h in second if h.id not in held])[:k]


def second_hop(
    kind: str, m: int, x: int, pipe: SearchPipeline, embed: Callable[[str], Vector]
) -> Second:
    """The second hop ``kind`` reading the ``m`` best hits (``x``: its T or N)."""
    if kind in ("terms", "names"):
        return lexical_hop(pipe, m, x, names=kind == "names")
    if kind == "near":
        return near_hop(pipe, m, x)
    if kind == "shared":
        return shared_hop(pipe, m, x)
    if kind == "text":
        return text_hop(pipe, embed, m, x)
    if kind == "words":
        return words_hop(pipe, m, x)
    raise SystemExit(f"unknown second hop {kind!r}")


def variant(spec: str, pipe: SearchPipeline, embed: Callable[[str], Vector]) -> Variant:
    """The variant ``spec`` names (``kind:M,X,W,P[,D]``, or several joined by ``+``)."""
    parts: list[tuple[Second, float]] = []
    keep = away = 0
    for n, part in enumerate(spec.split("+")):
        kind, _, raw = part.partition(":")
        v = [float(x) for x in raw.split(",")]
        if n == 0:
            keep, away = int(v[3]), int(v[4]) if len(v) > 4 else 0
        parts.append((second_hop(kind, int(v[0]), int(v[1]), pipe, embed), v[2]))
    return Variant(spec, parts, keep, away)


def flat(hits: Sequence[Hit]) -> list[str]:
    return locomo.ranked(hits, lambda h: turns_of(h.drawer))


def reach(
    pipe: SearchPipeline,
    variants: Sequence[Variant],
    questions: Sequence[locomo.Question],
    queries: Callable[[int], Vector],
    sizes: dict[str, int],
) -> None:
    """Whether the second hops' finds hold the multi-hop and open-domain gold turns that
    the first hop's 50 hits miss, beside as many turns drawn by chance from the rest."""
    missed = 0
    found = {v.name: [0.0, 0.0, 0.0, 0.0] for v in variants}  # gold, finds, chance, sessions
    for n, q in enumerate(questions):
        if q.category not in (1, 3):
            continue
        vector = queries(n)
        pool = candidates(pipe, q, vector, locomo.CURVE_K)
        fifty = flat(pool[: locomo.CURVE_K])
        lost = q.gold - set(fifty)
        ranking = locomo.ranking(flat(candidates(pipe, q, vector, 10)[:10])[:10], fifty)
        far = {locomo.session_of(t) for t in q.gold} - set(locomo.sessions(ranking)[:10])
        missed += len(lost)
        for v in variants:
            finds = v.signals(pipe, q, vector, pool)
            ids = sorted(finds, key=lambda i: (-finds[i], i))[: locomo.CURVE_K]
            held = {t for d in pipe._get_drawers(ids) for t in turns_of(d)}
            counts = found[v.name]
            counts[0] += len(lost & held)
            counts[1] += len(held)
            counts[2] += len(lost) * len(held - set(fifty)) / (sizes[q.wing] - len(fifty))
            counts[3] += len(far & {locomo.session_of(t) for t in q.gold & held})
    print(f"multi-hop and open-domain gold turns outside the 50 hits: {missed}")
    for v in variants:
        caught, total, chance, places = found[v.name]
        print(
            f"{v.name}: its finds hold {caught:.0f} ({total:.0f} turns found in all; as many "
            f"drawn by chance from outside the 50 hits: {chance:.1f}), and a gold turn of "
            f"{places:.0f} gold sessions outside the ten"
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=locomo.DEFAULT_DATA)
    parser.add_argument("--palace", type=Path, required=True, help="a door built by locomo.py")
    parser.add_argument("--limit", type=int, default=0, help="only the first N questions")
    parser.add_argument(
        "--reach", action="store_true", help="only count the lost gold turns the finds hold"
    )
    parser.add_argument(
        "variants",
        nargs="+",
        help="terms|names|shared:M,T,W,P[,D] near|text|words:M,N,W,P[,D], or A+B",
    )
    args = parser.parse_args(argv)
    wings, questions = locomo.load(args.data)
    with Palace.open(args.palace, backend="sqlite", create=False) as palace:
        pipe: SearchPipeline = palace._pipeline
        queries = query_vectors(palace, questions, args.palace)
        if args.limit:
            questions = questions[: args.limit]

        def embed(text: str) -> Vector:
            return np.asarray(palace.embedder.embed_query(text), dtype=np.float32)

        variants = [variant(spec, pipe, embed) for spec in args.variants]
        if args.reach:
            reach(pipe, variants, questions, queries, {w: len(t) for w, t in wings.items()})
            return 0
        systems = {v.name: locomo.System(v.name) for v in [Variant("as it is", [], 0), *variants]}
        for n, q in enumerate(questions):
            vector = queries(n)
            lists = []
            for k in (10, locomo.CURVE_K):
                start = time.perf_counter()
                lists.append(flat(candidates(pipe, q, vector, k)[:k]))
                if k == 10:
                    systems["as it is"].latencies.append(time.perf_counter() - start)
            systems["as it is"].rankings.append(locomo.ranking(lists[0][:10], lists[1]))
            for v in variants:
                lists = []
                for k in (10, locomo.CURVE_K):
                    start = time.perf_counter()
                    first = candidates(pipe, q, vector, k)
                    second = candidates(pipe, q, vector, k, v.signals(pipe, q, vector, first))
                    lists.append(flat(v.merged(first, second, k)))
                    if k == 10:
                        systems[v.name].latencies.append(time.perf_counter() - start)
                systems[v.name].rankings.append(locomo.ranking(lists[0][:10], lists[1]))
    print("variant | all questions | multi-hop | temporal | open-domain | single-hop | median")
    for name, system in systems.items():
        median = statistics.median(system.latencies) * 1000
        print(f"{line(name, system, questions)} | {median:.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
