"""The ``claude-code`` source: Claude Code session logs (``~/.claude/projects/*/*.jsonl``).

Each session file is one entry, keyed ``claude-code:<session id>`` (the file's name, a
UUID, so the key is the same wherever the logs lie, and a copy of the logs mined from
another path updates the same sessions: ``keys_are_ids``); a folder is walked for
``*.jsonl``.
A file's room is the project: the last folder of the session's working directory
(``cwd``), else ``claude-code``.

Of each line only ``user`` and ``assistant`` records are read; the rest (``summary``,
``system``, ``file-history-snapshot``...) is bookkeeping. What becomes of a record:

- a user prompt opens an exchange (``speaker`` ``user``); a user record that only carries
  tool results is a tool note inside the exchange, not a new one;
- assistant text is kept verbatim; a ``tool_use`` block becomes a short verbatim note
  ``[Tool] main argument`` (the command, file path, pattern, URL... cut at 200
  characters) and a tool result ``[Tool result] first line (+N lines)`` (``[Tool error]
  last line`` for a failed call); white space in notes is collapsed; an image is
  ``[image]``;
- noise is dropped: ``thinking`` blocks, ``<system-reminder>`` and slash-command tags,
  meta records (``isMeta``: local-command caveats), compaction summaries
  (``isCompactSummary``), synthetic assistant replies, "[Request interrupted by user]",
  sub-agent (``isSidechain``) records, and text left empty once cleaned.

Every segment keeps the records' ``uuid`` values as ``message_ids``, their ``timestamp``
times and the session id as ``session`` (the file's name when a record carries it as its
``sessionId``, as every record of a session does; else the first ``sessionId`` met).
A malformed line is reported as ``file:line`` and skipped.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path, PurePosixPath, PureWindowsPath
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
from palace_plugins.builtin.sources.reading import Problems, file_lines, jsonl_records, reported
from palace_plugins.builtin.sources.tree import walk
from palace_retrievers.errors import SourceError
from palace_retrievers.sources import Skipped, SourceDocument, SourceEntry

ROOM = "claude-code"

_NOISE = re.compile(
    r"<(system-reminder|command-name|command-message|command-args|local-command-stdout"
    r"|local-command-stderr|user-prompt-submit-hook)>.*?</\1>",
    re.DOTALL,
)
_INTERRUPTED = re.compile(r"^\[Request interrupted by user[^\]]*\]$")
#: Input fields that say what a tool call does, best first.
_MAIN_INPUT = (
    "command",
    "file_path",
    "notebook_path",
    "pattern",
    "url",
    "query",
    "path",
    "description",
    "prompt",
    "subject",
)


def clean(text: str) -> str:
    """``text`` without system reminders, slash-command tags and interruption notes."""
    text = _NOISE.sub("", text).strip()
    return "" if _INTERRUPTED.match(text) else text


def tool_call(block: Mapping[str, Any]) -> str:
    """A ``tool_use`` block as a short note: ``[Bash] git status``."""
    name = str(block.get("name") or "tool")
    given = block.get("input")
    given = given if isinstance(given, dict) else {}
    for field in _MAIN_INPUT:
        value = given.get(field)
        if isinstance(value, str) and value.strip():
            return note(name, value)
    return note(name, json.dumps(given, ensure_ascii=False, sort_keys=True))


def tool_result(block: Mapping[str, Any], name: str) -> str:
    """A ``tool_result`` block as a short note: one line of it and how many more.

    The line is the first of a result, and the last of an error (where a traceback or a
    test run puts its verdict).
    """
    content = block.get("content")
    if isinstance(content, list):
        content = "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    lines = [line for line in str(content or "").splitlines() if line.strip()]
    label = f"{name} {'error' if block.get('is_error') else 'result'}"
    if not lines:
        return f"[{label}] (empty)"
    more = f" (+{len(lines) - 1} lines)" if len(lines) > 1 else ""
    return note(label, lines[-1] if block.get("is_error") else lines[0]) + more


def _blocks(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict)]
    return []


def _turn(record: Mapping[str, Any], number: int, tools: dict[str, str]) -> Turn | None:
    """The turn of one log record, or ``None`` for bookkeeping and noise."""
    kind = record.get("type")
    message = record.get("message")
    if kind not in (USER, ASSISTANT) or not isinstance(message, dict):
        return None
    if record.get("isSidechain") or record.get("isMeta") or record.get("isCompactSummary"):
        return None
    if kind == ASSISTANT and message.get("model") == "<synthetic>":
        return None
    said: list[str] = []
    notes: list[str] = []
    for block in _blocks(message):
        match block.get("type"):
            case "text":
                text = clean(str(block.get("text", "")))
                if text:
                    said.append(text)
            case "tool_use":
                tools[str(block.get("id"))] = str(block.get("name") or "tool")
                notes.append(tool_call(block))
            case "tool_result":
                notes.append(tool_result(block, tools.get(str(block.get("tool_use_id")), "tool")))
            case "image":
                notes.append("[image]")
    if not said and not notes:
        return None
    role = kind if said or kind == ASSISTANT else TOOL
    return Turn(
        speaker=kind,
        text="\n".join(said + notes),
        role=role,
        time=utc(record.get("timestamp")),
        id=str(record["uuid"]) if record.get("uuid") else None,
        line_start=number,
        line_end=number,
    )


def _project(cwd: Any) -> str:
    if not isinstance(cwd, str) or not cwd.strip():
        return ROOM
    path = PureWindowsPath(cwd) if "\\" in cwd else PurePosixPath(cwd)
    return path.name or ROOM


def read_session(path: Path, *, chunking: Chunking, problems: Problems) -> SourceDocument:
    """The segments of one session file."""
    sha = hashlib.sha256()
    tools: dict[str, str] = {}
    turns: list[Turn] = []
    sessions: list[str] = []  # the sessionIds met, in order
    project = ROOM
    for number, record in jsonl_records(file_lines(path, sha.update), str(path), problems):
        ident = record.get("sessionId")
        if isinstance(ident, str) and ident not in sessions:
            sessions.append(ident)
        if project == ROOM:
            project = _project(record.get("cwd"))
        turn = _turn(record, number, tools)
        if turn is not None:
            turns.append(turn)
    # A resumed session's file may start with records of the session it resumed.
    session = path.stem if path.stem in sessions or not sessions else sessions[0]
    cut = segments(exchanges(turns), session=session, chunking=chunking)
    return SourceDocument(
        text="\n\n".join(s.text for s in cut),
        content_hash=sha.hexdigest(),
        room=project,
        content_date=min((t.time for t in turns if t.time), default=None),
        metadata={"format": "claude-code"},
        segments=cut,
    )


class ClaudeCodeSource(ConversationSource):
    """Claude Code session logs. Options: ``chunk_size``, ``chunk_overlap``."""

    keys_are_ids = True

    name = "claude-code"

    def scan(self, path: Path) -> Iterator[SourceEntry | Skipped]:
        path = mining_root(path)
        problems = Problems()
        if path.is_file():
            if not os.access(path, os.R_OK):
                raise SourceError(f"cannot read {path}: permission denied")
            yield from reported([self._entry(path, problems)], problems)
            return
        if not path.is_dir():
            raise SourceError(f"cannot mine {path}: not a regular file or a directory")
        seen: dict[str, Path] = {}
        found = 0
        for file in walk(path, want=lambda name: name.endswith(".jsonl")):
            if isinstance(file, Skipped):
                yield file
                continue
            found += 1
            if file.stem in seen:
                yield Skipped(str(file), f"same session id as {seen[file.stem]}; skipped")
                continue
            seen[file.stem] = file
            yield from reported([self._entry(file, problems)], problems)
        if not found:
            yield Skipped(str(path), "no Claude Code session logs (*.jsonl) here")

    def _entry(self, path: Path, problems: Problems) -> SourceEntry:
        chunking = self._chunking
        return SourceEntry(
            key=f"claude-code:{path.stem}",
            location=str(path),
            mtime=path.stat().st_mtime,
            read=lambda: read_session(path, chunking=chunking, problems=problems),
        )
