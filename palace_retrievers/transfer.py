"""Moving a palace, or auditing one: verbatim export (JSONL or Markdown) and import.

The JSONL export is one JSON object a line: a ``header``, then every ``drawer`` (all its
fields and metadata), every ``memory`` (its lifecycle fields and its whole ``history``),
the ``history`` of memories deleted since (kept for audit), and every ``triple`` of the
knowledge graph (with its validity interval). Vectors are not exported: they belong to
a model, and :func:`import_jsonl` embeds the texts again with the target palace's own.
Closets are derived from drawers and are rebuilt on import (from the drawers imported,
so they follow the drawers' owner checks).

Import is idempotent: a record already in the palace as exported is left alone (not
embedded again), a history event already there is not appended twice, and a triple
already known is merged, not repeated.

**Owners.** Import never writes into, or points at, another owner's records. A record
is skipped, and its id listed in ``conflicts``, when in the target:

- a drawer's id is another owner's drawer;
- a memory's id is another owner's memory, or the history of another owner's deleted
  memory; or one of its ``source_ids`` is another owner's drawer, or its
  ``superseded_by`` another owner's memory;
- a ``history`` record (the history of a deleted memory) is for the id of another
  owner's memory or deleted memory. Its events are appended to the history of the same
  owner's memory (or deleted memory) of that id, or kept as a deleted memory's history;
- a triple's ``source_drawer`` or ``source_memory`` is another owner's record. (A triple
  is filed in its owner's graph, so it never merges with another owner's facts.)

Inside the file the same holds: every event of a memory's history must be that memory's
and its owner's (else the record is bad), a ``history`` record's events must all have
one owner, and a record that points at a record of another owner in the same file
(a memory's source drawer, a history's memory, a triple's source) is skipped as bad.
What it points at may be missing everywhere (a drawer forgotten since): that is kept.

**Bad input.** The whole input is read and checked before anything is written, as the
owner checks above skip a record and file the rest: a bad record (not UTF-8, not JSON,
NaN or a number too large, not an object, an unknown type, a field missing or of the
wrong type, an unknown kind, status or event, a time that is not ISO-8601, an id
already used by a record of the same type earlier in the file) is skipped, with one
line naming its line number in ``rejected``, and every good record is filed. The file
as a whole is refused, with nothing written, when it cannot be read, is empty, or its
first line is not the ``palace-export`` header of a known version.

The Markdown export is for people: every record under headings, texts verbatim in
fences long enough that no text can close them. It is not read back.
"""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import IO, Any, Protocol

import numpy as np
import numpy.typing as npt

from palace_retrievers.embedder import unit_rows
from palace_retrievers.errors import BadRecordError, InvalidQueryError
from palace_retrievers.memory.checks import MAX_MEMORY_CHARS
from palace_retrievers.palace import Palace
from palace_retrievers.records import DRAWER_KIND, Drawer
from palace_retrievers.records.memories import (
    MEMORY_EVENTS,
    MEMORY_KINDS,
    MEMORY_ORIGINS,
    MEMORY_STATUSES,
    Memory,
    MemoryEvent,
)
from palace_retrievers.records.triples import Triple, entity_key, predicate_name

FORMAT = "palace-export"
VERSION = 1
RECORD_TYPES = ("header", "drawer", "memory", "history", "triple")

#: Export every owner's records (the default of :func:`export_records`).
EVERYONE = "*"


class Writer(Protocol):
    """Where an export is written: a text file, or anything with ``write(str)``."""

    def write(self, text: str, /) -> Any: ...


@dataclass(slots=True)
class ImportReport:
    """What :func:`import_jsonl` did.

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


# -- reading the palace ---------------------------------------------------------------


Keys = dict[str, list[str]]


def _owners_and_keys(palace: Palace) -> tuple[list[str], Keys, Keys]:
    """Every owner (stored form, ``""`` for unowned), the ids of memories whose history
    outlived them, and each owner's triple subject keys (see
    :meth:`~palace_retrievers.ledger.Ledger.owners_and_keys`)."""
    return palace.ledger.owners_and_keys()


def export_records(palace: Palace, *, user_id: str | None = EVERYONE) -> Iterator[dict[str, Any]]:
    """Every record of the palace as JSON-ready dicts, header first.

    Args:
        palace: The palace to export.
        user_id: Only this owner's records (``None``: only unowned ones); by default,
            :data:`EVERYONE`'s.
    """
    owners, orphans, subjects = _owners_and_keys(palace)
    if user_id != EVERYONE:
        owners = [o for o in owners if o == (user_id or "")]
    yield {
        "type": "header",
        "format": FORMAT,
        "version": VERSION,
        "exported_at": datetime.now(UTC).isoformat(),
        "palace": str(palace.path),
        "model": palace.ledger.get_meta("embedding_model"),
        "schema_version": palace.ledger.schema_version,
        "users": [o or None for o in owners],
    }
    wanted = set(owners)
    for batch in palace.ledger.iter_drawers(batch_size=256):
        for drawer in batch:
            if (drawer.user_id or "") in wanted:
                yield {"type": "drawer", **drawer.as_dict()}
    for owner in owners:
        memories = palace.ledger.list_memories(user_id=owner or None, statuses=None, limit=None)
        ordered = sorted(memories, key=lambda m: (m.created_at, m.id))
        for start in range(0, len(ordered), 500):  # their histories, one read per 500
            chunk = ordered[start : start + 500]
            histories = palace.ledger.memory_histories([m.id for m in chunk])
            for memory in chunk:
                history = [e.as_dict() for e in histories.get(memory.id, [])]
                yield {"type": "memory", **memory.as_dict(), "history": history}
        gone = orphans.get(owner, [])
        histories = palace.ledger.memory_histories(gone)
        for memory_id in gone:
            events = [e.as_dict() for e in histories.get(memory_id, [])]
            yield {"type": "history", "memory_id": memory_id, "events": events}
    for owner in owners:
        seen: set[str] = set()
        for key in subjects.get(owner, []):
            for triple in palace.ledger.triples_about(key, user_id=owner or None, as_of=None):
                if triple.id not in seen and triple.subject_key == key:
                    seen.add(triple.id)
                    yield {"type": "triple", **triple.as_dict()}


def write_jsonl(records: Iterable[Mapping[str, Any]], out: Writer) -> int:
    """Write ``records`` one JSON object a line; returns how many."""
    count = 0
    for record in records:
        out.write(json.dumps(record, ensure_ascii=False, sort_keys=False) + "\n")
        count += 1
    return count


# -- Markdown -------------------------------------------------------------------------


def _fence(text: str) -> str:
    """Text in a fence longer than any run of backticks inside it."""
    longest, run = 0, 0
    for char in text:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}text\n{text}\n{ticks}"


def _cell(value: Any) -> str:
    return str(value if value is not None else "").replace("|", "\\|").replace("\n", " ")


def write_markdown(records: Iterable[Mapping[str, Any]], out: Writer) -> int:
    """Write ``records`` (as :func:`export_records` yields them) as a Markdown document."""
    count = 0
    section = ""
    triples: list[Mapping[str, Any]] = []
    for record in records:
        kind = record["type"]
        if kind == "header":
            out.write(f"# Palace export: {record['palace']}\n\n")
            out.write(
                f"Exported {record['exported_at']} (format {record['format']} "
                f"{record['version']}, model {record['model']}).\n"
            )
            continue
        count += 1
        if kind == "triple":
            triples.append(record)
            continue
        heading = {"drawer": "Drawers", "memory": "Memories", "history": "Deleted memories"}[kind]
        if heading != section:
            section = heading
            out.write(f"\n## {heading}\n")
        if kind == "drawer":
            lines = f":{record['line_start']}-{record['line_end']}" if record["line_start"] else ""
            out.write(
                f"\n### {record['wing']} / {record['room']}: {record['source']}{lines}\n\n"
                f"- id: `{record['id']}`\n- user: {record['user_id'] or '(none)'}\n"
                f"- kind: {record['kind']}\n- filed: {record['filed_at']}\n"
                f"- content date: {record['content_date'] or ''}\n"
                f"- metadata: `{json.dumps(record['metadata'], ensure_ascii=False)}`\n\n"
                f"{_fence(record['text'])}\n"
            )
        elif kind == "memory":
            out.write(
                f"\n### {record['id']} ({record['kind']}, {record['status']})\n\n"
                f"{_fence(record['text'])}\n\n"
            )
            skip = {"id", "text", "kind", "status", "history", "type"}
            for name, value in record.items():
                if name not in skip:
                    out.write(f"- {name}: {json.dumps(value, ensure_ascii=False)}\n")
            _write_history(record["history"], out)
        else:
            out.write(f"\n### {record['memory_id']} (deleted)\n")
            _write_history(record["events"], out)
    if triples:
        out.write("\n## Knowledge graph\n\n")
        out.write("| user | subject | predicate | object | from | to | confidence | source |\n")
        out.write("|---|---|---|---|---|---|---|---|\n")
        for t in triples:
            cells = (
                t["user_id"],
                t["subject"],
                t["predicate"],
                t["object"],
                t["valid_from"],
                t["valid_to"],
                t["confidence"],
                t["source_drawer"] or t["source_memory"],
            )
            out.write("| " + " | ".join(_cell(c) for c in cells) + " |\n")
    return count


def _write_history(events: Sequence[Mapping[str, Any]], out: Writer) -> None:
    if not events:
        return
    out.write("\nHistory:\n\n")
    for e in events:
        change = " → ".join(s for s in (e["old_status"], e["new_status"]) if s)
        text = e["new_text"] or e["old_text"] or ""
        line = f"- {e['at']} **{e['event']}** {change}".rstrip()
        out.write(f"{line}: {json.dumps(text, ensure_ascii=False)}\n" if text else f"{line}\n")


# -- checking records -----------------------------------------------------------------


_MISSING: Any = object()
_MAX_INT = 2**63 - 1  # what both ledgers store in an integer column
_MAX_ID = 1_000
_SPOOL = 32 * 2**20  # bytes of checked records kept in memory before spilling to disk
_ENDED = ("superseded", "invalidated")


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _value(data: Mapping[str, Any], name: str, default: Any) -> Any:
    if name in data:
        return data[name]
    if default is _MISSING:
        raise BadRecordError(f"it has no {name!r}")
    return default


def _string(
    data: Mapping[str, Any],
    name: str,
    default: Any = _MISSING,
    *,
    nullable: bool = False,
    choices: Sequence[str] | None = None,
    nonempty: bool = False,
    limit: int | None = None,
) -> Any:
    value = _value(data, name, default)
    if value is None and nullable:
        return None
    if not isinstance(value, str):
        also = " or null" if nullable else ""
        raise BadRecordError(f"{name!r} must be a string{also}, not {_show(value)}")
    if choices is not None and value not in choices:
        raise BadRecordError(f"{name!r} is {value!r}, not one of: {', '.join(choices)}")
    if nonempty and not value.strip():
        raise BadRecordError(f"{name!r} is empty")
    if limit is not None and len(value) > limit:
        raise BadRecordError(f"{name!r} is {len(value)} characters long; the limit is {limit}")
    return value


def _id(data: Mapping[str, Any], name: str = "id", default: Any = _MISSING) -> Any:
    nullable = default is None
    return _string(data, name, default, nullable=nullable, nonempty=True, limit=_MAX_ID)


def _owner(data: Mapping[str, Any], name: str = "user_id") -> str | None:
    return _string(data, name, None, nullable=True) or None


def _integer(
    data: Mapping[str, Any], name: str, default: Any = _MISSING, *, nullable: bool = False
) -> Any:
    value = _value(data, name, default)
    if value is None and nullable:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX_INT:
        raise BadRecordError(
            f"{name!r} must be a whole number from 0 to 2**63-1, not {_show(value)}"
        )
    return value


def _number(
    data: Mapping[str, Any],
    name: str,
    default: Any = _MISSING,
    *,
    nullable: bool = False,
    unit: bool = False,
) -> Any:
    value = _value(data, name, default)
    if value is None and nullable:
        return None
    try:
        number = float(value) if isinstance(value, int | float) else math.nan
    except OverflowError:
        number = math.inf
    if isinstance(value, bool) or not math.isfinite(number) or (unit and not 0 <= number <= 1):
        what = "a number in [0, 1]" if unit else "a finite number"
        raise BadRecordError(f"{name!r} must be {what}, not {_show(value)}")
    return number


def _moment(
    data: Mapping[str, Any], name: str, default: Any = _MISSING, *, nullable: bool = False
) -> Any:
    value = _value(data, name, default)
    if value is None and nullable:
        return None
    if isinstance(value, datetime):  # a default
        return value
    try:
        if not isinstance(value, str):
            raise TypeError
        moment = datetime.fromisoformat(value)
        return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC)
    except (TypeError, ValueError, OverflowError):
        raise BadRecordError(f"{name!r} must be an ISO-8601 time, not {_show(value)}") from None


def _strings(data: Mapping[str, Any], name: str) -> tuple[str, ...]:
    value = _value(data, name, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise BadRecordError(f"{name!r} must be a list of non-empty strings, not {_show(value)}")
    return tuple(value)


def _mapping(data: Mapping[str, Any], name: str) -> dict[str, Any]:
    value = _value(data, name, {})
    if not isinstance(value, dict):
        raise BadRecordError(f"{name!r} must be a JSON object, not {_show(value)}")
    return value


def drawer_from(data: Mapping[str, Any]) -> Drawer:
    """A :class:`Drawer` from its exported dict.

    Raises:
        BadRecordError: a field is missing (``id``, ``text``, ``wing``, ``room``, ``source``,
            ``filed_at``; the others have defaults) or of the wrong type or range.
    """
    return Drawer(
        id=_id(data),
        text=_string(data, "text"),
        wing=_string(data, "wing"),
        room=_string(data, "room"),
        source=_string(data, "source"),
        chunk_index=_integer(data, "chunk_index", 0),
        line_start=_integer(data, "line_start", None, nullable=True),
        line_end=_integer(data, "line_end", None, nullable=True),
        source_mtime=_number(data, "source_mtime", None, nullable=True),
        normalize_version=_integer(data, "normalize_version", 0),
        filed_at=_moment(data, "filed_at"),
        content_date=_moment(data, "content_date", None, nullable=True),
        user_id=_owner(data),
        kind=_string(data, "kind", DRAWER_KIND, nonempty=True),
        metadata=_mapping(data, "metadata"),
    )


def memory_from(data: Mapping[str, Any]) -> Memory:
    """A :class:`Memory` from its exported dict (without its history).

    Raises:
        BadRecordError: a field is missing (``id``, ``text``, ``kind``, ``status``,
            ``created_at``; the others have defaults), of the wrong type, or not one of
            the known kinds, statuses or origins.
    """
    created = _moment(data, "created_at")
    return Memory(
        id=_id(data),
        text=_string(data, "text", nonempty=True, limit=MAX_MEMORY_CHARS),
        kind=_string(data, "kind", choices=MEMORY_KINDS),
        importance=_number(data, "importance", 1.0, unit=True),
        tags=_strings(data, "tags"),
        user_id=_owner(data),
        agent_id=_owner(data, "agent_id"),
        session_id=_owner(data, "session_id"),
        wing=_string(data, "wing", ""),
        room=_string(data, "room", ""),
        source_ids=_strings(data, "source_ids"),
        slot=_string(data, "slot", None, nullable=True),
        origin=_string(data, "origin", "explicit", choices=MEMORY_ORIGINS),
        created_at=created,
        updated_at=_moment(data, "updated_at", created),
        last_accessed=_moment(data, "last_accessed", None, nullable=True),
        access_count=_integer(data, "access_count", 0),
        expires_at=_moment(data, "expires_at", None, nullable=True),
        status=_string(data, "status", choices=MEMORY_STATUSES),
        superseded_by=_id(data, "superseded_by", None),
        status_at=_moment(data, "status_at", created),
        metadata=_mapping(data, "metadata"),
    )


def event_from(data: Any, memory_id: str | None = None) -> MemoryEvent:
    """A :class:`MemoryEvent` from its exported dict (its ``seq`` is the target's to give).

    ``memory_id``: the memory whose history holds it; the event must name that memory
    (or none, and gets it).

    Raises:
        BadRecordError: not an object, a field missing (``event``, ``at``) or wrong, or it
            names another memory.
    """
    if not isinstance(data, dict):
        raise BadRecordError(f"a history event must be a JSON object, not {_show(data)}")
    named = _id(data, "memory_id", _MISSING if memory_id is None else memory_id)
    if memory_id is not None and named != memory_id:
        raise BadRecordError(f"its history holds an event of another memory, {named!r}")
    statuses = MEMORY_STATUSES
    return MemoryEvent(
        memory_id=named,
        event=_string(data, "event", choices=MEMORY_EVENTS),
        at=_moment(data, "at"),
        user_id=_owner(data),
        old_text=_string(data, "old_text", None, nullable=True),
        new_text=_string(data, "new_text", None, nullable=True),
        old_status=_string(data, "old_status", None, nullable=True, choices=statuses),
        new_status=_string(data, "new_status", None, nullable=True, choices=statuses),
        detail=_mapping(data, "detail"),
        seq=0,
    )


def _history(data: Mapping[str, Any], name: str, memory_id: str) -> list[MemoryEvent]:
    events = _value(data, name, [] if name == "history" else _MISSING)
    if not isinstance(events, list):
        raise BadRecordError(f"{name!r} must be a list of history events, not {_show(events)}")
    return [event_from(e, memory_id) for e in events]


def triple_from(data: Mapping[str, Any]) -> Triple:
    """A :class:`Triple` from its exported dict.

    Raises:
        BadRecordError: a field is missing (``id``, ``subject``, ``predicate``, ``object``) or
            wrong, an entity or predicate is empty, or it ends before it starts.
    """
    values: dict[str, Any] = {
        "id": _id(data),
        "subject": _string(data, "subject"),
        "predicate": _string(data, "predicate"),
        "object": _string(data, "object"),
        "valid_from": _moment(data, "valid_from", None, nullable=True),
        "valid_to": _moment(data, "valid_to", None, nullable=True),
        "confidence": _number(data, "confidence", 1.0, unit=True),
        "source_drawer": _id(data, "source_drawer", None),
        "source_memory": _id(data, "source_memory", None),
        "user_id": _owner(data),
        "origin": _string(data, "origin", "explicit", nonempty=True),
        "ended_reason": _string(data, "ended_reason", None, nullable=True, choices=_ENDED),
    }
    created = _moment(data, "created_at", None, nullable=True)
    if created is not None:
        values["created_at"] = created
    try:
        values["subject_key"] = entity_key(values["subject"])
        values["object_key"] = entity_key(values["object"])
        values["predicate"] = predicate_name(values["predicate"])
    except InvalidQueryError as exc:
        raise BadRecordError(str(exc)) from None
    start, end = values["valid_from"], values["valid_to"]
    if start is not None and end is not None and end < start:
        raise BadRecordError(f"it ends ({end.isoformat()}) before it starts ({start.isoformat()})")
    return Triple(**values)


def _event_key(event: MemoryEvent) -> tuple[Any, ...]:
    return (
        event.event,
        event.at,
        event.old_text,
        event.new_text,
        event.old_status,
        event.new_status,
        json.dumps(dict(event.detail), sort_keys=True, default=str),
    )


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
            f"not a palace export: its header's format is {_show(record.get('format'))}, "
            f"not {FORMAT!r}"
        )
    version = record.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version != VERSION:
        raise InvalidQueryError(
            f"export format version {_show(version)} is not supported "
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


def _read(record: dict[str, Any]) -> tuple[Any, ...]:
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
        events = _history(record, "history", memory.id)
        if any(e.user_id != memory.user_id for e in events):
            raise BadRecordError("its history holds events of another owner")
        return memory, events
    if kind == "history":
        memory_id = _id(record, "memory_id")
        events = _history(record, "events", memory_id)
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
        named = f" {_show(name)}" if isinstance(name, str) else ""
        return f"line {line}: the {record['type']} record{named}"
    return f"line {line}"


def _first_reading(lines: Iterable[str | bytes], spool: IO[bytes]) -> dict[int, str]:
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
            also = f" (type {_show(kind)})" if kind is not None else ""
            rejected[number] = f"line {number}: not a palace export record{also}"
            continue
        try:
            entry = _entry(number, record["type"], _read(record))
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


# -- import ---------------------------------------------------------------------------


class _Importer:
    """Files checked records into a palace in batches, one writer lock for it all.

    Records wait in batches, and a batch of each kind is filed in the order drawers,
    memories, histories, triples, so that a record is checked against the target once
    what it points at in the file is there.
    """

    def __init__(self, palace: Palace, report: ImportReport, batch_size: int) -> None:
        self.palace = palace
        self.report = report
        self.batch_size = batch_size
        self.drawers: list[Drawer] = []
        self.memories: list[tuple[Memory, list[MemoryEvent]]] = []
        self.histories: list[tuple[str, str | None, list[MemoryEvent]]] = []
        self.triples: list[Triple] = []

    def _embed(self, items: Mapping[str, str]) -> dict[str, npt.NDArray[np.float32]]:
        """Id → unit vector of each text, embedded with the palace's model."""
        if not items:
            return {}
        embedder = self.palace.embedder
        vectors = unit_rows(
            embedder.embed_documents(list(items.values())),
            dimension=embedder.dimension,
            count=len(items),
        )
        self.report.embedded += len(items)
        return dict(zip(items, vectors, strict=True))

    def add(self, kind: str, objects: tuple[Any, ...]) -> None:
        if kind == "drawer":
            self.drawers.append(objects[0])
        elif kind == "memory":
            self.memories.append((objects[0], objects[1]))
        elif kind == "history":
            self.histories.append((objects[0], objects[1], objects[2]))
        else:
            self.triples.append(objects[0])
        waiting = len(self.drawers) + len(self.memories) + len(self.histories) + len(self.triples)
        if waiting >= self.batch_size:
            self.flush()

    def flush(self) -> None:
        self.flush_drawers()
        self.flush_memories()
        self.flush_histories()
        self.flush_triples()

    def _drawer_owners(self, ids: Iterable[str]) -> dict[str, str | None]:
        return {d.id: d.user_id for d in self.palace.ledger.get_drawers(list(dict.fromkeys(ids)))}

    def _memory_owners(self, ids: Iterable[str]) -> dict[str, str | None]:
        """Each id's owner in the target: a memory's, or its history's (deleted since)."""
        wanted = list(dict.fromkeys(ids))
        owners = {m.id: m.user_id for m in self.palace.ledger.get_memories(wanted)}
        for memory_id, events in self.palace.ledger.memory_histories(wanted).items():
            if events and memory_id not in owners:
                owners[memory_id] = events[0].user_id
        return owners

    def flush_drawers(self) -> None:
        batch, self.drawers = self.drawers, []
        if not batch:
            return
        ledger = self.palace.ledger
        existing = {d.id: d for d in ledger.get_drawers([d.id for d in batch])}
        fresh: list[Drawer] = []
        for drawer in batch:
            old = existing.get(drawer.id)
            if old is not None and old.user_id != drawer.user_id:
                self.report.conflicts.append(drawer.id)
            elif old is not None and old.as_dict() == drawer.as_dict():
                self.report.unchanged += 1
            else:
                fresh.append(drawer)
        if not fresh:
            return
        model = self.palace.embedder.model_name
        kept = ledger.drawer_vectors([d.id for d in fresh if d.id in existing])
        same_text = (
            {d.id for d in fresh if d.id in kept and existing[d.id].text == d.text}
            if ledger.get_meta("embedding_model") == model
            else set()
        )
        to_embed = [d for d in fresh if d.id not in same_text]
        vectors = self._embed({d.id: d.text for d in to_embed})
        vectors.update({i: kept[i] for i in same_text})
        self.palace._model.claim()
        ledger.upsert_drawers(fresh, np.stack([vectors[d.id] for d in fresh]), model=model)
        # Closets are derived: build them over the imported drawers as mining does.
        self.palace._filing.file_closets(fresh, [])
        self.report.drawers += len(fresh)

    def flush_memories(self) -> None:
        batch, self.memories = self.memories, []
        if not batch:
            return
        ledger = self.palace.ledger
        ids = [m.id for m, _ in batch]
        existing = {m.id: m for m in ledger.get_memories(ids)}
        histories = ledger.memory_histories(ids)
        drawers = self._drawer_owners(i for m, _ in batch for i in m.source_ids)
        successors = self._memory_owners(m.superseded_by for m, _ in batch if m.superseded_by)
        model = self.palace.embedder.model_name
        same_model = ledger.get_meta("embedding_model") == model
        kept = ledger.memory_vectors(list(existing)) if same_model else {}
        write: list[Memory] = []
        events: list[MemoryEvent] = []
        for memory, history in batch:
            had = histories.get(memory.id, [])
            old = existing.get(memory.id)
            owner = memory.user_id
            if (
                (old is not None and old.user_id != owner)
                or any(e.user_id != owner for e in had)
                or any(drawers.get(i, owner) != owner for i in memory.source_ids)
                or (memory.superseded_by and successors.get(memory.superseded_by, owner) != owner)
            ):
                self.report.conflicts.append(memory.id)
                continue
            keys = {_event_key(e) for e in had}
            new_events = [e for e in history if _event_key(e) not in keys]
            if old is not None and old.as_dict() == memory.as_dict() and not new_events:
                self.report.unchanged += 1
                continue
            write.append(memory)
            events.extend(new_events)
        if not write:
            return
        to_embed = [m for m in write if not (m.id in kept and existing[m.id].text == m.text)]
        vectors = self._embed({m.id: m.text for m in to_embed})
        vectors.update({m.id: kept[m.id] for m in write if m.id not in vectors})
        self.palace._model.claim()
        ledger.save_memories(write, vectors=vectors, model=model, events=events)
        self.report.memories += len(write)
        self.report.events += len(events)

    def flush_histories(self) -> None:
        """The histories of memories deleted since (kept for audit): appended to the
        history of the same owner's memory (or deleted memory) of that id, or kept alone;
        never to another owner's."""
        batch, self.histories = self.histories, []
        if not batch:
            return
        ledger = self.palace.ledger
        ids = [memory_id for memory_id, _, _ in batch]
        owners = {m.id: m.user_id for m in ledger.get_memories(ids)}
        histories = ledger.memory_histories(ids)
        new: list[MemoryEvent] = []
        for memory_id, owner, events in batch:
            had = histories.get(memory_id, [])
            if owners.get(memory_id, owner) != owner or any(e.user_id != owner for e in had):
                self.report.conflicts.append(memory_id)
                continue
            keys = {_event_key(e) for e in had}
            new.extend(e for e in events if _event_key(e) not in keys)
        if new:
            ledger.save_memories([], events=new)
            self.report.events += len(new)

    def flush_triples(self) -> None:
        batch, self.triples = self.triples, []
        if not batch:
            return
        drawers = self._drawer_owners(t.source_drawer for t in batch if t.source_drawer)
        memories = self._memory_owners(t.source_memory for t in batch if t.source_memory)
        for triple in batch:
            owner = triple.user_id
            if (triple.source_drawer and drawers.get(triple.source_drawer, owner) != owner) or (
                triple.source_memory and memories.get(triple.source_memory, owner) != owner
            ):
                self.report.conflicts.append(triple.id)
                continue
            self.palace.ledger.add_triple(triple, single_valued=False)
            self.report.triples += 1


def import_jsonl(
    palace: Palace, lines: Iterable[str | bytes], *, batch_size: int = 256
) -> ImportReport:
    """File the records of a JSONL export into ``palace``, embedding with its model.

    ``lines``: the export's lines, as text or as UTF-8 bytes (a file opened ``"rb"``,
    whose lines are then decoded one by one, so that one bad byte costs one record).

    The whole input is read and checked before anything is written (see the module's
    documentation for what is skipped and what refuses the file). Safe to run twice:
    what is already there as exported is left alone.

    Raises:
        InvalidQueryError: the input is not a palace export (empty, its first line not a
            ``palace-export`` header of a known version) or cannot be read; nothing is
            written.
        PalaceBusyError: another process is writing to the palace.
    """
    report = ImportReport()
    with tempfile.SpooledTemporaryFile(max_size=_SPOOL, mode="w+b") as spool:
        rejected = _first_reading(lines, spool)
        report.rejected = list(rejected.values())
        spool.seek(0)
        importer = _Importer(palace, report, batch_size)
        with palace.writing("import"):
            try:
                for raw in spool:
                    number, _, data = raw.partition(b"\t")
                    if int(number) in rejected:
                        continue
                    record = json.loads(data)
                    importer.add(record["type"], _read(record))
                importer.flush()
            finally:
                palace._writer.sync_index()
    return report


__all__ = [
    "EVERYONE",
    "FORMAT",
    "VERSION",
    "BadRecordError",
    "ImportReport",
    "export_records",
    "import_jsonl",
    "write_jsonl",
    "write_markdown",
]
