"""The ``text`` source: plain transcripts and the generic chat JSONL.

Fixtures live in ``tests/fixtures/sources/text/`` (see ``docs/sources.md`` for their
shapes). Retrieval quality is not the point here, so palaces use the FAKE embedder.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from palace_plugins.builtin.sources import text as text_source
from palace_plugins.builtin.sources.text import TextSource, transcript_turns
from palace_retrievers import ConfigError, Filter, Palace, SourceError
from palace_retrievers.records import Drawer
from palace_retrievers.sources import Skipped, SourceEntry

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "sources" / "text"


@pytest.fixture
def chats(tmp_path: Path) -> Path:
    """A private copy of the text fixtures (mtimes kept)."""
    target = tmp_path / "chats-export"
    shutil.copytree(FIXTURES, target)
    return target


def drawers(palace: Palace, wing: str) -> list[Drawer]:
    found = palace.get(palace.ledger.drawer_ids(Filter(wing=wing)))
    return sorted(found, key=lambda d: (d.source, d.chunk_index))


def by_source(found: list[Drawer], suffix: str) -> list[Drawer]:
    return [d for d in found if d.source.endswith(suffix)]


# -- end to end ---------------------------------------------------------------------------


def test_mining_a_folder_of_chats(fake_palace: Palace, chats: Path) -> None:
    report = fake_palace.mine(chats, source="text", wing="chats")
    # pricing-call.txt, deploy-help.md, two sessions of locomo-sample.jsonl, and
    # reading-list.md, seen but skipped when read (it is no transcript).
    assert (report.seen, report.mined) == (5, 4)
    skipped = {s.location.removeprefix(str(chats) + "/"): s.reason for s in report.skipped}
    assert skipped == {
        "chats/locomo-sample.jsonl:5": skipped["chats/locomo-sample.jsonl:5"],
        "chats/locomo-sample.jsonl:7": "not a JSON object",
        "chats/locomo-sample.jsonl:9": "no text in this record",
        "chats/locomo-sample.jsonl:10": "unreadable time 'last Sunday'; kept without it",
        "chats/reading-list.md": skipped["chats/reading-list.md"],
    }
    assert skipped["chats/locomo-sample.jsonl:5"].startswith("malformed JSON line")
    assert "no transcript markers" in skipped["chats/reading-list.md"]

    found = drawers(fake_palace, "chats")
    pricing = by_source(found, "pricing-call.txt")
    assert [d.text.splitlines()[0] for d in pricing] == [
        "Support chat export: Larkspur billing, 2024-03-04",
        "User: Can you credit those two seats?",
        "User: Great, and how do we stop this from happening again?",
    ]
    first = pricing[0]
    assert first.text.endswith("of the cycle.")
    assert (first.line_start, first.line_end) == (1, 7)
    assert first.metadata["speakers"] == ["User", "Assistant"]
    assert first.metadata["session"] == "chats/pricing-call.txt"
    assert first.metadata["format"] == "transcript"
    assert first.room == "general"


def test_generic_jsonl_sessions_times_and_ids(fake_palace: Palace, chats: Path) -> None:
    fake_palace.mine(chats / "chats" / "locomo-sample.jsonl", source="text", wing="locomo")
    found = drawers(fake_palace, "locomo")
    sessions = {d.metadata["session"] for d in found}
    assert sessions == {"conv-26/session_1", "conv-26/session_2"}
    one = [d for d in found if d.metadata["session"] == "conv-26/session_1"]
    # Nobody is the user (two people talking): a drawer per turn, each of its exchange.
    assert exchanges_of(one) == [["D1:1", "D1:2"], ["D1:3", "D1:4"]]
    assert [d.metadata["message_ids"] for d in one] == [["D1:1"], ["D1:2"], ["D1:3"], ["D1:4"]]
    assert [d.metadata["speaker"] for d in one[:2]] == ["Caroline", "Melanie"]
    assert [d.metadata["speakers"] for d in one[:2]] == [["Caroline"], ["Melanie"]]
    # A turn's text starts with the day it was said (UTC), when the export gives it.
    assert one[0].text == (
        "[8 May 2023]\nCaroline: Hey Mel! I went to an LGBTQ support group yesterday and it "
        "was so powerful."
    )
    assert one[1].text == "[8 May 2023]\nMelanie: That's great, Caroline! What did you talk about?"
    # +02:00 in the source, UTC in the palace.
    assert one[0].metadata["time_start"] == "2023-05-08T11:56:00+00:00"
    assert one[1].metadata["time_end"] == "2023-05-08T11:57:00+00:00"
    assert one[0].content_date is not None
    assert one[0].content_date.isoformat() == "2023-05-08T11:56:00+00:00"
    assert [(d.line_start, d.line_end) for d in one[:2]] == [(1, 1), (2, 2)]
    assert one[0].source.endswith("locomo-sample.jsonl#conv-26/session_1")

    two = [d for d in found if d.metadata["session"] == "conv-26/session_2"]
    # Melanie speaks first in session 2, so her turns open its exchanges.
    assert [
        [d.metadata["speaker"] for d in two if d.metadata["exchange"] == n] for n in (0, 1)
    ] == [
        ["Melanie", "Caroline"],
        ["Melanie"],
    ]
    # An epoch number and a time without an offset (taken as UTC).
    assert two[0].metadata["time_start"] == "2023-05-14T14:00:00+00:00"
    assert two[1].metadata["time_end"] == "2023-05-14T15:05:00+00:00"
    assert "time_start" not in two[2].metadata  # "last Sunday" is no time
    assert two[2].content_date is None
    assert two[2].text == "Melanie: They loved it, and Oscar found a crab."
    assert two[2].metadata["message_ids"] == ["D2:4"]


def test_a_chat_with_a_user_keeps_one_drawer_per_exchange(
    fake_palace: Palace, tmp_path: Path
) -> None:
    chat = tmp_path / "chat.jsonl"
    records = [
        {"speaker": "user", "text": "Where is the copper kettle?", "id": "m1"},
        {"speaker": "assistant", "text": "On the top shelf.", "id": "m2"},
        {"speaker": "user", "text": "And the brass key?", "id": "m3"},
    ]
    chat.write_text("".join(json.dumps(r) + "\n" for r in records))
    fake_palace.mine(chat, source="text", wing="w")
    found = drawers(fake_palace, "w")
    assert [d.metadata["message_ids"] for d in found] == [["m1", "m2"], ["m3"]]
    assert "speaker" not in found[0].metadata
    assert found[0].text == "user: Where is the copper kettle?\n\nassistant: On the top shelf."


def exchanges_of(found: list[Drawer]) -> list[list[str]]:
    """The turns' ids of each exchange of ``found`` (one session's drawers, in order)."""
    out: dict[int, list[str]] = {}
    for drawer in found:
        out.setdefault(drawer.metadata["exchange"], []).extend(drawer.metadata["message_ids"])
    return list(out.values())


def test_quoted_transcript_keeps_title_and_exact_lines(fake_palace: Palace, chats: Path) -> None:
    fake_palace.mine(chats / "chats" / "deploy-help.md", source="text", wing="deploy")
    found = drawers(fake_palace, "deploy")
    assert len(found) == 3
    text = (chats / "chats" / "deploy-help.md").read_text().split("\n")
    for drawer in found:
        assert drawer.line_start is not None
        assert drawer.line_end is not None
        assert drawer.text == "\n".join(text[drawer.line_start - 1 : drawer.line_end])
    assert found[0].text.startswith("# Asking about the deploy pipeline\n\n> Why did")
    assert "> And can it be made safe to rerun?" in found[1].text  # one user turn, two lines
    assert found[1].metadata["speakers"] == ["user", "assistant"]


def test_mining_again_changes_nothing(fake_palace: Palace, chats: Path) -> None:
    first = fake_palace.mine(chats, source="text", wing="chats")
    ids = fake_palace.ledger.drawer_ids(Filter(wing="chats"))
    again = fake_palace.mine(chats, source="text", wing="chats")
    assert (again.mined, again.unchanged) == (0, first.mined)
    assert fake_palace.ledger.drawer_ids(Filter(wing="chats")) == ids


def test_a_session_read_again_after_a_new_cut_is_filed_again(
    fake_palace: Palace, chats: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """How a palace mined before a change of the JSONL cut gets the new drawers: the
    session's content hash names the cut, so a session read again (its file's mtime
    changed, or a fresh export) is filed again even though its records are the same."""
    export = chats / "chats" / "locomo-sample.jsonl"
    fake_palace.mine(export, source="text", wing="w")
    monkeypatch.setattr(text_source, "JSONL_CUT", text_source.JSONL_CUT + 1)
    assert fake_palace.mine(export, source="text", wing="w").mined == 0  # not read
    stat = export.stat()
    os.utime(export, (stat.st_atime, stat.st_mtime + 10))
    assert fake_palace.mine(export, source="text", wing="w").mined == 2  # both sessions


def test_keys_do_not_depend_on_where_the_export_lies(tmp_path: Path) -> None:
    def keys(root: Path) -> list[str]:
        return [e.key for e in TextSource({}).scan(root) if isinstance(e, SourceEntry)]

    shutil.copytree(FIXTURES, tmp_path / "a" / "export")
    shutil.copytree(FIXTURES, tmp_path / "b" / "elsewhere")
    assert keys(tmp_path / "a" / "export") == keys(tmp_path / "b" / "elsewhere")
    assert "text:chats/locomo-sample.jsonl#conv-26/session_2" in keys(tmp_path / "a" / "export")


# -- formats and bad input ----------------------------------------------------------------


def test_a_lone_file_without_markers_is_refused(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("Just some notes.\nNo one is talking here.\n")
    with pytest.raises(SourceError, match=r"no transcript markers.*'files'"):
        list(TextSource({}).scan(notes))


def test_wrong_encodings_are_decoded_with_replacement(fake_palace: Palace, tmp_path: Path) -> None:
    latin = tmp_path / "latin.txt"
    latin.write_bytes("User: Où est le café ?\nAssistant: À côté.\n".encode("latin-1"))
    utf16 = tmp_path / "utf16.jsonl"
    record = {"speaker": "user", "text": "naïve question", "session": "s"}
    utf16.write_bytes(json.dumps(record, ensure_ascii=False).encode("utf-16"))
    fake_palace.mine(latin, source="text", wing="latin")
    fake_palace.mine(utf16, source="text", wing="utf16")
    (drawer,) = drawers(fake_palace, "latin")
    assert drawer.text == "User: O\ufffd est le caf\ufffd ?\nAssistant: \ufffd c\ufffdt\ufffd."
    (drawer,) = drawers(fake_palace, "utf16")
    assert drawer.text == "user: naïve question"


def test_an_empty_jsonl_file_is_a_clear_note(fake_palace: Palace, tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    report = fake_palace.mine(empty, source="text", wing="w")
    assert (report.seen, report.mined) == (0, 0)
    assert [(s.location, s.reason) for s in report.skipped] == [
        (str(empty), "no chat records in this JSONL file")
    ]


def test_a_long_exchange_is_cut_into_parts(fake_palace: Palace, tmp_path: Path) -> None:
    answer = " ".join(f"Step {n}: check the pump valve and log the pressure." for n in range(60))
    chat = tmp_path / "long.txt"
    chat.write_text(f"User: How do I service the pump?\nAssistant: {answer}\n")
    fake_palace.mine(chat, source="text", wing="w")
    found = drawers(fake_palace, "w")
    assert len(found) > 3
    assert all(len(d.text) <= 800 for d in found)
    assert [d.metadata["part"] for d in found] == list(range(1, len(found) + 1))
    assert {d.metadata["parts"] for d in found} == {len(found)}
    assert {d.metadata["exchange"] for d in found} == {0}
    assert found[0].text.startswith("User: How do I service the pump?")
    assert found[-1].text.endswith("log the pressure.")


def test_chunk_size_option(tmp_path: Path) -> None:
    chat = tmp_path / "chat.txt"
    chat.write_text("User: hi\nAssistant: " + "word " * 100 + "\n")
    (entry,) = TextSource({"chunk_size": 200, "chunk_overlap": 20}).scan(chat)
    assert isinstance(entry, SourceEntry)
    segments = entry.read().segments
    assert segments is not None
    assert len(segments) > 2
    with pytest.raises(ConfigError, match="'size'"):
        TextSource({"size": 10})
    with pytest.raises(ConfigError, match=r"chunking\.size"):
        TextSource({"chunk_size": 10})
    with pytest.raises(ConfigError, match="must be integers"):
        TextSource({"chunk_size": "big"})


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        (["User: a", "Assistant: b"], [("User", 1, 1), ("Assistant", 2, 2)]),
        (["**Human:** a", "**AI:** b", "more b"], [("Human", 1, 1), ("AI", 2, 3)]),
        (
            ["> q", "", "answer", "> q2", "a2"],
            [("user", 1, 1), ("assistant", 3, 3), ("user", 4, 4), ("assistant", 5, 5)],
        ),
        (["# Title", "", "> q", "a"], [("user", 1, 3), ("assistant", 4, 4)]),
        (["User: only the user talks"], None),
        (["> a quote with nothing after it"], None),
        (["plain", "text"], None),
    ],
)
def test_transcript_markers(lines: list[str], expected: list[tuple[str, int, int]] | None) -> None:
    turns = transcript_turns(lines)
    if expected is None:
        assert turns is None
    else:
        assert turns is not None
        assert [(t.speaker, t.line_start, t.line_end) for t in turns] == expected


def test_skipped_notes_follow_the_entry_they_belong_to(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text(
        '{"session": "a", "speaker": "user", "text": "hi", "time": "soon"}\n'
        '{"session": "b", "speaker": "user", "text": "yo"}\n'
    )
    order: list[str] = []
    for item in TextSource({}).scan(log):
        if isinstance(item, SourceEntry):
            order.append(item.key)
            item.read()
        else:
            assert isinstance(item, Skipped)
            order.append(item.location)
    assert order == ["text:log.jsonl#a", f"{log}:1", "text:log.jsonl#b"]


def test_the_same_chats_give_the_same_drawer_ids(
    open_palace: Callable[..., Palace], tmp_path: Path
) -> None:
    shutil.copytree(FIXTURES, tmp_path / "chats")
    ids = []
    for name in ("p1", "p2"):
        palace = open_palace(tmp_path / name, backend="sqlite")
        palace.mine(tmp_path / "chats", source="text", wing="chats")
        ids.append(palace.ledger.drawer_ids(Filter(wing="chats")))
    assert ids[0] == ids[1]
    assert ids[0]
