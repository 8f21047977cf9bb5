"""Checking one exported record: each field of the type it must have, or a bad record.

A bad record raises :class:`~palace_retrievers.errors.BadRecordError` with a message
that names the field; the import skips it and goes on. See
:mod:`palace_retrievers.transfer`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from palace_retrievers.errors import BadRecordError, InvalidQueryError
from palace_retrievers.memory.checks import MAX_MEMORY_CHARS
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

# -- checking records -----------------------------------------------------------------


MISSING: Any = object()
_MAX_INT = 2**63 - 1  # what both ledgers store in an integer column
_MAX_ID = 1_000
_ENDED = ("superseded", "invalidated")


def shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _value(data: Mapping[str, Any], name: str, default: Any) -> Any:
    if name in data:
        return data[name]
    if default is MISSING:
        raise BadRecordError(f"it has no {name!r}")
    return default


def _string(
    data: Mapping[str, Any],
    name: str,
    default: Any = MISSING,
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
        raise BadRecordError(f"{name!r} must be a string{also}, not {shown(value)}")
    if choices is not None and value not in choices:
        raise BadRecordError(f"{name!r} is {value!r}, not one of: {', '.join(choices)}")
    if nonempty and not value.strip():
        raise BadRecordError(f"{name!r} is empty")
    if limit is not None and len(value) > limit:
        raise BadRecordError(f"{name!r} is {len(value)} characters long; the limit is {limit}")
    return value


def record_id(data: Mapping[str, Any], name: str = "id", default: Any = MISSING) -> Any:
    nullable = default is None
    return _string(data, name, default, nullable=nullable, nonempty=True, limit=_MAX_ID)


def _owner(data: Mapping[str, Any], name: str = "user_id") -> str | None:
    return _string(data, name, None, nullable=True) or None


def _integer(
    data: Mapping[str, Any], name: str, default: Any = MISSING, *, nullable: bool = False
) -> Any:
    value = _value(data, name, default)
    if value is None and nullable:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX_INT:
        raise BadRecordError(
            f"{name!r} must be a whole number from 0 to 2**63-1, not {shown(value)}"
        )
    return value


def _number(
    data: Mapping[str, Any],
    name: str,
    default: Any = MISSING,
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
        raise BadRecordError(f"{name!r} must be {what}, not {shown(value)}")
    return number


def _moment(
    data: Mapping[str, Any], name: str, default: Any = MISSING, *, nullable: bool = False
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
        raise BadRecordError(f"{name!r} must be an ISO-8601 time, not {shown(value)}") from None


def _strings(data: Mapping[str, Any], name: str) -> tuple[str, ...]:
    value = _value(data, name, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise BadRecordError(f"{name!r} must be a list of non-empty strings, not {shown(value)}")
    return tuple(value)


def _mapping(data: Mapping[str, Any], name: str) -> dict[str, Any]:
    value = _value(data, name, {})
    if not isinstance(value, dict):
        raise BadRecordError(f"{name!r} must be a JSON object, not {shown(value)}")
    return value


def drawer_from(data: Mapping[str, Any]) -> Drawer:
    """A :class:`Drawer` from its exported dict.

    Raises:
        BadRecordError: a field is missing (``id``, ``text``, ``wing``, ``room``, ``source``,
            ``filed_at``; the others have defaults) or of the wrong type or range.
    """
    return Drawer(
        id=record_id(data),
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
        id=record_id(data),
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
        superseded_by=record_id(data, "superseded_by", None),
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
        raise BadRecordError(f"a history event must be a JSON object, not {shown(data)}")
    named = record_id(data, "memory_id", MISSING if memory_id is None else memory_id)
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


def history_of(data: Mapping[str, Any], name: str, memory_id: str) -> list[MemoryEvent]:
    events = _value(data, name, [] if name == "history" else MISSING)
    if not isinstance(events, list):
        raise BadRecordError(f"{name!r} must be a list of history events, not {shown(events)}")
    return [event_from(e, memory_id) for e in events]


def triple_from(data: Mapping[str, Any]) -> Triple:
    """A :class:`Triple` from its exported dict.

    Raises:
        BadRecordError: a field is missing (``id``, ``subject``, ``predicate``, ``object``) or
            wrong, an entity or predicate is empty, or it ends before it starts.
    """
    values: dict[str, Any] = {
        "id": record_id(data),
        "subject": _string(data, "subject"),
        "predicate": _string(data, "predicate"),
        "object": _string(data, "object"),
        "valid_from": _moment(data, "valid_from", None, nullable=True),
        "valid_to": _moment(data, "valid_to", None, nullable=True),
        "confidence": _number(data, "confidence", 1.0, unit=True),
        "source_drawer": record_id(data, "source_drawer", None),
        "source_memory": record_id(data, "source_memory", None),
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


def event_key(event: MemoryEvent) -> tuple[Any, ...]:
    return (
        event.event,
        event.at,
        event.old_text,
        event.new_text,
        event.old_status,
        event.new_status,
        json.dumps(dict(event.detail), sort_keys=True, default=str),
    )
