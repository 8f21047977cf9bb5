"""langmem's memory tools on PalaceStore, inside compiled LangGraph graphs.

An agent graph (a scripted chat model and langmem's tools in a ``ToolNode``) files a
memory, then updates it by the id its search returned: the palace supersedes the old
value. A plain node that takes the store with ``get_store()`` calls the tools too.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, TypedDict

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_store
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langmem import create_manage_memory_tool, create_search_memory_tool
from palace_retrievers import Palace

from langgraph.store.palace import PalaceStore
from tests.conftest import NEW, OLD

NAMESPACE = ("memories", "{langgraph_user_id}")


def config(user_id: str) -> RunnableConfig:
    return {"configurable": {"langgraph_user_id": user_id}}


def call(name: str, args: dict[str, Any]) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": f"call-{name}"}])


def script(messages: Sequence[BaseMessage]) -> AIMessage:
    """What the scripted model says after ``messages``: the user's last message says
    ``remember: …``, ``update: …`` or ``recall: …``; tool results are read back."""
    asked = next(m for m in reversed(messages) if isinstance(m, HumanMessage))
    verb, _, text = str(asked.content).partition(": ")
    last = messages[-1]
    if isinstance(last, HumanMessage):
        if verb == "remember":
            return call("manage_memory", {"content": text, "action": "create"})
        return call("search_memory", {"query": text})
    assert isinstance(last, ToolMessage)
    if last.name == "search_memory" and verb == "update":
        found = json.loads(str(last.content))
        return call("manage_memory", {"content": text, "action": "update", "id": found[0]["key"]})
    return AIMessage(content=str(last.content))


class ScriptedChatModel(BaseChatModel):
    """A chat model that answers by :func:`script` (it reads the conversation)."""

    answer: Callable[[Sequence[BaseMessage]], AIMessage] = script

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self.answer(messages))])


def agent_graph(store: PalaceStore) -> CompiledStateGraph[Any, Any, Any, Any]:
    tools = [
        create_manage_memory_tool(namespace=NAMESPACE),
        create_search_memory_tool(namespace=NAMESPACE),
    ]
    model = ScriptedChatModel()

    def agent(state: MessagesState) -> dict[str, list[BaseMessage]]:
        return {"messages": [model.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile(store=store)


def said(result: dict[str, Any]) -> str:
    return str(result["messages"][-1].content)


def test_the_agent_remembers_updates_and_the_palace_supersedes(
    store: PalaceStore, palace: Palace
) -> None:
    graph = agent_graph(store)
    created = graph.invoke({"messages": [HumanMessage(f"remember: {OLD}")]}, config("u1"))
    assert said(created).startswith("created memory ")
    key = said(created).removeprefix("created memory ")
    item = store.get(("memories", "u1"), key)
    assert item is not None
    assert item.value == {"content": OLD}
    (old,) = palace.memories(user_id="u1")

    updated = graph.invoke({"messages": [HumanMessage(f"update: {NEW}")]}, config("u1"))
    assert said(updated) == f"updated memory {key}"
    item = store.get(("memories", "u1"), key)
    assert item is not None
    assert item.value == {"content": NEW}
    (current,) = palace.memories(user_id="u1")
    assert current.text == NEW
    assert palace.memory(old.id, user_id="u1").status == "superseded"
    assert palace.memory(old.id, user_id="u1").superseded_by == current.id
    assert [e.event for e in palace.history(old.id, user_id="u1")] == ["add", "supersede"]
    assert [m.id for m in palace.chain(current.id, user_id="u1")] == [old.id, current.id]

    recalled = graph.invoke(
        {"messages": [HumanMessage("recall: which database holds the orders?")]}, config("u1")
    )
    found = json.loads(said(recalled))
    assert [(m["key"], m["value"]["content"]) for m in found] == [(key, NEW)]
    assert found[0]["namespace"] == ["memories", "u1"]
    assert isinstance(found[0]["score"], float)

    other = graph.invoke(
        {"messages": [HumanMessage("recall: which database holds the orders?")]}, config("u2")
    )
    assert json.loads(said(other)) == []


async def test_the_agent_runs_async(store: PalaceStore, palace: Palace) -> None:
    graph = agent_graph(store)
    await graph.ainvoke({"messages": [HumanMessage(f"remember: {OLD}")]}, config("u1"))
    await graph.ainvoke({"messages": [HumanMessage(f"update: {NEW}")]}, config("u1"))
    assert [m.text for m in palace.memories(user_id="u1")] == [NEW]
    assert [m.status for m in palace.memories(user_id="u1", status="superseded")] == ["superseded"]
    recalled = await graph.ainvoke(
        {"messages": [HumanMessage("recall: orders database")]}, config("u1")
    )
    assert [m["value"]["content"] for m in json.loads(said(recalled))] == [NEW]


class Note(TypedDict):
    text: str
    found: list[str]


def test_a_node_takes_the_store_with_get_store(store: PalaceStore, palace: Palace) -> None:
    manage = create_manage_memory_tool(namespace=NAMESPACE)
    search = create_search_memory_tool(namespace=NAMESPACE)

    def remember(state: Note) -> dict[str, Any]:
        assert get_store() is store
        manage.invoke({"content": state["text"]})
        return {}

    def recall(state: Note) -> dict[str, Any]:
        found = json.loads(search.invoke({"query": state["text"]}))
        return {"found": [m["value"]["content"] for m in found]}

    graph = StateGraph(Note)
    graph.add_node("remember", remember)
    graph.add_node("recall", recall)
    graph.add_edge(START, "remember")
    graph.add_edge("remember", "recall")
    graph.add_edge("recall", END)
    compiled = graph.compile(store=store)
    text = "The team standup is at 9am"
    assert compiled.invoke({"text": text, "found": []}, config("u1"))["found"] == [text]
    # The repeat files nothing new: the one memory is found under both keys langmem made.
    assert compiled.invoke({"text": text, "found": []}, config("u1"))["found"] == [text, text]
    (memory,) = palace.memories(user_id="u1")
    assert len({item.key for item in store.search(("memories", "u1"))}) == 2
    assert [e.event for e in palace.history(memory.id, user_id="u1")] == ["add", "duplicate"]
