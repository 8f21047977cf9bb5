"""``PalaceMemoryBlock``: a palace as long-term memory of a LlamaIndex ``Memory``."""

from __future__ import annotations

import asyncio
from typing import Any

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.bridge.pydantic import Field, field_validator
from llama_index.core.memory.memory import BaseMemoryBlock
from palace_retrievers import Palace

from llama_index.memory.palace.conversation import file_messages, message_text, remember_found

#: The session of messages flushed without one.
NO_SESSION = "default"


class PalaceMemoryBlock(BaseMemoryBlock[str]):
    """A user's palace as a memory block: what is flushed is kept, what applies comes back.

    - **Flush** (``aput``, when ``Memory`` ejects old messages from its chat history):
      the messages are filed as the user's conversation drawers, one per exchange, and
      the palace's memory extractor reads the user's turns; each memory it finds goes
      through :meth:`Palace.remember`, so a repeat is not filed twice and a new value
      supersedes the old one (see :mod:`llama_index.memory.palace.conversation`).
    - **Get** (``aget``): the palace's dated context block (:meth:`Palace.context`) of the
      user's memories that best answer the last ``context_window`` messages; empty when
      none applies.

    .. code-block:: python

        block = PalaceMemoryBlock(palace="~/.palace/default", user_id="u1")
        memory = Memory.from_defaults(session_id="s1", memory_blocks=[block])

    Args:
        palace: An open :class:`~palace_retrievers.Palace`, or the path of one (which
            must exist).
        user_id: Whose memories are kept and recalled.
        wing, room: Where the conversation drawers are filed.
        k: At most this many memory lines.
        max_tokens: The context block's budget (default: the palace's
            ``memory.context_tokens``).
        context_window: How many of the latest messages make the query.
        drawers: List the best conversation drawers too, beside the memories.

    Raises:
        ValidationError: an empty ``user_id``, or a ``palace`` that is neither a palace
            nor a path.
        PalaceNotFoundError: no palace at the path given.
    """

    name: str = Field(default="PalaceMemory", description="The name of the memory block.")
    description: str | None = Field(
        default="What the user told before, dated, from their palace.",
        description="A description of the memory block.",
    )
    palace: Palace = Field(description="The palace the user's memories live in.")
    user_id: str = Field(min_length=1, description="Whose memories.")
    wing: str = Field(default="conversations", min_length=1)
    room: str = Field(default="llama-index", min_length=1)
    k: int = Field(default=10, gt=0)
    max_tokens: int | None = Field(default=None, gt=0)
    context_window: int = Field(default=5, gt=0)
    drawers: bool = False

    @field_validator("palace", mode="before")
    @classmethod
    def open_palace(cls, value: Any) -> Any:
        """Open the palace when a path is given."""
        if isinstance(value, str) or hasattr(value, "__fspath__"):
            return Palace.open(value, create=False)
        return value

    def query(self, messages: list[ChatMessage] | None) -> str:
        """The text of the latest ``context_window`` messages that have some, oldest first,
        cut to the palace's longest query."""
        texts = [message_text(m) for m in messages or []]
        texts = [t for t in texts if t][-self.context_window :]
        return "\n".join(texts)[-self.palace.config.search.max_query_chars :].strip()

    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        query = self.query(messages)
        if not query:
            return ""
        return await asyncio.to_thread(
            self.palace.context,
            query,
            user_id=self.user_id,
            k=self.k,
            max_tokens=self.max_tokens,
            drawers=self.drawers,
        )

    async def _aput(self, messages: list[ChatMessage]) -> None:
        await asyncio.to_thread(self.keep, messages)

    def keep(self, messages: list[ChatMessage]) -> list[str]:
        """File ``messages`` and remember what is found in them; returns the drawer ids.

        Messages are filed by the session ``Memory`` gives them (``session_id`` in their
        ``additional_kwargs``), or :data:`NO_SESSION`.
        """
        sessions: dict[str, list[ChatMessage]] = {}
        for message in messages:
            session = message.additional_kwargs.get("session_id") or NO_SESSION
            sessions.setdefault(str(session), []).append(message)
        filed: list[str] = []
        for session, group in sessions.items():
            ids = file_messages(
                self.palace,
                group,
                user_id=self.user_id,
                session=session,
                wing=self.wing,
                room=self.room,
            )
            remember_found(self.palace, ids, user_id=self.user_id, session=session)
            filed.extend(ids)
        return filed
