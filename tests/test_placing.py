"""Where directly added texts sit: their source and position (``ingest/placing.py``).

The palaces are real (SQLite ledger, exact backend); they embed with the FAKE embedder,
since only the drawers' ``source`` and ``chunk_index`` are checked.
"""

from __future__ import annotations

import pytest

from palace_retrievers import Palace
from palace_retrievers.ingest.placing import (
    TEXT_SOURCE,
    call_source,
    is_call_source,
    place,
    positions,
)


def placed(palace: Palace, ids: list[str]) -> list[tuple[str, int]]:
    drawers = {d.id: d for d in palace.get(ids)}
    return [(drawers[i].source, drawers[i].chunk_index) for i in ids]


def test_positions_follow_the_keys_then_the_given_order() -> None:
    assert positions(["a", "b", "a", "a"]) == [0, 0, 1, 2]
    assert positions(["a", "a", "a"], [(2.0,), (0.0,), (2.0,)]) == [1, 0, 2]
    with pytest.raises(ValueError, match="one key for each item"):
        positions(["a"], [])


def test_the_texts_of_one_call_form_one_ordered_source(fake_palace: Palace) -> None:
    ids = fake_palace.add_texts(["first turn", "second turn", "third turn"], wing="w")
    sources = {source for source, _ in placed(fake_palace, ids)}
    assert len(sources) == 1
    (source,) = sources
    assert source.startswith("text#")
    assert is_call_source(source)
    assert [chunk for _, chunk in placed(fake_palace, ids)] == [0, 1, 2]
    assert [d.id for d in fake_palace.source_drawers(source, wing="w")] == ids
    # The same call again files the same texts in the same source.
    assert fake_palace.add_texts(["first turn", "second turn", "third turn"], wing="w") == ids
    assert {s for s, _ in placed(fake_palace, ids)} == {source}


def test_a_text_on_its_own_keeps_the_plain_text_source(fake_palace: Palace) -> None:
    (one,) = fake_palace.add_texts(["a note on its own"], wing="w")
    (two,) = fake_palace.add_texts(["another note"], wing="w")
    assert placed(fake_palace, [one, two]) == [(TEXT_SOURCE, 0), (TEXT_SOURCE, 0)]


def test_named_sources_and_given_positions_win(fake_palace: Palace) -> None:
    ids = fake_palace.add_texts(
        ["a1", "b1", "a2", "loose", "b2", "fixed"],
        metadatas=[
            {"source": "a.md"},
            {"source": "b.md"},
            {"source": "a.md"},
            {},
            {"source": "b.md"},
            {"source": "a.md", "chunk_index": 7},
        ],
        wing="w",
    )
    assert placed(fake_palace, ids) == [
        ("a.md", 0),
        ("b.md", 0),
        ("a.md", 1),
        (TEXT_SOURCE, 0),  # the only text of the call without a source
        ("b.md", 1),
        ("a.md", 7),
    ]


def test_each_wing_orders_its_own_texts(fake_palace: Palace) -> None:
    ids = fake_palace.add_texts(
        ["x", "y", "z", "w"], metadatas=[{}, {"wing": "other"}, {}, {"wing": "other"}]
    )
    found = placed(fake_palace, ids)
    assert [chunk for _, chunk in found] == [0, 0, 1, 1]
    assert len({source for source, _ in found}) == 1  # one call: one source, two wings


def test_place_names_the_call_by_its_unnamed_ids() -> None:
    metadatas = [{}, {"source": "s"}, {}]
    assert place(metadatas, ["i1", "i2", "i3"], ["w"] * 3) == [
        (call_source(["i1", "i3"]), 0),
        ("s", 0),
        (call_source(["i1", "i3"]), 1),
    ]
    assert call_source(["i1", "i3"]) != call_source(["i1", "i2"])
    assert not is_call_source("notes/text#1.md")
