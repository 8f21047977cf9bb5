"""PalaceChatMessageHistory: a session's messages kept as a user's drawers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory
from palace_retrievers import Palace, PalaceNotFoundError

from langchain_palace import PalaceChatMessageHistory, PalaceRetriever


def history(palace: Palace, user_id: str, session_id: str) -> PalaceChatMessageHistory:
    return PalaceChatMessageHistory(palace=palace, user_id=user_id, session_id=session_id)


def test_messages_come_back_in_order(corpus_palace: Palace) -> None:
    kept = history(corpus_palace, "ch-ana", "s1")
    said = [
        SystemMessage("Be brief."),
        HumanMessage("I adopted a parrot called Kiwi."),
        AIMessage("", tool_calls=[{"name": "remember", "args": {"t": "x"}, "id": "c1"}]),
        ToolMessage("added", tool_call_id="c1"),
        AIMessage("Kiwi is a fine name.", id="a1"),
    ]
    kept.add_messages(said[:2])
    kept.add_messages(said[2:])
    assert kept.messages == said
    again = history(corpus_palace, "ch-ana", "s1")  # another process, the same session
    assert again.messages == said
    drawers = corpus_palace.source_drawers("langchain:s1", wing="conversations", user_id="ch-ana")
    assert [d.text for d in drawers][1] == "user: I adopted a parrot called Kiwi."
    assert [d.chunk_index for d in drawers] == [0, 1, 2, 3, 4]
    assert drawers[1].metadata["speakers"] == ["user"]
    assert drawers[4].room == "langchain"


def test_sessions_and_users_apart(corpus_palace: Palace) -> None:
    mine = history(corpus_palace, "ch-bob", "shared")
    theirs = history(corpus_palace, "ch-eve", "shared")
    later = history(corpus_palace, "ch-bob", "later")
    mine.add_user_message("My locker code is 4711.")
    theirs.add_user_message("My locker code is 9000.")
    later.add_ai_message("Hello again.")
    assert [m.content for m in mine.messages] == ["My locker code is 4711."]
    assert [m.content for m in theirs.messages] == ["My locker code is 9000."]
    found = PalaceRetriever(palace=corpus_palace, user_id="ch-bob", k=3).invoke("locker code")
    assert "4711" in found[0].page_content
    assert all("9000" not in d.page_content for d in found)

    mine.clear()
    assert mine.messages == []
    mine.add_user_message("A fresh start.")
    assert [m.content for m in mine.messages] == ["A fresh start."]
    assert [m.content for m in later.messages] == ["Hello again."]
    assert [m.content for m in theirs.messages] == ["My locker code is 9000."]


@pytest.mark.filterwarnings("ignore:RunnableWithMessageHistory is deprecated")
def test_in_a_chain_with_message_history(corpus_palace: Palace) -> None:
    prompt = ChatPromptTemplate.from_messages(
        [MessagesPlaceholder("history"), ("human", "{question}")]
    )
    model = GenericFakeChatModel(messages=iter([AIMessage("Hi Ana."), AIMessage("Ana.")]))
    chain = RunnableWithMessageHistory(
        prompt | model,
        lambda session_id: history(corpus_palace, "ch-carla", session_id),
        input_messages_key="question",
        history_messages_key="history",
    )
    config: Any = {"configurable": {"session_id": "chat-1"}}
    chain.invoke({"question": "I am Ana."}, config=config)
    chain.invoke({"question": "Who am I?"}, config=config)
    assert [m.content for m in history(corpus_palace, "ch-carla", "chat-1").messages] == [
        "I am Ana.",
        "Hi Ana.",
        "Who am I?",
        "Ana.",
    ]


async def test_async(corpus_palace: Palace) -> None:
    kept = history(corpus_palace, "ch-dan", "s1")
    await kept.aadd_messages([HumanMessage("ping"), AIMessage("pong")])
    assert [m.content for m in await kept.aget_messages()] == ["ping", "pong"]
    await kept.aclear()
    assert await kept.aget_messages() == []


@pytest.mark.parametrize(
    "kwargs",
    [{"user_id": None}, {"user_id": ""}, {"session_id": ""}, {"session_id": 3}, {"wing": " "}],
)
def test_bad_arguments(corpus_palace: Palace, kwargs: dict[str, Any]) -> None:
    arguments = {"palace": corpus_palace, "user_id": "u", "session_id": "s", **kwargs}
    with pytest.raises(ValueError, match="must be a non-empty string"):
        PalaceChatMessageHistory(**arguments)


def test_only_messages_are_kept(corpus_palace: Palace) -> None:
    kept = history(corpus_palace, "ch-fay", "s1")
    with pytest.raises(ValueError, match="keeps messages, not str"):
        kept.add_messages([HumanMessage("fine"), "not a message"])  # type: ignore[list-item]
    assert kept.messages == []


def test_a_path(tmp_path: Path) -> None:
    with pytest.raises(PalaceNotFoundError):
        PalaceChatMessageHistory(palace=tmp_path / "missing", user_id="u", session_id="s")
