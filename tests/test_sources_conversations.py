"""What the conversation sources share: exchanges, rendering, segments, times, bad records."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from palace_plugins.builtin.sources.conversations import (
    ASSISTANT,
    NOTE_CHARS,
    TOOL,
    USER,
    Chunking,
    Turn,
    conversation_segments,
    exchanges,
    note,
    packed,
    render,
    segments,
    turn_segments,
    utc,
)
from palace_plugins.builtin.sources.reading import (
    Item,
    Problems,
    array_items,
    decode,
    jsonl_records,
)
from palace_retrievers import SourceError


def u(text: str, **kw: object) -> Turn:
    return Turn("user", text, USER, **kw)  # type: ignore[arg-type]


def a(text: str, **kw: object) -> Turn:
    return Turn("assistant", text, ASSISTANT, **kw)  # type: ignore[arg-type]


def texts(groups: list[list[Turn]]) -> list[list[str]]:
    return [[t.text for t in g] for g in groups]


def test_a_user_turn_opens_an_exchange() -> None:
    turns = [a("hello, how can I help?"), u("q1"), u("q1 again"), a("r1"), a("r1b"), u("q2")]
    assert texts(exchanges(turns)) == [
        ["hello, how can I help?"],
        ["q1", "q1 again", "r1", "r1b"],
        ["q2"],
    ]


def test_tool_notes_stay_in_their_exchange() -> None:
    turns = [u("fix it"), a("looking"), Turn("tool", "[Bash result] ok", TOOL), a("fixed")]
    assert len(exchanges(turns)) == 1


def test_without_a_user_role_the_first_speaker_opens_exchanges() -> None:
    turns = [Turn(name, text) for name, text in [("Ann", "1"), ("Bo", "2"), ("Bo", "3")]]
    turns += [Turn("Ann", "4"), Turn("Ann", "5"), Turn("Bo", "6")]
    assert texts(exchanges(turns)) == [["1", "2", "3"], ["4", "5", "6"]]
    assert exchanges([]) == []


def test_packed_runs_stay_within_the_size() -> None:
    turns = [Turn("Ann", "x" * 40) for _ in range(10)]
    groups = packed(turns, 100)
    assert [len(g) for g in groups] == [2] * 5
    assert all(len(render(g)) <= 100 for g in groups)
    assert packed([Turn("Ann", "y" * 500)], 100) == [[Turn("Ann", "y" * 500)]]


def test_render_labels_each_change_of_speaker_once() -> None:
    turns = [
        u("run the tests"),
        a("Running them."),
        a("[Bash] pytest -q"),
        Turn("tool", "[Bash result] 3 passed", TOOL),
        a("All green."),
        u("thanks"),
    ]
    assert render(turns) == (
        "user: run the tests\n\n"
        "assistant: Running them.\n[Bash] pytest -q\n[Bash result] 3 passed\nAll green.\n\n"
        "user: thanks"
    )


def test_note_is_cut_to_a_short_line() -> None:
    assert note("Bash", "  ls -la  ") == "[Bash] ls -la"
    long = note("Bash", "echo " + "a" * 500)
    assert len(long) == NOTE_CHARS
    assert long.endswith("…")


def test_segments_describe_their_exchange() -> None:
    t0 = datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
    t1 = datetime(2024, 1, 2, 3, 5, 0, tzinfo=UTC)
    groups = [[u("q", time=t1, id="m1"), a("r", time=t0, id="m2"), a("r2", id="m2")]]
    (segment,) = segments(groups, session="s1", chunking=Chunking(800, 100))
    assert segment.text == "user: q\n\nassistant: r\nr2"
    assert segment.content_date == t0
    assert dict(segment.metadata) == {
        "session": "s1",
        "exchange": 0,
        "speakers": ["user", "assistant"],
        "message_ids": ["m1", "m2"],
        "time_start": "2024-01-02T03:04:05+00:00",
        "time_end": "2024-01-02T03:05:00+00:00",
    }


def test_empty_exchanges_make_no_segment_and_no_gap_in_the_numbering() -> None:
    groups = [[u("one")], [u("   ")], [u("two")]]
    cut = segments(groups, session="s", chunking=Chunking(800, 100), render=lambda g: g[0].text)
    assert [(s.text, s.metadata["exchange"]) for s in cut] == [("one", 0), ("two", 1)]


def test_between_people_each_turn_is_a_segment_of_its_exchange() -> None:
    t0 = datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
    turns = [
        Turn("Ann", "I moved to Porto.", time=t0, id="1", line_start=1, line_end=1),
        Turn("Bo", "Nice!", id="2", line_start=2, line_end=2),
        Turn("Bo", "   "),
        Turn("Ann", "x " * 500, id="3"),
    ]
    cut = conversation_segments(turns, session="s", chunking=Chunking(800, 100))
    assert cut == turn_segments(exchanges(turns), session="s", chunking=Chunking(800, 100))
    # The day it was said opens a timed turn's text.
    assert [s.text for s in cut[:2]] == ["[2 January 2024]\nAnn: I moved to Porto.", "Bo: Nice!"]
    assert dict(cut[0].metadata) == {
        "session": "s",
        "exchange": 0,
        "speakers": ["Ann"],
        "message_ids": ["1"],
        "time_start": "2024-01-02T03:04:05+00:00",
        "time_end": "2024-01-02T03:04:05+00:00",
        "speaker": "Ann",
    }
    assert (cut[0].line_start, cut[0].line_end, cut[0].content_date) == (1, 1, t0)
    assert cut[1].metadata["exchange"] == 0
    # A blank turn makes no segment; a long turn is cut into parts of its exchange.
    parts = cut[2:]
    assert len(parts) > 1
    assert [s.metadata["part"] for s in parts] == list(range(1, len(parts) + 1))
    assert {(s.metadata["exchange"], s.metadata["speaker"]) for s in parts} == {(1, "Ann")}


def test_with_a_user_a_conversation_is_cut_into_exchanges() -> None:
    turns = [u("q", id="m1"), a("r", id="m2"), u("q2", id="m3")]
    cut = conversation_segments(turns, session="s", chunking=Chunking(800, 100))
    assert cut == segments(exchanges(turns), session="s", chunking=Chunking(800, 100))
    assert [s.metadata["message_ids"] for s in cut] == [["m1", "m2"], ["m3"]]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2024-03-01T10:00:00Z", "2024-03-01T10:00:00+00:00"),
        ("2024-03-01T12:00:00+02:00", "2024-03-01T10:00:00+00:00"),
        ("2024-03-01 10:00:00", "2024-03-01T10:00:00+00:00"),
        (1709287200, "2024-03-01T10:00:00+00:00"),
        (1709287200.5, "2024-03-01T10:00:00.500000+00:00"),
        (1709287200000, "2024-03-01T10:00:00+00:00"),
        ("1709287200.000200", "2024-03-01T10:00:00.000200+00:00"),
    ],
)
def test_times_become_utc(value: object, expected: str) -> None:
    moment = utc(value)
    assert moment is not None
    assert moment.isoformat() == expected


@pytest.mark.parametrize("value", [None, True, "yesterday", "", [], {}, float("nan"), 1e300])
def test_unreadable_times_are_none(value: object) -> None:
    assert utc(value) is None


def test_decode_honours_byte_order_marks_and_replaces_bad_bytes() -> None:
    assert decode("\ufeffhé".encode()) == "hé"
    assert decode("hé".encode("utf-16")) == "hé"
    assert decode(b"caf\xe9") == "caf\ufffd"


def test_jsonl_records_note_bad_lines_and_keep_the_rest() -> None:
    problems = Problems()
    data = b'{"a": 1}\n{"a": \n\n[1]\n{"a": 2}\r\n\xff{"a": 3}\n'
    found = list(jsonl_records(data.splitlines(), "log.jsonl", problems))
    assert found == [(1, {"a": 1}), (5, {"a": 2})]
    assert [(p.location, p.reason.split(" (")[0]) for p in problems.drain()] == [
        ("log.jsonl:2", "malformed JSON line"),
        ("log.jsonl:4", "not a JSON object"),
        ("log.jsonl:6", "malformed JSON line"),
    ]
    assert problems.drain() == []


def test_array_items_keep_everything_before_the_damage() -> None:
    problems = Problems()
    text = '[\n  {"id": 1},\n  {"id": 2},\n  {"id": 3, "title": "cut off'
    assert list(array_items(text, "c.json", problems)) == [
        Item(0, 2, 2, {"id": 1}),
        Item(1, 3, 3, {"id": 2}),
    ]
    (problem,) = problems.drain()
    assert problem.location == "c.json:4:22"  # where the cut-off string starts
    assert "item 2 and everything after it skipped" in problem.reason


def test_array_items_know_their_lines() -> None:
    text = '[\n  {\n    "a": 1\n  },\n  {"b": [\n\n  ]}\n]'
    assert [(i.index, i.line_start, i.line_end) for i in array_items(text, "x", Problems())] == [
        (0, 2, 4),
        (1, 5, 7),
    ]


def test_array_items_of_an_empty_or_a_broken_array() -> None:
    problems = Problems()
    assert list(array_items(" [ ] ", "e.json", problems)) == []
    assert list(array_items('[{"a": 1} {"a": 2}]', "b.json", problems)) == [Item(0, 1, 1, {"a": 1})]
    (problem,) = problems.drain()
    assert problem.location == "b.json:1:11"
    with pytest.raises(SourceError, match="not a JSON array"):
        list(array_items('{"a": 1}', "o.json", problems))
    with pytest.raises(SourceError, match="empty file"):
        list(array_items("   ", "z.json", problems))
