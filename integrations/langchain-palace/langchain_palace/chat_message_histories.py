"""``PalaceChatMessageHistory``: a session's messages as a user's conversation drawers."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage, message_to_dict, messages_from_dict
from palace_retrievers import Drawer, Palace

#: How a message's type is named as the speaker of its drawer (as the palace's
#: conversation sources name them, so that its memory extractor reads the user's turns).
SPEAKERS = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}


class PalaceChatMessageHistory(BaseChatMessageHistory):
    """The messages of one session of one user, kept in a palace.

    Each message is one drawer of ``user_id`` in ``wing``/``room``: its text is
    ``speaker: content`` (``user``, ``assistant``, ``system``, ``tool``), so that search
    and the palace's memory extractor read it as a conversation, its ``source`` is
    ``langchain:<session_id>`` with the message's place in the session as its
    ``chunk_index``, and its metadata keeps ``session``, ``speakers`` and the message
    itself (``message_to_dict``), from which :attr:`messages` reads it back, in order.
    :meth:`clear` deletes the session's drawers through the palace's owner-checked
    :meth:`~palace_retrievers.Palace.delete_drawers`; other sessions and users are
    never touched.

    .. code-block:: python

        history = PalaceChatMessageHistory(palace="~/.palace/default", user_id="u1",
                                           session_id="s1")
        chain = RunnableWithMessageHistory(model, lambda session: history)

    Args:
        palace: An open :class:`~palace_retrievers.Palace`, or the path of one (which
            must exist).
        user_id: Whose session it is.
        session_id: The session.
        wing, room: Where the drawers are filed.

    Raises:
        ValueError: an empty or non-string ``user_id``, ``session_id``, ``wing`` or
            ``room``; at :meth:`add_messages`, something that is not a message.
        PalaceNotFoundError: no palace at the path given.
    """

    def __init__(
        self,
        *,
        palace: Palace | str | os.PathLike[str],
        user_id: str,
        session_id: str,
        wing: str = "conversations",
        room: str = "langchain",
    ) -> None:
        for name, value in (
            ("user_id", user_id),
            ("session_id", session_id),
            ("wing", wing),
            ("room", room),
        ):
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"{name} must be a non-empty string, not {value!r}")
        self.palace = palace if isinstance(palace, Palace) else Palace.open(palace, create=False)
        self.user_id = user_id
        self.session_id = session_id
        self.wing = wing
        self.room = room
        self.source = f"langchain:{session_id}"

    def _drawers(self) -> list[Drawer]:
        return self.palace.source_drawers(self.source, wing=self.wing, user_id=self.user_id)

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The session's messages, in the order they were added."""
        return messages_from_dict([d.metadata["message"] for d in self._drawers()])

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """File ``messages`` after the session's others, in one write."""
        messages = list(messages)
        for message in messages:
            if not isinstance(message, BaseMessage):
                raise ValueError(f"a chat history keeps messages, not {type(message).__name__}")
        if not messages:
            return
        first = len(self._drawers())
        texts, metadatas, ids = [], [], []
        for offset, message in enumerate(messages):
            index = first + offset
            speaker = SPEAKERS.get(message.type, message.type)
            texts.append(f"{speaker}: {message.text}")
            metadatas.append(
                {
                    "source": self.source,
                    "chunk_index": index,
                    "session": self.session_id,
                    "speakers": [speaker],
                    "message": message_to_dict(message),
                }
            )
            key = f"{self.user_id}\x00{self.session_id}\x00{index}"
            ids.append(f"langchain-{hashlib.sha256(key.encode()).hexdigest()[:24]}")
        self.palace.add_texts(
            texts, metadatas, ids, wing=self.wing, room=self.room, user_id=self.user_id
        )

    def clear(self) -> None:
        """Delete the session's drawers (only this user's)."""
        ids = [d.id for d in self._drawers()]
        if ids:
            self.palace.delete_drawers(ids, user_id=self.user_id)
