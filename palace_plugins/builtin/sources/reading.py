"""Reading raw exports tolerantly: bytes to text, JSON and JSONL records, bad records.

Real exports are messy: a line cut in half by a crash, a file saved as Latin-1, a JSON
array truncated by an interrupted unzip. The sources read them with the functions here so
that one bad record never costs the good ones:

- :func:`decode` turns bytes into text, honouring a UTF-8 or UTF-16 byte-order mark and
  replacing undecodable bytes (U+FFFD) rather than failing.
- :func:`jsonl_records` yields each JSON object of a JSONL file with its line number; a
  malformed line is noted in :class:`Problems` as ``file:line`` and the rest is read.
  :func:`file_lines` streams a file's lines to it, hashing them on the way, so that a
  large log is never held whole in memory.
- :func:`array_items` yields the items of a top-level JSON array one by one, so a file
  truncated or corrupted half-way still gives every item before the damage.

A record nested deeper than Python's JSON parser goes (it recurses), or holding a number
too long to convert, is well-formed JSON that cannot be read: it is noted like a malformed
one, and in an array the items after it are still read.

:class:`Problems` collects those notes while an entry is read; :func:`reported` makes a
source's ``scan`` yield them as :class:`~palace_retrievers.sources.Skipped` notes right
after the entry they came from, so they reach the mine report without any change to the
miner. Each note is also logged as a warning.
"""

from __future__ import annotations

import codecs
import json
import logging
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from palace_retrievers.errors import SourceError
from palace_retrievers.sources import Skipped, SourceEntry

log = logging.getLogger(__name__)

_BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


def decode(data: bytes) -> str:
    """``data`` as text: UTF-8 (or UTF-16 with a byte-order mark), bad bytes replaced."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return data[len(bom) :].decode(encoding, errors="replace")
    return data.decode("utf-8", errors="replace")


def read_bytes(path: Path) -> bytes:
    """The bytes of ``path``.

    Raises:
        SourceError: the file cannot be read.
    """
    try:
        return path.read_bytes()
    except OSError as exc:
        raise SourceError(f"cannot read {path}: {exc.strerror or exc}") from None


class Problems:
    """Bad records found while reading, waiting to be reported as ``Skipped`` notes."""

    def __init__(self) -> None:
        self._pending: list[Skipped] = []
        self.total = 0
        """How many problems were noted, drained or not."""

    def add(self, location: str, reason: str) -> None:
        """Note that the record at ``location`` (e.g. ``file:line``) was passed over."""
        log.warning("%s: %s", location, reason)
        self._pending.append(Skipped(location, reason))
        self.total += 1

    def drain(self) -> list[Skipped]:
        """The notes gathered since the last drain."""
        pending, self._pending = self._pending, []
        return pending


def reported(
    entries: Iterable[SourceEntry | Skipped], problems: Problems
) -> Iterator[SourceEntry | Skipped]:
    """``entries``, each followed by the problems found since (e.g. while it was read).

    The miner reads an entry before it asks for the next one, so the notes of an entry
    follow it; whatever is still pending when the entries end is yielded last.
    """
    for entry in entries:
        yield from problems.drain()
        yield entry
    yield from problems.drain()


def file_lines(path: Path, feed: Callable[[bytes], object]) -> Iterator[bytes]:
    """The lines of the file at ``path``, read as a stream; ``feed`` gets every raw byte.

    Pass ``hashlib.sha256().update`` as ``feed`` to hash the file while it is read. A
    UTF-16 file (one with a byte-order mark) is read whole and given as UTF-8 lines.

    Raises:
        SourceError: the file cannot be read.
    """
    try:
        with path.open("rb") as stream:
            head = stream.read(2)
            if head in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE):
                data = head + stream.read()
                feed(data)
                yield from (line.encode("utf-8") for line in decode(data).split("\n"))
                return
            stream.seek(0)
            for line in stream:
                feed(line)
                yield line
    except OSError as exc:
        raise SourceError(f"cannot read {path}: {exc.strerror or exc}") from None


def jsonl_records(
    lines: Iterable[bytes], location: str, problems: Problems
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Every JSON object of a JSONL file's ``lines``, with its 1-based line number.

    Blank lines are ignored. A line that is not valid JSON, or not a JSON object, is
    noted as ``location:line`` in ``problems`` and skipped. Bytes that are not UTF-8 are
    replaced.
    """
    for number, raw in enumerate(lines, start=1):
        line = decode(raw)
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.add(
                f"{location}:{number}", f"malformed JSON line ({exc.msg}, column {exc.colno})"
            )
            continue
        except (ValueError, RecursionError) as exc:
            problems.add(f"{location}:{number}", f"unreadable JSON line ({unreadable(exc)})")
            continue
        if not isinstance(record, dict):
            problems.add(f"{location}:{number}", "not a JSON object")
            continue
        yield number, record


@dataclass(frozen=True, slots=True)
class Item:
    """One item of a JSON array: its index (from 0), its lines (1-based) and its value."""

    index: int
    line_start: int
    line_end: int
    value: Any


def array_items(text: str, location: str, problems: Problems) -> Iterator[Item]:
    """The items of the JSON array ``text``, one at a time.

    Raises:
        SourceError: ``text`` is not a JSON array at all.

    Damage part-way (a truncated file, a stray character) is noted in ``problems`` with
    its line and column; the items before it are still yielded.
    """
    decoder = json.JSONDecoder()
    at = _skip_space(text, 0)
    if at >= len(text) or text[at] != "[":
        what = "an empty file" if at >= len(text) else f"{text[at]!r} at the start"
        raise SourceError(f"{location} is not a JSON array ({what})")
    at = _skip_space(text, at + 1)
    line, counted = 1, 0  # the line of position `counted`, kept up to date as we go
    index = 0
    if at < len(text) and text[at] == "]":
        return
    while True:
        line += text.count("\n", counted, at)
        start, counted = line, at
        try:
            value, at = decoder.raw_decode(text, at)
        except json.JSONDecodeError as exc:
            problems.add(
                f"{location}:{exc.lineno}:{exc.colno}",
                f"malformed JSON ({exc.msg}); item {index} and everything after it skipped",
            )
            return
        except (ValueError, RecursionError) as exc:
            end = value_end(text, at)
            column = at - (text.rfind("\n", 0, at) + 1) + 1
            if end is None:
                problems.add(
                    f"{location}:{start}:{column}",
                    f"unreadable JSON ({unreadable(exc)}); item {index} and everything "
                    "after it skipped",
                )
                return
            problems.add(f"{location}:{start}:{column}", f"item {index} skipped: {unreadable(exc)}")
            at = end
        else:
            line += text.count("\n", counted, at)
            counted = at
            yield Item(index, start, line, value)
        index += 1
        at = _skip_space(text, at)
        if at < len(text) and text[at] == ",":
            at = _skip_space(text, at + 1)
            continue
        if at < len(text) and text[at] == "]":
            return
        line += text.count("\n", counted, at)
        counted = at
        column = at - (text.rfind("\n", 0, at) + 1) + 1
        problems.add(
            f"{location}:{line}:{column}",
            f"malformed JSON (expected ',' or ']'); everything after item {index - 1} skipped",
        )
        return


def unreadable(exc: Exception) -> str:
    """Why well-formed JSON could not be read: too deep, or a number too long."""
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    if "digits" in str(exc):
        return "a number too long to read"
    return str(exc).split(";")[0]


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_STRUCTURE = re.compile(r'["\[\]{}]')
_SCALAR_END = re.compile(r"[\s,\]}]")


def value_end(text: str, at: int) -> int | None:
    """Where the JSON value starting at ``at`` ends, found without recursing (so at any
    depth), or ``None`` when it never closes. The value is not checked, only delimited."""
    if at >= len(text):
        return None
    if text[at] not in "[{":
        if text[at] == '"':
            match = _STRING.match(text, at)
            return match.end() if match else None
        scalar = _SCALAR_END.search(text, at)
        return scalar.start() if scalar else len(text)
    depth = 0
    position = at
    while found := _STRUCTURE.search(text, position):
        char = found.group()
        if char == '"':
            match = _STRING.match(text, found.start())
            if match is None:
                return None
            position = match.end()
            continue
        depth += 1 if char in "[{" else -1
        position = found.end()
        if depth == 0:
            return position
    return None


def _skip_space(text: str, at: int) -> int:
    while at < len(text) and text[at] in " \t\r\n":
        at += 1
    return at
