"""Flushed chat messages as a user's conversation drawers, and the memories found in them.

Messages are grouped into exchanges as the palace's conversation sources group turns (a
user message with the replies that follow it, up to the next user message) and rendered
the same way (``speaker: text`` blocks), so that the palace's memory extractor reads the
user's turns and never the assistant's. Each exchange is one drawer of the user, filed
with :meth:`~palace_retrievers.Palace.add_texts` in ``wing``/``room``, its ``source``
``llama-index:<session>`` and its ``chunk_index`` the next of that source, so that
:meth:`~palace_retrievers.Palace.source_drawers` gives a session back in order. Its
metadata has ``session``, ``speakers`` and ``exchange``.

Then the palace's memory extractor (``memory.extractor``, :meth:`Palace.memory_extractor`)
reads the new drawers, and each memory it finds is remembered for the user with
:meth:`Palace.remember` (deduplicated and superseded against the user's memories) as mining
does: ``origin="extracted"``, pointing at its drawers, importance capped at
``memory.extracted_importance``, status ``memory.extracted_status``, in no wing (a fact
about the user applies in every wing), its triples filed in the knowledge graph. As at mine
time, extraction is a signal, not a gate: an extractor that fails, or a memory the palace
refuses, is logged and the drawers stay filed.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from llama_index.core.base.llms.types import ChatMessage, MessageRole, TextBlock
from palace_retrievers import InvalidQueryError, Palace, Remembered

log = logging.getLogger(__name__)
#: The roles whose messages are filed: the system prompt is the app's, not the user's.
FILED_ROLES = (MessageRole.USER, MessageRole.ASSISTANT, MessageRole.TOOL)


@dataclass(frozen=True, slots=True)
class Exchange:
    """A user message and the replies after it, rendered as ``speaker: text`` blocks."""

    text: str
    speakers: tuple[str, ...]


def message_text(message: ChatMessage) -> str:
    """The text blocks of ``message``, joined."""
    return "\n".join(b.text for b in message.blocks if isinstance(b, TextBlock)).strip()


def exchanges(messages: Sequence[ChatMessage]) -> list[Exchange]:
    """The exchanges of ``messages`` (module docstring); messages without text are left out."""
    groups: list[list[tuple[str, str]]] = []
    for message in messages:
        text = message_text(message)
        if message.role not in FILED_ROLES or not text:
            continue
        speaker = message.role.value
        if speaker == MessageRole.USER.value and groups and groups[-1][-1][0] != speaker:
            groups.append([])
        if not groups:
            groups.append([])
        groups[-1].append((speaker, text))
    out = []
    for group in groups:
        blocks: list[str] = []
        for index, (speaker, text) in enumerate(group):
            same = index > 0 and group[index - 1][0] == speaker
            blocks.append(text if same else f"{speaker}: {text}")
        speakers = tuple(dict.fromkeys(speaker for speaker, _ in group))
        out.append(Exchange(text="\n\n".join(blocks), speakers=speakers))
    return out


def file_messages(
    palace: Palace,
    messages: Sequence[ChatMessage],
    *,
    user_id: str,
    session: str,
    wing: str,
    room: str,
) -> list[str]:
    """File ``messages`` as ``user_id``'s conversation drawers; returns their ids."""
    found = exchanges(messages)
    if not found:
        return []
    source = f"llama-index:{session}"
    first = len(palace.source_drawers(source, wing=wing, user_id=user_id))
    texts, metadatas, ids = [], [], []
    for offset, exchange in enumerate(found):
        index = first + offset
        texts.append(exchange.text)
        metadatas.append(
            {
                "source": source,
                "chunk_index": index,
                "session": session,
                "exchange": index,
                "speakers": list(exchange.speakers),
            }
        )
        digest = hashlib.sha256(f"{user_id}\x00{session}\x00{index}".encode()).hexdigest()
        ids.append(f"llama-index-{digest[:24]}")
    return palace.add_texts(texts, metadatas, ids, wing=wing, room=room, user_id=user_id)


def remember_found(
    palace: Palace, drawer_ids: Sequence[str], *, user_id: str, session: str
) -> list[Remembered]:
    """Remember for ``user_id`` what the palace's memory extractor finds in these drawers
    (none when the palace has no extractor, or it fails)."""
    drawers = palace.get(drawer_ids, user_id=user_id)
    if not drawers:
        return []
    cfg = palace.config.memory
    try:
        extractor = palace.memory_extractor()
        found = extractor.extract(drawers=drawers) if extractor is not None else []
    except Exception as exc:  # a plugin's failure: signal, not gate
        log.warning("no memories were extracted from %d drawers (%s)", len(drawers), exc)
        return []
    done = []
    for candidate in found:
        try:
            remembered = palace.remember(
                candidate.text,
                kind=candidate.kind,
                importance=min(candidate.importance, cfg.extracted_importance),
                user_id=user_id,
                session_id=session,
                source_ids=candidate.source_ids,
                status=cfg.extracted_status,
                origin="extracted",
                metadata={"extractor": cfg.extractor},
            )
        except InvalidQueryError as exc:
            log.warning("an extracted memory was not remembered (%s): %r", exc, candidate.text)
            continue
        for subject, predicate, obj, valid_from in candidate.triples:
            palace.kg.add(
                subject,
                predicate,
                obj,
                valid_from=valid_from or remembered.memory.created_at,
                source_drawer=candidate.source_ids[0] if candidate.source_ids else None,
                source_memory=remembered.memory.id,
                user_id=user_id,
                origin=cfg.extractor,
            )
        done.append(remembered)
    return done
