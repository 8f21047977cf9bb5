"""Writing an export: JSON lines to move a palace, Markdown for people to read.

What is written is what :meth:`~palace_retrievers.palace.Palace.export_records`
yields; see :mod:`palace_retrievers.transfer` for the format.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

FORMAT = "palace-export"
VERSION = 1
RECORD_TYPES = ("header", "drawer", "memory", "history", "triple")

#: Export every owner's records (the default of
#: :meth:`~palace_retrievers.palace.Palace.export_records`).
EVERYONE = "*"


class Writer(Protocol):
    """Where an export is written: a text file, or anything with ``write(str)``."""

    def write(self, text: str, /) -> Any: ...


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
    """Write ``records`` (as ``Palace.export_records`` yields them) as a Markdown document."""
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
