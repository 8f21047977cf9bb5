"""Candidate expansion for LoCoMo's multi-hop and open-domain questions, tried offline.

Reopens a palace built by ``locomo.py`` (``turns`` or ``plain``: its drawers are the
turns) and asks every question twice through the search pipeline: once as it is, and
once with extra drawers handed to it as outside boosts (the pipeline's ``signals``: each
joins the candidates and its boost is added to its score, as the knowledge graph's are).
Each variant makes those boosts a different way, from what a first search found:

- ``feedback:M,BETA,W,N``: pseudo-relevance feedback in vector space: the query vector
  plus ``BETA`` × the mean vector of the first search's ``M`` best hits; the ``N``
  drawers nearest that vector get ``W`` × their cosine over the best one's.
- ``rare:M,DF,W,N``: words shared with a strong hit: the terms of the first search's
  ``M`` best hits that at most ``DF`` drawers of the wing hold and the query lacks; the
  ``N`` drawers with the largest summed idf of those terms get ``W`` × that sum over the
  best one's.
- ``context:W,N``: a drawer embedded with its neighbours (the turn before and after it in
  its source, one text): the ``N`` drawers whose such vector is nearest the query get
  ``W`` × their cosine over the best one's (the vectors are made here, once, and kept in
  the palace folder as ``context_vectors.npz``).

Variants joined by ``+`` add their boosts up.

Printed: turn R / all / session R at 10, overall and per category, as ``locomo.py``
counts them (the k = 10 list, then the k = 50 list for the session ranking). Searches run
on the exact ``sqlite`` backend; latency is not measured (a variant costs a second
search).

    .venv/bin/python benchmarks/locomo.py --palace /tmp/lp --door turns --no-baselines
    .venv/bin/python benchmarks/locomo_expansion.py --palace /tmp/lp/turns \\
        feedback:3,0.5,0.15,50 rare:3,5,0.1,30 context:0.1,50
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence
from pathlib import Path

import locomo
import numpy as np
import numpy.typing as npt

from palace_retrievers import Palace
from palace_retrievers.records import Filter
from palace_retrievers.search.pipeline import SearchPipeline

Vector = npt.NDArray[np.float32]
#: Makes the boosts of one question: (question, its vector, k) -> drawer id -> boost.
Boosts = Callable[[locomo.Question, Vector, int], dict[str, float]]


def scaled(scores: dict[str, float], weight: float, n: int) -> dict[str, float]:
    """The ``n`` best of ``scores``, each ``weight`` × its share of the best one."""
    best = sorted(scores, key=lambda i: (-scores[i], i))[:n]
    if not best or scores[best[0]] <= 0:
        return {}
    top = scores[best[0]]
    return {i: weight * scores[i] / top for i in best if scores[i] > 0}


def feedback(pipe: SearchPipeline, m: int, beta: float, weight: float, n: int) -> Boosts:
    def boosts(q: locomo.Question, vector: Vector, k: int) -> dict[str, float]:
        where = Filter(wing=q.wing)
        first = [h.id for h in pipe.run(q.text, k=k, where=where, vector=vector)[:m]]
        held = pipe._get_vectors(first)
        if not held:
            return {}
        moved = vector + beta * np.mean([held[i] for i in first if i in held], axis=0)
        moved = (moved / np.linalg.norm(moved)).astype(np.float32)
        near = pipe._indexes.query("drawers", vector=moved, k=n, where=where)
        return scaled({x.id: x.similarity for x in near}, weight, n)

    return boosts


def rare(
    pipe: SearchPipeline,
    wings: dict[str, list[locomo.Turn]],
    m: int,
    most: int,
    weight: float,
    n: int,
) -> Boosts:
    held = {
        wing: {i: set(pipe._terms(text)) for i, text, _, _ in turns}
        for wing, turns in wings.items()
    }
    counts: dict[str, dict[str, int]] = {}
    for wing, docs in held.items():
        df: dict[str, int] = {}
        for words in docs.values():
            for word in words:
                df[word] = df.get(word, 0) + 1
        counts[wing] = df

    def boosts(q: locomo.Question, vector: Vector, k: int) -> dict[str, float]:
        where = Filter(wing=q.wing)
        docs, df = held[q.wing], counts[q.wing]
        asked = set(pipe._terms(q.text))
        shared: set[str] = set()
        for hit in pipe.run(q.text, k=k, where=where, vector=vector)[:m]:
            shared |= {t for t in docs.get(hit.id, ()) if df[t] <= most and t not in asked}
        idf = {t: math.log(len(docs) / df[t]) for t in shared}
        found = {i: sum(idf[t] for t in shared & words) for i, words in docs.items()}
        return scaled(found, weight, n)

    return boosts


def context_vectors(
    palace: Palace, wings: dict[str, list[locomo.Turn]], path: Path
) -> dict[str, tuple[list[str], Vector]]:
    """Per wing, each turn's id and the vector of its text joined with its neighbours'."""
    if not path.exists():
        stored: dict[str, Vector] = {}
        for wing, turns in wings.items():
            sources: dict[str, list[tuple[int, str, str]]] = {}
            for i, text, position, _ in turns:
                sources.setdefault(locomo.session_of(i), []).append((position, i, text))
            ids, texts = [], []
            for items in sources.values():
                items.sort()
                for at, (_, i, _) in enumerate(items):
                    ids.append(i)
                    texts.append(" ".join(t for _, _, t in items[max(0, at - 1) : at + 2]))
            matrix = np.asarray(palace.embedder.embed_documents(texts), dtype=np.float32)
            stored[f"{wing}|ids"] = np.array(ids)
            stored[f"{wing}|vectors"] = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
        np.savez(path, **stored)  # type: ignore[arg-type]
    found = dict(np.load(path))
    return {w: ([str(i) for i in found[f"{w}|ids"]], found[f"{w}|vectors"]) for w in wings}


def context(table: dict[str, tuple[list[str], Vector]], weight: float, n: int) -> Boosts:
    def boosts(q: locomo.Question, vector: Vector, k: int) -> dict[str, float]:
        ids, matrix = table[q.wing]
        sims = matrix @ vector
        return scaled({i: float(s) for i, s in zip(ids, sims, strict=True)}, weight, n)

    return boosts


def summed(parts: Sequence[Boosts]) -> Boosts:
    """The boosts of several variants added up (a variant ``A+B``)."""

    def boosts(q: locomo.Question, vector: Vector, k: int) -> dict[str, float]:
        out: dict[str, float] = {}
        for part in parts:
            for i, boost in part(q, vector, k).items():
                out[i] = out.get(i, 0.0) + boost
        return out

    return boosts


def line(name: str, system: locomo.System, questions: Sequence[locomo.Question]) -> str:
    parts = [name]
    r = locomo.metrics(system, questions, 10)
    parts.append(f"{r['turn']:.3f} / {r['all']:.3f} / {r['session']:.3f}")
    for category in sorted(locomo.CATEGORIES):
        picked = [n for n, q in enumerate(questions) if q.category == category]
        sub = locomo.System(name, [system.rankings[n] for n in picked])
        r = locomo.metrics(sub, [questions[n] for n in picked], 10)
        parts.append(f"{r['turn']:.3f} / {r['all']:.3f} / {r['session']:.3f}")
    return " | ".join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=locomo.DEFAULT_DATA)
    parser.add_argument("--palace", type=Path, required=True, help="built by locomo.py")
    locomo.add_overrides_argument(parser)
    parser.add_argument(
        "variants", nargs="+", help="feedback:M,BETA,W,N rare:M,DF,W,N context:W,N, or A+B"
    )
    args = parser.parse_args(argv)
    wings, questions = locomo.load(args.data)
    with Palace.open(
        args.palace, backend="sqlite", create=False, config=locomo.overrides(args.set)
    ) as palace:
        pipe: SearchPipeline = palace._pipeline
        made: dict[str, Boosts | None] = {"as it is": None}

        def one(part: str) -> Boosts:
            kind, _, values = part.partition(":")
            v = [float(x) for x in values.split(",")]
            if kind == "feedback":
                return feedback(pipe, int(v[0]), v[1], v[2], int(v[3]))
            if kind == "rare":
                return rare(pipe, wings, int(v[0]), int(v[1]), v[2], int(v[3]))
            if kind == "context":
                table = context_vectors(palace, wings, args.palace / "context_vectors.npz")
                return context(table, v[0], int(v[1]))
            parser.error(f"unknown variant {part!r}")

        for variant in args.variants:
            made[variant] = summed([one(part) for part in variant.split("+")])
        systems = {name: locomo.System(name) for name in made}
        for q in questions:
            where = Filter(wing=q.wing)
            vector = np.asarray(palace.embedder.embed_query(q.text), dtype=np.float32)
            for name, make in made.items():
                lists = []
                for k in (10, locomo.CURVE_K):
                    signals = make(q, vector, k) if make is not None else None
                    hits = pipe.run(q.text, k=k, where=where, vector=vector, signals=signals)
                    lists.append([h.id for h in hits])
                ten, curve = lists
                systems[name].rankings.append(locomo.ranking(ten, curve))
    heads = [locomo.CATEGORIES[c] for c in sorted(locomo.CATEGORIES)]
    print(
        "variant | all questions | " + " | ".join(heads) + "  (turn R@10 / all@10 / session R@10)"
    )
    for name, system in systems.items():
        print(line(name, system, questions))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
