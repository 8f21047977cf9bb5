"""Moving a palace, or auditing one: verbatim export (JSONL or Markdown) and import.

The format: :mod:`.export` writes an export, :mod:`.records` checks each record of one,
and :mod:`.importing` reads one whole and checks it. The palace reads and files the
records itself (:meth:`Palace.export_records <palace_retrievers.palace.Palace.export_records>`,
:meth:`Palace.import_jsonl <palace_retrievers.palace.Palace.import_jsonl>`, through
:class:`~palace_retrievers.facade.transfer.Transfer`); :func:`export_records` and
:func:`import_jsonl` here are their older names, which take the palace as an argument.

The JSONL export is one JSON object a line: a ``header``, then every ``drawer`` (all its
fields and metadata), every ``memory`` (its lifecycle fields and its whole ``history``),
the ``history`` of memories deleted since (kept for audit), and every ``triple`` of the
knowledge graph (with its validity interval). Vectors are not exported: they belong to
a model, and the import embeds the texts again with the target palace's own.
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

from collections.abc import Iterable, Iterator
from typing import Any, Protocol

from palace_retrievers.errors import BadRecordError
from palace_retrievers.transfer.export import (
    EVERYONE,
    FORMAT,
    RECORD_TYPES,
    VERSION,
    write_jsonl,
    write_markdown,
)
from palace_retrievers.transfer.importing import ImportReport
from palace_retrievers.transfer.records import drawer_from, event_from, memory_from, triple_from


class Transferable(Protocol):
    """What exports and imports records: a :class:`~palace_retrievers.palace.Palace`."""

    def export_records(self, *, user_id: str | None = EVERYONE) -> Iterator[dict[str, Any]]: ...

    def import_jsonl(
        self, lines: Iterable[str | bytes], *, batch_size: int = 256
    ) -> ImportReport: ...


def export_records(
    palace: Transferable, *, user_id: str | None = EVERYONE
) -> Iterator[dict[str, Any]]:
    """``palace.export_records(user_id=user_id)``: its older name."""
    return palace.export_records(user_id=user_id)


def import_jsonl(
    palace: Transferable, lines: Iterable[str | bytes], *, batch_size: int = 256
) -> ImportReport:
    """``palace.import_jsonl(lines, batch_size=batch_size)``: its older name."""
    return palace.import_jsonl(lines, batch_size=batch_size)


__all__ = [
    "EVERYONE",
    "FORMAT",
    "RECORD_TYPES",
    "VERSION",
    "BadRecordError",
    "ImportReport",
    "Transferable",
    "drawer_from",
    "event_from",
    "export_records",
    "import_jsonl",
    "memory_from",
    "triple_from",
    "write_jsonl",
    "write_markdown",
]
