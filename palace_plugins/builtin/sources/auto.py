"""The ``auto`` source: tells what a path holds and mines it with the built-in that fits.

The first rule that matches decides, for the whole path:

1. ``chatgpt``: a file named ``conversations.json``, a ``.zip`` holding one, a JSON file
   whose array starts with an object that has a ``mapping``, or a folder with a
   ``conversations.json`` at its top;
2. ``slack``: a folder with ``users.json`` or a channel list (``channels.json``, …)
   and at least one ``<channel>/YYYY-MM-DD.json`` file, or a ``.zip`` holding both, at
   its top or in its one top folder (the ``slack`` source reads it in place);
3. ``claude-code``: a ``.jsonl`` file whose first record has a ``sessionId``, or a
   folder whose every ``.jsonl`` file (and there is one at least) looks so, with no other
   text files beside them;
4. ``text``: a ``.jsonl`` file (any other chat JSONL), or a ``.txt``/``.md``/``.log``
   file with transcript markers;
5. ``files``: everything else, including folders that mix formats. A folder is never
   split between sources: mine each part with its own source when that is wanted.

Options are passed on to the chosen source (``chunk_size``/``chunk_overlap`` to the
conversation sources, ``max_file_bytes`` to ``files``); the choice is logged. Asked
whether its keys are ids (``keys_are_ids_for``), ``auto`` answers for the source it picks
for that path.
"""

from __future__ import annotations

import json
import logging
import re
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from palace_plugins.builtin.sources.chatgpt import EXPORT_FILE, ChatGPTSource
from palace_plugins.builtin.sources.claude_code import ClaudeCodeSource
from palace_plugins.builtin.sources.conversations import OPTIONS
from palace_plugins.builtin.sources.files import FilesSource
from palace_plugins.builtin.sources.reading import decode
from palace_plugins.builtin.sources.slack import CHANNEL_LISTS, SlackSource
from palace_plugins.builtin.sources.text import TextSource, transcript_turns
from palace_plugins.builtin.sources.tree import walk
from palace_plugins.factories import SourceFactory
from palace_retrievers.embedder import options_check
from palace_retrievers.errors import SourceError
from palace_retrievers.sources import Skipped, Source, SourceEntry

log = logging.getLogger(__name__)

SNIFF_BYTES = 64 * 1024
_DAY = re.compile(r"\d{4}-\d{2}-\d{2}\.json")
_TEXT_SUFFIXES = frozenset({".txt", ".md", ".log"})


def _head(path: Path) -> str:
    try:
        with path.open("rb") as stream:
            return decode(stream.read(SNIFF_BYTES))
    except OSError:
        return ""


def _first_record(path: Path) -> dict[str, Any] | None:
    for line in _head(path).splitlines():
        if line.strip():
            try:
                record = json.loads(line)
            except (ValueError, RecursionError):  # malformed, too deep, too long a number
                return None
            return record if isinstance(record, dict) else None
    return None


def _is_claude_code(path: Path) -> bool:
    record = _first_record(path)
    return record is not None and ("sessionId" in record or record.get("type") == "summary")


def _is_chatgpt_file(path: Path) -> bool:
    if path.name == EXPORT_FILE:
        return True
    if path.suffix.lower() == ".zip":
        try:
            with zipfile.ZipFile(path) as archive:
                return any(n.rsplit("/", 1)[-1] == EXPORT_FILE for n in archive.namelist())
        except (OSError, zipfile.BadZipFile):
            return False
    if path.suffix.lower() != ".json":
        return False
    try:
        item, _ = json.JSONDecoder().raw_decode(_head(path).lstrip().removeprefix("[").lstrip())
    except (ValueError, RecursionError):  # malformed, too deep, too long a number
        return False
    return isinstance(item, dict) and isinstance(item.get("mapping"), dict)


def _is_slack(folder: Path) -> bool:
    if not any((folder / name).is_file() for name in ("users.json", *CHANNEL_LISTS)):
        return False
    return any(
        _DAY.fullmatch(f.name)
        for d in folder.iterdir()
        if d.is_dir() and not d.name.startswith(".")
        for f in d.iterdir()
    )


def _is_slack_zip(path: Path) -> bool:
    """Whether ``path`` is a zip holding a Slack export: its lists and a channel's day
    file side by side, at the zip's top or in its one top folder."""
    if path.suffix.lower() != ".zip":
        return False
    try:
        with zipfile.ZipFile(path) as archive:
            names = [i.filename for i in archive.infolist() if not i.is_dir()]
    except (OSError, zipfile.BadZipFile):
        return False
    tops = {name.split("/", 1)[0] for name in names}
    prefixes = [""] + ([f"{tops.pop()}/"] if len(tops) == 1 else [])
    for prefix in prefixes:
        inside = [n.removeprefix(prefix) for n in names if n.startswith(prefix)]
        if any(n in ("users.json", *CHANNEL_LISTS) for n in inside) and any(
            n.count("/") == 1 and not n.startswith(".") and _DAY.fullmatch(n.split("/")[1])
            for n in inside
        ):
            return True
    return False


def _is_claude_code_folder(folder: Path) -> bool:
    logs = 0
    for found in walk(folder):
        if isinstance(found, Skipped):
            continue
        if found.suffix == ".jsonl":
            if not _is_claude_code(found):
                return False
            logs += 1
        elif found.suffix.lower() in _TEXT_SUFFIXES:
            return False
    return logs > 0


def detect(path: Path) -> str:
    """The name of the built-in source for ``path`` (see the module docstring)."""
    if path.is_dir():
        if (path / EXPORT_FILE).is_file():
            return "chatgpt"
        if _is_slack(path):
            return "slack"
        if _is_claude_code_folder(path):
            return "claude-code"
        return "files"
    if _is_chatgpt_file(path):
        return "chatgpt"
    if _is_slack_zip(path):
        return "slack"
    if path.suffix.lower() in {".jsonl", ".ndjson"}:
        return "claude-code" if _is_claude_code(path) else "text"
    if path.suffix.lower() in _TEXT_SUFFIXES and transcript_turns(_head(path).split("\n")):
        return "text"
    return "files"


SOURCES: dict[str, SourceFactory] = {
    "chatgpt": ChatGPTSource,
    "slack": SlackSource,
    "claude-code": ClaudeCodeSource,
    "text": TextSource,
    "files": FilesSource,
}


class AutoSource(Source):
    """Whichever built-in fits. Options: ``chunk_size``, ``chunk_overlap``, ``max_file_bytes``."""

    palace_settings = frozenset({"max_file_bytes", "chunk_size", "chunk_overlap"})

    def __init__(self, options: Mapping[str, Any]) -> None:
        options_check("source", "auto", options, {*OPTIONS, "max_file_bytes"})
        self._options = dict(options)

    def keys_are_ids_for(self, path: Path) -> bool:
        """Whether the source :meth:`scan` picks for ``path`` gives ids as keys."""
        target = path.expanduser()
        if not target.exists():
            return False  # scan says why there is nothing to mine
        return bool(getattr(SOURCES[detect(target.resolve())], "keys_are_ids", False))

    def scan(self, path: Path) -> Iterator[SourceEntry | Skipped]:
        target = path.expanduser()
        if not target.exists():
            raise SourceError(f"nothing to mine at {target}: no such file or directory")
        name = detect(target.resolve())
        log.info("auto: mining %s with the %r source", target, name)
        known = {"max_file_bytes"} if name == "files" else OPTIONS
        options = {k: v for k, v in self._options.items() if k in known}
        yield from SOURCES[name](options).scan(path)
