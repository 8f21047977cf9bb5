"""Contextual vectors for LoCoMo, tried inside the search pipeline (offline, #21.3).

Reopens a palace built by ``locomo.py`` (any door) and embeds, once, every drawer's text
joined with the chunk before it in its source, and again with the chunk after it (the
palace's own embedder; kept in the palace folder as ``neighbour_vectors.npz``). A drawer's
*contextual cosine* with a query is then ``(1 - S) × its own cosine + S × the mean of its
two joined cosines``. Each variant puts it somewhere in the pipeline (its private parts
are swapped for the run; nothing is stored in the ledger):

- ``fuse:S``: the cosine that fusion (and the hit's ``vector`` score) reads is the
  contextual one; the candidates are unchanged;
- ``floor:S``: the vector floor ranks the wing's drawers by the contextual cosine (an
  exact scan), so turns whose neighbours match become candidates; fusion as it is;
- ``both:S``: both; ``none``: the pipeline as it is.

With ``--derived`` nothing is embedded: a drawer's two joined vectors are its stored vector
plus the chunk before's, and plus the chunk after's (normalised), which a search could
compute from the vectors a palace already holds.

Printed: turn R / all / session R at 10, overall and per category, as ``locomo.py``
counts them (a mined drawer stands for its ``message_ids``). Searches run on the exact
``sqlite`` backend with the query vectors ``locomo_sweep.py`` caches; latency is not
measured.

    .venv/bin/python benchmarks/locomo.py --palace /tmp/lp --no-baselines
    .venv/bin/python benchmarks/locomo_context.py --palace /tmp/lp/turns none fuse:0.5 both:0.5
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import locomo
import numpy as np
import numpy.typing as npt
from locomo_expansion import line

from palace_retrievers import Palace
from palace_retrievers.index import VectorMatch
from palace_retrievers.records import Drawer, Filter
from palace_retrievers.search.pipeline import SearchPipeline

Vector = npt.NDArray[np.float32]
CACHE = "neighbour_vectors.npz"


def unit(rows: Vector) -> Vector:
    out: Vector = (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)
    return out


def joined(drawers: Iterable[Drawer]) -> tuple[list[str], list[str], list[str]]:
    """Each drawer's id, its text after the chunk before it, and before the chunk after it
    (same wing and source; a drawer at an end is joined with nothing on that side)."""
    sources: dict[tuple[str, str], list[Drawer]] = {}
    for d in drawers:
        sources.setdefault((d.wing, d.source), []).append(d)
    ids, before, after = [], [], []
    for chunks in sources.values():
        chunks.sort(key=lambda d: d.chunk_index)
        for n, d in enumerate(chunks):
            ids.append(d.id)
            before.append((chunks[n - 1].text + "\n" if n else "") + d.text)
            after.append(d.text + ("\n" + chunks[n + 1].text if n + 1 < len(chunks) else ""))
    return ids, before, after


def derived_vectors(palace: Palace) -> dict[str, tuple[Vector, Vector]]:
    """Drawer id -> (its stored vector plus the chunk before's, plus the chunk after's),
    normalised: no text is embedded (a drawer at an end keeps its own on that side)."""
    drawers = palace.ledger.get_drawers(palace.drawer_ids())
    own = palace.ledger.drawer_vectors([d.id for d in drawers])
    sources: dict[tuple[str, str], list[Drawer]] = {}
    for d in drawers:
        sources.setdefault((d.wing, d.source), []).append(d)
    out = {}
    for chunks in sources.values():
        chunks.sort(key=lambda d: d.chunk_index)
        for n, d in enumerate(chunks):
            mine = own[d.id]
            before = mine + own[chunks[n - 1].id] if n else 2 * mine
            after = mine + own[chunks[n + 1].id] if n + 1 < len(chunks) else 2 * mine
            pair = unit(np.stack([before, after]))
            out[d.id] = (pair[0], pair[1])
    return out


def neighbour_vectors(palace: Palace, path: Path) -> dict[str, tuple[Vector, Vector]]:
    """Drawer id -> (vector of it joined with the chunk before, with the chunk after)."""
    if not path.exists():
        ids, before, after = joined(palace.ledger.get_drawers(palace.drawer_ids()))
        np.savez(
            path,
            ids=np.array(ids),
            before=unit(np.asarray(palace.embedder.embed_documents(before), dtype=np.float32)),
            after=unit(np.asarray(palace.embedder.embed_documents(after), dtype=np.float32)),
        )
    stored = np.load(path)
    rows = zip(stored["ids"], stored["before"], stored["after"], strict=True)
    return {str(i): (before, after) for i, before, after in rows}


def query_vectors(
    palace: Palace, questions: Sequence[locomo.Question], folder: Path
) -> Callable[[int], Vector]:
    """The vector of the n-th question, embedded once and kept in ``folder`` as
    ``query_vectors.npz`` (the file ``locomo_sweep.py`` keeps)."""
    cache = folder / "query_vectors.npz"
    if not cache.exists():
        made = {str(n): palace.embedder.embed_query(q.text) for n, q in enumerate(questions)}
        np.savez(cache, **made)  # type: ignore[arg-type]
    stored = np.load(cache)
    return lambda n: np.asarray(stored[str(n)], dtype=np.float32)


def turns_of(drawer: Drawer) -> list[str]:
    """The LoCoMo turns a drawer stands for (a mined drawer's ``message_ids``)."""
    return [str(i) for i in drawer.metadata.get("message_ids", [])] or [drawer.id]


def run(
    pipe: SearchPipeline,
    questions: Sequence[locomo.Question],
    vectors: Callable[[int], Vector],
) -> locomo.System:
    system = locomo.System("")
    for n, q in enumerate(questions):
        where, vector = Filter(wing=q.wing), vectors(n)
        lists = []
        for k in (10, locomo.CURVE_K):
            hits = pipe.run(q.text, k=k, where=where, vector=vector)
            lists.append(locomo.ranked(hits, lambda h: turns_of(h.drawer)))
        system.rankings.append(locomo.ranking(lists[0][:10], lists[1]))
    return system


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=locomo.DEFAULT_DATA)
    parser.add_argument("--palace", type=Path, required=True, help="a door built by locomo.py")
    parser.add_argument(
        "--derived",
        action="store_true",
        help="instead of embedding joined texts, add the neighbours' stored vectors",
    )
    parser.add_argument("variants", nargs="+", help="none, fuse:S, floor:S or both:S")
    args = parser.parse_args(argv)
    _, questions = locomo.load(args.data)
    with Palace.open(args.palace, backend="sqlite", create=False) as palace:
        pipe: SearchPipeline = palace._pipeline
        queries = query_vectors(palace, questions, args.palace)
        if args.derived:
            near = derived_vectors(palace)
        else:
            near = neighbour_vectors(palace, args.palace / CACHE)
        every = palace.ledger.get_drawers(palace.drawer_ids())
        own = palace.ledger.drawer_vectors([d.id for d in every])
        wings: dict[str, list[str]] = {}
        for d in every:
            wings.setdefault(d.wing, []).append(d.id)
        tables = {
            w: (
                ids,
                np.stack([own[i] for i in ids]),
                np.stack([near[i][0] for i in ids]),
                np.stack([near[i][1] for i in ids]),
            )
            for w, ids in wings.items()
        }
        similarities, query = pipe._similarities, pipe._indexes.query
        print("variant | all questions | multi-hop | temporal | open-domain | single-hop")
        for variant in args.variants:
            kind, _, value = variant.partition(":")
            share = float(value or 0)

            def mixed(
                ids: Iterable[str], vector: Vector, known: dict[str, float], share: float = share
            ) -> dict[str, float]:
                found = similarities(ids, vector, known)
                return {
                    i: (1 - share) * s + share * 0.5 * float((near[i][0] + near[i][1]) @ vector)
                    for i, s in found.items()
                }

            def floor(
                collection: str, *, vector: Vector, k: int, where: Filter, share: float = share
            ) -> list[VectorMatch]:
                if collection != "drawers" or where.wing is None:
                    return query(collection, vector=vector, k=k, where=where)
                ids, mine, before, after = tables[where.wing]
                score = (1 - share) * (mine @ vector) + share * 0.5 * ((before + after) @ vector)
                top = np.argsort(-score, kind="stable")[:k]
                return [VectorMatch(id=ids[t], similarity=float(score[t])) for t in top]

            if kind in ("fuse", "both"):
                pipe._similarities = mixed  # type: ignore[method-assign]
            if kind in ("floor", "both"):
                pipe._indexes.query = floor  # type: ignore[method-assign]
            if kind not in ("none", "fuse", "floor", "both"):
                parser.error(f"unknown variant {variant!r}")
            system = run(pipe, questions, queries)
            pipe._similarities = similarities  # type: ignore[method-assign]
            pipe._indexes.query = query  # type: ignore[method-assign]
            print(line(variant, system, questions), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
