"""The filter dict, split into index filters and a drawer test (no palace needed)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from palace_retrievers import Drawer, Hit, InvalidQueryError

from langchain_palace.filters import FETCH_LIMIT, compile_filter, fetch


def drawer(**fields: Any) -> Drawer:
    metadata = fields.pop("metadata", {})
    return Drawer(
        id="d",
        text="t",
        wing=fields.pop("wing", "w"),
        room=fields.pop("room", "r"),
        source=fields.pop("source", "text"),
        filed_at=datetime(2026, 3, 1, tzinfo=UTC),
        metadata=metadata,
        **fields,
    )


def test_no_filter_is_the_user_partition_alone() -> None:
    compiled = compile_filter(None, user_id="u1")
    assert compiled.where == {"user_id": "u1"}
    assert compiled.test is None


def test_palace_fields_go_inside_the_index() -> None:
    spec = {"wing": "w", "room": "r", "kind": "drawer", "since": "2026-01-01"}
    compiled = compile_filter(spec, user_id=None)
    assert compiled.where == {**spec, "user_id": None}
    assert compiled.test is None


def test_top_level_and_is_flattened() -> None:
    compiled = compile_filter({"$and": [{"wing": "w"}, {"topic": "db"}]}, user_id=None)
    assert compiled.where == {"user_id": None, "wing": "w"}
    assert compiled.test is not None
    assert compiled.test(drawer(metadata={"topic": "db"}))
    assert not compiled.test(drawer(metadata={"topic": "ops"}))


@pytest.mark.parametrize(
    ("spec", "passes", "fails"),
    [
        ({"topic": "db"}, {"topic": "db"}, {"topic": "ops"}),
        ({"year": {"$eq": 2024}}, {"year": 2024}, {"year": 2023}),
        ({"year": {"$ne": 2024}}, {}, {"year": 2024}),
        ({"year": {"$gt": 2024}}, {"year": 2025}, {"year": 2024}),
        ({"year": {"$gte": 2024}}, {"year": 2024}, {"year": 2023}),
        ({"year": {"$lt": 2024}}, {"year": 2023}, {"year": 2024}),
        ({"year": {"$lte": 2024}}, {"year": 2024}, {"year": "2024"}),
        ({"who": {"$in": ["ann", "bo"]}}, {"who": "bo"}, {"who": "cy"}),
        ({"who": {"$nin": ["ann", "bo"]}}, {}, {"who": "ann"}),
        ({"$or": [{"who": "ann"}, {"year": 1}]}, {"year": 1}, {"who": "bo"}),
    ],
)
def test_metadata_conditions(
    spec: dict[str, Any], passes: dict[str, Any], fails: dict[str, Any]
) -> None:
    compiled = compile_filter(spec, user_id=None)
    assert compiled.test is not None
    assert compiled.test(drawer(metadata=passes))
    assert not compiled.test(drawer(metadata=fails))


def test_drawer_fields_inside_or() -> None:
    compiled = compile_filter({"$or": [{"wing": "a"}, {"source": "x.md"}]}, user_id=None)
    assert compiled.test is not None
    assert compiled.test(drawer(wing="a"))
    assert compiled.test(drawer(source="x.md"))
    assert not compiled.test(drawer())


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"year": {"$regex": "x"}}, "unknown filter operator '\\$regex'"),
        ({"$not": {"a": 1}}, "unknown filter operator '\\$not'"),
        ({"year": {"$gt": 1, "$lt": 3}}, "one operator"),
        ({"who": {"$in": "ann"}}, "takes a list"),
        ({"$or": []}, "non-empty list"),
        ({"user_id": "u2"}, "belongs to user_id='u1'"),
    ],
)
def test_what_the_palace_cannot_honour_is_an_error(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidQueryError, match=message):
        compile_filter(spec, user_id="u1")


def test_own_user_id_is_accepted() -> None:
    assert compile_filter({"user_id": "u1"}, user_id="u1").where == {"user_id": "u1"}


def test_post_filtering_asks_for_a_bounded_number_of_hits(caplog: pytest.LogCaptureFixture) -> None:
    """A filter that almost nothing passes stops at FETCH_LIMIT hits, with a warning."""
    asked: list[int] = []

    def run(n: int) -> list[Hit]:  # a palace of 100,000 drawers; only the last passes
        asked.append(n)
        drawers = [drawer(metadata={"i": i}) for i in range(min(n, 100_000))]
        return [Hit(drawer=d, score=1.0, scores={}) for d in drawers]

    kept = fetch(run, 2, lambda d: d.metadata["i"] % 100 == 0)
    assert asked == [8, 32, 128]  # four times more per round, until 2 pass
    assert [h.drawer.metadata["i"] for h in kept] == [0, 100]
    asked.clear()
    assert fetch(run, 3, lambda d: d.metadata["i"] == 99_999) == []
    assert asked == [12, 48, 192, 768, FETCH_LIMIT]
    assert "only 0 of the best 1024 hits pass the filter (3 wanted)" in caplog.text
    asked.clear()
    assert len(fetch(run, 2000, lambda d: True)) == 2000
    assert asked == [2000]  # k itself, when it is over the limit
