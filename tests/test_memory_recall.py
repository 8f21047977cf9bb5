"""Recall by the question's slot and time: the current value first, and the value that
held at a past date (:mod:`palace_retrievers.memory.recall`, :mod:`palace_retrievers.memory.asof`).

Relevance matters here, so the palace uses the REAL all-MiniLM-L6-v2 and real Chroma,
with the structural matcher on (it files each memory's slot). The two tests of ledger
round trips at the end use the FAKE embedder: they count queries, not meaning.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from palace_retrievers import Palace

T = datetime(2024, 1, 5, 9, tzinfo=UTC)
USER = "me"

#: (text, when): a life with a city, a job and a standup that change.
LIFE = [
    ("I live in Lisbon", datetime(2024, 1, 5, 9, tzinfo=UTC)),
    ("My sister lives in Berlin", datetime(2024, 1, 6, 9, tzinfo=UTC)),
    ("I work as a data analyst", datetime(2024, 1, 7, 9, tzinfo=UTC)),
    ("The team standup is at 9am", datetime(2024, 2, 1, 9, tzinfo=UTC)),
    ("我最喜欢的水果是芒果", datetime(2024, 2, 2, 9, tzinfo=UTC)),
    ("I moved to Porto", datetime(2024, 6, 1, 9, tzinfo=UTC)),
    ("Standup moved to 10am", datetime(2024, 9, 2, 9, tzinfo=UTC)),
    ("I'm now working as a product manager", datetime(2024, 11, 4, 9, tzinfo=UTC)),
    ("我现在最喜欢的水果是草莓", datetime(2025, 1, 3, 9, tzinfo=UTC)),
    ("I relocated to Madrid", datetime(2025, 3, 1, 9, tzinfo=UTC)),
    ("I visited Porto last summer", datetime(2025, 4, 1, 9, tzinfo=UTC)),
]
DRAWERS = [
    "user: My sister just moved to Berlin, she loves it there. assistant: Noted.",
    "user: Where should I live if I like the sea? assistant: Lisbon or Porto are nice.",
    "user: The standup today was long. assistant: Sorry to hear that.",
]


@pytest.fixture(scope="module")
def life(tmp_path_factory: pytest.TempPathFactory, real_embedder: Any) -> Iterator[Palace]:
    """One palace for the module (remembering with the real model is slow); the tests
    only search it (they count as accesses, which changes no ranking here by much)."""
    path = tmp_path_factory.mktemp("recall") / "palace"
    with Palace.open(path, embedder=real_embedder) as palace:
        for text, when in LIFE:
            palace.remember(text, user_id=USER, now=when)
        palace.add_texts(DRAWERS, user_id=USER)
        yield palace


def top(palace: Palace, question: str, **kwargs: Any) -> str:
    hits = palace.search(question, k=3, user_id=USER, **kwargs)
    assert hits, question
    return hits[0].text


def test_the_updates_were_filed_as_updates(life: Palace) -> None:
    statuses = {m.text: m.status for m in life.memories(user_id=USER, status=None)}
    assert statuses["I live in Lisbon"] == statuses["I moved to Porto"] == "superseded"
    assert statuses["I relocated to Madrid"] == "active"
    assert statuses["The team standup is at 9am"] == "superseded"
    assert statuses["I work as a data analyst"] == "superseded"


@pytest.mark.parametrize(
    ("question", "answer"),
    [
        ("Where do I live?", "I relocated to Madrid"),
        ("Which city do I live in?", "I relocated to Madrid"),
        ("What is my job?", "I'm now working as a product manager"),
        ("What time is the team standup?", "Standup moved to 10am"),
        ("When is standup?", "Standup moved to 10am"),
        ("我最喜欢的水果是什么？", "我现在最喜欢的水果是草莓"),
    ],
)
def test_the_current_value_of_the_asked_slot_is_the_top_hit(
    life: Palace, question: str, answer: str
) -> None:
    hits = life.search(question, k=3, user_id=USER)
    assert hits[0].text == answer
    assert hits[0].is_memory
    assert hits[0].memory is not None
    assert hits[0].memory.status == "active"
    assert hits[0].scores["held"] == 1.0
    assert hits[0].scores["relevance"] == 1.0
    assert hits[0].score > max((h.score for h in hits if not h.is_memory), default=0.0)


def test_a_distractor_of_another_subject_does_not_hold_the_slot(life: Palace) -> None:
    hits = life.search("Where do I live?", k=5, user_id=USER)
    sister = [h for h in hits if h.text == "My sister lives in Berlin"]
    assert not sister or sister[0].scores["held"] == 0.0


@pytest.mark.parametrize(
    ("question", "answer"),
    [
        ("Where did I live in March 2024?", "I live in Lisbon"),
        ("Where did I live on July 10, 2024?", "I moved to Porto"),
        ("In August 2024, where did I live?", "I moved to Porto"),
        ("Where did I live as of 2025-06-01?", "I relocated to Madrid"),
        ("What was my job in 2024-03?", "I work as a data analyst"),
        ("What time was the team standup on 10 March 2024?", "The team standup is at 9am"),
        ("2024年3月我最喜欢的水果是什么？", "我最喜欢的水果是芒果"),
        ("2025年2月10日我最喜欢的水果是什么？", "我现在最喜欢的水果是草莓"),
    ],
)
def test_a_past_date_in_the_question_finds_the_value_that_held_then(
    life: Palace, question: str, answer: str
) -> None:
    hits = life.search(question, k=1, user_id=USER)
    assert [h.text for h in hits] == [answer]
    assert hits[0].scores["held"] > 0.5


def test_a_year_ranks_the_value_that_held_longest_first(life: Palace) -> None:
    hits = life.search("Where did I live in 2024?", k=5, user_id=USER)
    assert hits[0].text == "I moved to Porto"  # June to December
    [lisbon] = [h for h in hits if h.text == "I live in Lisbon"]  # January to June
    assert hits[0].scores["held"] > lisbon.scores["held"] > 0
    assert "I relocated to Madrid" not in [h.text for h in hits[:2]]


def test_a_past_until_is_the_asked_moment(life: Palace) -> None:
    assert top(life, "Where do I live?", until="2024-03-01") == "I live in Lisbon"
    assert top(life, "Where do I live?", until="2024-07-01") == "I moved to Porto"


def test_a_future_date_asks_for_the_current_value(life: Palace) -> None:
    assert top(life, "Where will I live in 2099?") == "I relocated to Madrid"


def test_superseded_memories_stay_out_of_questions_about_now(life: Palace) -> None:
    for question in ("Where do I live?", "Porto", "data analyst"):
        hits = life.search(question, k=10, user_id=USER)
        assert all(h.memory is None or h.memory.status == "active" for h in hits), question


def test_context_answers_a_past_date_too(life: Palace) -> None:
    block = life.context("Where did I live in March 2024?", user_id=USER, k=1)
    assert block.splitlines()[-1].endswith("(fact) I live in Lisbon")


def test_another_user_never_gets_the_slot(life: Palace) -> None:
    assert all(not h.is_memory for h in life.search("Where do I live?", k=5, user_id="bob"))


# -- cost: FAKE embedder (what is counted is ledger queries, not meaning) --------------------


@pytest.fixture
def counted(open_palace: Callable[..., Palace], tmp_path: Path) -> tuple[Palace, dict[str, int]]:
    palace = open_palace(tmp_path / "palace", backend="sqlite")
    palace.remember("I live in Lisbon", user_id=USER, now=T)
    palace.add_texts(["The orders database is backed up every night."], user_id=USER)
    calls: dict[str, int] = {"slot_memories": 0, "lexical_memories": 0}
    for name in calls:
        original = getattr(palace.ledger, name)

        def wrapped(*args: Any, _name: str = name, _original: Any = original, **kw: Any) -> Any:
            calls[_name] += 1
            return _original(*args, **kw)

        setattr(palace.ledger, name, wrapped)
    return palace, calls


def test_a_query_with_no_slot_and_no_date_costs_no_more_ledger_queries(
    counted: tuple[Palace, dict[str, int]],
) -> None:
    palace, calls = counted
    palace.search("orders database backups", k=3, user_id=USER)
    assert calls == {"slot_memories": 0, "lexical_memories": 1}
    palace.search("Where do I live?", k=3, user_id=USER)
    assert calls == {"slot_memories": 1, "lexical_memories": 2}
    palace.search("Where did I live in 2023?", k=3, user_id=USER)
    assert calls == {"slot_memories": 2, "lexical_memories": 4}


def test_a_user_without_memories_gets_no_memory_query(
    counted: tuple[Palace, dict[str, int]],
) -> None:
    palace, calls = counted
    palace.search("Where did I live in 2023?", k=3, user_id="nobody")
    assert calls == {"slot_memories": 0, "lexical_memories": 0}
