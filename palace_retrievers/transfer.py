"""Moving a palace, or auditing one: verbatim export (JSONL or Markdown) and import.

The JSONL export is one JSON object a line: a ``header``, then every ``drawer`` (all its
fields and metadata), every ``memory`` (its lifecycle fields and its whole ``history``),
the ``history`` of memories deleted since (kept for audit), and every ``triple`` of the
knowledge graph (with its validity interval). Vectors are not exported: they belong to
a model, and :func:`import_jsonl` embeds the texts again with the target palace's own.
Closets are derived from drawers and are rebuilt on import.

Import is idempotent: a record already in the palace as exported is left alone (not
embedded again), a history event already there is not appended twice, and a triple
already known is merged, not repeated. A drawer whose id belongs to another owner in the
target is never overwritten (it is counted in ``conflicts``).

The Markdown export is for people: every record under headings, texts verbatim in
fences long enough that no text can close them. It is not read back.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from typing import IO, Any

import numpy as np
import numpy.typing as npt

from palace_retrievers.embedder import unit_rows
from palace_retrievers.errors import InvalidQueryError
from palace_retrievers.kg import Triple, entity_key
from palace_retrievers.memories import Memory, MemoryEvent
from palace_retrievers.palace import Palace
from palace_retrievers.records import Drawer

FORMAT = "palace-export"
VERSION = 1
RECORD_TYPES = ("header", "drawer", "memory", "history", "triple")

#: Export every owner's records (the default of :func:`export_records`).
EVERYONE = "*"


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
        conflicts: Ids of drawers that belong to another owner in the target (skipped).
    """

    drawers: int = 0
    memories: int = 0
    events: int = 0
    triples: int = 0
    unchanged: int = 0
    embedded: int = 0
    conflicts: list[str] = field(default_factory=list)


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


def write_jsonl(records: Iterable[Mapping[str, Any]], out: IO[str]) -> int:
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


def write_markdown(records: Iterable[Mapping[str, Any]], out: IO[str]) -> int:
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


def _write_history(events: Sequence[Mapping[str, Any]], out: IO[str]) -> None:
    if not events:
        return
    out.write("\nHistory:\n\n")
    for e in events:
        change = " → ".join(s for s in (e["old_status"], e["new_status"]) if s)
        text = e["new_text"] or e["old_text"] or ""
        line = f"- {e['at']} **{e['event']}** {change}".rstrip()
        out.write(f"{line}: {json.dumps(text, ensure_ascii=False)}\n" if text else f"{line}\n")


# -- import ---------------------------------------------------------------------------


def _time(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def _known(cls: type, data: Mapping[str, Any]) -> dict[str, Any]:
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in data.items() if k in names}


def drawer_from(data: Mapping[str, Any]) -> Drawer:
    """A :class:`Drawer` from its exported dict."""
    values = _known(Drawer, data)
    values["filed_at"] = _time(values["filed_at"])
    values["content_date"] = _time(values.get("content_date"))
    return Drawer(**values)


def memory_from(data: Mapping[str, Any]) -> Memory:
    """A :class:`Memory` from its exported dict."""
    values = _known(Memory, data)
    for name in ("created_at", "updated_at", "last_accessed", "expires_at", "status_at"):
        values[name] = _time(values.get(name))
    for name in ("tags", "source_ids"):
        values[name] = tuple(values.get(name) or ())
    return Memory(**{k: v for k, v in values.items() if v is not None or k in _NULLABLE})


_NULLABLE = {"user_id", "agent_id", "session_id", "slot", "last_accessed", "expires_at"}


def event_from(data: Mapping[str, Any]) -> MemoryEvent:
    """A :class:`MemoryEvent` from its exported dict (its ``seq`` is the target's to give)."""
    values = _known(MemoryEvent, data)
    values["at"] = _time(values["at"])
    values["seq"] = 0
    return MemoryEvent(**values)


def triple_from(data: Mapping[str, Any]) -> Triple:
    """A :class:`Triple` from its exported dict."""
    values = _known(Triple, data)
    for name in ("valid_from", "valid_to", "created_at"):
        values[name] = _time(values.get(name))
    if values["created_at"] is None:
        del values["created_at"]
    values["subject_key"] = entity_key(values["subject"])
    values["object_key"] = entity_key(values["object"])
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


def read_jsonl(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    """The records of an export, checked line by line.

    Raises:
        InvalidQueryError: a line is not JSON, not a record, or the file is not an export
            (its first record must be a ``palace-export`` header of a known version).
    """
    header = False
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InvalidQueryError(f"line {number} is not JSON: {exc.msg}") from None
        if not isinstance(record, dict) or record.get("type") not in RECORD_TYPES:
            raise InvalidQueryError(f"line {number} is not a palace export record")
        if not header:
            if record["type"] != "header" or record.get("format") != FORMAT:
                raise InvalidQueryError(
                    "not a palace export: its first line must be the palace-export header "
                    "that `palace export --format jsonl` writes"
                )
            if record.get("version") != VERSION:
                raise InvalidQueryError(
                    f"export format version {record.get('version')!r} is not supported "
                    f"(this palace reads version {VERSION})"
                )
            header = True
            continue
        yield record
    if not header:
        raise InvalidQueryError("the export is empty: not even a header")


class _Importer:
    """Files exported records into a palace in batches, one writer lock for it all."""

    def __init__(self, palace: Palace, report: ImportReport, batch_size: int) -> None:
        self.palace = palace
        self.report = report
        self.batch_size = batch_size
        self.drawers: list[Drawer] = []
        self.memories: list[tuple[Memory, list[MemoryEvent]]] = []

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

    def add(self, record: Mapping[str, Any]) -> None:
        kind = record["type"]
        try:
            if kind == "drawer":
                self.drawers.append(drawer_from(record))
            elif kind == "memory":
                events = [event_from(e) for e in record.get("history") or ()]
                self.memories.append((memory_from(record), events))
            elif kind == "history":
                events = [event_from(e) for e in record["events"]]
                new = self._events(str(record["memory_id"]), events)
                if new:  # the history of a memory deleted since: kept for audit
                    self.palace.ledger.save_memories([], events=new)
                    self.report.events += len(new)
            elif kind == "triple":
                self.palace.ledger.add_triple(triple_from(record), single_valued=False)
                self.report.triples += 1
        except (KeyError, TypeError, ValueError) as exc:
            what = record.get("id") or record.get("memory_id") or "?"
            raise InvalidQueryError(f"the {kind} record {what!r} is malformed: {exc}") from None
        if len(self.drawers) >= self.batch_size:
            self.flush_drawers()
        if len(self.memories) >= self.batch_size:
            self.flush_memories()

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
        self.palace._claim_model()
        ledger.upsert_drawers(fresh, np.stack([vectors[d.id] for d in fresh]), model=model)
        # Closets are derived: build them over the imported drawers as mining does.
        self.palace._file_closets(fresh, [])
        self.report.drawers += len(fresh)

    def _events(self, memory_id: str, events: Sequence[MemoryEvent]) -> list[MemoryEvent]:
        """The events that the memory's history in the palace does not hold yet."""
        had = {_event_key(e) for e in self.palace.ledger.memory_history(memory_id)}
        return [e for e in events if _event_key(e) not in had]

    def flush_memories(self) -> None:
        batch, self.memories = self.memories, []
        if not batch:
            return
        ledger = self.palace.ledger
        existing = {m.id: m for m in ledger.get_memories([m.id for m, _ in batch])}
        model = self.palace.embedder.model_name
        same_model = ledger.get_meta("embedding_model") == model
        kept = ledger.memory_vectors(list(existing)) if same_model else {}
        write: list[Memory] = []
        events: list[MemoryEvent] = []
        histories = ledger.memory_histories([m.id for m, _ in batch])
        for memory, history in batch:
            had = {_event_key(e) for e in histories.get(memory.id, [])}
            new_events = [e for e in history if _event_key(e) not in had]
            old = existing.get(memory.id)
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
        self.palace._claim_model()
        ledger.save_memories(write, vectors=vectors, model=model, events=events)
        self.report.memories += len(write)
        self.report.events += len(events)


def import_jsonl(palace: Palace, lines: Iterable[str], *, batch_size: int = 256) -> ImportReport:
    """File the records of a JSONL export into ``palace``, embedding with its model.

    Safe to run twice: what is already there as exported is left alone.

    Raises:
        InvalidQueryError: the input is not a palace export, or a record is malformed
            (records before it stay imported; run it again once the file is fixed).
        PalaceBusyError: another process is writing to the palace.
    """
    report = ImportReport()
    importer = _Importer(palace, report, batch_size)
    with palace.writing("import"):
        try:
            for record in read_jsonl(lines):
                importer.add(record)
            importer.flush_drawers()
            importer.flush_memories()
        finally:
            palace._sync_index()
    return report


__all__ = [
    "EVERYONE",
    "FORMAT",
    "VERSION",
    "ImportReport",
    "export_records",
    "import_jsonl",
    "read_jsonl",
    "write_jsonl",
    "write_markdown",
]
