"""Triples as table rows, and how a new triple is filed: what both SQL ledgers share.

A SQL ledger stores a :class:`~palace_retrievers.records.triples.Triple` as one row of
:data:`TRIPLE_COLUMNS`; the dialects differ in how a time is written (SQLite: an
ISO-8601 string; PostgreSQL: ``timestamptz``) and in their SQL. What a new triple does to
the triples already filed (merged into one, ends another, or is inserted, perhaps already
ended) is decided here, on records, by :func:`file_single_valued` and :func:`merged`;
each ledger only reads the rows it needs and carries the decision out in its own
transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from palace_retrievers.ids import digest
from palace_retrievers.records.triples import Triple

TRIPLE_COLUMNS = (
    "id, subject, predicate, object, valid_from, valid_to, confidence, source_drawer, "
    "source_memory, user_id, origin, created_at, ended_reason, subject_key, object_key"
)


def triple_from_row(row: Sequence[Any], when: Callable[[Any], datetime | None]) -> Triple:
    """The triple of a row of :data:`TRIPLE_COLUMNS` (``when`` reads a stored time)."""
    return Triple(
        id=row[0],
        subject=row[1],
        predicate=row[2],
        object=row[3],
        valid_from=when(row[4]),
        valid_to=when(row[5]),
        confidence=float(row[6]),
        source_drawer=row[7],
        source_memory=row[8],
        user_id=row[9] or None,
        origin=row[10],
        created_at=when(row[11]) or datetime.now(UTC),
        ended_reason=row[12],
        subject_key=row[13],
        object_key=row[14],
    )


def triple_row(t: Triple, owner: str, when: Callable[[datetime | None], Any]) -> tuple[Any, ...]:
    """The row of :data:`TRIPLE_COLUMNS` for ``t`` filed under ``owner``."""
    return (
        t.id,
        t.subject,
        t.predicate,
        t.object,
        when(t.valid_from),
        when(t.valid_to),
        t.confidence,
        t.source_drawer,
        t.source_memory,
        owner,
        t.origin,
        when(t.created_at),
        t.ended_reason,
        t.subject_key,
        t.object_key,
    )


def iso(value: datetime | None) -> str | None:
    """A time as the SQLite ledger stores it, and as it goes into a triple's id."""
    return None if value is None else value.astimezone(UTC).isoformat(timespec="microseconds")


def triple_id(owner: str, triple: Triple, seen: int) -> str:
    """The id of the ``seen``-th triple filed with this owner, subject, predicate and
    object: the same in every ledger, so that an exported graph keeps its ids."""
    return "kg_" + digest(
        owner,
        triple.subject_key,
        triple.predicate,
        triple.object_key,
        iso(triple.valid_from) or "",
        str(seen),
    )


def holds(triple: Triple, at: datetime) -> bool:
    """Whether ``triple`` holds at ``at`` (``valid_from <= at < valid_to``)."""
    started = triple.valid_from is None or triple.valid_from <= at
    return started and (triple.valid_to is None or at < triple.valid_to)


def merged(kept: Triple, again: Triple) -> Triple:
    """The same fact filed again: ``kept`` stays, with the higher confidence, the earliest
    known start (an unknown start never hides a known one) and any source it lacked."""
    starts = [t.valid_from for t in (kept, again) if t.valid_from is not None]
    return replace(
        kept,
        valid_from=min(starts, default=None),
        confidence=max(kept.confidence, again.confidence),
        source_drawer=kept.source_drawer or again.source_drawer,
        source_memory=kept.source_memory or again.source_memory,
    )


@dataclass(frozen=True)
class Filing:
    """What filing a triple does: end the triples ``ended`` at ``at``, then either merge
    ``again`` into ``kept`` or insert ``insert`` (exactly one of the two)."""

    ended: list[str] = field(default_factory=list)
    at: datetime | None = None
    kept: Triple | None = None
    again: Triple | None = None
    insert: Triple | None = None


def file_single_valued(sequence: Sequence[Triple], triple: Triple, now: datetime) -> Filing:
    """File an open triple of a single-valued predicate into its subject's sequence of
    values (``sequence``: every triple of that owner, subject and predicate), which is
    ordered by start whatever order the values arrive in.

    A triple with no start begins ``now`` unless its value is the open one (merged) or
    it is the first value (inserted as is). The value holding at the new start ends
    there (``superseded``) unless it is this very value, which is merged with its
    interval unchanged; the new triple ends where the next known start begins, or is
    merged into that next value when it is the same.
    """
    start = triple.valid_from
    if start is None:
        holding = [t for t in sequence if t.is_open and t.object_key == triple.object_key]
        if holding:
            return Filing(kept=holding[0], again=triple)
        if not sequence:
            return Filing(insert=triple)
        start = now
    restated = [t for t in sequence if t.object_key == triple.object_key and holds(t, start)]
    if restated:
        return Filing(kept=restated[0], again=replace(triple, valid_from=None))
    ended = [t.id for t in sequence if holds(t, start)]
    filed = replace(triple, valid_from=start)
    later = [t for t in sequence if t.valid_from is not None and t.valid_from > start]
    if later:
        following = min(later, key=lambda t: t.valid_from or start)
        if following.object_key == triple.object_key:
            # The next known value is this one: it held from the earlier start.
            return Filing(ended=ended, at=start, kept=following, again=filed)
        # The graph already knows what came next: this value is history, ended by it.
        filed = replace(filed, valid_to=following.valid_from, ended_reason="superseded")
    return Filing(ended=ended, at=start, insert=filed)
