"""The ``chatgpt`` source: a ChatGPT data export (``conversations.json``).

The path may be the ``conversations.json`` file, the unzipped export folder holding it,
or the export's ``.zip`` itself. Each conversation is one entry, keyed
``chatgpt:<conversation id>``, so a later export updates the same conversations instead
of adding copies, wherever it is saved (the keys are ids: ``keys_are_ids``); its drawers
go to the room ``chatgpt``.

A conversation is a tree of messages (``mapping``: node id → ``{message, parent,
children}``) because an edited prompt or a regenerated answer starts a new branch. Only
the branch the user last saw is mined: from ``current_node`` back to the root through
the ``parent`` links (when ``current_node`` is missing, the newest child is followed down
from the root, and a note says so).

What becomes of a message on that branch:

- ``user`` and ``assistant`` text (``text`` and ``multimodal_text`` parts; an image is
  ``[image]``) is kept verbatim; the user's turns open the exchanges;
- an assistant message addressed to a tool (``recipient`` other than ``all``, e.g. code
  for ``python``) is a short note ``[python] code``; a ``tool`` message's output is a
  note ``[python result] first line``; a quoted web page is ``[quote] title url``;
- noise is dropped: ``system`` messages, messages hidden from the conversation
  (``is_visually_hidden_from_conversation``), reasoning (``thoughts``,
  ``reasoning_recap``), custom instructions and memory (``user_editable_context``,
  ``model_editable_context``), and empty messages.

Segments keep the message ids, their ``create_time`` (epoch seconds, stored as UTC) and
the conversation id as ``session``; the document carries the conversation's ``title``.
Damage part-way through the file (an interrupted download) costs only the conversations
after it, reported with line and column; a conversation that is not a JSON object or has
no id or no ``mapping`` is reported with its line and skipped.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from palace_plugins.builtin.sources.conversations import (
    ASSISTANT,
    TOOL,
    USER,
    Chunking,
    ConversationSource,
    Turn,
    exchanges,
    mining_root,
    note,
    segments,
    utc,
)
from palace_plugins.builtin.sources.reading import (
    Problems,
    array_items,
    decode,
    read_bytes,
    reported,
)
from palace_retrievers.errors import SourceError
from palace_retrievers.ids import digest
from palace_retrievers.sources import Skipped, SourceDocument, SourceEntry

EXPORT_FILE = "conversations.json"
ROOM = "chatgpt"
NOISE_TYPES = frozenset(
    {"thoughts", "reasoning_recap", "user_editable_context", "model_editable_context"}
)


def current_branch(
    mapping: Mapping[str, Any], current: Any, where: str, problems: Problems
) -> list[Mapping[str, Any]]:
    """The nodes from the root to ``current`` (the branch the user last saw).

    Node ids are strings (JSON object keys); a link of another type leads nowhere.
    """
    current = _id(current)
    if current not in mapping:
        problems.add(where, "no current_node; the newest branch is mined")
        roots = [k for k, n in mapping.items() if _id(_node(n).get("parent")) not in mapping]
        current = roots[0] if roots else None
        seen: set[Any] = set()
        while current is not None and current not in seen:
            seen.add(current)
            listed = _node(mapping[current]).get("children")
            children = [c for c in listed if _id(c) in mapping] if isinstance(listed, list) else []
            if not children:
                break
            current = children[-1]
    chain: list[Mapping[str, Any]] = []
    visited: set[Any] = set()
    while current in mapping and current not in visited:
        visited.add(current)
        node = _node(mapping[current])
        chain.append(node)
        current = _id(node.get("parent"))
    chain.reverse()
    return chain


def _id(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _node(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _said(content: Mapping[str, Any]) -> str:
    """The words of a ``text``-like content (parts or ``text``), images as ``[image]``."""
    pieces: list[str] = []
    parts = content.get("parts")
    for part in parts if isinstance(parts, list) else []:
        if isinstance(part, str):
            pieces.append(part)
        elif isinstance(part, dict):
            if str(part.get("content_type", "")).startswith("image"):
                pieces.append("[image]")
            elif isinstance(part.get("text"), str):
                pieces.append(part["text"])
    if not pieces and isinstance(content.get("text"), str):
        pieces.append(content["text"])
    return "\n".join(p for p in pieces if p.strip()).strip()


def message_turn(message: Mapping[str, Any]) -> Turn | None:
    """The turn of one message on the branch, or ``None`` for noise."""
    author = _node(message.get("author"))
    role = author.get("role")
    content = _node(message.get("content"))
    kind = content.get("content_type")
    meta = _node(message.get("metadata"))
    if role not in (USER, ASSISTANT, TOOL) or (isinstance(kind, str) and kind in NOISE_TYPES):
        return None
    if meta.get("is_visually_hidden_from_conversation"):
        return None
    text = _said(content)
    if kind == "tether_quote":
        text = f"{content.get('title') or ''} {content.get('url') or ''}".strip()
    elif kind == "tether_browsing_display":
        text = str(content.get("result") or content.get("summary") or "")
    if not text:
        return None
    recipient = message.get("recipient") or "all"
    speaker = str(role)
    if role == TOOL:
        name = str(author.get("name") or "tool")
        label = "quote" if kind == "tether_quote" else f"{name} result"
        speaker, text = name, note(label, text.splitlines()[0])
    elif role == ASSISTANT and recipient != "all":
        text = note(str(recipient), text)
    return Turn(
        speaker=speaker,
        text=text,
        role=str(role),
        time=utc(message.get("create_time")),
        id=str(message["id"]) if message.get("id") else None,
    )


def read_conversation(
    conversation: Mapping[str, Any], *, key: str, where: str, chunking: Chunking, problems: Problems
) -> SourceDocument:
    """The segments of one conversation, along its current branch."""
    mapping = _node(conversation.get("mapping"))
    branch = current_branch(mapping, conversation.get("current_node"), where, problems)
    turns = [
        turn
        for node in branch
        if isinstance(node.get("message"), dict)
        and (turn := message_turn(node["message"])) is not None
    ]
    session = key.removeprefix("chatgpt:")
    cut = segments(exchanges(turns), session=session, chunking=chunking)
    canonical = json.dumps(conversation, sort_keys=True, ensure_ascii=False, default=str)
    return SourceDocument(
        text="\n\n".join(s.text for s in cut),
        content_hash=digest(canonical, length=64),
        room=ROOM,
        content_date=utc(conversation.get("create_time")),
        metadata={"format": "chatgpt", "title": str(conversation.get("title") or "")},
        segments=cut,
    )


def _export_text(path: Path) -> tuple[str, Path]:
    """The text of ``conversations.json`` and the file it came from."""
    if path.is_dir():
        file = path / EXPORT_FILE
        if file.is_symlink():  # a folder's contents are read, never what they link to
            raise SourceError(
                f"{file} is a symlink: not followed out of {path}; mine the file it points to"
            )
        if not file.is_file():
            raise SourceError(f"no {EXPORT_FILE} in {path}: not a ChatGPT export folder")
        return decode(read_bytes(file)), file
    if zipfile.is_zipfile(path):
        try:
            with zipfile.ZipFile(path) as archive:
                names = [n for n in archive.namelist() if n.rsplit("/", 1)[-1] == EXPORT_FILE]
                if not names:
                    raise SourceError(f"no {EXPORT_FILE} in {path}: not a ChatGPT export")
                return decode(archive.read(min(names, key=len))), path
        except (OSError, zipfile.BadZipFile) as exc:
            raise SourceError(f"cannot read {path}: {exc}") from None
    return decode(read_bytes(path)), path


class ChatGPTSource(ConversationSource):
    """ChatGPT exports. Options: ``chunk_size``, ``chunk_overlap``."""

    keys_are_ids = True

    name = "chatgpt"

    def scan(self, path: Path) -> Iterator[SourceEntry | Skipped]:
        text, file = _export_text(mining_root(path))
        problems = Problems()
        yield from reported(self._entries(text, file, problems), problems)

    def _entries(self, text: str, file: Path, problems: Problems) -> Iterator[SourceEntry]:
        mtime = file.stat().st_mtime
        chunking = self._chunking
        seen: set[str] = set()
        count, damage = 0, problems.total
        for item in array_items(text, str(file), problems):
            count += 1
            index, conversation = item.index, item.value
            where = f"{file}:{item.line_start}"
            if not isinstance(conversation, dict):
                problems.add(where, f"conversation {index} is not a JSON object")
                continue
            ident = conversation.get("conversation_id") or conversation.get("id")
            if not isinstance(ident, str) or not ident:
                problems.add(where, f"conversation {index} has no id")
                continue
            if not isinstance(conversation.get("mapping"), dict):
                problems.add(where, f"conversation {ident} has no message mapping")
                continue
            if ident in seen:
                problems.add(where, f"conversation {ident} appears twice; the first is kept")
                continue
            seen.add(ident)
            key = f"chatgpt:{ident}"

            def read(
                conversation: Mapping[str, Any] = conversation, key: str = key, where: str = where
            ) -> SourceDocument:
                return read_conversation(
                    conversation, key=key, where=where, chunking=chunking, problems=problems
                )

            yield SourceEntry(key=key, location=f"{file}#{ident}", mtime=mtime, read=read)
        if not count and problems.total == damage:
            problems.add(str(file), "empty ChatGPT export: no conversations")
