"""Importing an export: read and check it all, then file what is good, owner by owner.

See :mod:`palace_retrievers.transfer` for what is checked and what is skipped.
"""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import IO, Any

import numpy as np
import numpy.typing as npt

from palace_retrievers.embedder import unit_rows
from palace_retrievers.errors import BadRecordError, InvalidQueryError
from palace_retrievers.palace import Palace
from palace_retrievers.records import Drawer
from palace_retrievers.records.memories import Memory, MemoryEvent
from palace_retrievers.records.triples import Triple
from palace_retrievers.transfer.export import FORMAT, RECORD_TYPES, VERSION
from palace_retrievers.transfer.records import (
    drawer_from,
    event_key,
    history_of,
    memory_from,
    record_id,
    shown,
    triple_from,
)

#: Bytes of checked records kept in memory before spilling to disk.
_SPOOL = 32 * 2**20


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
            also = f" (type {shown(kind)})" if kind is not None else ""
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
            keys = {event_key(e) for e in had}
            new_events = [e for e in history if event_key(e) not in keys]
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
            keys = {event_key(e) for e in had}
            new.extend(e for e in events if event_key(e) not in keys)
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
