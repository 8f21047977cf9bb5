"""Memories extracted at mine time: what the built-in ``rules`` extractor finds in mined
conversations is remembered (deduplicated and superseded like any memory), and a failing
extractor never stops a mine.

The FAKE embedder is enough here (the rules extractor reads patterns, and the structural
matcher decides updates by structure), with the exact ``sqlite`` backend.
"""

from __future__ import annotations

import json
import logging
import types
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from palace_plugins import hookimpl
from palace_retrievers import Palace
from palace_retrievers.memory.extraction import Candidate, MemoryExtractor
from palace_retrievers.records import Drawer


def write_chat(path: Path, messages: Sequence[tuple[str, str, str]]) -> Path:
    """A generic chat JSONL: (speaker, text, ISO time) per message."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        json.dumps({"session": "s1", "speaker": s, "text": t, "time": when})
        for s, t, when in messages
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


CHAT = [
    ("user", "Hi! I live in Lisbon.", "2026-01-05T10:00:00Z"),
    ("assistant", "Nice, Lisbon is lovely. I live in the cloud.", "2026-01-05T10:00:05Z"),
    ("user", "We use MySQL for the orders database.", "2026-01-05T10:01:00Z"),
]


@pytest.fixture
def palace(open_palace: Callable[..., Palace], tmp_path: Path) -> Palace:
    return open_palace(tmp_path / "palace", backend="sqlite")


def test_mining_a_conversation_remembers_what_the_user_said(palace: Palace, tmp_path: Path) -> None:
    chat = write_chat(tmp_path / "chats" / "a.jsonl", CHAT)
    palace.mine(chat.parent, source="text", wing="me", user_id="u1")
    memories = {m.text: m for m in palace.memories(user_id="u1")}
    assert "I live in Lisbon" in memories, sorted(memories)
    assert not any("cloud" in text for text in memories)  # never the assistant's words
    lisbon = memories["I live in Lisbon"]
    assert lisbon.origin == "extracted"
    assert lisbon.status == "active"
    assert lisbon.wing == "me"
    assert lisbon.metadata["extractor"] == "rules"
    assert lisbon.created_at.date().isoformat() == "2026-01-05"  # when it was said
    assert lisbon.source_ids
    drawers = palace.get(list(lisbon.source_ids), user_id="u1")
    assert drawers
    assert "Lisbon" in drawers[0].text
    assert lisbon.room == drawers[0].room != ""  # filed where its drawer is
    # Its triple went to the graph, pointing at the drawer and the memory.
    [triple] = palace.kg.query("user", predicate="lives_in", user_id="u1")
    assert triple.object == "Lisbon"
    assert triple.source_drawer in lisbon.source_ids
    assert triple.source_memory == lisbon.id
    assert palace.memories(user_id=None) == []  # the owner's, nobody else's


def test_a_later_conversation_supersedes_and_a_second_mine_adds_nothing(
    palace: Palace, tmp_path: Path
) -> None:
    folder = tmp_path / "chats"
    write_chat(folder / "a.jsonl", CHAT)
    palace.mine(folder, source="text", wing="me", user_id="u1")
    events = sum(len(palace.history(m.id, user_id="u1")) for m in palace.memories(user_id="u1"))
    palace.mine(folder, source="text", wing="me", user_id="u1")  # nothing changed
    assert (
        sum(len(palace.history(m.id, user_id="u1")) for m in palace.memories(user_id="u1"))
        == events
    )
    write_chat(
        folder / "b.jsonl",
        [("user", "I moved! I live in Porto now.", "2026-03-01T09:00:00Z")],
    )
    palace.mine(folder, source="text", wing="me", user_id="u1")
    current = [m.text for m in palace.memories(user_id="u1") if "live" in m.text]
    assert current == ["I live in Porto now"], current
    [old] = [m for m in palace.memories(user_id="u1", status="superseded") if "Lisbon" in m.text]
    assert [m.text for m in palace.chain(old.id, user_id="u1")] == [
        "I live in Lisbon",
        "I live in Porto now",
    ]
    [now] = palace.kg.query("user", predicate="lives_in", user_id="u1")
    assert now.object == "Porto"


def test_extracted_memories_can_start_pending(
    open_palace: Callable[..., Palace], tmp_path: Path
) -> None:
    palace = open_palace(
        tmp_path / "p",
        backend="sqlite",
        config={"memory": {"extracted_status": "pending", "extracted_importance": 0.4}},
    )
    palace.mine(write_chat(tmp_path / "c" / "a.jsonl", CHAT), source="text", user_id="u1")
    assert palace.memories(user_id="u1") == []
    pending = palace.memories(user_id="u1", status="pending")
    assert pending
    assert all(m.importance <= 0.4 for m in pending)
    assert not [h for h in palace.search("where do I live", user_id="u1") if h.is_memory]


def test_no_extractor_extracts_nothing(open_palace: Callable[..., Palace], tmp_path: Path) -> None:
    palace = open_palace(tmp_path / "p", backend="sqlite", config={"memory": {"extractor": ""}})
    palace.mine(write_chat(tmp_path / "c" / "a.jsonl", CHAT), source="text", user_id="u1")
    assert palace.memories(user_id="u1", status=None) == []
    assert palace.stats().ledger.drawers > 0


class Exploding(MemoryExtractor):
    def extract(self, *, drawers: Sequence[Drawer]) -> list[Candidate]:
        raise RuntimeError("boom")


class Half(MemoryExtractor):
    """One good candidate and one the ledger refuses (an unknown drawer owner is fine,
    but a text of 20,000 characters is not a memory)."""

    def extract(self, *, drawers: Sequence[Drawer]) -> list[Candidate]:
        ids = (drawers[0].id,)
        return [Candidate("x" * 20_000, source_ids=ids), Candidate("I like tea", source_ids=ids)]


def plugin(name: str, factory: Callable[[Mapping[str, Any]], MemoryExtractor]) -> Any:
    module = types.ModuleType(f"test-memories-{name}")

    @hookimpl
    def palace_register_memory_extractors(register: Callable[[str, Any], None]) -> None:
        register(name, factory)

    module.palace_register_memory_extractors = palace_register_memory_extractors  # type: ignore[attr-defined]
    return module


@pytest.mark.parametrize(
    ("name", "factory", "kept"),
    [
        ("exploding", lambda options: Exploding(), []),
        ("half", lambda options: Half(), ["I like tea"]),
        ("not-one", lambda options: object(), []),
    ],
)
def test_a_failing_extractor_never_stops_a_mine(
    open_palace: Callable[..., Palace],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    name: str,
    factory: Callable[[Mapping[str, Any]], MemoryExtractor],
    kept: list[str],
) -> None:
    palace = open_palace(
        tmp_path / "p",
        backend="sqlite",
        plugins=[plugin(name, factory)],
        config={"memory": {"extractor": name}},
    )
    with caplog.at_level(logging.WARNING):
        report = palace.mine(
            write_chat(tmp_path / "c" / "a.jsonl", CHAT), source="text", user_id="u1"
        )
    assert report.drawers_added > 0
    assert [m.text for m in palace.memories(user_id="u1")] == kept
    assert "memor" in caplog.text


def test_an_unknown_extractor_is_logged_not_fatal(
    open_palace: Callable[..., Palace], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    palace = open_palace(tmp_path / "p", backend="sqlite", config={"memory": {"extractor": "nope"}})
    with caplog.at_level(logging.WARNING):
        palace.mine(write_chat(tmp_path / "c" / "a.jsonl", CHAT), source="text", user_id="u1")
    assert palace.stats().ledger.drawers > 0
    assert "nope" in caplog.text


def test_a_conversation_between_people_filed_by_turns_gives_the_named_users_words(
    open_palace: Callable[..., Palace], tmp_path: Path
) -> None:
    """People talking are filed a drawer per turn, each opening with its day: the turns
    of the speaker the palace is told is the user are still read as theirs."""
    palace = open_palace(
        tmp_path / "palace",
        backend="sqlite",
        config={"memory_extractors": {"rules": {"users": ["Melanie"]}}},
    )
    people = [
        ("Caroline", "I live in Lisbon and we use Slack for chat.", "2026-01-05T10:00:00Z"),
        ("Melanie", "I work at Google.", "2026-01-05T10:00:05Z"),
    ]
    palace.mine(write_chat(tmp_path / "c" / "a.jsonl", people), source="text", wing="w")
    texts = {m.text for m in palace.memories()}
    assert texts == {"I work at Google"}, texts
