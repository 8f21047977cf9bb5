"""Remembering finds a new memory's active neighbours in the vector index when the
palace hands it a ``nearest`` look-up (no exact scan over every memory of the owner).

Pure logic: the FAKE embedder (texts that share words are close) and the exact
``sqlite`` backend, whose index answers exactly as the ledger's scan would.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from palace_retrievers import Palace
from palace_retrievers.records import Filter

TEXTS = [
    ("I live in Lisbon", "active"),
    ("The team standup is at 9am", "active"),
    ("My favourite editor is Vim", "pending"),
    ("I live in Porto now", "active"),
    ("The team standup is at 10am", "active"),
    ("My favourite editor is Emacs", "pending"),
    ("The team standup is at 10am", "active"),
    ("We had pizza on Friday", "active"),
    ("We had pizza on Friday", "active"),  # no slot: found by the neighbour look-up only
]


def wire(palace: Palace, calls: list[tuple[str, ...]]) -> None:
    """What the palace would pass: the ``memories`` collection of its vector index."""

    def nearest(
        vector: npt.NDArray[np.float32], user_id: str | None, k: int
    ) -> Sequence[tuple[str, float]]:
        where = Filter(user_id=user_id)
        return [
            (m.id, m.similarity)
            for m in palace.indexes.query("memories", vector=vector, k=k, where=where)
        ]

    original = palace.ledger.nearest_memories

    def scan(*args: Any, **kwargs: Any) -> Any:
        calls.append(tuple(kwargs.get("statuses", ())))
        return original(*args, **kwargs)

    palace._remembering._nearest = nearest
    palace.ledger.nearest_memories = scan  # type: ignore[method-assign]


def life(palace: Palace) -> list[tuple[str, str, str]]:
    out = []
    for text, status in TEXTS:
        done = palace.remember(text, user_id="u", status=status)
        out.append((text, done.action, done.memory.status))
    return out


def test_the_index_look_up_gives_the_exact_scans_verdicts(
    open_palace: Callable[..., Palace], tmp_path: Path
) -> None:
    exact = life(open_palace(tmp_path / "exact", backend="sqlite"))
    indexed = open_palace(tmp_path / "indexed", backend="sqlite")
    calls: list[tuple[str, ...]] = []
    wire(indexed, calls)
    assert life(indexed) == exact
    assert [action for _, action, _ in exact].count("updated") >= 2
    assert exact[-1][1] == "duplicate"
    assert calls
    assert set(calls) == {("pending",)}  # only the pending memories are scanned


def test_another_owners_memories_are_no_neighbours(
    open_palace: Callable[..., Palace], tmp_path: Path
) -> None:
    palace = open_palace(tmp_path / "palace", backend="sqlite")
    wire(palace, [])
    palace.remember("I live in Lisbon", user_id="alice")
    done = palace.remember("I live in Lisbon", user_id="bob")
    assert done.action == "added"
    assert palace.remember("I live in Lisbon", user_id="bob").action == "duplicate"


@pytest.mark.parametrize("status", ["active", "pending"])
def test_a_pending_memory_is_still_found(
    open_palace: Callable[..., Palace], tmp_path: Path, status: str
) -> None:
    palace = open_palace(tmp_path / "palace", backend="sqlite")
    wire(palace, [])
    palace.remember("My favourite editor is Vim", user_id="u", status=status)
    again = palace.remember("My favourite editor is Vim", user_id="u", status=status)
    assert again.action == "duplicate"


def test_the_palace_wires_the_index_and_sees_what_the_journal_still_holds(
    open_palace: Callable[..., Palace], tmp_path: Path
) -> None:
    """The palace's own look-up (chroma): a memory filed but not yet in the vector index
    (another process's queued write, journalled for the index) is still a neighbour."""
    palace = open_palace(tmp_path / "palace", backend="chroma")
    first = palace.remember("We had pizza on Friday", user_id="u").memory
    assert palace.remember("We had pizza on Friday", user_id="u").action == "duplicate"
    palace.indexes.delete("memories", [first.id])  # as if another process had filed it
    palace.ledger._db.execute(  # type: ignore[attr-defined]  # SQLite ledger internals
        "INSERT INTO index_pending (collection, id) VALUES ('memories', ?)", (first.id,)
    )
    vector = palace.embedder.embed_query("We had pizza on Friday")
    indexed = palace.indexes.query("memories", vector=vector, k=5, where=Filter(user_id="u"))
    assert first.id not in [m.id for m in indexed]
    assert first.id in [i for i, _ in palace._memories.nearest(vector, "u", 5)]
    assert palace.remember("We had pizza on Friday", user_id="u").action == "duplicate"
    assert [m.id for m in palace.memories(user_id="u")] == [first.id]
