"""PalaceMemoryTool: an agent's recall, bound to one user."""

from __future__ import annotations

from langchain_core.messages import ToolMessage
from palace_retrievers import Palace

from langchain_palace import PalaceMemoryTool


def test_recall_as_text(corpus_palace: Palace) -> None:
    tool = PalaceMemoryTool(palace=corpus_palace, k=2)
    content = tool.invoke({"query": "who adopted a cat?"})
    assert content.splitlines()[0] == (
        "[1] (home/pets, text) Alice adopted a grey cat called Miso in May."
    )
    assert len(content.splitlines()) == 2


def test_tool_call_returns_documents_as_artifact(corpus_palace: Palace) -> None:
    tool = PalaceMemoryTool(palace=corpus_palace)
    call = {
        "name": tool.name,
        "args": {"query": "how do we deploy?", "k": 1, "wing": "work"},
        "id": "call-1",
        "type": "tool_call",
    }
    message = tool.invoke(call)
    assert isinstance(message, ToolMessage)
    assert [d.id for d in message.artifact] == ["deploy"]
    assert "lk-prod-blue" in str(message.content)


def test_the_model_cannot_choose_the_user(corpus_palace: Palace) -> None:
    tool = PalaceMemoryTool(palace=corpus_palace, user_id="u1")
    assert "user_id" not in tool.args
    assert "SQLite" in tool.invoke({"query": "which database?", "k": 5})
    assert "MySQL" not in tool.invoke({"query": "which database?", "k": 5})


def test_nothing_found(corpus_palace: Palace) -> None:
    tool = PalaceMemoryTool(palace=corpus_palace, user_id="nobody")
    assert tool.invoke({"query": "anything"}) == "No memory matches."


async def test_ainvoke(corpus_palace: Palace) -> None:
    tool = PalaceMemoryTool(palace=corpus_palace, k=1)
    assert "Miso" in await tool.ainvoke({"query": "grey cat", "room": "pets"})
