"""A palace's export and import: the records read from, and filed into, its ledger.

:class:`Transfer` walks the ledger for :meth:`~palace_retrievers.palace.Palace.export_records`
and files an export's checked records for
:meth:`~palace_retrievers.palace.Palace.import_jsonl`. The format, the checks of each
record and the reading of a file are :mod:`palace_retrievers.transfer`'s; what the
import skips, and why, is said there.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from palace_retrievers.facade.filing import Filing
from palace_retrievers.facade.model import Model
from palace_retrievers.facade.writer import Writer
from palace_retrievers.ledger import Ledger
from palace_retrievers.records import Drawer
from palace_retrievers.records.memories import Memory, MemoryEvent
from palace_retrievers.records.triples import Triple
from palace_retrievers.transfer.export import EVERYONE, FORMAT, VERSION
from palace_retrievers.transfer.importing import SPOOL, ImportReport, first_reading, objects_of
from palace_retrievers.transfer.records import event_key


class Transfer:
    """Exports a palace's records, and imports an export's.

    Args:
        path: The palace's folder (named in an export's header).
        ledger: What is exported, and where an import files.
        model: Embeds what an import files.
        filing: Builds the closets of imported drawers.
        writer: The writer lock an import holds, and the index journal it applies.
    """

    def __init__(
        self, *, path: Path, ledger: Ledger, model: Model, filing: Filing, writer: Writer
    ) -> None:
        self._path = path
        self._ledger = ledger
        self._model = model
        self._filing = filing
        self._writer = writer

    def export_records(self, *, user_id: str | None = EVERYONE) -> Iterator[dict[str, Any]]:
        """Every record of ``user_id`` (:data:`EVERYONE`: of every owner) as JSON-ready
        dicts, header first; each owner's memories with their histories, then the
        histories of the owner's memories deleted since, then each owner's triples."""
        ledger = self._ledger
        owners, orphans, subjects = ledger.owners_and_keys()
        if user_id != EVERYONE:
            owners = [o for o in owners if o == (user_id or "")]
        yield {
            "type": "header",
            "format": FORMAT,
            "version": VERSION,
            "exported_at": datetime.now(UTC).isoformat(),
            "palace": str(self._path),
            "model": ledger.get_meta("embedding_model"),
            "schema_version": ledger.schema_version,
            "users": [o or None for o in owners],
        }
        wanted = set(owners)
        for batch in ledger.iter_drawers(batch_size=256):
            for drawer in batch:
                if (drawer.user_id or "") in wanted:
                    yield {"type": "drawer", **drawer.as_dict()}
        for owner in owners:
            memories = ledger.list_memories(user_id=owner or None, statuses=None, limit=None)
            ordered = sorted(memories, key=lambda m: (m.created_at, m.id))
            for start in range(0, len(ordered), 500):  # their histories, one read per 500
                chunk = ordered[start : start + 500]
                histories = ledger.memory_histories([m.id for m in chunk])
                for memory in chunk:
                    history = [e.as_dict() for e in histories.get(memory.id, [])]
                    yield {"type": "memory", **memory.as_dict(), "history": history}
            gone = orphans.get(owner, [])
            histories = ledger.memory_histories(gone)
            for memory_id in gone:
                events = [e.as_dict() for e in histories.get(memory_id, [])]
                yield {"type": "history", "memory_id": memory_id, "events": events}
        for owner in owners:
            seen: set[str] = set()
            for key in subjects.get(owner, []):
                for triple in ledger.triples_about(key, user_id=owner or None, as_of=None):
                    if triple.id not in seen and triple.subject_key == key:
                        seen.add(triple.id)
                        yield {"type": "triple", **triple.as_dict()}

    def import_jsonl(self, lines: Iterable[str | bytes], *, batch_size: int = 256) -> ImportReport:
        """File the good records of an export, read whole and checked first (see
        :func:`palace_retrievers.transfer.importing.first_reading`), under one writer
        lock."""
        report = ImportReport()
        with tempfile.SpooledTemporaryFile(max_size=SPOOL, mode="w+b") as spool:
            rejected = first_reading(lines, spool)
            report.rejected = list(rejected.values())
            spool.seek(0)
            importer = _Importer(self._ledger, self._model, self._filing, report, batch_size)
            with self._writer.writing("import"):
                try:
                    for raw in spool:
                        number, _, data = raw.partition(b"\t")
                        if int(number) in rejected:
                            continue
                        record = json.loads(data)
                        importer.add(record["type"], objects_of(record))
                    importer.flush()
                finally:
                    self._writer.sync_index()
        return report


class _Importer:
    """Files checked records into a palace in batches, one writer lock for it all.

    Records wait in batches, and a batch of each kind is filed in the order drawers,
    memories, histories, triples, so that a record is checked against the target once
    what it points at in the file is there.
    """

    def __init__(
        self, ledger: Ledger, model: Model, filing: Filing, report: ImportReport, batch_size: int
    ) -> None:
        self.ledger = ledger
        self.model = model
        self.filing = filing
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
        vectors = self.model.embed(list(items.values()))
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
        return {d.id: d.user_id for d in self.ledger.get_drawers(list(dict.fromkeys(ids)))}

    def _memory_owners(self, ids: Iterable[str]) -> dict[str, str | None]:
        """Each id's owner in the target: a memory's, or its history's (deleted since)."""
        wanted = list(dict.fromkeys(ids))
        owners = {m.id: m.user_id for m in self.ledger.get_memories(wanted)}
        for memory_id, events in self.ledger.memory_histories(wanted).items():
            if events and memory_id not in owners:
                owners[memory_id] = events[0].user_id
        return owners

    def flush_drawers(self) -> None:
        batch, self.drawers = self.drawers, []
        if not batch:
            return
        ledger = self.ledger
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
        model = self.model.name
        kept = ledger.drawer_vectors([d.id for d in fresh if d.id in existing])
        same_text = (
            {d.id for d in fresh if d.id in kept and existing[d.id].text == d.text}
            if ledger.get_meta("embedding_model") == model
            else set()
        )
        to_embed = [d for d in fresh if d.id not in same_text]
        vectors = self._embed({d.id: d.text for d in to_embed})
        vectors.update({i: kept[i] for i in same_text})
        self.model.claim()
        ledger.upsert_drawers(fresh, np.stack([vectors[d.id] for d in fresh]), model=model)
        # Closets are derived: build them over the imported drawers as mining does.
        self.filing.file_closets(fresh, [])
        self.report.drawers += len(fresh)

    def flush_memories(self) -> None:
        batch, self.memories = self.memories, []
        if not batch:
            return
        ledger = self.ledger
        ids = [m.id for m, _ in batch]
        existing = {m.id: m for m in ledger.get_memories(ids)}
        histories = ledger.memory_histories(ids)
        drawers = self._drawer_owners(i for m, _ in batch for i in m.source_ids)
        successors = self._memory_owners(m.superseded_by for m, _ in batch if m.superseded_by)
        model = self.model.name
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
        self.model.claim()
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
        ledger = self.ledger
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
            self.ledger.add_triple(triple, single_valued=False)
            self.report.triples += 1
