"""Records: times in UTC, filters and how they match drawers."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

import pytest

from palace_retrievers import Drawer, Filter, Hit, InvalidQueryError
from palace_retrievers.records import utc


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (datetime(2026, 3, 1, 9, 30), datetime(2026, 3, 1, 9, 30, tzinfo=UTC)),
        (
            datetime(2026, 3, 1, 10, 30, tzinfo=timezone(timedelta(hours=1))),
            datetime(2026, 3, 1, 9, 30, tzinfo=UTC),
        ),
        (date(2026, 3, 1), datetime(2026, 3, 1, tzinfo=UTC)),
        ("2026-03-01", datetime(2026, 3, 1, tzinfo=UTC)),
        ("2026-03-01T09:30Z", datetime(2026, 3, 1, 9, 30, tzinfo=UTC)),
        (" 2026-03-01T10:30:00+01:00 ", datetime(2026, 3, 1, 9, 30, tzinfo=UTC)),
        (0, datetime(1970, 1, 1, tzinfo=UTC)),
        (1.5, datetime(1970, 1, 1, 0, 0, 1, 500000, tzinfo=UTC)),
    ],
)
def test_utc(value: object, expected: datetime) -> None:
    result = utc(value)  # type: ignore[arg-type]
    assert result == expected
    assert result.utcoffset() == timedelta(0)


@pytest.mark.parametrize("value", ["yesterday", "2026-02-30", True, ""])
def test_utc_rejects(value: object) -> None:
    with pytest.raises(InvalidQueryError):
        utc(value)  # type: ignore[arg-type]


def drawer(**fields: object) -> Drawer:
    values: dict[str, object] = {"id": "d", "text": "t", "wing": "w", "room": "r", "source": "s"}
    values.update(fields)
    return Drawer(**values)  # type: ignore[arg-type]


def test_filter_matches() -> None:
    march = datetime(2026, 3, 15, tzinfo=UTC)
    d = drawer(user_id="u1", content_date=march)
    assert Filter(user_id="u1").matches(d)
    assert not Filter().matches(d)  # user_id=None sees only unowned drawers
    assert not Filter(user_id="u2").matches(d)
    assert Filter(user_id="u1", wing="w", room="r", kind="drawer").matches(d)
    assert not Filter(user_id="u1", wing="x").matches(d)
    assert not Filter(user_id="u1", room="x").matches(d)
    assert not Filter(user_id="u1", kind="memory").matches(d)
    assert Filter(user_id="u1", since=march, until=march).matches(d)  # inclusive
    assert not Filter(user_id="u1", since="2026-03-16").matches(d)
    assert not Filter(user_id="u1", until="2026-03-14").matches(d)
    assert Filter().matches(drawer(user_id=None))


def test_filter_uses_filed_at_without_content_date() -> None:
    filed = datetime(2026, 1, 1, tzinfo=UTC)
    d = drawer(filed_at=filed)
    assert d.timestamp == filed.timestamp()
    assert Filter(until="2026-01-02").matches(d)
    assert not Filter(since="2026-01-02").matches(d)


def test_filter_validation() -> None:
    assert Filter(since="2026-03-01").since == datetime(2026, 3, 1, tzinfo=UTC)  # type: ignore[arg-type]
    with pytest.raises(InvalidQueryError, match="'wing'"):
        Filter(wing=3)  # type: ignore[arg-type]
    with pytest.raises(InvalidQueryError, match="since"):
        Filter(since=datetime(2026, 3, 2, tzinfo=UTC), until=datetime(2026, 3, 1, tzinfo=UTC))
    with pytest.raises(InvalidQueryError, match=r"'rooom'.*filters are"):
        Filter.from_mapping({"room": "r", "rooom": "r"})
    assert Filter().owner == ""
    assert Filter(user_id="u").owner == "u"


def test_records_are_frozen() -> None:
    d = drawer()
    with pytest.raises(AttributeError):
        d.text = "changed"  # type: ignore[misc]
    hit = Hit(drawer=d, score=0.5, scores={"vector": 0.5})
    assert (hit.id, hit.text, hit.source, hit.wing, hit.room) == ("d", "t", "s", "w", "r")
    with pytest.raises(AttributeError):
        hit.score = 1.0  # type: ignore[misc]
