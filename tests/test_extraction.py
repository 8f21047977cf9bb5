"""Memory extraction at mine time: the contract, the ``rules`` and ``llm`` extractors, lookup.

Conversation drawers are built the way the conversation sources build them
(``palace_plugins.builtin.sources.conversations``: exchanges rendered as ``speaker: text``, with
``speakers`` in the metadata), so the extractors read what mining would hand them.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest
from fakes import make_plugin
from langchain_core.language_models.fake_chat_models import FakeListChatModel

from palace_plugins import PluginManager
from palace_plugins.builtin.extractors.llm_memories import PROMPT, LLMMemoryExtractor, parse_answer
from palace_plugins.builtin.extractors.rule_memories import RuleMemoryExtractor
from palace_plugins.builtin.sources.conversations import Chunking, Turn, exchanges, segments
from palace_retrievers.errors import ConfigError, PluginError, PluginNotFoundError
from palace_retrievers.memory.extraction import (
    KINDS,
    Candidate,
    MemoryExtractor,
    extract_memories,
    is_code,
    turns,
    user_speaker,
)
from palace_retrievers.records import Drawer

WHEN = datetime(2026, 1, 5, 9, 30, tzinfo=UTC)


def chat(*said: tuple[str, str], session: str = "s1", role_of: Any = None) -> list[Drawer]:
    """Drawers of a conversation, cut and rendered as the conversation sources do it."""
    roles = role_of or {"user": "user", "assistant": "assistant"}
    turns_ = [Turn(speaker, text, roles.get(speaker, "other"), WHEN) for speaker, text in said]
    cut = segments(exchanges(turns_), session=session, chunking=Chunking(4000, 200))
    return [
        Drawer(
            id=f"d{i}",
            text=segment.text,
            wing="me",
            room="chat",
            source=f"chat:{session}",
            chunk_index=i,
            content_date=segment.content_date,
            metadata=dict(segment.metadata),
        )
        for i, segment in enumerate(cut)
    ]


def document(text: str, name: str = "notes.md") -> Drawer:
    return Drawer(
        id="doc", text=text, wing="me", room="notes", source=name, metadata={"file_name": name}
    )


def texts(candidates: Sequence[Candidate]) -> list[str]:
    return [c.text for c in candidates]


# -- rules ------------------------------------------------------------------------------

ENGLISH = chat(
    ("user", "Hi! Quick one before the meeting."),
    ("assistant", "Sure, what do you need?"),
    (
        "user",
        "Remember that my sister's birthday is on May 3rd. Also, I live in Lisbon. "
        "We use MySQL for the orders database, and honestly I prefer tabs over spaces.",
    ),
    (
        "assistant",
        "Noted! I live in the cloud. We use Redis for caching. Remember that I am a bot.",
    ),
    ("user", "After a long discussion we decided to go with Kubernetes for deployment."),
    ("user", "Maybe we should try Nomad? If I move to Porto I'll tell you."),
    ("assistant", "Sounds good."),
    ("user", "The quarterly report is due by Friday.\nDo you know a good pizza place?"),
)


def test_rules_extract_what_the_user_said_in_english() -> None:
    found = RuleMemoryExtractor().extract(drawers=ENGLISH)
    by_text = {c.text: c for c in found}
    assert set(by_text) == {
        "My sister's birthday is on May 3rd",
        "I live in Lisbon",
        "We use MySQL for the orders database",
        "I prefer tabs over spaces",
        "The quarterly report is due by Friday",
    } | {t for t in by_text if "Kubernetes" in t}, sorted(by_text)
    kubernetes = next(c for c in found if "Kubernetes" in c.text)
    assert (
        kubernetes.text == "After a long discussion we decided to go with Kubernetes for deployment"
    )
    assert (kubernetes.kind, kubernetes.importance) == ("decision", 0.9)
    assert kubernetes.triples == (("deployment", "uses_tool", "Kubernetes", WHEN),)
    tabs = by_text["I prefer tabs over spaces"]
    assert (tabs.kind, tabs.slot) == ("preference", "i|prefers:spac/tab")
    birthday = by_text["My sister's birthday is on May 3rd"]
    assert (birthday.kind, birthday.importance) == ("event", 1.0)  # explicit: 1.0
    lisbon = by_text["I live in Lisbon"]
    assert lisbon.slot == "i|lives_in"
    assert lisbon.triples == (("user", "lives_in", "Lisbon", WHEN),)
    assert lisbon.content_date == WHEN
    assert by_text["The quarterly report is due by Friday"].kind == "event"
    # Every candidate points at the drawer it came from.
    ids = {d.id for d in ENGLISH}
    assert all(c.source_ids and set(c.source_ids) <= ids for c in found)


def test_rules_never_take_the_assistants_words() -> None:
    found = texts(RuleMemoryExtractor().extract(drawers=ENGLISH))
    assert not any("cloud" in t or "Redis" in t or "bot" in t for t in found)


def test_rules_skip_questions_hedges_and_conditionals() -> None:
    found = texts(RuleMemoryExtractor().extract(drawers=ENGLISH))
    assert not any("Nomad" in t or "Porto" in t or "pizza" in t for t in found)


CHINESE = chat(
    ("user", "记住，我的手机号是13800138000。我现在住在波尔图。"),
    ("assistant", "好的，我住在北京，我们用Redis做缓存。"),
    ("user", "我们决定用PostgreSQL做订单数据库。报告周五之前交。我更喜欢喝茶。你觉得呢？"),
    ("user", "如果我搬到上海，我会告诉你。我们可能换成MongoDB。"),
)


def test_rules_extract_what_the_user_said_in_chinese() -> None:
    found = RuleMemoryExtractor().extract(drawers=CHINESE)
    by_text = {c.text: c for c in found}
    assert set(by_text) == {
        "我的手机号是13800138000",
        "我现在住在波尔图",
        "我们决定用PostgreSQL做订单数据库",
        "报告周五之前交",
        "我更喜欢喝茶",
    }
    assert by_text["我的手机号是13800138000"].importance == 1.0
    assert by_text["我现在住在波尔图"].triples == (("user", "lives_in", "波尔图", WHEN),)
    decision = by_text["我们决定用PostgreSQL做订单数据库"]
    assert decision.kind == "decision"
    assert decision.triples == (("订单数据库", "uses_tool", "PostgreSQL", WHEN),)
    assert by_text["报告周五之前交"].kind == "event"
    assert by_text["我更喜欢喝茶"].kind == "preference"


def test_rules_never_read_code() -> None:
    code = Drawer(
        id="c",
        text="# I live in Lisbon\ndef main():\n    remember = 'I live in Lisbon'\n    return 1\n",
        wing="w",
        room="r",
        source="src/app.py",
        metadata={"file_name": "app.py"},
    )
    assert is_code(code)
    looks_like_code = document("const x = 1;\nfunction f() {\n  return x;\n}\nlet y = 2;\n", "x")
    assert is_code(looks_like_code)
    fenced = document("We use Postgres for the orders database.\n```\nI live in Lisbon\n```\n")
    extractor = RuleMemoryExtractor()
    assert extractor.extract(drawers=[code, looks_like_code]) == []
    assert texts(extractor.extract(drawers=[fenced])) == ["We use Postgres for the orders database"]


def test_a_conversation_between_people_has_no_user() -> None:
    people = chat(
        ("Caroline", "I live in Lisbon and we use Slack for chat."),
        ("Melanie", "I work at Google."),
        role_of={},
    )
    assert user_speaker(people[0].metadata["speakers"]) == set()
    assert RuleMemoryExtractor().extract(drawers=people) == []
    # ... unless the palace is told who the user is.
    named = RuleMemoryExtractor({"users": ["Melanie"]}).extract(drawers=people)
    assert texts(named) == ["I work at Google"]


def test_documents_are_read_unless_turned_off() -> None:
    notes = document("# Setup\n\nWe use PostgreSQL for the orders database.\n")
    assert texts(RuleMemoryExtractor().extract(drawers=[notes])) == [
        "We use PostgreSQL for the orders database"
    ]
    assert RuleMemoryExtractor({"documents": False}).extract(drawers=[notes]) == []


def test_turns_follow_the_speaker_labels() -> None:
    drawer = ENGLISH[1]
    parts = turns(drawer)
    assert [speaker for speaker, _ in parts] == ["user", "assistant"]
    assert turns(document("plain text")) == [(None, "plain text")]


def test_rules_options_are_checked() -> None:
    with pytest.raises(ConfigError):
        RuleMemoryExtractor({"colour": "blue"})
    with pytest.raises(ConfigError):
        RuleMemoryExtractor({"users": "me"})


# -- llm --------------------------------------------------------------------------------


class Spy:
    """A chat model that records what it was sent (wrapping LangChain's fake model)."""

    def __init__(self, *answers: str) -> None:
        self.model = FakeListChatModel(responses=list(answers))
        self.sent: list[Any] = []

    def invoke(self, messages: Any) -> Any:
        self.sent.append(messages)
        return self.model.invoke(messages)


GOOD = """Here you go:
```json
{"memories": [
  {"text": "I live in Porto", "kind": "fact", "importance": 0.7, "source": 2,
   "triple": ["user", "lives_in", "Porto"]},
  {"text": "Prefers tea", "kind": "mood", "importance": 3, "source": 99},
  {"kind": "fact"},
  "not an object"
]}
```"""


def test_llm_extractor_with_a_fake_chat_model() -> None:
    drawers = chat(("user", "hello"), ("assistant", "hi"), ("user", "I moved to Porto last month."))
    spy = Spy(GOOD)
    found = LLMMemoryExtractor({"model": spy}).extract(drawers=drawers)
    assert len(spy.sent) == 1
    system, human = spy.sent[0]
    assert system == ("system", PROMPT)
    assert "[1]" in human[1]
    assert "[2]" in human[1]
    assert "the user is: user" in human[1]
    porto, tea = found
    assert porto.text == "I live in Porto"
    assert porto.source_ids == (drawers[1].id,)
    assert porto.triples == (("user", "lives_in", "Porto", drawers[1].content_date),)
    assert porto.slot == "i|lives_in"
    assert (tea.kind, tea.importance) == ("fact", 1.0)  # unknown kind, importance clipped
    assert tea.source_ids == tuple(d.id for d in drawers)  # no such passage: all of them


@pytest.mark.parametrize(
    "answer",
    ["I could not find any memories.", '{"memories": [{"text": "unterminated', "[1, 2", "{}"],
)
def test_llm_extractor_survives_bad_json(answer: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="palace_plugins.builtin.extractors.llm_memories"):
        found = LLMMemoryExtractor({"model": Spy(answer)}).extract(drawers=ENGLISH[:1])
    assert found == []
    assert caplog.records, "bad output is logged"


def test_llm_extractor_survives_a_failing_model(caplog: pytest.LogCaptureFixture) -> None:
    class Broken:
        def invoke(self, messages: Any) -> Any:
            raise TimeoutError("the model is down")

    with caplog.at_level(logging.WARNING):
        assert LLMMemoryExtractor({"model": Broken()}).extract(drawers=ENGLISH[:1]) == []
    assert "the model is down" in caplog.text


def test_llm_extractor_sends_no_code_and_splits_long_batches() -> None:
    code = Drawer(id="c", text="print('hi')\n", wing="w", room="r", source="a.py", metadata={})
    spy = Spy('{"memories": []}', '{"memories": []}', '{"memories": []}')
    extractor = LLMMemoryExtractor({"model": spy, "max_chars": 300})
    assert extractor.extract(drawers=[code]) == []
    assert spy.sent == []
    long = [document("I live in Lisbon. " * 12) for _ in range(3)]
    extractor.extract(drawers=long)
    assert len(spy.sent) == 3


def test_llm_extractor_needs_a_model() -> None:
    with pytest.raises(ConfigError, match="model"):
        LLMMemoryExtractor({})
    with pytest.raises(ConfigError):
        LLMMemoryExtractor({"model": Spy(), "importance": 2})


def test_parse_answer_accepts_a_bare_list_and_content_blocks() -> None:
    assert parse_answer('[{"text": "a"}]') == [{"text": "a"}]
    assert parse_answer([{"type": "text", "text": '{"memories": [{"text": "b"}]}'}]) == [
        {"text": "b"}
    ]


def test_llm_module_does_not_import_langchain() -> None:
    code = (
        "import sys, palace_plugins.builtin.extractors.llm_memories, "
        "palace_plugins.builtin.extractors.rule_memories;"
        "print(sorted(m for m in sys.modules if m.startswith('langchain')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# -- the contract -------------------------------------------------------------------------


def test_candidate_kinds_are_the_memory_kinds() -> None:
    from palace_retrievers.records.memories import MEMORY_KINDS

    assert set(KINDS) == set(MEMORY_KINDS)


def test_candidates_are_checked() -> None:
    with pytest.raises(PluginError):
        Candidate(text="")
    with pytest.raises(PluginError):
        Candidate(text="x", kind="rumour")
    with pytest.raises(PluginError):
        Candidate(text="x", importance=1.5)
    with pytest.raises(PluginError):
        Candidate(text="x", triples=(("a", "b"),))  # type: ignore[arg-type]


class Fixed(MemoryExtractor):
    def __init__(self, result: Any) -> None:
        self.result = result

    def extract(self, *, drawers: Sequence[Drawer]) -> list[Candidate]:
        if isinstance(self.result, Exception):
            raise self.result
        return self.result  # type: ignore[no-any-return]


def test_extract_memories_merges_and_checks() -> None:
    drawers = chat(("user", "a"), ("assistant", "b"), ("user", "c"))
    found = extract_memories(
        drawers,
        extractor=Fixed(
            [
                Candidate("I live in Lisbon", importance=0.5, source_ids=("d0",)),
                Candidate("i live in  lisbon", importance=0.9, source_ids=("d1",)),
            ]
        ),
        extractor_name="fixed",
    )
    assert len(found) == 1
    assert (found[0].importance, found[0].source_ids) == (0.9, ("d0", "d1"))
    with pytest.raises(PluginError, match="not given"):
        extract_memories(
            drawers,
            extractor=Fixed([Candidate("x", source_ids=("elsewhere",))]),
            extractor_name="fixed",
        )
    with pytest.raises(PluginError, match="raised"):
        extract_memories(drawers, extractor=Fixed(RuntimeError("boom")), extractor_name="f")
    with pytest.raises(PluginError, match="Candidates"):
        extract_memories(drawers, extractor=Fixed(["text"]), extractor_name="f")


# -- plugins ------------------------------------------------------------------------------


def test_the_builtin_extractors_are_plugins() -> None:
    pm = PluginManager()
    assert {"rules", "llm"} <= set(pm.registry("memory extractor").names())
    assert isinstance(pm.memory_extractor("rules")({}), RuleMemoryExtractor)
    assert pm.memory_extractor("llm") is LLMMemoryExtractor


def test_a_third_party_memory_extractor_registers_and_unknown_names_fail() -> None:
    plugin = make_plugin(
        "acme-memories",
        palace_register_memory_extractors=lambda register: register("acme", Fixed),
    )
    pm = PluginManager(entry_points=False, plugins=[plugin])
    assert pm.memory_extractor("acme") is Fixed
    with pytest.raises(PluginNotFoundError, match="no memory extractor named 'nope'"):
        pm.memory_extractor("nope")
