"""PalaceRememberTool: an agent's writes to the palace, for one user only."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import ToolException
from palace_retrievers import Palace
from pydantic import ValidationError

from langchain_palace import PalaceMemoryTool, PalaceRememberTool


def test_added_duplicate_updated(corpus_palace: Palace) -> None:
    tool = PalaceRememberTool(palace=corpus_palace, user_id="rt-ana")
    assert tool.invoke({"text": "I live in Lisbon."}).startswith("added: m_")
    assert tool.invoke({"text": "I live in Lisbon."}).startswith("duplicate: already remembered")
    said = tool.invoke({"text": "I live in Porto now."})
    assert said.startswith("updated: ")
    assert "(superseded m_" in said
    assert "Lisbon" in said
    current = [m.text for m in corpus_palace.memories(user_id="rt-ana")]
    assert current == ["I live in Porto now."]


def test_the_model_cannot_choose_the_user(corpus_palace: Palace) -> None:
    tool = PalaceRememberTool(palace=corpus_palace, user_id="rt-bob", session_id="s1")
    assert "user_id" not in tool.args
    tool.invoke({"text": "I prefer tea to coffee.", "kind": "preference", "user_id": "rt-eve"})
    assert [m.kind for m in corpus_palace.memories(user_id="rt-bob")] == ["preference"]
    assert corpus_palace.memories(user_id="rt-bob")[0].session_id == "s1"
    assert corpus_palace.memories(user_id="rt-eve") == []


def test_a_tool_call_from_a_chat_model(corpus_palace: Palace) -> None:
    """The flow of an agent: the model asks for the tool, the tool answers with a
    ToolMessage, and what was remembered is recalled for that user alone."""
    remember = PalaceRememberTool(palace=corpus_palace, user_id="rt-carla")
    call = {"name": "remember", "args": {"text": "My manager is Ana Souza."}, "id": "c1"}
    model = GenericFakeChatModel(messages=iter([AIMessage(content="", tool_calls=[call])]))
    tools = {remember.name: remember}

    def run_tools(message: AIMessage) -> list[ToolMessage]:
        return [tools[c["name"]].invoke({**c, "type": "tool_call"}) for c in message.tool_calls]

    replies = (model | RunnableLambda(run_tools)).invoke("Remember who my manager is.")
    assert isinstance(replies[0], ToolMessage)
    assert replies[0].tool_call_id == "c1"
    assert str(replies[0].content).startswith("added: ")
    assert replies[0].artifact["action"] == "added"
    recall = PalaceMemoryTool(palace=corpus_palace, user_id="rt-carla", k=1)
    assert "Ana Souza" in recall.invoke({"query": "who is my manager?"})
    other = PalaceMemoryTool(palace=corpus_palace, user_id="rt-dan", k=5)
    assert "Ana Souza" not in other.invoke({"query": "who is my manager?"})


async def test_ainvoke(corpus_palace: Palace) -> None:
    tool = PalaceRememberTool(palace=corpus_palace, user_id="rt-fay")
    assert (await tool.ainvoke({"text": "We decided to ship on Fridays."})).startswith("added")
    assert len(corpus_palace.memories(user_id="rt-fay")) == 1


@pytest.mark.parametrize("user_id", [None, ""])
def test_a_user_is_needed(corpus_palace: Palace, user_id: Any) -> None:
    with pytest.raises(ValidationError):
        PalaceRememberTool(palace=corpus_palace, user_id=user_id)
    with pytest.raises(ValidationError):
        PalaceRememberTool(palace=corpus_palace)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    "args", [{"text": 42}, {"text": ""}, {}, {"text": "I like jazz.", "kind": "gossip"}]
)
def test_bad_arguments_store_nothing(corpus_palace: Palace, args: dict[str, Any]) -> None:
    tool = PalaceRememberTool(palace=corpus_palace, user_id="rt-gil")
    with pytest.raises(ValidationError):
        tool.invoke(args)
    assert corpus_palace.memories(user_id="rt-gil") == []


def test_a_statement_the_palace_refuses(corpus_palace: Palace) -> None:
    tool = PalaceRememberTool(palace=corpus_palace, user_id="rt-hal")
    with pytest.raises(ToolException):
        tool.invoke({"text": "   "})
    assert corpus_palace.memories(user_id="rt-hal") == []
    tool.handle_tool_error = True
    assert "empty" in tool.invoke({"text": "   "})
