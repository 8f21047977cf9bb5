"""The exact ``sqlite`` backend is the reference: ``chroma`` returns the same top 10.

2,000 distinct, varied sentences are generated deterministically, embedded once with the
real model, and the SAME vectors are fed to both backends. Every query must then give
the same top-10 ids, in the same order, with and without a wing filter, whether Chroma's
HNSW index answers the filtered query (``chroma-ann``: ``exact_below = 1``) or the backend's
exact scan of the few records passing (``chroma``, the default).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from palace_plugins.builtin.backends.chroma import ChromaIndex
from palace_plugins.builtin.backends.exact import ExactIndex
from palace_retrievers.embedder import Embedder
from palace_retrievers.index import BackendContext, VectorIndex
from palace_retrievers.ledger.sqlite import LEDGER_FILE, SQLiteLedger
from palace_retrievers.records import Drawer, Filter

pytestmark = pytest.mark.slow

SIZE = 2000
WINGS = ("north", "south", "east", "west", "centre")
NAMES = (
    "Alice", "Bashir", "Chen", "Dana", "Elif", "Farid", "Greta", "Hiro", "Ines", "Jonas",
    "Kofi", "Lena", "Mateo", "Nadia", "Oskar", "Priya", "Quinn", "Rosa", "Sven", "Tomoko",
)  # fmt: skip
PLACES = (
    "Lisbon", "Oslo", "Kyoto", "Quito", "Accra", "Perth", "Lima", "Riga", "Hanoi", "Tunis",
    "Dakar", "Split", "Cusco", "Malmo", "Porto", "Bergen", "Hobart", "Ghent", "Leeds", "Graz",
)  # fmt: skip
THINGS = (
    "a red bicycle", "three crates of oranges", "a broken violin", "the quarterly report",
    "a jar of honey", "two tickets to the opera", "a vintage camera", "the server logs",
    "a bag of coffee beans", "a hand-drawn map",
)  # fmt: skip
TEMPLATES = (
    "{name} flew to {place} on day {n} to deliver {thing}.",
    "In {place}, {name} repaired {thing} for {n} euros.",
    "{name} lost {thing} at the {place} railway station after {n} hours of waiting.",
    "The {place} office asked {name} to audit {thing}; it took {n} days.",
    "{name} sold {thing} at a street market in {place} for {n} dollars.",
    "During a storm in {place}, {name} kept {thing} dry for {n} minutes.",
    "{name} wrote a blog post about {thing} found near {place}, read {n} times.",
    "A customer in {place} returned {thing} to {name} after {n} weeks.",
    "{name} photographed {thing} on a hike above {place} at {n} metres.",
    "The team in {place} voted {name} owner of {thing} with {n} votes.",
)
QUERIES = (
    "Who flew to Kyoto to deliver something?",
    "repairing a violin",
    "lost luggage at a railway station",
    "an audit of the quarterly report",
    "selling oranges at a market",
    "keeping a camera dry in a storm",
    "blog post about a map",
    "a customer returned a bicycle",
    "photographs taken on a mountain hike",
    "team vote on who owns the server logs",
    "Priya in Porto",
    "honey from Bergen",
    "opera tickets",
    "coffee beans",
    "Tomoko and a hand-drawn map",
    "what happened in Accra?",
    "Hobart",
    "expensive repairs in euros",
    "a trip that took many days",
    "Farid sold something",
)


def sentences() -> list[str]:
    """2,000 distinct sentences: templates × names × places, each with its own number/thing."""
    combos = itertools.product(range(len(TEMPLATES)), range(len(NAMES)), range(len(PLACES)))
    out = []
    for i, (t, a, p) in enumerate(itertools.islice(combos, SIZE)):
        out.append(
            TEMPLATES[t].format(
                name=NAMES[a],
                place=PLACES[p],
                thing=THINGS[(a * 7 + p * 3 + t) % len(THINGS)],
                n=(i * 37) % 997 + 3,
            )
        )
    assert len(set(out)) == SIZE
    return out


@pytest.fixture(scope="module")
def backends(
    real_embedder: Embedder, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, VectorIndex]]:
    palace_dir: Path = tmp_path_factory.mktemp("equivalence")
    texts = sentences()
    vectors = real_embedder.embed_documents(texts)
    ledger = SQLiteLedger(palace_dir / LEDGER_FILE)
    drawers = [
        Drawer(id=f"s{i:04d}", text=t, wing=WINGS[i % len(WINGS)], room="r", source="generated")
        for i, t in enumerate(texts)
    ]
    ledger.upsert_drawers(drawers, vectors, model=real_embedder.model_name)
    context = BackendContext(
        palace_dir=palace_dir, collection="drawers", dimension=real_embedder.dimension,
        ledger=ledger,
    )  # fmt: skip
    exact = ExactIndex(context)
    chroma = ChromaIndex(context)
    for batch in ledger.iter_entries("drawers", batch_size=1000):
        chroma.upsert(entries=batch)  # the very vectors the exact scan reads
    assert exact.count() == chroma.count() == SIZE
    # A second handle on the same collection that asks HNSW for every filter.
    ann = ChromaIndex(dataclasses.replace(context, options={"exact_below": 1}))
    assert ann.count() == SIZE
    yield {"sqlite": exact, "chroma": chroma, "chroma-ann": ann}
    ann.close()
    chroma.close()
    ledger.close()


@pytest.mark.parametrize("backend", ["chroma", "chroma-ann"])
@pytest.mark.parametrize("wing", [None, "east"])
@pytest.mark.parametrize("query", QUERIES)
def test_same_top_10(
    backends: dict[str, VectorIndex],
    real_embedder: Embedder,
    query: str,
    wing: str | None,
    backend: str,
) -> None:
    vector = real_embedder.embed_query(query)
    where = Filter(wing=wing)
    exact = backends["sqlite"].query(vector=vector, k=10, where=where)
    approximate = backends[backend].query(vector=vector, k=10, where=where)
    assert [m.id for m in approximate] == [m.id for m in exact]
    for a, e in zip(approximate, exact, strict=True):
        assert a.similarity == pytest.approx(e.similarity, abs=1e-4)
    if wing is not None:
        assert all(int(m.id[1:]) % len(WINGS) == WINGS.index(wing) for m in exact)
