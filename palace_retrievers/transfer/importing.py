"""Reading an export: every record read and checked before anything is filed.

:func:`first_reading` checks a whole export, and :func:`objects_of` turns a good record
into what the palace files
(:meth:`~palace_retrievers.palace.Palace.import_jsonl` files them, owner by owner). See
:mod:`palace_retrievers.transfer` for what is checked and what is skipped.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import IO, Any

from palace_retrievers.errors import BadRecordError, InvalidQueryError
from palace_retrievers.records import Drawer
from palace_retrievers.records.memories import Memory
from palace_retrievers.records.triples import Triple
from palace_retrievers.transfer.export import FORMAT, RECORD_TYPES, VERSION
from palace_retrievers.transfer.records import (
    drawer_from,
    history_of,
    memory_from,
    record_id,
    shown,
    triple_from,
)

#: Bytes of checked records kept in memory before spilling to disk.
SPOOL = 32 * 2**20


@dataclass(slots=True)
class ImportReport:
    """What :meth:`~palace_retrievers.palace.Palace.import_jsonl` did.

    Attributes:
        drawers: Drawers written (new, or changed since they were last imported).
        memories: Memories written (new or changed).
        events: History events appended.
        triples: Triples read (each filed, or merged with the same fact already known).
        unchanged: Drawers and memories already there exactly as exported.
        embedded: Texts embedded with the target's model.
        conflicts: Ids of records skipped because they would overwrite, or point at,
            another owner's records in the target (drawers, memories, deleted memories'
            histories by memory id, triples).
        rejected: Why each bad record was skipped, one line each, starting
            ``line N:`` (its line in the file).
    """

    drawers: int = 0
    memories: int = 0
    events: int = 0
    triples: int = 0
    unchanged: int = 0
    embedded: int = 0
    conflicts: list[str] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)


# -- reading an export ----------------------------------------------------------------


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"{text} is too large a number")
    return number


def _parse(line: str | bytes) -> Any:
    """One line as JSON (strict: no NaN or infinities, no number too long to read).

    Raises:
        BadRecordError: not UTF-8, not JSON, or text JSON cannot be UTF-8 (a lone surrogate).
    """
    if isinstance(line, bytes):
        try:
            line = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BadRecordError(f"not UTF-8 text (byte {exc.start + 1})") from None
    try:
        record = json.loads(line, parse_constant=_no_constant, parse_float=_finite)
        json.dumps(record, ensure_ascii=False).encode("utf-8")
    except json.JSONDecodeError as exc:
        raise BadRecordError(f"not JSON: {exc.msg} (column {exc.colno})") from None
    except UnicodeEncodeError:
        raise BadRecordError("it holds text that is not valid Unicode (a lone surrogate)") from None
    except (ValueError, RecursionError) as exc:
        raise BadRecordError(
            f"not JSON this import reads: {str(exc)[:80] or 'nested too deep'}"
        ) from None
    return record


def _check_header(record: Any) -> None:
    if not isinstance(record, dict) or record.get("type") != "header":
        raise InvalidQueryError(
            "not a palace export: its first line must be the palace-export header "
            "that `palace export --format jsonl` writes"
        )
    if record.get("format") != FORMAT:
        raise InvalidQueryError(
            f"not a palace export: its header's format is {shown(record.get('format'))}, "
            f"not {FORMAT!r}"
        )
    version = record.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version != VERSION:
        raise InvalidQueryError(
            f"export format version {shown(version)} is not supported "
            f"(this palace reads version {VERSION})"
        )


@dataclass(slots=True)
class _Entry:
    """What the first reading keeps of a good record: enough to check its references."""

    line: int
    kind: str
    id: str
    owner: str | None
    refs: list[tuple[str, str]]  # (drawer or memory, id) it points at


def objects_of(record: dict[str, Any]) -> tuple[Any, ...]:
    """The objects of one record: ``(Drawer,)``, ``(Memory, events)``, ``(memory id,
    owner, events)`` or ``(Triple,)``.

    Raises:
        BadRecordError: the record is malformed.
    """
    kind = record["type"]
    if kind == "drawer":
        return (drawer_from(record),)
    if kind == "memory":
        memory = memory_from(record)
        events = history_of(record, "history", memory.id)
        if any(e.user_id != memory.user_id for e in events):
            raise BadRecordError("its history holds events of another owner")
        return memory, events
    if kind == "history":
        memory_id = record_id(record, "memory_id")
        events = history_of(record, "events", memory_id)
        owners = {e.user_id for e in events}
        if len(owners) > 1:
            raise BadRecordError("its events name more than one owner")
        return memory_id, next(iter(owners), None), events
    return (triple_from(record),)


def _entry(line: int, kind: str, objects: tuple[Any, ...]) -> _Entry:
    if kind == "drawer":
        drawer: Drawer = objects[0]
        return _Entry(line, kind, drawer.id, drawer.user_id, [])
    if kind == "memory":
        memory: Memory = objects[0]
        refs = [("drawer", i) for i in memory.source_ids]
        if memory.superseded_by:
            refs.append(("memory", memory.superseded_by))
        return _Entry(line, kind, memory.id, memory.user_id, refs)
    if kind == "history":
        return _Entry(line, kind, objects[0], objects[1], [])
    triple: Triple = objects[0]
    refs = [("drawer", triple.source_drawer)] if triple.source_drawer else []
    if triple.source_memory:
        refs.append(("memory", triple.source_memory))
    return _Entry(line, kind, triple.id, triple.user_id, refs)


def _what(line: int, record: Any) -> str:
    if isinstance(record, dict) and record.get("type") in RECORD_TYPES:
        name = record.get("id", record.get("memory_id"))
        named = f" {shown(name)}" if isinstance(name, str) else ""
        return f"line {line}: the {record['type']} record{named}"
    return f"line {line}"


def first_reading(lines: Iterable[str | bytes], spool: IO[bytes]) -> dict[int, str]:
    """Check every record of an export, write the good ones to ``spool`` (a line number,
    a tab and the record's JSON, a line each) and return why each bad one is skipped, by
    line (a record found bad only once the whole file is read, by a reference to another
    owner's record in it, is in ``spool`` too: skip it).

    Raises:
        InvalidQueryError: the file as a whole is not an export, or cannot be read.
    """
    rejected: dict[int, str] = {}
    entries: list[_Entry] = []
    seen: dict[tuple[str, str], int] = {}  # (kind, id) → line
    header = False
    number = 0
    iterator = iter(lines)
    while True:
        try:
            line = next(iterator)
        except StopIteration:
            break
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidQueryError(
                f"the export cannot be read after line {number}: {exc}"
            ) from None
        number += 1
        if not line.strip():
            continue
        try:
            record = _parse(
                line.rstrip(b"\r\n") if isinstance(line, bytes) else line.rstrip("\r\n")
            )
        except BadRecordError as exc:
            if not header:
                raise InvalidQueryError(f"line {number} is {exc}: not a palace export") from None
            rejected[number] = f"line {number}: {exc}"
            continue
        if not header:
            _check_header(record)
            header = True
            continue
        if not isinstance(record, dict) or record.get("type") not in RECORD_TYPES[1:]:
            kind = record.get("type") if isinstance(record, dict) else None
            also = f" (type {shown(kind)})" if kind is not None else ""
            rejected[number] = f"line {number}: not a palace export record{also}"
            continue
        try:
            entry = _entry(number, record["type"], objects_of(record))
        except BadRecordError as exc:
            rejected[number] = f"{_what(number, record)} is skipped: {exc}"
            continue
        twin = seen.get((entry.kind, entry.id))
        if twin is not None:
            rejected[number] = f"{_what(number, record)} is skipped: line {twin} has its id"
            continue
        seen[(entry.kind, entry.id)] = number
        entries.append(entry)
        data = json.dumps(record, ensure_ascii=False)
        spool.write(f"{number}\t{data}\n".encode())
    if not header:
        raise InvalidQueryError("the export is empty: not even a header")
    # References inside the file never go from one owner's record to another's.
    owners: dict[tuple[str, str], str | None] = {}
    for entry in sorted(entries, key=lambda e: e.kind == "history"):
        owners.setdefault(
            ("memory" if entry.kind == "history" else entry.kind, entry.id), entry.owner
        )
    for entry in entries:
        pointed = [("memory", entry.id)] if entry.kind == "history" else []
        for target in [*pointed, *entry.refs]:
            if target in owners and owners[target] != entry.owner:
                rejected[entry.line] = (
                    f"line {entry.line}: the {entry.kind} record {entry.id!r} is skipped: "
                    f"the {target[0]} {target[1]!r} in this file belongs to another owner"
                )
                break
    return dict(sorted(rejected.items()))
