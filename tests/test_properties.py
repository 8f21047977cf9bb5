"""Property-based tests (hypothesis) of what mining and searching promise for any input.

- **Chunking, through the whole write path.** Whatever a file holds, the drawers the
  ledger keeps for it are exactly the chunks of its text: verbatim slices, in order, every
  non-blank character in at least one of them, with the right line numbers and ids; and a
  long exchange of a conversation is cut into parts that cover it the same way.
- **Drawer ids.** Two different (wing, source, chunk, text) never share an id, whatever
  characters the fields hold, and a mine of many files with the same text files every
  chunk under its own id.
- **Closet lines.** A closet line never exceeds its limit, always keeps every drawer id
  it points to, and a filed closet never points to a drawer the ledger does not hold.
- **Filters.** The ``Filter`` of a query gives the same records through every backend's
  own translation (Chroma's ``where`` clause, the exact scan's numpy mask, the ledger's
  SQL) as :meth:`Filter.matches`, the reference, applied record by record. Chroma is
  asked both ways: with its in-memory catalog (small filters answered by an exact scan
  of it), and with ``exact_below = 0`` (every query through the HNSW graph: the
  unfiltered probes kept by the cached filter fields, then the ``where`` clause).

The FAKE embedder is used throughout (meaning does not matter to any of these), with
real SQLite and real Chroma. ``max_examples`` stays modest so the suite stays fast;
``HYPOTHESIS_EXAMPLES_FACTOR`` raises it for a thorough run (``make test-slow``).
"""

from __future__ import annotations

import itertools
import os
import sqlite3
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fakes import FAKE_PLUGIN
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from palace_plugins.builtin.backends.chroma import ChromaIndex
from palace_plugins.builtin.backends.exact import ExactIndex
from palace_plugins.builtin.sources.conversations import (
    ASSISTANT,
    USER,
    Chunking,
    Turn,
    exchanges,
    render,
    segments,
)
from palace_retrievers import Palace
from palace_retrievers.closets import ClosetEntry, ClosetExtractor, build_closets, render_line
from palace_retrievers.errors import PluginError
from palace_retrievers.ids import digest, drawer_id
from palace_retrievers.index import BackendContext
from palace_retrievers.ingest.chunking import Chunk, chunk_text
from palace_retrievers.ledger.sqlite import LEDGER_FILE, SQLiteLedger
from palace_retrievers.records import Drawer, Filter


def examples(n: int) -> int:
    """``n``, or ``n`` times the factor in ``HYPOTHESIS_EXAMPLES_FACTOR`` (slow runs)."""
    return n * int(os.environ.get("HYPOTHESIS_EXAMPLES_FACTOR", "1"))


def fast(n: int) -> settings:
    """Settings of a property test: ``n`` examples (see :func:`examples`), no deadline."""
    return settings(
        max_examples=examples(n),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )


CHUNKING = {"chunking": {"size": 120, "overlap": 20}}
#: Characters that stress chunking and storage: boundaries, CJK, emoji, CR, tabs,
#: quotes and SQL, the id separator, combining marks.
ALPHABET = "ab cd.!?\n\n\r\t#。！中文é🦜'\";-%_\x1f\u0301|→"


def placed(text: str, chunks: Sequence[Chunk]) -> None:
    """The chunks are verbatim slices of ``text``, in order, covering every non-blank
    character, each with the 1-based lines it spans."""
    covered = bytearray(len(text))
    for before, after in itertools.pairwise(chunks):
        assert before.start < after.start, "out of order"
        assert before.end < after.end, "a chunk adds nothing"
    for chunk in chunks:
        assert text[chunk.start : chunk.end] == chunk.text, "not a verbatim slice"
        assert chunk.text.strip(), "a blank chunk was kept"
        assert chunk.line_start == text.count("\n", 0, chunk.start) + 1
        assert chunk.line_end == chunk.line_start + chunk.text.rstrip("\n").count("\n")
        covered[chunk.start : chunk.end] = b"\x01" * (chunk.end - chunk.start)
    lost = "".join(c for c, seen in zip(text, covered, strict=True) if not seen)
    assert not lost.strip(), f"characters in no drawer: {lost!r}"


# -- chunking through the write path ----------------------------------------------------


@pytest.fixture(scope="module")
def file_palace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Palace, Path]]:
    """A palace (FAKE embedder, exact backend) and a folder whose one file is rewritten."""
    root = tmp_path_factory.mktemp("chunks")
    (root / "tree").mkdir()
    with Palace.open(
        root / "palace", backend="sqlite", embedder="fake", plugins=[FAKE_PLUGIN], config=CHUNKING
    ) as palace:
        yield palace, root / "tree"


_version = itertools.count(1)


@fast(30)
@given(text=st.text(alphabet=ALPHABET, max_size=1500))
def test_the_ledger_holds_exactly_the_chunks_of_a_file(
    file_palace: tuple[Palace, Path], text: str
) -> None:
    palace, tree = file_palace
    note = tree / "note.md"
    note.write_bytes(text.encode("utf-8"))
    stamp = 1_700_000_000 + next(_version)
    os.utime(note, (stamp, stamp))  # a new mtime: the file is read again
    palace.mine(tree, wing="w", progress=False)

    expected = chunk_text(text, size=120, overlap=20)
    placed(text, expected)
    db = sqlite3.connect(palace.path / LEDGER_FILE)
    try:
        rows = db.execute(
            "SELECT id, text, chunk_index, line_start, line_end FROM drawers "
            "WHERE wing = 'w' AND source_key = 'note.md' ORDER BY chunk_index"
        ).fetchall()
        (others,) = db.execute("SELECT count(*) FROM drawers WHERE source_key != 'note.md'")
    finally:
        db.close()
    assert others == (0,)
    assert rows == [
        (
            drawer_id(wing="w", source_key="note.md", chunk_index=c.index, text=c.text),
            c.text,
            c.index,
            c.line_start,
            c.line_end,
        )
        for c in expected
    ]


turns = st.lists(
    st.builds(
        Turn,
        speaker=st.sampled_from(["user", "assistant", "Alice", "Bob"]),
        text=st.text(alphabet=ALPHABET, min_size=1, max_size=300),
        role=st.sampled_from([USER, ASSISTANT, "other", "tool"]),
    ),
    max_size=12,
)


@fast(60)
@given(turns=turns, size=st.integers(40, 400), data=st.data())
def test_a_long_exchange_is_cut_into_parts_that_cover_it(
    turns: list[Turn], size: int, data: st.DataObject
) -> None:
    overlap = data.draw(st.integers(0, size // 2 - 1))
    cut = segments(exchanges(turns), session="s", chunking=Chunking(size, overlap))
    by_exchange: dict[int, list[Any]] = {}
    for segment in cut:
        by_exchange.setdefault(segment.metadata["exchange"], []).append(segment)
    rendered = [r for r in (render(group).strip() for group in exchanges(turns)) if r]
    assert sorted(by_exchange) == list(range(len(rendered))), "an exchange was lost"
    for index, text in enumerate(rendered):
        parts = by_exchange[index]
        if len(text) <= size:
            assert [p.text for p in parts] == [text]
            assert "part" not in parts[0].metadata
            continue
        chunks = chunk_text(text, size=size, overlap=overlap)
        placed(text, chunks)
        assert [p.text for p in parts] == [c.text for c in chunks]
        assert [(p.metadata["part"], p.metadata["parts"]) for p in parts] == [
            (n, len(parts)) for n in range(1, len(parts) + 1)
        ]


# -- drawer ids -------------------------------------------------------------------------

fields = st.tuples(
    st.text(alphabet="ab|\x1f\x1b_0", max_size=6),
    st.text(alphabet="ab/|\x1f\x1b_0", max_size=6),
    st.integers(0, 12),
    st.text(alphabet="ab \x1f\x1b_01", max_size=6),
)


@fast(400)
@given(first=fields, second=fields)
def test_different_drawers_never_share_an_id(
    first: tuple[str, str, int, str], second: tuple[str, str, int, str]
) -> None:
    assume(first != second)

    def ident(f: tuple[str, str, int, str]) -> str:
        return drawer_id(wing=f[0], source_key=f[1], chunk_index=f[2], text=f[3])

    assert ident(first) != ident(second)
    assert ident(first) == ident(first)  # stable


@fast(200)
@given(
    parts=st.lists(st.text(alphabet="a\x1f\x1b_", max_size=5), min_size=2, max_size=4),
    data=st.data(),
)
def test_fields_that_join_alike_still_hash_apart(parts: list[str], data: st.DataObject) -> None:
    """The same characters cut into fields elsewhere: the collision a plain join allows."""
    joined = "\x1f".join(parts)
    cuts = [i for i, c in enumerate(joined) if c == "\x1f"]
    chosen = sorted(
        data.draw(
            st.lists(
                st.sampled_from(cuts), min_size=len(parts) - 1, max_size=len(parts) - 1, unique=True
            )
        )
    )
    bounds = [-1, *chosen, len(joined)]
    other = [joined[a + 1 : b] for a, b in itertools.pairwise(bounds)]
    assume(other != parts)
    assert digest(*other) != digest(*parts)


def test_a_field_holding_the_separator_cannot_shift_into_the_next() -> None:
    """Found by the property above: before the fix, these four fields hashed alike."""
    a = drawer_id(wing="w", source_key="x\x1f1", chunk_index=0, text="t")
    b = drawer_id(wing="w", source_key="x", chunk_index=1, text="0\x1ft")
    assert a != b
    assert digest("a\x1fb", "c") != digest("a", "b\x1fc")
    # Fields without the separator hash as they always did: mined palaces keep their ids.
    assert digest("a", "b") == __import__("hashlib").sha256(b"a\x1fb").hexdigest()[:24]


names = st.text(alphabet="abc-_ .|'中", min_size=1, max_size=8).filter(
    lambda n: not n.startswith(".") and n.strip() == n
)


@fast(12)
@given(
    files=st.dictionaries(
        names,
        st.sampled_from(["same words in every file.\n", "other text\n" * 30, "x\x1fy " * 50]),
        min_size=1,
        max_size=6,
    )
)
def test_the_same_text_in_many_files_gets_an_id_per_file_and_wing(
    tmp_path_factory: pytest.TempPathFactory, files: dict[str, str]
) -> None:
    root = tmp_path_factory.mktemp("ids")
    (root / "tree").mkdir()
    for name, body in files.items():
        (root / "tree" / f"{name}.md").write_text(body, encoding="utf-8")
    expected = sum(len(chunk_text(body, size=120, overlap=20)) for body in files.values())
    with Palace.open(
        root / "palace", backend="sqlite", embedder="fake", plugins=[FAKE_PLUGIN], config=CHUNKING
    ) as palace:
        for wing in ("one", "two"):
            report = palace.mine(root / "tree", wing=wing, progress=False)
            assert report.drawers_added == expected
        assert palace.stats().ledger.drawers == 2 * expected


# -- closet lines -----------------------------------------------------------------------

entries = st.builds(
    ClosetEntry,
    topic=st.text(alphabet="ab |;→\n中", max_size=2000),
    entities=st.lists(st.text(alphabet="ab |;→\n中", max_size=300), max_size=40).map(tuple),
    drawer_ids=st.lists(
        st.from_regex(r"d_[0-9a-f]{24}", fullmatch=True), min_size=1, max_size=80, unique=True
    ).map(tuple),
)


@fast(200)
@given(entry=entries, max_chars=st.integers(40, 1500))
def test_a_closet_line_fits_and_keeps_every_pointer(entry: ClosetEntry, max_chars: int) -> None:
    try:
        line, text = render_line(entry, max_chars=max_chars)
    except PluginError:
        assert len("→" + ",".join(entry.drawer_ids)) + 2 > max_chars  # refused only then
        return
    assert len(line) <= max_chars
    assert "\n" not in line
    _topic, entities, pointer = line.split("|")  # exactly three fields
    assert line == f"{text}|{pointer}"
    assert all(e.strip() for e in entities.split("; ")) or not entities
    assert pointer.startswith("→")
    assert tuple(pointer.removeprefix("→").split(",")) == entry.drawer_ids


class _RandomExtractor(ClosetExtractor):
    """Returns whatever entries hypothesis draws, over subsets of the drawers it is given."""

    def __init__(self, data: st.DataObject) -> None:
        self._data = data
        self.drawn: list[ClosetEntry] = []

    def extract(self, *, drawers: Sequence[Drawer]) -> list[ClosetEntry]:
        ids = [d.id for d in drawers]
        drawn = self._data.draw(
            st.lists(
                st.builds(
                    ClosetEntry,
                    topic=st.text(alphabet="ab |;\n", max_size=600),
                    entities=st.lists(st.text(alphabet="ab |;", max_size=200), max_size=10).map(
                        tuple
                    ),
                    drawer_ids=st.lists(st.sampled_from(ids), min_size=1, unique=True).map(tuple),
                ),
                max_size=3,
            )
        )
        self.drawn += drawn
        return drawn


def _drawers(count: int, sources: int) -> list[Drawer]:
    return [
        Drawer(
            id=drawer_id(wing="w", source_key=f"s{n % sources}", chunk_index=n, text=str(n)),
            text=f"drawer {n} of source {n % sources}",
            wing="w",
            room="r",
            source=f"s{n % sources}",
            chunk_index=n,
        )
        for n in range(count)
    ]


@fast(80)
@given(
    count=st.integers(1, 30),
    sources=st.integers(1, 4),
    per_closet=st.integers(1, 8),
    max_chars=st.integers(40, 1500),
    data=st.data(),
)
def test_built_closets_fit_and_point_only_inside_their_run(
    count: int, sources: int, per_closet: int, max_chars: int, data: st.DataObject
) -> None:
    drawers = _drawers(count, sources)
    by_id = {d.id: d for d in drawers}
    extractor = _RandomExtractor(data)
    closets = build_closets(
        drawers,
        extractor=extractor,
        extractor_name="random",
        drawers_per_closet=per_closet,
        max_chars=max_chars,
    )
    for closet in closets:
        assert len(closet.line) <= max_chars
        assert closet.line.endswith("→" + ",".join(closet.drawer_ids))
        pointed = [by_id[i] for i in closet.drawer_ids]  # KeyError: a broken pointer
        assert {d.source for d in pointed} == {closet.source}
        assert len(pointed) <= per_closet
    # An entry whose pointers do not fit on one line is split, never dropped.
    wanted = {i for e in extractor.drawn if e.topic.strip() or e.entities for i in e.drawer_ids}
    assert {i for c in closets for i in c.drawer_ids} == wanted


@pytest.fixture(scope="module")
def closet_palace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Palace, Path]]:
    root = tmp_path_factory.mktemp("closets")
    (root / "tree").mkdir()
    config = {**CHUNKING, "closets": {"drawers_per_closet": 2, "max_chars": 200}}
    with Palace.open(
        root / "palace", backend="sqlite", embedder="fake", plugins=[FAKE_PLUGIN], config=config
    ) as palace:
        yield palace, root / "tree"


@fast(15)
@given(
    bodies=st.lists(
        st.text(alphabet="Alice Bob met in Paris on 8 May 2023. |;→中文\n", max_size=900),
        min_size=1,
        max_size=4,
    )
)
def test_filed_closets_never_point_to_a_missing_drawer(
    closet_palace: tuple[Palace, Path], bodies: list[str]
) -> None:
    """The regex extractor on random text, mined, re-mined and partly deleted."""
    palace, tree = closet_palace
    for old in tree.iterdir():
        old.unlink()
    for n, body in enumerate(bodies):
        (tree / f"n{n}.md").write_text(body, encoding="utf-8")
        stamp = 1_700_000_000 + next(_version)
        os.utime(tree / f"n{n}.md", (stamp, stamp))
    palace.mine(tree, wing="w", progress=False)
    palace.sync(tree)
    doomed = palace.ledger.drawer_ids(Filter(wing="w"))[::3]
    palace.delete(doomed)
    db = sqlite3.connect(palace.path / LEDGER_FILE)
    try:
        lines = db.execute("SELECT id, line FROM closets").fetchall()
        broken = db.execute(
            "SELECT count(*) FROM closet_drawers p LEFT JOIN drawers d ON d.id = p.drawer_id "
            "WHERE d.id IS NULL"
        ).fetchone()
        empty = db.execute(
            "SELECT count(*) FROM closets c WHERE NOT EXISTS "
            "(SELECT 1 FROM closet_drawers p WHERE p.closet_id = c.id)"
        ).fetchone()
    finally:
        db.close()
    assert broken == (0,)
    assert empty == (0,)
    for _, line in lines:
        assert len(line) <= 200
        assert line.count("|") == 2


# -- filters ----------------------------------------------------------------------------

BASE_TIME = datetime(2026, 3, 1, tzinfo=UTC)
TIMES = [BASE_TIME + timedelta(seconds=s) for s in (0, 0.000001, 0.5, 1, 86_400.25, 10**8)]
VALUES = ["a", "b", "", "ä'\"; DROP TABLE x"]

records = st.lists(
    st.tuples(
        st.sampled_from(VALUES),  # wing
        st.sampled_from(VALUES[:3]),  # room
        st.sampled_from([None, "u1", "u2"]),  # user
        st.sampled_from(["drawer", "memory"]),  # kind
        st.sampled_from(TIMES),  # content date
    ),
    min_size=1,
    max_size=40,
)


@st.composite
def filters(draw: st.DrawFn) -> Filter:
    """A filter over :data:`VALUES` and :data:`TIMES`, its bounds often on a record's time."""
    bounds = sorted(draw(st.lists(st.sampled_from(TIMES), max_size=2)))
    since = until = None
    if len(bounds) == 2:
        since, until = bounds
    elif bounds:
        since, until = (bounds[0], None) if draw(st.booleans()) else (None, bounds[0])
    return Filter(
        wing=draw(st.none() | st.sampled_from(VALUES)),
        room=draw(st.none() | st.sampled_from(VALUES[:3])),
        user_id=draw(st.none() | st.sampled_from(["u1", "u2"])),
        kind=draw(st.none() | st.sampled_from(["drawer", "memory"])),
        since=since,
        until=until,
    )


@pytest.fixture(scope="module")
def backends(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A real ledger with the exact scan over it, and two real Chroma collections: one
    with the in-memory catalog, one that sends every query to the HNSW graph."""
    root = tmp_path_factory.mktemp("filters")
    ledger = SQLiteLedger(root / LEDGER_FILE)
    context = BackendContext(palace_dir=root, collection="drawers", dimension=8, ledger=ledger)
    chroma = ChromaIndex(context)
    hnsw = ChromaIndex(
        BackendContext(
            palace_dir=root,
            collection="closets",  # a collection of its own, filled with the drawers
            dimension=8,
            ledger=ledger,
            options={"exact_below": 0},
        )
    )
    yield {"ledger": ledger, "sqlite": ExactIndex(context), "chroma": chroma, "chroma-hnsw": hnsw}
    hnsw.close()
    chroma.close()
    ledger.close()


@fast(40)
@given(rows=records, wheres=st.lists(filters(), min_size=1, max_size=6), seed=st.integers(0, 99))
def test_every_backend_filters_like_the_reference(
    backends: dict[str, Any], rows: list[tuple[Any, ...]], wheres: list[Filter], seed: int
) -> None:
    ledger: SQLiteLedger = backends["ledger"]
    ledger.delete_drawers(ledger.drawer_ids())
    drawers = [
        Drawer(
            id=f"d{n:03d}",
            text=f"record {n}",
            wing=wing,
            room=room,
            source="s",
            user_id=user,
            kind=kind,
            content_date=when,
        )
        for n, (wing, room, user, kind, when) in enumerate(rows)
    ]
    vectors = np.random.default_rng(seed).normal(size=(len(drawers), 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ledger.upsert_drawers(drawers, vectors, model="fake")
    for name in ("chroma", "chroma-hnsw"):
        backends[name].clear()
        for batch in ledger.iter_entries("drawers"):
            backends[name].upsert(entries=batch)
    query = vectors[0]
    for where in wheres:
        expected = {d.id for d in drawers if where.matches(d)}
        assert set(ledger.drawer_ids(where)) == expected, "the ledger's SQL"
        for name in ("sqlite", "chroma", "chroma-hnsw"):
            found = backends[name].query(vector=query, k=len(drawers), where=where)
            assert {m.id for m in found} == expected, name
            sims = [m.similarity for m in found]
            assert sims == sorted(sims, reverse=True), name
