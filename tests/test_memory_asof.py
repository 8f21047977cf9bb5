"""The past period a question asks about (:mod:`palace_retrievers.memory.asof`) and the memories
that held a slot during it (:func:`palace_retrievers.memory.recall.held_slot`).

Pure logic: no embedder, no palace.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from palace_retrievers.memory.asof import Period, period_in, point, without_period
from palace_retrievers.memory.recall import asked, held_slot
from palace_retrievers.records import Filter
from palace_retrievers.records.memories import Memory

NOW = datetime(2026, 6, 10, 12, 0, tzinfo=UTC)  # a Wednesday


def day(y: int, m: int, d: int) -> datetime:
    return datetime(y, m, d, tzinfo=UTC)


@pytest.mark.parametrize(
    ("question", "start", "end", "rest"),
    [
        ("Where did I live in March 2024?", day(2024, 3, 1), day(2024, 4, 1), "Where did I live?"),
        ("In March 2024, where did I live?", day(2024, 3, 1), day(2024, 4, 1), "where did I live?"),
        ("Where did I live in Mar. 2024?", day(2024, 3, 1), day(2024, 4, 1), "Where did I live?"),
        ("Where did I live on March 10, 2024?", day(2024, 3, 10), day(2024, 3, 11), None),
        ("Where did I live on 10th of March 2024?", day(2024, 3, 10), day(2024, 3, 11), None),
        ("Where did I work as of 2025-04-10?", day(2025, 4, 10), day(2025, 4, 11), None),
        ("Who was my manager on 2025/4/7?", day(2025, 4, 7), day(2025, 4, 8), None),
        ("What was my job in 2024-02?", day(2024, 2, 1), day(2024, 3, 1), None),
        ("What was my job back in 2023?", day(2023, 1, 1), day(2024, 1, 1), "What was my job?"),
        ("What did we use during 2023?", day(2023, 1, 1), day(2024, 1, 1), None),
        ("What did we decide yesterday?", day(2026, 6, 9), day(2026, 6, 10), None),
        ("What did we decide last week?", day(2026, 6, 1), day(2026, 6, 8), None),
        ("What did we decide last month?", day(2026, 5, 1), day(2026, 6, 1), None),
        ("Who was my manager last year?", day(2025, 1, 1), day(2026, 1, 1), None),
        ("Who was my manager 3 months ago?", day(2026, 3, 1), day(2026, 4, 1), None),
        ("What was my job two years ago?", day(2024, 1, 1), day(2025, 1, 1), None),
        ("What was my job a year ago?", day(2025, 1, 1), day(2026, 1, 1), None),
        ("2024年3月我住在哪里？", day(2024, 3, 1), day(2024, 4, 1), "我住在哪里?"),
        ("2024年3月10日的时候我住在哪里？", day(2024, 3, 10), day(2024, 3, 11), "我住在哪里?"),
        ("我2024年3月10号住在哪里？", day(2024, 3, 10), day(2024, 3, 11), "我 住在哪里?"),
        ("截至2025年我最喜欢的水果是什么？", day(2025, 1, 1), day(2026, 1, 1), None),
        ("去年我在哪里工作？", day(2025, 1, 1), day(2026, 1, 1), "我在哪里工作?"),
        ("前年我在哪里工作？", day(2024, 1, 1), day(2025, 1, 1), None),
        ("上个月周会是什么时候？", day(2026, 5, 1), day(2026, 6, 1), "周会是什么时候?"),
        ("上周周会是什么时候？", day(2026, 6, 1), day(2026, 6, 8), None),
        ("三个月前周会是什么时候？", day(2026, 3, 1), day(2026, 4, 1), None),
        ("两年前我住在哪里？", day(2024, 1, 1), day(2025, 1, 1), None),
        ("十二天前周会是什么时候？", day(2026, 5, 29), day(2026, 5, 30), None),
    ],
)
def test_periods_are_read_from_questions(
    question: str, start: datetime, end: datetime, rest: str | None
) -> None:
    period = period_in(question, now=NOW)
    assert period is not None
    assert (period.start, period.end) == (start, end)
    if rest is not None:
        assert without_period(question, period) == rest


@pytest.mark.parametrize(
    "question",
    [
        "Where do I live?",
        "What is the 2023 budget?",  # a bare year needs "in", "during", "as of"...
        "Tell me about ticket 2024-13",  # no month 13
        "Which room is 2024?",
        "Where will I live in 2030?",  # a future period is no question about the past
        "What is on the agenda next month?",
        "May I ask what we decided?",  # "May" opening a question is not a month
        "Was Feb 30, 2024 a holiday?",  # no such day
        "我住在哪里？",
        "明年我住在哪里？",
    ],
)
def test_questions_without_a_past_period(question: str) -> None:
    assert period_in(question, now=NOW) is None


def test_the_current_period_counts_as_asked() -> None:
    period = period_in("Where did I live in 2026?", now=NOW)
    assert period is not None
    assert period.start == day(2026, 1, 1)


def test_share_of_a_period() -> None:
    march = Period(day(2024, 3, 1), day(2024, 4, 1))
    assert march.share(day(2023, 1, 1), None) == 1.0
    assert march.share(day(2023, 1, 1), day(2024, 3, 1)) == 0.0
    assert march.share(day(2024, 4, 1), None) == 0.0
    assert march.share(day(2024, 3, 1), day(2024, 3, 17)) == pytest.approx(16 / 31)
    moment = point(day(2024, 3, 5))
    assert moment.share(day(2024, 3, 1), day(2024, 3, 6)) == 1.0
    assert moment.share(day(2024, 3, 6), None) == 0.0


def test_asked_reads_slots_after_the_date_is_taken_out() -> None:
    where = Filter(user_id="u")
    ask = asked("Where did I live in March 2024?", where, NOW)
    assert ask.slots == ("i|lives_in",)
    assert ask.period is not None
    assert ask.period.start == day(2024, 3, 1)
    assert ask.rest == "Where did I live?"
    current = asked("Where do I live?", where, NOW)
    assert current.period is None
    assert current.slots == ("i|lives_in",)
    plain = asked("orders database backups", where, NOW)
    assert plain == type(plain)((), None, "orders database backups")


def test_a_past_until_is_the_asked_moment_unless_the_question_names_one() -> None:
    until = day(2025, 2, 3)
    ask = asked("Where do I live?", Filter(until=until), NOW)
    assert ask.period == point(until)
    named = asked("Where did I live in March 2024?", Filter(until=until), NOW)
    assert named.period is not None
    assert named.period.start == day(2024, 3, 1)
    future = asked("Where do I live?", Filter(until=NOW + timedelta(days=3)), NOW)
    assert future.period is None


def memory(
    name: str, at: datetime, *, status: str = "active", by: str | None = None, slot: str = ""
) -> Memory:
    return Memory(
        id=name,
        text=name,
        slot=slot or "i|lives_in",
        created_at=at,
        updated_at=at,
        status=status,
        superseded_by=by,
        status_at=at,
    )


def test_held_slot_lays_the_memories_of_a_slot_on_a_timeline() -> None:
    lisbon = memory("lisbon", day(2024, 1, 5), status="superseded", by="porto")
    porto = memory("porto", day(2024, 6, 1), status="superseded", by="madrid")
    madrid = memory("madrid", day(2025, 3, 1))
    members = [madrid, lisbon, porto]
    both = ("active", "superseded")
    assert held_slot(members, point(NOW), ("active",)) == {"madrid": 1.0}
    assert held_slot(members, Period(day(2024, 3, 1), day(2024, 4, 1)), both) == {"lisbon": 1.0}
    year = held_slot(members, Period(day(2024, 1, 1), day(2025, 1, 1)), both)
    assert set(year) == {"lisbon", "porto"}
    assert year["porto"] > year["lisbon"]
    assert held_slot(members, Period(day(2023, 1, 1), day(2024, 1, 1)), both) == {}


def test_held_slot_without_supersede_the_newest_value_holds() -> None:
    old = memory("old", day(2024, 1, 1))
    new = memory("new", day(2024, 6, 1))
    assert held_slot([old, new], point(NOW), ("active",)) == {"new": 1.0}
    assert held_slot([old, new], point(day(2024, 2, 1)), ("active",)) == {"old": 1.0}


def test_held_slot_keeps_one_timeline_per_predicate() -> None:
    time = memory("at 9", day(2024, 1, 1), slot="standup|time")
    moved = memory("on monday", day(2024, 6, 1), slot="team standup|date")
    held = held_slot([time, moved], point(NOW), ("active",))
    assert held == {"at 9": 1.0, "on monday": 1.0}


def test_a_superseded_memory_filed_late_holds_until_its_successor() -> None:
    # mined out of order: filed after its successor, already superseded by it
    current = memory("current", day(2024, 6, 1))
    late = Memory(
        id="late",
        text="late",
        slot="i|lives_in",
        created_at=day(2024, 1, 1),
        status="superseded",
        superseded_by="current",
        status_at=day(2025, 1, 1),
    )
    held = held_slot([current, late], point(day(2024, 3, 1)), ("active", "superseded"))
    assert held == {"late": 1.0}
