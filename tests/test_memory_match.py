"""compare() and slot_of(): duplicates, updates and new memories decided by structure.

The pure-logic tests pass the similarity the issue measured with all-MiniLM-L6-v2 (or a
plausible one); ``test_the_measured_pairs_with_the_real_model`` computes it with the real
model, so that the verdicts are checked against what a palace would actually pass in.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from palace_retrievers.embedder import Embedder
from palace_retrievers.errors import InvalidQueryError, PalaceError
from palace_retrievers.memory.learned.structural import VERDICTS, Match, compare, slot_of
from palace_retrievers.memory.slots import parse, question_slots, slots_match
from palace_retrievers.memory.wording import tokens

PAIRS = Path(__file__).parents[1] / "benchmarks" / "data"

#: The issue's four pairs and the similarity it measured for each.
MEASURED = [
    ("The team standup is at 9am", "The team standup is at 10am", 0.941, "9am", "10am"),
    (
        "We use MySQL for the orders database",
        "We use PostgreSQL for the orders database",
        0.923,
        "MySQL",
        "PostgreSQL",
    ),
    ("My favourite editor is Vim", "My favourite editor is Emacs", 0.806, "Vim", "Emacs"),
    ("I live in Lisbon", "I live in Porto now", 0.692, "Lisbon", "Porto"),
]


@pytest.mark.parametrize(("old", "new", "similarity", "old_value", "new_value"), MEASURED)
def test_the_issues_measured_pairs_are_updates(
    old: str, new: str, similarity: float, old_value: str, new_value: str
) -> None:
    match = compare(old, new, similarity=similarity)
    assert match.verdict == "update", match
    assert (match.old_value or "").lower() == old_value.lower()
    assert (match.new_value or "").lower() == new_value.lower()


@pytest.mark.slow
def test_the_measured_pairs_with_the_real_model(real_embedder: Embedder) -> None:
    texts = [t for old, new, *_ in MEASURED for t in (old, new)]
    vectors = np.asarray(real_embedder.embed_documents(texts))
    for i, (old, new, *_) in enumerate(MEASURED):
        similarity = float(vectors[2 * i] @ vectors[2 * i + 1])
        # What a similarity rule would do: two of them merged (>= 0.85), two kept apart.
        assert compare(old, new, similarity=similarity).verdict == "update", (old, similarity)
    # And the real model finds wording-only duplicates duplicates.
    same = ["The team standup is at 9am", "the team standup is at nine a.m."]
    a, b = np.asarray(real_embedder.embed_documents(same))
    assert compare(*same, similarity=float(a @ b)).verdict == "duplicate"


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("The team standup is at 9am", "the team standup is at nine a.m."),
        ("The team standup is at 9am", "Our team standup is at 09:00"),
        ("I live in Lisbon", "I'm living in Lisbon."),
        ("I live in Lisbon", "I'm based in Lisbon"),
        ("My favourite editor is Vim", "Vim is my favorite editor"),
        ("I like tea and coffee", "I like coffee and tea"),
        ("Our team has 6 engineers", "Our team has six engineers"),
        ("The marketing budget is $5,000", "The marketing budget is 5000 dollars"),
        ("The release is scheduled for 2026-03-01", "The release is scheduled for March 1, 2026"),
        ("The report is due on Friday", "The report's due Friday."),
        ("我住在里斯本", "我现在住在里斯本。"),
        ("团队站会在早上9点", "团队站会在上午九点"),
        ("市场预算是5000元", "市场预算是五千元"),
        ("Vim是我最喜欢的编辑器", "我最喜欢的编辑器是Vim"),
    ],
)
def test_the_same_text_up_to_wording_is_a_duplicate(old: str, new: str) -> None:
    # A low similarity on purpose: these are decided by structure, not by the model.
    assert compare(old, new, similarity=0.5).verdict == "duplicate"


@pytest.mark.parametrize(
    ("old", "new", "similarity"),
    [
        ("The team standup is at 9am", "Standup moved to 10am", 0.8),
        (
            "We use MySQL for the orders database",
            "We migrated the orders database to Postgres",
            0.6,
        ),
        ("I live in Lisbon", "I moved to Porto", 0.6),
        ("I live in Lisbon", "I don't live in Lisbon anymore", 0.8),
        ("I work at Google", "I joined Stripe", 0.4),
        ("I prefer Python over JavaScript", "I prefer JavaScript over Python now", 0.97),
        ("My manager is Ana", "Rui is my manager now", 0.6),
        ("We're on Python 3.11", "We upgraded to Python 3.13", 0.7),
        ("The release is scheduled for 2026-03-01", "The release has been pushed to April 1", 0.8),
        ("I eat meat", "I no longer eat meat", 0.7),
        ("我住在里斯本", "我现在住在波尔图", 0.64),
        ("我们用MySQL做订单数据库", "订单数据库现在用的是PostgreSQL", 0.7),
        ("团队站会在早上9点", "团队站会改到早上10点了", 0.9),
        ("我最喜欢的编辑器是Vim", "我最喜欢的编辑器是Emacs", 0.99),
        ("我在谷歌工作", "我跳槽到了字节跳动", 0.5),
        ("比起咖啡我更喜欢茶", "比起茶我更喜欢咖啡", 1.0),
        ("我吃肉", "我不吃肉了", 0.9),
    ],
)
def test_the_same_slot_with_another_value_is_an_update(
    old: str, new: str, similarity: float
) -> None:
    assert compare(old, new, similarity=similarity).verdict == "update"


@pytest.mark.parametrize(
    ("old", "new", "similarity"),
    [
        ("The team standup is at 9am", "The team retro is at 9am", 0.72),
        ("I live in Lisbon", "My sister lives in Lisbon", 0.8),
        ("I live in Lisbon", "I work in Lisbon", 0.88),
        ("My sister lives in Paris", "My brother lives in Paris", 0.89),
        ("I like hiking", "I like painting", 0.53),
        ("We use MySQL for the orders database", "We use Redis for the session cache", 0.5),
        ("My favourite editor is Vim", "My favourite language is Python", 0.42),
        ("I work as a data analyst", "I work with a data analyst", 0.96),
        ("My manager is Ana", "My manager is on holiday", 0.49),
        ("We're on Python 3.11", "We're on Django 4.2", 0.56),
        ("The design review is in room 4B", "The design review is at 3pm", 0.6),
        ("My birthday is on May 3rd", "My sister's birthday is on May 3rd", 0.9),
        ("我住在里斯本", "我妹妹住在里斯本", 0.99),
        ("我在谷歌工作", "我在谷歌吃午饭", 0.998),
        ("我的经理是安娜", "我的导师是安娜", 1.0),
        ("我喜欢爬山", "我喜欢画画", 0.9),
        ("I live in Lisbon", "We deploy on Tuesdays", 0.1),
    ],
)
def test_anything_else_is_new(old: str, new: str, similarity: float) -> None:
    assert compare(old, new, similarity=similarity).verdict == "new"


def test_similarity_alone_decides_only_what_structure_leaves_open() -> None:
    # A paraphrase with no slot and another verb: a duplicate only when the model agrees.
    old, new = "I go climbing at Boulderhaus", "I climb at Boulderhaus"
    assert compare(old, new, similarity=0.96).verdict == "duplicate"
    assert compare(old, new, similarity=0.80).verdict == "new"
    # The thresholds are the caller's: a lower duplicate threshold lets 0.80 merge.
    lowered = compare(old, new, similarity=0.80, duplicate_threshold=0.8, supersede_threshold=0.7)
    assert lowered.verdict == "duplicate"
    # But no similarity merges two different times: that is an update, always.
    assert compare("Standup is at 9am", "Standup is at 10am", similarity=1.0).verdict == "update"


def test_a_match_says_why_and_which_slot() -> None:
    match = compare("I live in Lisbon", "I live in Porto now", similarity=0.69)
    assert isinstance(match, Match)
    assert match.verdict in VERDICTS
    assert match.slot == "i|lives_in"
    assert "slot" in match.reason
    assert (match.old_value, match.new_value) == ("Lisbon", "Porto")


@pytest.mark.parametrize(
    ("text", "slot"),
    [
        ("I live in Porto now", "i|lives_in"),
        ("I'm based in Lisbon", "i|lives_in"),
        ("我现在住在波尔图", "i|lives_in"),
        ("I work at Google", "i|works_at"),
        ("我在谷歌工作", "i|works_at"),
        ("I work as a data engineer", "i|works_as"),
        ("We use MySQL for the orders database", "order database|uses"),
        ("The orders database runs on PostgreSQL now", "order database|uses"),
        ("我们用MySQL做订单数据库", "订单数据库|uses"),
        ("The team standup is at 9am", "team standup|time"),
        ("团队站会在早上9点", "团队站会|time"),
        ("The report is due on Friday", "report|date"),
        ("My favourite editor is Vim", "i|favourite_editor"),
        ("Emacs is my favorite editor", "i|favourite_editor"),
        ("My manager is Ana", "i|manager"),
        ("I prefer tabs over spaces", "i|prefers:spac/tab"),
        ("Alice is the project lead", "project lead|holder"),
        ("My name is Sam", "i|name"),
        ("I like hiking", None),
        ("We use Slack", None),
        ("I met Ana yesterday and we talked about the launch plan", None),
        ("", None),
    ],
)
def test_slot_of(text: str, slot: str | None) -> None:
    assert slot_of(text) == slot


def test_a_negated_statement_keeps_its_slot() -> None:
    statement = parse("I don't live in Lisbon anymore")
    assert statement is not None
    assert (statement.slot, statement.value_key, statement.negated) == (
        "i|lives_in",
        "lisbon",
        True,
    )


def test_wording_is_canonical() -> None:
    keys = [
        [t.key for t in tokens(text)] for text in ("9am", "9 a.m.", "nine AM", "09:00", "早上九点")
    ]
    assert all(k == ["09:00"] for k in keys), keys
    assert [t.key for t in tokens("周二")] == ["tue"]
    assert [t.key for t in tokens("Tuesdays")] == ["tue"]
    assert [t.kind for t in tokens("I don't")] == ["word", "neg"]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"similarity": 1.5},
        {"similarity": float("nan")},
        {"similarity": "0.9"},
        {"similarity": 0.9, "duplicate_threshold": 0.8, "supersede_threshold": 0.9},
        {"similarity": 0.9, "duplicate_threshold": 1.2},
    ],
)
def test_bad_arguments_raise_a_palace_error(kwargs: dict[str, object]) -> None:
    with pytest.raises(InvalidQueryError) as raised:
        compare("a", "b", **kwargs)  # type: ignore[arg-type]
    assert isinstance(raised.value, PalaceError)


def test_empty_or_odd_texts_are_new_not_errors() -> None:
    assert compare("", "", similarity=1.0).verdict in VERDICTS
    assert compare("???", "I live in Lisbon", similarity=0.0).verdict == "new"
    assert compare("x" * 10_000, "y" * 10_000, similarity=0.2).verdict == "new"


def test_the_labelled_pairs_load_and_cover_both_languages() -> None:
    pairs = [json.loads(line) for line in (PAIRS / "memory_pairs.jsonl").open(encoding="utf-8")]
    assert len(pairs) >= 300
    assert {p["label"] for p in pairs} == set(VERDICTS)
    assert {p["lang"] for p in pairs} == {"en", "zh"}


# -- properties ---------------------------------------------------------------------------

_PIECES = [
    *"abcdefghijklmnopqrstuvwxyz ABCMPT0123456789.,:;!?'-$€%/+()",
    *"我们住在里斯本工作的是不了用做吗周一二三十点早上",
    *["I ", "we ", "live in ", "is at ", "9am ", "Friday ", "not ", "my ", "favourite "],
]
_TEXT = st.lists(st.sampled_from(_PIECES), max_size=30).map("".join)


@settings(max_examples=300, deadline=None)
@given(old=_TEXT, new=_TEXT, similarity=st.floats(-1.0, 1.0))
def test_compare_never_fails_and_answers_a_verdict(old: str, new: str, similarity: float) -> None:
    match = compare(old, new, similarity=similarity)
    assert match.verdict in VERDICTS
    assert match.reason
    slot_of(old)


@settings(max_examples=200, deadline=None)
@given(text=_TEXT, similarity=st.floats(-1.0, 1.0))
def test_a_text_duplicates_itself(text: str, similarity: float) -> None:
    assert compare(text, text, similarity=similarity).verdict == "duplicate"


@pytest.mark.parametrize(
    ("question", "slots"),
    [
        ("Where do I live?", ("i|lives_in",)),
        ("Which city did I live in?", ("i|lives_in",)),
        ("Where do I work?", ("i|works_at",)),
        ("What do I work as?", ("i|works_as",)),
        ("What is my favourite editor?", ("i|favourite_editor",)),
        ("Which database do we use for the orders database?", ("order database|uses",)),
        ("When is standup?", ("standup|time", "standup|date")),
        ("Who is my manager?", ("i|manager",)),
        ("Who is the project lead?", ("project lead|holder",)),
        ("我住在哪里？", ("i|lives_in",)),
        ("我最喜欢的水果是什么？", ("i|favourite_水果",)),
        ("周会是什么时候？", ("周会|time", "周会|date")),
        ("How are you?", ()),
    ],
)
def test_question_slots(question: str, slots: tuple[str, ...]) -> None:
    assert question_slots(question) == slots


def test_a_questions_slot_finds_the_memory_that_answers_it() -> None:
    # The memory is worded unlike the question; the slot joins them.
    assert slot_of("I moved to Porto") == question_slots("Where do I live?")[0]
    assert slots_match(question_slots("When is standup?")[0], slot_of("The team standup is at 9am"))
    assert not slots_match("my birthday|date", "my sister birthday|date")


def test_spelled_numbers_are_values() -> None:
    # Found by the blind held-out set: "two coffees" / "one coffee" was merged as a duplicate.
    match = compare("I drink two coffees a day", "I drink one coffee a day now", similarity=0.93)
    assert match.verdict == "update"
    assert compare("I have two cats", "I have 2 cats", similarity=0.9).verdict == "duplicate"


# -- rules of the second round (general patterns, checked on texts unlike the pair sets') ---


@pytest.mark.parametrize(
    ("old", "new", "verdict"),
    [
        # noon and midnight are times
        ("The café opens at noon", "The café opens at 11am now", "update"),
        ("Quiet hours start at midnight", "Quiet hours start at 11pm", "update"),
        ("Our lunch break is at noon", "Our lunch break is at 12:00", "duplicate"),
        # a person holding a thing: "X leads/owns/manages the Y", and its passive
        ("Sofia manages the data platform", "Tariq manages the data platform now", "update"),
        ("Sofia manages the data platform", "The data platform is managed by Sofia", "duplicate"),
        ("Sofia manages the data platform", "Sofia manages the interns", "new"),
        ("I own a bike", "Sam owns a bike", "new"),  # no "the": many own one
        # my X went up to / dropped to: a new value of X
        ("My gym fee is $40 a month", "My gym fee went up to $45 a month", "update"),
        ("Our budget is $10,000", "Our budget was cut to $8,000", "update"),
        ("My gym fee is $40 a month", "My gym fee is due on Monday", "new"),  # a state
        # an event's end is another slot than its time
        ("The workshop ends at 5pm", "The workshop starts at 5pm", "new"),
        ("The workshop is at 2pm", "The workshop starts at 2pm", "duplicate"),
        # parts of a day belong to the moment
        ("Yoga is on Tuesday evenings", "Yoga moved to Thursday evenings", "update"),
        ("周例会在周一下午", "周例会改到周二下午了", "update"),
        # phone numbers are their digits
        ("My mobile number is 912-345-678", "My mobile number is 912 345 678", "duplicate"),
        ("My mobile number is 912-345-678", "My mobile number is 913-111-222", "update"),
        ("We had 1500 2000 visitors", "We had 1500 2000 visitors", "duplicate"),
        # Chinese roles take no 的; a role first or last
        ("我们老师是王老师", "我们老师现在是李老师", "update"),
        ("队长是小刘", "队长换成小赵了", "update"),
        ("队长是小刘", "小刘是队长", "duplicate"),
        # Chinese: what a thing is built with, behind 我们的, with a trailing 开发
        ("我们的前端用React开发", "我们的前端改用Vue开发了", "update"),
        ("我们的网站用PHP", "我们的网站迁移到Python了", "update"),
        # Chinese: a span that starts with 今天/明天... is what is going on, not a value
        ("我的教练是陈教练", "我的教练明天出差", "new"),
        # taking a role over; a role first or last
        ("Omar is the tech lead", "Grace became the tech lead", "update"),
        ("Omar is the tech lead", "The tech lead is Omar", "duplicate"),
        ("Our accountant is Mrs. Diaz", "Mrs. Diaz is our accountant", "duplicate"),
        ("My manager is Ana", "My manager is on holiday", "new"),
        # a cue on one side only: "is X" against "needs ..." is another predicate
        ("My bike is a Trek", "My bike needs new tyres", "new"),
        ("我的医生是刘医生", "我的医生很忙", "new"),
        # Chinese: 把 X 迁到 Y, X 在 Y 上; head-final subjects; a change verb is no subject
        ("我们的网站在AWS上", "我们把网站迁到了Azure", "update"),
        ("公司的周会是下午三点", "周会改到下午四点了", "update"),
        ("我每周一去游泳", "我改成每周三去游泳了", "update"),
    ],
)
def test_second_round_rules(old: str, new: str, verdict: str) -> None:
    assert compare(old, new, similarity=0.8).verdict == verdict


def test_phone_like_runs_are_one_number_but_years_are_not() -> None:
    assert [t.key for t in tokens("call 555 0142")] == ["call", "5550142"]
    assert [t.key for t in tokens("call +351 912 345 678")] == ["call", "351912345678"]
    assert [t.key for t in tokens("from 2019 2020")][-2:] == ["2019", "2020"]
    assert [t.key for t in tokens("at noon")][-1] == "12:00"
    assert [t.key for t in tokens("at midnight")][-1] == "00:00"


@pytest.mark.parametrize(
    ("old", "new", "similarity", "verdict"),
    [
        # a lone describing word against a name is a quality, not another value
        ("Our piano teacher is Mrs. Okoye", "Our piano teacher is patient", 0.6, "new"),
        ("My accountant is Ravi Shah", "My accountant is helpful", 0.6, "new"),
        ("Our piano teacher is Mrs. Okoye", "Our piano teacher is Mr. Lund now", 0.7, "update"),
        # "my X is N years old" is X's age, not which X
        ("My cat is called Miso", "My cat is 4 years old", 0.5, "new"),
        ("My cat is 4 years old", "My cat is 5 years old now", 0.95, "update"),
        # two relatives are two subjects, however close the embeddings
        ("My niece plays the cello", "My nephew plays the cello", 0.95, "new"),
        # the paraphrase step: another structure, same slot
        ("I bike to work", "These days I take the tram to work", 0.5, "update"),
        ("Ana Silva is my boss", "I report to Ana Silva", 0.7, "duplicate"),
    ],
)
def test_third_round_rules(old: str, new: str, similarity: float, verdict: str) -> None:
    assert compare(old, new, similarity=similarity).verdict == verdict
