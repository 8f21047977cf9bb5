"""Questions about the past, more of them: dates without a year
(:func:`palace_retrievers.memory.asof.period_in`), and memories that ``palace gc`` archived for
having been superseded, which a question about a past period still recalls
(:mod:`palace_retrievers.memory.recall`).

The tests of dates and timelines are pure logic (no embedder). The tests through a palace
use real SQLite with the FAKE embedder: they check which memories are candidates (the
statuses, the archive reasons, the ledger queries), not meaning. The last test uses the
REAL all-MiniLM-L6-v2 through ``Palace.search``.
"""

from __future__ import annotations

import calendar
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from palace_retrievers import Palace
from palace_retrievers.memory.asof import Period, period_in, without_period
from palace_retrievers.memory.recall import held_slot, superseded_at
from palace_retrievers.records.memories import Memory, MemoryEvent

NOW = datetime(2026, 6, 10, 12, 0, tzinfo=UTC)  # a Wednesday
USER = "me"
MONTH_NAMES = tuple(calendar.month_name)[1:]  # January ... December (C locale)


def day(y: int, m: int, d: int) -> datetime:
    return datetime(y, m, d, tzinfo=UTC)


# -- dates without a year (pure) ----------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "start", "end", "rest"),
    [
        ("Where did I live in March?", day(2026, 3, 1), day(2026, 4, 1), "Where did I live?"),
        ("In May, where did I live?", day(2026, 5, 1), day(2026, 6, 1), "where did I live?"),
        ("Where did I live in June?", day(2026, 6, 1), day(2026, 7, 1), None),  # this month
        ("Where did I live in July?", day(2025, 7, 1), day(2025, 8, 1), None),  # not yet: 2025
        ("Where did I live in december?", day(2025, 12, 1), day(2026, 1, 1), None),
        ("What did I decide during May?", day(2026, 5, 1), day(2026, 6, 1), None),
        ("Where did I work since April?", day(2026, 4, 1), day(2026, 5, 1), None),
        ("Where did I work since Sept.?", day(2025, 9, 1), day(2025, 10, 1), None),
        ("Where did I work in Aug?", day(2025, 8, 1), day(2025, 9, 1), "Where did I work?"),
        ("What was my job in early March?", day(2026, 3, 1), day(2026, 4, 1), "What was my job?"),
        ("What was my job at the end of May?", day(2026, 5, 1), day(2026, 6, 1), None),
        (
            "What was the standup time on June 3?",
            day(2026, 6, 3),
            day(2026, 6, 4),
            "What was the standup time?",
        ),
        ("What was the standup time on June 10?", day(2026, 6, 10), day(2026, 6, 11), None),
        ("What was the standup time on June 11?", day(2025, 6, 11), day(2025, 6, 12), None),
        ("What was the standup time on 3 June?", day(2026, 6, 3), day(2026, 6, 4), None),
        (
            "What was the standup time on the 3rd of June?",
            day(2026, 6, 3),
            day(2026, 6, 4),
            "What was the standup time?",
        ),
        ("What was the standup time on may 3?", day(2026, 5, 3), day(2026, 5, 4), None),
        ("May 3: what was the standup time?", day(2026, 5, 3), day(2026, 5, 4), None),
        ("Where did I live on Feb 29?", day(2024, 2, 29), day(2024, 3, 1), None),  # leap day
        ("Where did I live last March?", day(2026, 3, 1), day(2026, 4, 1), "Where did I live?"),
        ("Where did I live last June?", day(2025, 6, 1), day(2025, 7, 1), None),
        ("Where did I live in March last year?", day(2025, 3, 1), day(2025, 4, 1), None),
        ("Where did I live on June 3 this year?", day(2026, 6, 3), day(2026, 6, 4), None),
        ("3月份周会是几点？", day(2026, 3, 1), day(2026, 4, 1), "周会是几点?"),
        ("3月周会是几点？", day(2026, 3, 1), day(2026, 4, 1), "周会是几点?"),
        ("三月份周会是几点？", day(2026, 3, 1), day(2026, 4, 1), None),
        ("十二月的时候我住在哪里？", day(2025, 12, 1), day(2026, 1, 1), "我住在哪里?"),
        ("6月3日周会是几点？", day(2026, 6, 3), day(2026, 6, 4), "周会是几点?"),
        ("6月3号周会是几点？", day(2026, 6, 3), day(2026, 6, 4), None),
        ("六月三十号周会是几点？", day(2025, 6, 30), day(2025, 7, 1), None),
        ("我８月住在哪里？", day(2025, 8, 1), day(2025, 9, 1), "我 住在哪里?"),  # full-width
        ("去年3月我住在哪里？", day(2025, 3, 1), day(2025, 4, 1), "我住在哪里?"),
        ("前年6月3日周会是几点？", day(2024, 6, 3), day(2024, 6, 4), "周会是几点?"),
    ],
)
def test_a_date_without_a_year_is_its_latest_occurrence(
    question: str, start: datetime, end: datetime, rest: str | None
) -> None:
    period = period_in(question, now=NOW)
    assert period is not None, question
    assert (period.start, period.end) == (start, end)
    if rest is not None:
        assert without_period(question, period) == rest


def test_a_date_without_a_year_is_read_on_the_askers_calendar() -> None:
    tokyo = timezone(timedelta(hours=9))
    morning = datetime(2026, 6, 3, 8, 0, tzinfo=tokyo)  # still June 2 in UTC
    assert _start("What was the standup time on June 3?", morning) == day(2026, 6, 3)
    assert _start("Where did I live in June?", morning) == day(2026, 6, 1)
    new_year = datetime(2026, 1, 1, 7, 0, tzinfo=tokyo)  # still 2025 in UTC
    assert _start("Where did I live in January?", new_year) == day(2026, 1, 1)


def test_days_and_weeks_back_win_over_a_month_without_a_year() -> None:
    start = _start("What did I say last week about my trip in May?", NOW)
    assert start is not None
    assert NOW - timedelta(days=14) <= start < NOW  # last week, not May
    assert _start("What did we decide 3 days ago about March?", NOW) == day(2026, 6, 7)
    assert _start("What was my job in March last year?", NOW) == day(2025, 3, 1)
    assert _start("去年3月我住在哪里？", NOW) == day(2025, 3, 1)


def test_a_month_after_now_in_the_year_is_last_years_across_new_year() -> None:
    january = datetime(2026, 1, 15, 8, tzinfo=UTC)
    assert _start("Where did I live in December?", january) == day(2025, 12, 1)
    assert _start("Where did I live in January?", january) == day(2026, 1, 1)
    assert _start("Where did I live last January?", january) == day(2025, 1, 1)
    assert _start("What was the standup time on January 16?", january) == day(2025, 1, 16)
    assert _start("What was the standup time on January 15?", january) == day(2026, 1, 15)
    assert _start("12月31日周会是几点？", january) == day(2025, 12, 31)


def _start(question: str, now: datetime) -> datetime | None:
    period = period_in(question, now=now)
    return None if period is None else period.start


@pytest.mark.parametrize(
    "question",
    [
        "May I ask where I live?",
        "may I ask where I live?",
        "I march to the office every morning, where is it?",
        "We march on, what is my job?",
        "Where did I live in march?",  # "may" and "march" alone need a capital
        "What did we decide in may?",
        "Who took a photo of Jan?",  # short names alone: capitalised, never after "of"
        "Where did I go with Jan?",
        "What is the March Madness schedule?",  # a month alone needs "in", "during"...
        "Only 3 may come to the standup, who?",
        "He may 3D print it",
        "Where will I live on June 3, 2030?",  # a dated future is no past
        "Where will I live in December this year?",
        "What was the standup time on June 31?",  # no such day
        "13月的计划是什么？",
        "周会改到周一下午3点了吗？",
        "三月前周会是什么时候？",  # "three months ago" or "before March": neither
        "Is the pool closed until June?",  # the coming June as likely as the last one
        "Where is June's car parked?",  # a name
        "Who sat in June's seat?",
        "这个月周会是什么时候？",
    ],
)
def test_words_that_are_no_date(question: str) -> None:
    assert period_in(question, now=NOW) is None, question


def test_a_dated_question_is_still_read_before_a_year_less_one() -> None:
    period = period_in("In March, or rather on 2024-04-02, where did I live?", now=NOW)
    assert period is not None
    assert period.start == day(2024, 4, 2)


# -- archived by gc: the reason and the timeline (pure) -----------------------------------


def event(kind: str, at: datetime, status: str, **detail: Any) -> MemoryEvent:
    return MemoryEvent(memory_id="m", event=kind, at=at, new_status=status, detail=detail)


def test_superseded_at_reads_the_archive_reason_from_the_history() -> None:
    added = event("add", day(2024, 1, 5), "active")
    superseded = event("supersede", day(2024, 6, 1), "superseded", superseded_by="n")
    gc = event("archive", day(2025, 1, 1), "archived", reason="superseded")
    assert superseded_at([added, superseded, gc]) == day(2024, 6, 1)
    for reason in ("expired", "unused"):
        archived = event("archive", day(2025, 1, 1), "archived", reason=reason)
        assert superseded_at([added, superseded, archived]) is None
    deleted = event("delete", day(2025, 1, 1), "archived", soft=True)
    assert superseded_at([added, superseded, deleted]) is None
    assert superseded_at([added, superseded]) is None  # not archived
    # archived, restored, then deleted: the last archiving counts
    restored = event("restore", day(2025, 2, 1), "superseded")
    assert superseded_at([added, superseded, gc, restored, deleted]) is None
    again = event("archive", day(2025, 9, 1), "archived", reason="superseded")
    # a restore to superseded ends nothing: the value held until its supersede
    assert superseded_at([added, superseded, gc, restored, again]) == day(2024, 6, 1)


def memory(name: str, at: datetime, *, status: str = "active", by: str | None = None) -> Memory:
    return Memory(
        id=name,
        text=name,
        slot="i|lives_in",
        created_at=at,
        updated_at=at,
        status=status,
        superseded_by=by,
        status_at=at,
    )


def test_an_archived_member_holds_until_it_was_superseded() -> None:
    archived_at = day(2025, 1, 1)
    lisbon = Memory(
        id="lisbon",
        text="lisbon",
        slot="i|lives_in",
        created_at=day(2024, 1, 5),
        status="archived",
        superseded_by="porto",
        status_at=archived_at,
    )
    porto = memory("porto", day(2024, 6, 1))
    statuses = ("active", "superseded", "archived")
    march = Period(day(2024, 3, 1), day(2024, 4, 1))
    assert held_slot([lisbon, porto], march, statuses) == {"lisbon": 1.0}
    # its successor gone from the members: the time of its supersede event ends it
    ended = {"lisbon": day(2024, 6, 1)}
    assert held_slot([lisbon], Period(day(2024, 7, 1), day(2024, 8, 1)), statuses, ended) == {}
    assert held_slot([lisbon], march, statuses, ended) == {"lisbon": 1.0}
    # without it, the archive time would have been taken: what ``ended`` is for
    assert held_slot([lisbon], Period(day(2024, 7, 1), day(2024, 8, 1)), statuses) != {}
    # a question about now never counts an archived memory
    assert held_slot([lisbon, porto], march, ("active",)) == {}


# -- through a palace: real SQLite, FAKE embedder -----------------------------------------

LIFE = [
    ("I live in Lisbon", day(2024, 1, 5)),
    ("I moved to Porto", day(2024, 6, 1)),
    ("I relocated to Madrid", day(2025, 3, 1)),
]
GC_AT = day(2025, 10, 1)


def open_fake(open_palace: Callable[..., Palace], tmp_path: Path) -> Palace:
    """A palace on SQLite with the FAKE embedder and the learned pair judges off (the pair
    model's features of FAKE vectors mean nothing; the reader is not what this tests): the
    structural matcher files the updates."""
    config = {"memory": {"pair_model": False, "pair_reader": False}}
    return open_palace(tmp_path / "palace", backend="sqlite", config=config)


@pytest.fixture
def archived_life(open_palace: Callable[..., Palace], tmp_path: Path) -> Palace:
    """Lisbon → Porto → Madrid, a cache memory of low importance and a memory with a
    short ttl; ``gc`` at ``GC_AT`` (the tests run it) archives Lisbon and Porto as
    superseded, the cache as unused and the wifi as expired."""
    palace = open_fake(open_palace, tmp_path)
    for text, when in LIFE:
        palace.remember(text, user_id=USER, now=when)
    palace.remember("We use Redis for the cache", importance=0.1, user_id=USER, now=day(2024, 6, 2))
    palace.remember(
        "The office wifi password is tulip",
        ttl=timedelta(days=30),
        user_id=USER,
        now=day(2024, 6, 3),
    )
    return palace


def texts(palace: Palace, question: str, **kwargs: Any) -> list[tuple[str, str]]:
    return [
        (h.text, h.memory.status)
        for h in palace.search(question, k=5, user_id=USER, **kwargs)
        if h.memory is not None
    ]


def test_gc_archives_as_the_tests_expect(archived_life: Palace) -> None:
    report = archived_life.gc(now=GC_AT)
    assert report.counts == {"expired": 1, "superseded": 2, "unused": 1}
    status = {m.text: m.status for m in archived_life.memories(user_id=USER, status=None)}
    assert status == {
        "I live in Lisbon": "archived",
        "I moved to Porto": "archived",
        "I relocated to Madrid": "active",
        "We use Redis for the cache": "archived",
        "The office wifi password is tulip": "archived",
    }


def test_a_past_question_recalls_memories_archived_as_superseded(archived_life: Palace) -> None:
    before = texts(archived_life, "Where did I live in July 2024?")
    archived_life.gc(now=GC_AT)
    assert before[0] == ("I moved to Porto", "superseded")
    assert texts(archived_life, "Where did I live in July 2024?")[0] == (
        "I moved to Porto",
        "archived",
    )
    assert texts(archived_life, "Where did I live in March 2024?")[0] == (
        "I live in Lisbon",
        "archived",
    )
    assert texts(archived_life, "Where did I live in April 2025?")[0] == (
        "I relocated to Madrid",
        "active",
    )
    # a past ``until`` is a past period too
    assert texts(archived_life, "Where do I live?", until="2024-07-01")[0][0] == "I moved to Porto"
    # word matches, not only the slot's timeline
    assert ("I moved to Porto", "archived") in texts(archived_life, "moved to Porto in July 2024")


def test_a_memory_deleted_after_gc_is_not_recalled_for_the_past(archived_life: Palace) -> None:
    archived_life.gc(now=GC_AT)
    porto = next(m for m in archived_life.memories(user_id=USER, status=None) if "Porto" in m.text)
    assert archived_life.delete_memory(porto.id, user_id=USER).status == "archived"
    assert [e.event for e in archived_life.history(porto.id, user_id=USER)][-2:] == [
        "archive",
        "delete",
    ]
    assert not any(
        "Porto" in text for text, _ in texts(archived_life, "Where did I live in July 2024?")
    )
    archived_life.delete_memory(porto.id, user_id=USER)  # once deleted, nothing more is written
    assert [e.event for e in archived_life.history(porto.id, user_id=USER)][-1] == "delete"
    assert [e.event for e in archived_life.history(porto.id, user_id=USER)].count("delete") == 1


def test_archived_memories_stay_out_of_questions_about_now(archived_life: Palace) -> None:
    archived_life.gc(now=GC_AT)
    for question in ("Where do I live?", "moved to Porto", "Lisbon", "Redis cache"):
        assert all(status == "active" for _, status in texts(archived_life, question)), question
    assert texts(archived_life, "Where do I live?")[0][0] == "I relocated to Madrid"


def test_memories_archived_as_unused_or_expired_stay_out_of_past_questions(
    archived_life: Palace,
) -> None:
    report = archived_life.gc(now=GC_AT)  # before any search: a search counts as a use
    question = "What did we use for the cache in June 2024?"
    assert not any("Redis" in text for text, _ in texts(archived_life, question))
    wifi = "What was the office wifi password on June 10, 2024?"
    assert not any("wifi" in text for text, _ in texts(archived_life, wifi))
    # the question does find the cache memory once it is restored: it matches
    (unused,) = report.ids["unused"]
    archived_life.restore(unused, user_id=USER)
    assert ("We use Redis for the cache", "active") in texts(archived_life, question)


def test_a_deleted_superseded_memory_stays_out_of_past_questions(
    open_palace: Callable[..., Palace], tmp_path: Path
) -> None:
    palace = open_fake(open_palace, tmp_path)
    for text, when in LIFE:
        palace.remember(text, user_id=USER, now=when)
    porto = next(m for m in palace.memories(user_id=USER, status=None) if "Porto" in m.text)
    assert texts(palace, "Where did I live in July 2024?")[0][0] == "I moved to Porto"
    palace.delete_memory(porto.id, user_id=USER)  # archived, still linked to Madrid
    assert palace.memory(porto.id, user_id=USER).superseded_by is not None
    assert not any("Porto" in t for t, _ in texts(palace, "Where did I live in July 2024?"))
    palace.gc(now=GC_AT)  # archives Lisbon; Porto stays deleted
    assert not any("Porto" in t for t, _ in texts(palace, "Where did I live in July 2024?"))
    assert texts(palace, "Where did I live in March 2024?")[0][0] == "I live in Lisbon"


def test_only_a_past_question_reads_the_history_of_archived_memories(
    archived_life: Palace,
) -> None:
    archived_life.gc(now=GC_AT)
    ledger = archived_life.ledger
    reads: list[list[str]] = []  # the ids of each batched history read
    original = ledger.memory_histories

    def counted(ids: Sequence[str]) -> dict[str, list[MemoryEvent]]:
        reads.append(list(ids))
        return original(ids)

    def one_by_one(memory_id: str) -> list[MemoryEvent]:
        raise AssertionError(f"a search read the history of {memory_id} on its own")

    ledger.memory_histories = counted  # type: ignore[method-assign]
    ledger.memory_history = one_by_one  # type: ignore[method-assign]
    archived_life.search("Where do I live?", k=3, user_id=USER)
    archived_life.search("moved to Porto", k=3, user_id=USER)
    assert reads == []
    archived_life.search("Where did I live in July 2024?", k=3, user_id=USER)
    assert len(reads) == 1  # one history read for the search, whatever it looks up
    # Lisbon and Porto may have held in July 2024 (stated before it, archived after it);
    # the memories archived as unused or expired are never looked up (no successor)
    names = {m.id: m.text for m in archived_life.memories(user_id=USER, status=None)}
    assert sorted(names[i] for ids in reads for i in ids) == [
        "I live in Lisbon",
        "I moved to Porto",
    ]
    reads.clear()
    archived_life.search("Where did I live in March 2024?", k=3, user_id=USER)
    assert len(reads) <= 1


def test_a_year_less_month_resolves_against_the_searchs_clock(archived_life: Palace) -> None:
    """``Palace.search`` asks as of now: "in <month>" is the latest such month."""
    now = datetime.now(UTC)
    month = now.month - 1 or 12  # last month: always in the past, within a year
    year = now.year if now.month > 1 else now.year - 1
    archived_life.remember("I moved to Berlin", user_id=USER, now=day(year, month, 1))
    archived_life.remember("I relocated to Rome", user_id=USER, now=now - timedelta(minutes=1))
    archived_life.gc(now=now)
    question = f"Where did I live in {MONTH_NAMES[month - 1]}?"
    assert texts(archived_life, question)[0][0] == "I moved to Berlin"
    assert texts(archived_life, "Where do I live?")[0][0] == "I relocated to Rome"


# -- through Palace.search with the REAL model --------------------------------------------


def months_before(now: datetime, count: int) -> datetime:
    index = now.year * 12 + now.month - 1 - count
    return datetime(index // 12, index % 12 + 1, 1, tzinfo=UTC)


def test_a_year_less_month_finds_the_value_then_even_after_gc_archives_it(
    open_palace: Callable[..., Palace], tmp_path: Path
) -> None:
    palace = open_palace(tmp_path / "palace", fake=False)
    now = datetime.now(UTC)
    asked = months_before(now, 6)  # "in <month>": six months ago, whatever the date
    after = months_before(now, 5)
    palace.remember("I live in Lisbon", user_id=USER, now=asked - timedelta(days=200))
    palace.remember("I moved to Porto", user_id=USER, now=asked - timedelta(days=20))
    palace.remember("I relocated to Madrid", user_id=USER, now=after + timedelta(days=20))
    palace.remember("我最喜欢的水果是芒果", user_id=USER, now=asked - timedelta(days=30))
    palace.remember("我现在最喜欢的水果是草莓", user_id=USER, now=after + timedelta(days=10))
    palace.add_texts(
        ["user: Where should I live if I like the sea? assistant: Lisbon or Porto are nice."],
        user_id=USER,
    )
    name = MONTH_NAMES[asked.month - 1]
    past = f"Where did I live in {name}?"
    past_zh = f"{asked.month}月我最喜欢的水果是什么？"

    def top_memory(question: str) -> Memory:
        hits = palace.search(question, k=5, user_id=USER)
        found = [h.memory for h in hits if h.memory is not None]
        assert found, question
        assert hits[0].memory is found[0], question  # the top hit is the memory
        return found[0]

    # (a) the value that held then, while it is only superseded
    assert top_memory(past).text == "I moved to Porto"
    assert top_memory(past).status == "superseded"
    assert top_memory(past_zh).text == "我最喜欢的水果是芒果"
    # (b) gc archives the superseded values (superseded for over 90 days) ...
    report = palace.gc()
    assert report.superseded == 3, report.as_dict()
    porto = top_memory(past)
    assert (porto.text, porto.status) == ("I moved to Porto", "archived")
    assert top_memory(past_zh).text == "我最喜欢的水果是芒果"
    # ... and a question about now never gets them
    present = palace.search("Where do I live?", k=5, user_id=USER)
    assert present[0].text == "I relocated to Madrid"
    assert all(h.memory is None or h.memory.status == "active" for h in present)
    assert top_memory("我最喜欢的水果是什么？").text == "我现在最喜欢的水果是草莓"
