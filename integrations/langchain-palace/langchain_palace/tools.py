"""An agent's long-term memory as tools: ``PalaceMemoryTool`` recalls (searches the
palace), ``PalaceRememberTool`` remembers (:meth:`Palace.remember`)."""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from langchain_core.callbacks import (
    AsyncCallbackManagerForToolRun,
    CallbackManagerForToolRun,
)
from langchain_core.documents import Document
from langchain_core.tools import BaseTool, ToolException
from palace_retrievers import Hit, InvalidQueryError, Palace, Remembered
from pydantic import BaseModel, ConfigDict, Field, field_validator

from langchain_palace.documents import hit_document
from langchain_palace.retrievers import open_palace
from langchain_palace.scope import Memories, Scope


class PalaceTool(BaseTool):
    """A tool over a palace: ``palace`` is an open palace, or the path of one."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    palace: Palace

    @field_validator("palace", mode="before")
    @classmethod
    def open_palace_path(cls, value: Any) -> Any:
        """Open the palace when a path is given."""
        return open_palace(value)


class RecallInput(BaseModel):
    """What the model passes to the tool."""

    query: str = Field(description="What to recall, in plain words.")
    k: int | None = Field(default=None, gt=0, le=50, description="How many memories.")
    wing: str | None = Field(default=None, description="Only this wing (person or project).")
    room: str | None = Field(default=None, description="Only this room (topic).")


class PalaceMemoryTool(PalaceTool):
    """Search the palace as a tool, so that an agent can recall what it was told.

    The tool answers with the memories as numbered lines (text, wing/room and source)
    and, as its artifact, the hits as ``Document`` objects (see
    :class:`~langchain_palace.PalaceRetriever` for their metadata).

    ``user_id`` is fixed when the tool is built and is not an argument the model can
    set: an agent recalls only the memories of the user it serves.

    Args:
        palace: An open :class:`~palace_retrievers.Palace`, or the path of one.
        user_id: Whose memories to search (``None``: unowned drawers only).
        k: How many memories to return when the model does not say.
        wing: Only this wing, unless the model names one.
        memories: Which memories to recall besides drawers, as
            :class:`~langchain_palace.PalaceRetriever`'s ``memories``: by default, with
            a wing or room, only the memories filed there.
    """

    name: str = "recall_memory"
    description: str = (
        "Search long-term memory (notes, past conversations, decisions) for what is "
        "relevant to a question. Input: what to recall, in plain words."
    )
    args_schema: type[BaseModel] = RecallInput
    response_format: Literal["content", "content_and_artifact"] = "content_and_artifact"

    user_id: str | None = None
    k: int = Field(default=5, gt=0)
    wing: str | None = None
    memories: Memories = "scoped"

    def _recall(
        self, query: str, k: int | None, wing: str | None, room: str | None
    ) -> tuple[str, list[Document]]:
        where = {"wing": wing or self.wing, "room": room}
        scope = Scope(self.palace, user_id=self.user_id, where=where, memories=self.memories)
        hits = scope.search(query, k or self.k)
        return _format(hits), [hit_document(hit) for hit in hits]

    def _run(
        self,
        query: str,
        k: int | None = None,
        wing: str | None = None,
        room: str | None = None,
        run_manager: CallbackManagerForToolRun | None = None,
    ) -> tuple[str, list[Document]]:
        return self._recall(query, k, wing, room)

    async def _arun(
        self,
        query: str,
        k: int | None = None,
        wing: str | None = None,
        room: str | None = None,
        run_manager: AsyncCallbackManagerForToolRun | None = None,
    ) -> tuple[str, list[Document]]:
        return await asyncio.to_thread(self._recall, query, k, wing, room)


class RememberInput(BaseModel):
    """What the model passes to the remember tool."""

    text: str = Field(
        min_length=1,
        description="One short, self-contained statement about the user, in their words.",
    )
    kind: Literal["fact", "preference", "decision", "event"] = Field(
        default="fact", description="What the statement is."
    )


class PalaceRememberTool(PalaceTool):
    """Remember a statement for the user, as a tool: :meth:`Palace.remember` decides.

    The tool answers with what the palace did, in one line: ``added``, ``duplicate`` (the
    statement repeats a current memory; nothing new is filed) or ``updated`` (a new value
    of something remembered, which supersedes the old memory, named in the line); its
    artifact is :meth:`Remembered.as_dict`.

    ``user_id`` is fixed when the tool is built and is not an argument the model can
    set: an agent remembers only for the user it serves.

    Args:
        palace: An open :class:`~palace_retrievers.Palace`, or the path of one.
        user_id: Whose memory it is (required).
        agent_id: The agent that remembers, kept with each memory.
        session_id: The session the memories come from, kept with each memory.
        wing: The wing the memories belong to (``""``: every wing of the user).

    Raises:
        ValidationError: an empty or missing ``user_id``; at a call, arguments the
            schema refuses (an empty or non-string ``text``, an unknown ``kind``).
        ToolException: a statement the palace refuses; nothing is stored.
    """

    name: str = "remember"
    description: str = (
        "Save one fact, preference, decision or event about the user to long-term memory, "
        "so it is known in later conversations. A new value of something already "
        "remembered replaces the old one; a repeat is not stored twice."
    )
    args_schema: type[BaseModel] = RememberInput
    response_format: Literal["content", "content_and_artifact"] = "content_and_artifact"

    user_id: str = Field(min_length=1)
    agent_id: str | None = None
    session_id: str | None = None
    wing: str = ""

    def _remember(self, text: str, kind: str) -> tuple[str, dict[str, Any]]:
        try:
            done = self.palace.remember(
                text,
                kind=kind,
                user_id=self.user_id,
                agent_id=self.agent_id,
                session_id=self.session_id,
                wing=self.wing,
            )
        except InvalidQueryError as exc:
            raise ToolException(str(exc)) from exc
        return _said(done), done.as_dict()

    def _run(
        self,
        text: str,
        kind: str = "fact",
        run_manager: CallbackManagerForToolRun | None = None,
    ) -> tuple[str, dict[str, Any]]:
        return self._remember(text, kind)

    async def _arun(
        self,
        text: str,
        kind: str = "fact",
        run_manager: AsyncCallbackManagerForToolRun | None = None,
    ) -> tuple[str, dict[str, Any]]:
        return await asyncio.to_thread(self._remember, text, kind)


def _said(done: Remembered) -> str:
    memory = done.memory
    if done.action == "duplicate":
        return f"duplicate: already remembered as {memory.id}: {memory.text}"
    if done.action == "updated":
        old = "; ".join(f"{m.id}: {m.text}" for m in done.superseded)
        return f"updated: {memory.id}: {memory.text} (superseded {old})"
    return f"{done.action}: {memory.id}: {memory.text}"


def _format(hits: list[Hit]) -> str:
    if not hits:
        return "No memory matches."
    lines = []
    for number, hit in enumerate(hits, 1):
        lines.append(f"[{number}] ({hit.wing}/{hit.room}, {hit.source}) {hit.text.strip()}")
    return "\n".join(lines)
