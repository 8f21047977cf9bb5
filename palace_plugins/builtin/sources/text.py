"""The ``text`` source: plain chat transcripts, and a generic chat JSONL.

Given a file or a folder (walked like ``files``: sorted, ``.gitignore`` honoured; only
``.txt``, ``.md``, ``.log``, ``.jsonl`` and ``.ndjson`` files), it tells the two formats
apart by themselves:

- **JSONL** (a ``.jsonl``/``.ndjson`` file, or any file whose first non-blank line opens a
  JSON object): one message a line, ``{"session", "speaker", "text", "time", "id"}``;
  ``role`` and ``content`` are accepted for ``speaker`` and ``text``. Only ``text`` is
  required; ``session`` defaults to the file's name, ``speaker`` to ``unknown``. A file
  gives one entry per session (in order of first appearance), keyed
  ``text:<path>#<session>``. A speaker (or role) named user/human is the user, and
  assistant/ai/bot the assistant: a session with a user is filed as exchanges; one with
  none (people talking) a drawer per turn, each naming its exchange (the first speaker
  of a session opens each), see
  :func:`~palace_plugins.builtin.sources.conversations.conversation_segments`.
- **Transcript**: ``User:``/``Assistant:`` markers (also ``Human:``/``AI:``, any case,
  optionally in markdown bold) when both kinds occur, else ``> `` quoted lines as the
  user's turns with the unquoted lines after them as the reply. A file is one entry,
  keyed ``text:<path>``; its exchanges keep their exact lines, and lines before the first
  marker (a title) open the first exchange. A file with neither is skipped ("no transcript
  markers"), or refused when it is the one file mined.

``<path>`` is the path under the mined folder (the file's name when one file is mined).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from palace_plugins.builtin.sources.conversations import (
    ASSISTANT,
    OTHER,
    USER,
    Chunking,
    ConversationSource,
    Turn,
    conversation_segments,
    exchanges,
    mining_root,
    segments,
    utc,
)
from palace_plugins.builtin.sources.reading import (
    Problems,
    decode,
    file_lines,
    jsonl_records,
    read_bytes,
    reported,
)
from palace_plugins.builtin.sources.tree import walk
from palace_retrievers.errors import SourceError
from palace_retrievers.ids import content_hash, digest
from palace_retrievers.sources import Skipped, SourceDocument, SourceEntry

SUFFIXES = frozenset({".txt", ".md", ".log", ".jsonl", ".ndjson"})
JSONL_SUFFIXES = frozenset({".jsonl", ".ndjson"})
USER_NAMES = frozenset({"user", "human"})
ASSISTANT_NAMES = frozenset({"assistant", "ai", "bot"})
ROOM = "general"
#: Bumped when the drawers cut from a JSONL session change (2: a drawer per turn when
#: nobody is the user), so that a session read again is filed again even if its records
#: are the same.
JSONL_CUT = 2

_MARKER = re.compile(r"^\s*\**\s*(user|human|assistant|ai)\s*\**\s*:\s*\**\s?(.*)$", re.I)
_QUOTE = re.compile(r"^\s*>")


def role_of(name: str) -> str:
    """``user``, ``assistant`` or ``other`` for a speaker or role name."""
    lowered = name.strip().lower()
    if lowered in USER_NAMES:
        return USER
    if lowered in ASSISTANT_NAMES:
        return ASSISTANT
    return OTHER


# -- transcripts ------------------------------------------------------------------------


def transcript_turns(lines: Sequence[str]) -> list[Turn] | None:
    """The turns of a transcript, or ``None`` when ``lines`` have no transcript markers.

    Lines before the first marker (a title) belong to the first turn's line range.
    """
    marked = [(n, _MARKER.match(line)) for n, line in enumerate(lines, start=1)]
    roles = {role_of(m.group(1)) for _, m in marked if m}
    if {USER, ASSISTANT} <= roles:
        starts = {n: (m.group(1).strip("* "), role_of(m.group(1))) for n, m in marked if m}
    else:
        starts = {}
        quoted_before = False
        for n, line in enumerate(lines, start=1):
            if _QUOTE.match(line):
                if not quoted_before:
                    starts[n] = ("user", USER)
                quoted_before = True
            elif line.strip():
                if quoted_before:
                    starts[n] = ("assistant", ASSISTANT)
                quoted_before = False
        if ASSISTANT not in {role for _, role in starts.values()}:
            return None
    bounds = sorted(starts)
    turns = []
    for i, first in enumerate(bounds):
        end = bounds[i + 1] - 1 if i + 1 < len(bounds) else len(lines)
        while end > first and not lines[end - 1].strip():
            end -= 1
        speaker, role = starts[first]
        text = "\n".join(lines[first - 1 : end])
        turns.append(Turn(speaker, text, role, line_start=first, line_end=end))
    preamble = lines[: bounds[0] - 1]
    if any(line.strip() for line in preamble):  # a title: it opens the first exchange
        turns[0] = replace(turns[0], line_start=1)
    return turns


def _read_transcript(path: Path, *, session: str, chunking: Chunking) -> SourceDocument:
    data = read_bytes(path)
    lines = decode(data).split("\n")
    turns = transcript_turns(lines)
    if turns is None:
        raise SourceError(
            f"{path} has no transcript markers ('> ' or 'User:'/'Assistant:'); "
            "mine it with source 'files'"
        )

    def verbatim(group: Sequence[Turn]) -> str:
        first = group[0].line_start or 1
        last = group[-1].line_end or len(lines)
        return "\n".join(lines[first - 1 : last])

    cut = segments(exchanges(turns), session=session, chunking=chunking, render=verbatim)
    return SourceDocument(
        text="\n\n".join(s.text for s in cut),
        content_hash=content_hash(data),
        room=ROOM,
        content_date=utc(path.stat().st_mtime),
        metadata={"format": "transcript"},
        segments=cut,
    )


# -- JSONL ------------------------------------------------------------------------------


@dataclass(slots=True)
class _Session:
    name: str
    records: list[tuple[int, dict[str, Any]]]


def _jsonl_sessions(path: Path, problems: Problems) -> list[_Session]:
    sessions: dict[str, _Session] = {}
    for number, record in jsonl_records(file_lines(path, len), str(path), problems):
        text = record.get("text", record.get("content"))
        if not isinstance(text, str) or not text.strip():
            problems.add(f"{path}:{number}", "no text in this record")
            continue
        name = record.get("session")
        name = path.stem if name is None else str(name)
        sessions.setdefault(name, _Session(name, [])).records.append((number, record))
    return list(sessions.values())


def _turn(number: int, record: Mapping[str, Any], where: str, problems: Problems) -> Turn:
    speaker = str(record.get("speaker") or record.get("role") or "unknown")
    role = role_of(str(record.get("role") or speaker))
    time = None
    raw_time = record.get("time", record.get("timestamp"))
    if raw_time is not None:
        time = utc(raw_time)
        if time is None:
            problems.add(f"{where}:{number}", f"unreadable time {raw_time!r}; kept without it")
    text = str(record.get("text", record.get("content")))
    ident = record.get("id")
    return Turn(speaker, text, role, time, None if ident is None else str(ident), number, number)


def _jsonl_document(
    session: _Session, *, path: Path, chunking: Chunking, problems: Problems
) -> SourceDocument:
    turns = [_turn(n, r, str(path), problems) for n, r in session.records]
    cut = conversation_segments(turns, session=session.name, chunking=chunking)
    canonical = json.dumps(session.records, sort_keys=True, ensure_ascii=False, default=str)
    return SourceDocument(
        text="\n\n".join(s.text for s in cut),
        content_hash=digest(canonical, f"cut {JSONL_CUT}", length=64),
        room=ROOM,
        metadata={"format": "chat-jsonl"},
        segments=cut,
    )


# -- the source -------------------------------------------------------------------------


def is_jsonl(path: Path) -> bool:
    """Whether ``path`` is a JSONL file: by its suffix, else by its first non-blank line."""
    if path.suffix.lower() in JSONL_SUFFIXES:
        return True
    try:
        with path.open("rb") as stream:
            head = decode(stream.read(4096))
    except OSError:
        return False
    return head.lstrip().startswith("{")


class TextSource(ConversationSource):
    """Plain transcripts and chat JSONL. Options: ``chunk_size``, ``chunk_overlap``."""

    name = "text"

    def scan(self, path: Path) -> Iterator[SourceEntry | Skipped]:
        path = mining_root(path)
        problems = Problems()
        if path.is_file():
            if not os.access(path, os.R_OK):
                raise SourceError(f"cannot read {path}: permission denied")
            if not is_jsonl(path):
                _read_transcript(path, session="", chunking=self._chunking)  # fail early
            yield from reported(self._entries(path, path.name, problems), problems)
            return
        if not path.is_dir():
            raise SourceError(f"cannot mine {path}: not a regular file or a directory")
        for found in walk(path, want=lambda name: Path(name).suffix.lower() in SUFFIXES):
            if isinstance(found, Skipped):
                yield found
                continue
            rel = found.relative_to(path).as_posix()
            yield from reported(self._entries(found, rel, problems), problems)

    def _entries(self, path: Path, rel: str, problems: Problems) -> Iterator[SourceEntry]:
        mtime = path.stat().st_mtime
        chunking = self._chunking
        if not is_jsonl(path):
            yield SourceEntry(
                key=f"text:{rel}",
                location=str(path),
                mtime=mtime,
                read=lambda: _read_transcript(path, session=rel, chunking=chunking),
            )
            return
        sessions = _jsonl_sessions(path, problems)
        if not sessions:
            problems.add(str(path), "no chat records in this JSONL file")
        for session in sessions:

            def read(session: _Session = session) -> SourceDocument:
                return _jsonl_document(session, path=path, chunking=chunking, problems=problems)

            yield SourceEntry(
                key=f"text:{rel}#{session.name}",
                location=f"{path}#{session.name}",
                mtime=mtime,
                read=read,
            )
