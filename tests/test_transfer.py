"""Export and import: a palace moved through JSONL comes out the same, and can be audited.

The palaces here use the FAKE hashing embedder (what is tested is bookkeeping: every field
carried over, nothing doubled, texts embedded with the target's model, owners kept apart,
hostile files refused or skipped record by record), with the exact sqlite backend and
the real SQLite ledger; the owner checks also run on the PostgreSQL ledger (pgserver, see
``services.py``). Hostile files are also fuzzed with hypothesis (a few dozen examples;
``HYPOTHESIS_EXAMPLES_FACTOR`` multiplies them). CLI tests run the commands end to end.
"""

from __future__ import annotations

import io
import itertools
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from fakes import FAKE_PLUGIN, HashingEmbedder
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pg_palace import open_postgres_palace
from services import PostgresService

from palace_retrievers import Palace
from palace_retrievers.cli import cli
from palace_retrievers.errors import InvalidQueryError, MemoryNotFoundError
from palace_retrievers.transfer import (
    export_records,
    import_jsonl,
    write_jsonl,
    write_markdown,
)

pytest_plugins = ["services"]

TRICKY = "Fenced:\n```python\nprint('<script>alert(1)</script>')\n```\n  trailing spaces  \n"


class OtherEmbedder(HashingEmbedder):
    """The FAKE embedder under another model name: the target of a move."""

    @property
    def model_name(self) -> str:
        return "fake/other-model"


def fill(palace: Palace, corpus: Path) -> dict[str, str]:
    """Drawers, memories in every state and triples, for two owners; returns some ids."""
    (corpus / "ops").mkdir(parents=True)
    (corpus / "ops" / "deploy.md").write_text("# Deploy\n\nBlue/green on lk-prod.\n")
    palace.mine(corpus, wing="notes")
    palace.add_texts(
        [TRICKY, "Bob keeps bees on the depot roof."],
        metadatas=[
            {"wing": "chat", "room": "code", "content_date": "2025-03-01", "speaker": "ann"},
            {"wing": "chat", "room": "bees"},
        ],
        user_id="u1",
    )
    tea = palace.remember("I prefer green tea", kind="preference", user_id="u1", tags=["drinks"])
    palace.remember("I prefer green tea", kind="preference", user_id="u1")  # a duplicate
    gone = palace.remember("The wifi password is hunter2", user_id="u1")
    palace.forget_memories([gone.memory.id], user_id="u1")  # history outlives it
    old = palace.remember("The standup is at 9am", kind="event", user_id="u1")
    palace.delete_memory(old.memory.id, user_id="u1")  # archived
    palace.remember("Release notes go out on Fridays", ttl=3600)
    palace.kg.add("Alice", "lives in", "Lisbon", valid_from="2020-01-01", user_id="u1")
    palace.kg.add("Alice", "lives in", "Porto", valid_from="2024-06-01", user_id="u1")
    palace.kg.add("Depot", "located in", "Leeds", valid_from="2021-05-05", confidence=0.7)
    palace.kg.invalidate("Depot", "located in", ended="2023-01-01")
    return {"tea": tea.memory.id, "gone": gone.memory.id, "old": old.memory.id}


@pytest.fixture
def source(open_palace: Callable[..., Palace], tmp_path: Path) -> tuple[Palace, dict[str, str]]:
    palace = open_palace(tmp_path / "source", backend="sqlite")
    return palace, fill(palace, tmp_path / "corpus")


def dump(palace: Palace, **kwargs: Any) -> str:
    out = io.StringIO()
    write_jsonl(export_records(palace, **kwargs), out)
    return out.getvalue()


def comparable(text: str) -> list[dict[str, Any]]:
    """The records of an export without what a move legitimately changes: the header,
    the history's sequence numbers (the target's own) and when a triple was filed."""
    out = []
    for line in text.splitlines():
        record = json.loads(line)
        if record["type"] == "header":
            continue
        for event in record.get("history", record.get("events", [])):
            event.pop("seq")
        if record["type"] == "triple":
            record.pop("created_at")
        out.append(record)
    return out


HEADER = json.dumps({"type": "header", "format": "palace-export", "version": 1})
T = "2026-01-01T00:00:00+00:00"


def good_drawer(drawer_id: str, user: str | None = "alice", **fields: Any) -> dict[str, Any]:
    """A drawer record as the export writes it."""
    return {
        "type": "drawer",
        "id": drawer_id,
        "text": f"text of {drawer_id}",
        "wing": "w",
        "room": "r",
        "source": "s",
        "filed_at": T,
        "user_id": user,
        **fields,
    }


def good_memory(memory_id: str, user: str | None = "alice", **fields: Any) -> dict[str, Any]:
    """A memory record as the export writes it, with its ``add`` event."""
    text = fields.pop("text", f"I remember {memory_id}")
    event = {"memory_id": memory_id, "event": "add", "at": T, "user_id": user, "new_text": text}
    return {
        "type": "memory",
        "id": memory_id,
        "text": text,
        "kind": "fact",
        "status": "active",
        "created_at": T,
        "user_id": user,
        "history": [event],
        **fields,
    }


def history(memory_id: str, *events: dict[str, Any]) -> dict[str, Any]:
    """A deleted memory's history record, its events naming the memory as exported."""
    return {
        "type": "history",
        "memory_id": memory_id,
        "events": [{"memory_id": memory_id, **e} for e in events],
    }


def lines_of(*records: dict[str, Any]) -> list[str]:
    return [HEADER, *(json.dumps(r) for r in records)]


def test_export_holds_every_record_verbatim(source: tuple[Palace, dict[str, str]]) -> None:
    palace, ids = source
    records = [json.loads(line) for line in dump(palace).splitlines()]
    header = records[0]
    assert header["type"] == "header"
    assert header["format"] == "palace-export"
    assert header["model"] == palace.embedder.model_name
    assert sorted(u or "" for u in header["users"]) == ["", "u1"]
    by_type: dict[str, list[dict[str, Any]]] = {}
    for record in records[1:]:
        by_type.setdefault(record["type"], []).append(record)

    drawers = {d["text"]: d for d in by_type["drawer"]}
    assert drawers[TRICKY]["metadata"] == {"speaker": "ann"}
    assert drawers[TRICKY]["content_date"].startswith("2025-03-01")
    assert drawers[TRICKY]["user_id"] == "u1"
    mined = next(d for d in by_type["drawer"] if d["source"].endswith("deploy.md"))
    assert (mined["line_start"], mined["line_end"]) == (1, 3)
    assert mined["source_mtime"] is not None

    memories = {m["id"]: m for m in by_type["memory"]}
    assert ids["gone"] not in memories
    assert memories[ids["old"]]["status"] == "archived"
    assert memories[ids["tea"]]["tags"] == ["drinks"]
    assert [e["event"] for e in memories[ids["tea"]]["history"]] == ["add", "duplicate"]
    assert any(m["expires_at"] for m in memories.values())
    (orphan,) = by_type["history"]
    assert orphan["memory_id"] == ids["gone"]
    assert [e["event"] for e in orphan["events"]][-1] == "delete"

    triples = {(t["object"], t["user_id"]): t for t in by_type["triple"]}
    assert triples[("Lisbon", "u1")]["valid_to"].startswith("2024-06-01")
    assert triples[("Porto", "u1")]["valid_to"] is None
    assert triples[("Leeds", None)]["ended_reason"] == "invalidated"
    assert triples[("Leeds", None)]["confidence"] == 0.7


def test_a_moved_palace_exports_the_same(
    source: tuple[Palace, dict[str, str]], open_palace: Callable[..., Palace], tmp_path: Path
) -> None:
    palace, _ = source
    exported = dump(palace)
    target = open_palace(tmp_path / "target", backend="sqlite")
    report = import_jsonl(target, exported.splitlines())
    assert report.drawers == len([r for r in comparable(exported) if r["type"] == "drawer"])
    assert report.memories == 3
    assert report.triples == 3
    assert report.conflicts == []
    assert comparable(dump(target)) == comparable(exported)
    assert target.stats().ledger.closets > 0  # rebuilt from the drawers

    again = import_jsonl(target, exported.splitlines())  # idempotent
    assert (again.drawers, again.memories, again.events, again.embedded) == (0, 0, 0, 0)
    assert again.unchanged == report.drawers + report.memories
    assert comparable(dump(target)) == comparable(exported)


def test_import_embeds_with_the_targets_model(
    source: tuple[Palace, dict[str, str]], open_palace: Callable[..., Palace], tmp_path: Path
) -> None:
    palace, ids = source
    target = open_palace(tmp_path / "target", embedder=OtherEmbedder(), backend="sqlite")
    report = import_jsonl(target, dump(palace).splitlines())
    assert report.embedded == report.drawers + report.memories
    assert target.ledger.get_meta("embedding_model") == "fake/other-model"
    assert all(index.ok for index in target.stats().indexes)

    hits = target.search("green tea", user_id="u1")
    assert hits[0].id == ids["tea"]
    assert hits[0].source == f"memory:{ids['tea']}"
    assert target.search("bees depot roof", user_id="u1", memories=False)[0].wing == "chat"
    assert target.memory(ids["old"], user_id="u1").status == "archived"
    assert [e.event for e in target.history(ids["gone"], user_id="u1")][-1] == "delete"
    assert [t.object for t in target.kg.query("Alice", as_of="2021-01-01", user_id="u1")] == [
        "Lisbon"
    ]


def test_export_of_one_user(source: tuple[Palace, dict[str, str]]) -> None:
    palace, _ = source
    records = comparable(dump(palace, user_id="u1"))
    assert records
    assert all(r.get("user_id", "u1") == "u1" for r in records)
    assert all(e["user_id"] == "u1" for r in records for e in r.get("history", []))
    unowned = comparable(dump(palace, user_id=None))
    assert {r["text"] for r in unowned if r["type"] == "memory"} == {
        "Release notes go out on Fridays"
    }


def test_a_drawer_of_another_owner_is_never_overwritten(
    source: tuple[Palace, dict[str, str]], open_palace: Callable[..., Palace], tmp_path: Path
) -> None:
    palace, _ = source
    exported = dump(palace)
    taken = next(r for r in comparable(exported) if r["type"] == "drawer" and r["user_id"])
    target = open_palace(tmp_path / "target", backend="sqlite")
    target.add_texts(["Mine, not yours"], ids=[taken["id"]], user_id="someone-else")
    report = import_jsonl(target, exported.splitlines())
    assert report.conflicts == [taken["id"]]
    (kept,) = target.get([taken["id"]], user_id="someone-else")
    assert kept.text == "Mine, not yours"


def test_markdown_export_is_readable_and_verbatim(source: tuple[Palace, dict[str, str]]) -> None:
    palace, ids = source
    out = io.StringIO()
    count = write_markdown(export_records(palace), out)
    text = out.getvalue()
    assert count == len(comparable(dump(palace)))
    assert text.startswith("# Palace export: ")
    assert f"````text\n{TRICKY}\n````" in text  # a fence longer than the text's own
    assert "## Memories" in text
    assert f"### {ids['gone']} (deleted)" in text
    assert "**duplicate**" in text
    assert "| u1 | Alice | lives_in | Lisbon |" in text


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ([], "the export is empty"),
        (["not json"], "line 1 is not JSON"),
        (['{"type": "drawer", "id": "x"}'], "not a palace export"),
        (['{"type": "header", "format": "palace-export", "version": 99}'], "version 99"),
        (['{"type": "header", "format": "palace-export", "version": "1"}'], "version '1'"),
        (['{"type": "header", "format": "other", "version": 1}'], "format is 'other'"),
        (['{"type": "header", "format": "palace-export", "version": 1, "x": NaN}'], "line 1"),
        ([b"\xff\xfe{}"], "line 1 is not UTF-8"),
        (["[" * 100_000], "line 1 is not JSON"),
        (["", "   ", "\n"], "the export is empty"),
    ],
)
def test_bad_exports_are_refused(
    lines: list[str | bytes], message: str, open_palace: Callable[..., Palace], tmp_path: Path
) -> None:
    """A file that is not an export is refused whole: one message, nothing written."""
    target = open_palace(tmp_path / "target", backend="sqlite")
    drawers = [json.dumps(good_drawer("d_ok"))]
    with pytest.raises(InvalidQueryError, match=message):
        import_jsonl(target, [*lines, *drawers] if any(x.strip() for x in lines) else lines)
    assert target.stats().ledger.drawers == 0


def test_export_and_import_commands(
    source: tuple[Palace, dict[str, str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    palace, ids = source
    palace.close()
    original = Palace.open.__func__  # type: ignore[attr-defined]

    def open_with_fake(cls: type[Palace], /, path: Any = None, **kwargs: Any) -> Palace:
        kwargs["plugins"] = [FAKE_PLUGIN, *kwargs.get("plugins", ())]
        opened: Palace = original(cls, path, **kwargs)
        return opened

    monkeypatch.setattr(Palace, "open", classmethod(open_with_fake))
    runner = CliRunner()
    dump_file = tmp_path / "palace.jsonl"
    result = runner.invoke(cli, ["--palace", str(palace.path), "export", "-o", str(dump_file)])
    assert result.exit_code == 0, result.stderr
    assert "exported" in result.stderr
    assert result.stdout == ""

    streamed = runner.invoke(cli, ["--palace", str(palace.path), "export"])
    assert comparable(streamed.stdout) == comparable(dump_file.read_text())
    markdown = runner.invoke(cli, ["--palace", str(palace.path), "export", "--format", "markdown"])
    assert "# Palace export" in markdown.stdout

    target = tmp_path / "moved"
    (target).mkdir()
    (target / "palace.toml").write_text('embedder = "fake"\nbackend = "sqlite"\n')
    imported = runner.invoke(cli, ["--palace", str(target), "import", str(dump_file), "--json"])
    assert imported.exit_code == 0, imported.stderr
    assert json.loads(imported.stdout)["memories"] == 3
    from_stdin = runner.invoke(
        cli, ["--palace", str(target), "import", "-"], input=dump_file.read_text()
    )
    assert from_stdin.exit_code == 0
    assert "imported 0 drawers, 0 memories" in from_stdin.stdout
    shown = runner.invoke(
        cli, ["--palace", str(target), "memories", "show", ids["tea"], "--user", "u1", "--json"]
    )
    assert json.loads(shown.stdout)["tags"] == ["drinks"]

    bad = tmp_path / "bad.jsonl"
    bad.write_text("hello\n")
    refused = runner.invoke(cli, ["--palace", str(target), "import", str(bad)])
    assert refused.exit_code == 1
    assert refused.stderr.startswith("error: ")
    assert refused.stderr.count("\n") == 1


@pytest.mark.slow
def test_a_shell_pipe_moves_a_palace(tmp_path: Path, real_embedder: Any) -> None:
    """``palace export | palace import -`` in real processes, with the real model."""
    source = tmp_path / "source"
    with Palace.open(source, embedder=real_embedder) as palace:
        palace.add_texts(["Alice adopted a grey cat called Miso."], user_id="u1")
        tea = palace.remember("I prefer green tea", kind="preference", user_id="u1").memory.id
        palace.kg.add("Alice", "lives in", "Lisbon", valid_from="2020-01-01", user_id="u1")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PALACE_")}
    palace_cmd = [sys.executable, "-m", "palace_retrievers.cli", "--palace"]
    exporter = subprocess.Popen(
        [*palace_cmd, str(source), "export"], stdout=subprocess.PIPE, env=env
    )
    importer = subprocess.run(
        [*palace_cmd, str(tmp_path / "target"), "import", "-", "--json"],
        stdin=exporter.stdout,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert exporter.wait(timeout=300) == 0
    assert importer.returncode == 0, importer.stderr
    report = json.loads(importer.stdout)
    assert (report["drawers"], report["memories"], report["triples"]) == (1, 1, 1)
    with Palace.open(tmp_path / "target", embedder=real_embedder) as moved:
        assert moved.search("who has a cat?", user_id="u1", memories=False)[0].text.startswith(
            "Alice adopted"
        )
        assert moved.search("which tea do I prefer?", user_id="u1")[0].id == tea
        assert moved.ledger.get_meta("embedding_model") == real_embedder.model_name


# -- owners ---------------------------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
def target(
    request: pytest.FixtureRequest, open_palace: Callable[..., Palace], tmp_path: Path
) -> Iterator[Palace]:
    """An empty palace on each ledger (PostgreSQL: pgserver, a schema of its own)."""
    if request.param == "sqlite":
        yield open_palace(tmp_path / "target", backend="sqlite")
        return
    postgres: PostgresService = request.getfixturevalue("postgres")
    schema = f"transfer_{uuid.uuid4().hex[:10]}"
    palace = open_postgres_palace(
        tmp_path / "target",
        url=postgres.url,
        schema=schema,
        embedder=HashingEmbedder(),
        plugins=(FAKE_PLUGIN,),
    )
    try:
        yield palace
    finally:
        palace.close()
        postgres.sql(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def bobs_records(palace: Palace) -> dict[str, str]:
    """Bob's drawer, memory, deleted memory and triple in ``palace``; returns their ids."""
    (drawer,) = palace.add_texts(["Bob's bank PIN is 4321"], user_id="bob")
    memory = palace.remember("Bob's PIN is 4321", source_ids=[drawer], user_id="bob").memory
    gone = palace.remember("Bob's old PIN was 1234", user_id="bob").memory
    palace.forget_memories([gone.id], user_id="bob")
    palace.kg.add("Bob", "banks with", "Acme", user_id="bob", source_memory=memory.id)
    return {"drawer": drawer, "memory": memory.id, "gone": gone.id}


def bobs_view(palace: Palace, ids: dict[str, str]) -> Any:
    """All that bob sees of his records."""
    return (
        [d.as_dict() for d in palace.get([ids["drawer"]], user_id="bob")],
        palace.memory(ids["memory"], user_id="bob").as_dict(),
        [e.as_dict() for e in palace.history(ids["memory"], user_id="bob")],
        [e.as_dict() for e in palace.history(ids["gone"], user_id="bob")],
        [t.as_dict() for t in palace.kg.query("Bob", user_id="bob")],
    )


def test_import_never_takes_over_or_points_at_another_owners_records(target: Palace) -> None:
    """Records of alice (or of no one) whose ids are bob's, or that point at bob's
    records, are skipped as conflicts; bob's records and histories are unchanged, and
    alice's own records in the same file are filed."""
    ids = bobs_records(target)
    before = bobs_view(target, ids)
    forged = {"event": "update", "at": T, "new_text": "Bob's PIN is 0000"}
    records = [
        good_memory(ids["memory"], "alice", text="Bob's PIN is 0000"),  # takeover
        good_memory(ids["memory"], None, text="Bob's PIN is 0000"),  # the same, unowned
        good_memory(ids["gone"], "alice"),  # bob's deleted memory's history
        good_memory("m_alice1", "alice", source_ids=[ids["drawer"]]),  # bob's drawer
        good_memory("m_alice2", "alice", status="superseded", superseded_by=ids["memory"]),
        history(ids["memory"], {**forged, "user_id": "alice"}),
        history(ids["gone"], {**forged, "user_id": "alice"}),
        {
            "type": "triple",
            "id": "kg_1",
            "subject": "Alice",
            "predicate": "knows",
            "object": "PIN",
            "user_id": "alice",
            "source_drawer": ids["drawer"],
        },
        {
            "type": "triple",
            "id": "kg_2",
            "subject": "Alice",
            "predicate": "knows",
            "object": "PIN",
            "user_id": "alice",
            "source_memory": ids["memory"],
        },
        good_drawer(ids["drawer"], "alice", text="Bob's PIN is 0000"),
        good_memory("m_alice3", "alice"),  # alice's own: filed
    ]
    report = import_jsonl(target, lines_of(*records))
    assert bobs_view(target, ids) == before
    # The memory record of bob's id comes twice (alice, no one): the second is bad.
    assert report.rejected == [
        f"line 3: the memory record {ids['memory']!r} is skipped: line 2 has its id"
    ]
    taken = [ids["memory"], ids["gone"], "m_alice1", "m_alice2", ids["memory"], ids["gone"]]
    assert sorted(report.conflicts) == sorted([*taken, "kg_1", "kg_2", ids["drawer"]])
    assert (report.memories, report.triples, report.drawers) == (1, 0, 0)
    assert bobs_view(target, ids) == before
    assert target.memory("m_alice3", user_id="alice").text == "I remember m_alice3"
    unowned = {**forged, "user_id": None}
    claims = import_jsonl(
        target,
        lines_of(
            history(ids["memory"], unowned),
            history(ids["gone"], unowned),
        ),
    )
    assert (claims.conflicts, claims.rejected, claims.events) == (
        [ids["memory"], ids["gone"]],
        [],
        0,
    )
    assert bobs_view(target, ids) == before
    for user in ("alice", None):
        assert [m.id for m in target.memories(user_id=user, status=None)] == (
            ["m_alice3"] if user else []
        )
        assert target.kg.query("Alice", user_id=user) == []


def test_history_goes_only_to_the_same_owners_memory(target: Palace) -> None:
    """A history record is appended to its owner's memory (or deleted memory) of that
    id, or kept as a deleted memory's; a memory record's history holds only its own
    events and owner."""
    mine = target.remember("Alice likes tea", user_id="alice").memory
    event = {"event": "update", "at": T, "user_id": "alice", "new_text": "Alice likes coffee"}
    other_memory = good_memory("m_alice9", "alice")
    other_memory["history"].append({**event, "memory_id": "m_bob"})  # another memory's
    foreign_owner = good_memory("m_alice8", "alice")
    foreign_owner["history"].append({**event, "user_id": "bob", "memory_id": "m_alice8"})
    records = [
        history(mine.id, event),
        history("m_gone", event),
        history("m_mixed", event, {**event, "user_id": None}),
        other_memory,
        foreign_owner,
        good_memory("m_carol", "carol"),
        history("m_carol", event),  # for carol's memory in the file
    ]
    report = import_jsonl(target, lines_of(*records))
    assert [e.new_text for e in target.history(mine.id, user_id="alice")] == [
        "Alice likes tea",
        "Alice likes coffee",
    ]
    assert [e.event for e in target.history("m_carol", user_id="carol")] == ["add"]
    with pytest.raises(MemoryNotFoundError):
        target.history("m_alice9", user_id="alice")
    assert report.conflicts == []
    assert [r.split(" is skipped: ")[0] for r in report.rejected] == [
        "line 4: the history record 'm_mixed'",
        "line 5: the memory record 'm_alice9'",
        "line 6: the memory record 'm_alice8'",
        "line 8: the history record 'm_carol'",
    ]
    assert "another owner" in report.rejected[-1]
    assert [e.event for e in target.history("m_gone", user_id="alice")] == ["update"]
    with pytest.raises(MemoryNotFoundError):
        target.history("m_mixed", user_id="alice")


# -- hostile files ----------------------------------------------------------------------


def _big(digits: int) -> str:
    return "1" + "0" * digits


def _with(record: dict[str, Any], **changes: Any) -> str:
    return json.dumps({**record, **changes})


def _without(record: dict[str, Any], name: str) -> str:
    return json.dumps({k: v for k, v in record.items() if k != name})


DRAWER = good_drawer("d_bad")
MEMORY = good_memory("m_bad")
TRIPLE = {"type": "triple", "id": "kg_bad", "subject": "A", "predicate": "knows", "object": "B"}

#: (a bad line, what its one line of report says after ``line 2: ``).
BAD_LINES: list[tuple[str | bytes, str]] = [
    ('{"type": "drawer", "id": "d_bad", "text": "cut sh', "not JSON: Unterminated string"),
    ("[1, 2]", "not a palace export record"),
    ('"drawer"', "not a palace export record"),
    ('{"type": "closet", "id": "c1"}', "not a palace export record (type 'closet')"),
    ('{"type": ["drawer"]}', "not a palace export record"),
    (HEADER, "not a palace export record (type 'header')"),
    (_without(DRAWER, "text"), "drawer record 'd_bad' is skipped: it has no 'text'"),
    (_without(DRAWER, "filed_at"), "it has no 'filed_at'"),
    (_with(DRAWER, id=""), "'id' is empty"),
    (_with(DRAWER, id=7), "'id' must be a string, not 7"),
    (_with(DRAWER, text=None), "'text' must be a string, not None"),
    (_with(DRAWER, user_id=["bob"]), "'user_id' must be a string or null"),
    (_with(DRAWER, chunk_index=-1), "'chunk_index' must be a whole number"),
    (_with(DRAWER, chunk_index=True), "'chunk_index' must be a whole number"),
    (_with(DRAWER, line_start=2**64), "'line_start' must be a whole number"),
    (_with(DRAWER, chunk_index=1.5), "'chunk_index' must be a whole number"),
    (_with(DRAWER, filed_at="yesterday"), "'filed_at' must be an ISO-8601 time"),
    (_with(DRAWER, filed_at="2026-02-30"), "'filed_at' must be an ISO-8601 time"),
    (_with(DRAWER, filed_at="0001-01-01T00:00:00+01:00"), "'filed_at' must be an ISO-8601"),
    (_with(DRAWER, filed_at=1767225600), "'filed_at' must be an ISO-8601 time"),
    (_with(DRAWER, metadata=[1]), "'metadata' must be a JSON object"),
    (_with(DRAWER, kind=""), "'kind' is empty"),
    (_with(DRAWER, source_mtime="now"), "'source_mtime' must be a finite number"),
    (_with(DRAWER, source_mtime=10**400), "'source_mtime' must be a finite number"),
    ('{"type": "drawer", "source_mtime": NaN}', "not JSON this import reads: NaN"),
    ('{"type": "drawer", "source_mtime": -Infinity}', "not JSON this import reads"),
    ('{"type": "drawer", "source_mtime": 1e999}', "not JSON this import reads"),
    ('{"type": "drawer", "chunk_index": ' + _big(5000) + "}", "not JSON this import reads"),
    ('{"type": "drawer", "metadata": ' + "[" * 50_000 + "]" * 50_000 + "}", "not JSON"),
    (b'{"type": "drawer", "text": "caf\xe9"}', "not UTF-8 text (byte 32)"),
    ('{"type": "drawer", "text": "\\ud800"}', "not valid Unicode (a lone surrogate)"),
    (_with(MEMORY, kind="opinion"), "'kind' is 'opinion', not one of: fact, preference"),
    (_with(MEMORY, status="deleted"), "'status' is 'deleted', not one of: active"),
    (_with(MEMORY, origin="dreamt"), "'origin' is 'dreamt'"),
    (_with(MEMORY, importance=1.5), "'importance' must be a number in [0, 1]"),
    (_with(MEMORY, importance="high"), "'importance' must be a number in [0, 1]"),
    (_with(MEMORY, text="   "), "'text' is empty"),
    (_with(MEMORY, text="x" * 10_001), "'text' is 10001 characters long"),
    (_with(MEMORY, tags="health"), "'tags' must be a list of non-empty strings"),
    (_with(MEMORY, source_ids=[None]), "'source_ids' must be a list of non-empty strings"),
    (_with(MEMORY, access_count=-3), "'access_count' must be a whole number"),
    (_with(MEMORY, history={"event": "add"}), "'history' must be a list of history events"),
    (_with(MEMORY, history=["add"]), "a history event must be a JSON object"),
    (_with(MEMORY, history=[{"event": "add"}]), "it has no 'at'"),
    (_with(MEMORY, history=[{"event": "vanish", "at": T}]), "'event' is 'vanish'"),
    (_with(MEMORY, history=[{"event": "add", "at": T, "new_status": "gone"}]), "'new_status'"),
    (_without(MEMORY, "created_at"), "it has no 'created_at'"),
    ('{"type": "history", "memory_id": "m_x"}', "it has no 'events'"),
    ('{"type": "history", "events": []}', "it has no 'memory_id'"),
    (_with(TRIPLE, subject="  "), "an entity name must not be empty"),
    (_with(TRIPLE, predicate="!!"), "predicate"),
    (_with(TRIPLE, confidence=float("nan")), "not JSON this import reads: NaN"),
    (_with(TRIPLE, confidence=2), "'confidence' must be a number in [0, 1]"),
    (_with(TRIPLE, ended_reason="bored"), "'ended_reason' is 'bored'"),
    (_with(TRIPLE, valid_from="2024-01-01", valid_to="2023-01-01"), "before it starts"),
    (_with(TRIPLE, valid_from="2024-13-01"), "'valid_from' must be an ISO-8601 time"),
]


@pytest.mark.parametrize(("bad", "message"), BAD_LINES)
def test_a_bad_record_is_skipped_with_its_line_and_the_rest_filed(
    bad: str | bytes, message: str, fake_palace: Palace
) -> None:
    """One line of report per bad record, naming its line; the good records around it
    are filed; nothing raises."""
    good = [
        json.dumps(good_drawer("d_before")),
        json.dumps(good_memory("m_after")),
        json.dumps({**TRIPLE, "id": "kg_after"}),
    ]
    lines = [HEADER.encode(), good[0].encode(), bad if isinstance(bad, bytes) else bad.encode()]
    lines += [line.encode() for line in good[1:]]
    report = import_jsonl(fake_palace, lines)
    assert len(report.rejected) == 1, report.rejected
    assert report.rejected[0].startswith("line 3: ")
    assert message in report.rejected[0]
    assert "\n" not in report.rejected[0]
    assert (report.drawers, report.memories, report.triples) == (1, 1, 1)
    assert [d.id for d in fake_palace.get(["d_before", "d_bad"], user_id="alice")] == ["d_before"]
    assert fake_palace.memory("m_after", user_id="alice").text == "I remember m_after"


def test_ids_that_collide_within_the_file(fake_palace: Palace) -> None:
    """The second record of a type with an id already used in the file is bad; a
    memory and the history of a deleted memory may share an id (the same owner's)."""
    records = [
        good_drawer("d_1"),
        good_drawer("d_1", text="another text"),
        good_memory("m_1"),
        good_memory("m_1", text="another memory"),
        {**TRIPLE, "id": "kg_1"},
        {**TRIPLE, "id": "kg_1", "object": "C"},
        history("m_1", {"event": "archive", "at": T, "user_id": "alice"}),
        history("m_1", {"event": "restore", "at": T, "user_id": "alice"}),
    ]
    report = import_jsonl(fake_palace, lines_of(*records))
    assert report.rejected == [
        "line 3: the drawer record 'd_1' is skipped: line 2 has its id",
        "line 5: the memory record 'm_1' is skipped: line 4 has its id",
        "line 7: the triple record 'kg_1' is skipped: line 6 has its id",
        "line 9: the history record 'm_1' is skipped: line 8 has its id",
    ]
    (drawer,) = fake_palace.get(["d_1"], user_id="alice")
    assert drawer.text == "text of d_1"
    assert [e.event for e in fake_palace.history("m_1", user_id="alice")] == ["add", "archive"]


def test_a_file_that_cannot_be_read_whole_writes_nothing(fake_palace: Palace) -> None:
    """A read that fails half-way (a broken disk, a closed pipe) refuses the import
    before anything is written, though good records came before it."""

    def lines() -> Iterator[bytes]:
        yield HEADER.encode()
        yield json.dumps(good_drawer("d_1")).encode()
        raise OSError(5, "Input/output error")

    with pytest.raises(InvalidQueryError, match=r"cannot be read after line 2: .*Input/output"):
        import_jsonl(fake_palace, lines())
    assert fake_palace.stats().ledger.drawers == 0


def _cli(palace_dir: Path, *args: str, input: bytes | None = None) -> Any:
    palace_dir.mkdir(exist_ok=True)
    (palace_dir / "palace.toml").write_text('embedder = "fake"\nbackend = "sqlite"\n')
    return CliRunner().invoke(cli, ["--palace", str(palace_dir), "import", *args], input=input)


@pytest.fixture
def fake_cli(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's palaces get the FAKE embedder plugin."""
    original = Palace.open.__func__  # type: ignore[attr-defined]

    def open_with_fake(cls: type[Palace], /, path: Any = None, **kwargs: Any) -> Palace:
        kwargs["plugins"] = [FAKE_PLUGIN, *kwargs.get("plugins", ())]
        opened: Palace = original(cls, path, **kwargs)
        return opened

    monkeypatch.setattr(Palace, "open", classmethod(open_with_fake))


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: p.mkdir(), "cannot read {path}: Is a directory"),
        (lambda p: None, "cannot read {path}: No such file or directory"),
        (lambda p: p.write_bytes(b""), "the export is empty"),
        (lambda p: p.write_bytes(b"\xff\xfe\x00h\x00i"), "line 1 is not UTF-8 text"),
        (lambda p: p.write_text('[{"type": "header"'), "line 1 is not JSON"),
        (lambda p: p.write_text(json.dumps(good_drawer("d"))), "not a palace export"),
    ],
)
def test_the_import_command_refuses_an_unreadable_file_in_one_line(
    make: Callable[[Path], None], message: str, tmp_path: Path, fake_cli: None
) -> None:
    path = tmp_path / "in.jsonl"
    make(path)
    result = _cli(tmp_path / "target", str(path))
    assert result.exit_code == 1
    assert result.stderr == f"error: {message.format(path=path)}\n" or (
        result.stderr.startswith(f"error: {message.format(path=path)}")
        and result.stderr.count("\n") == 1
    )
    assert "Traceback" not in result.output
    assert result.stdout == ""
    with Palace.open(tmp_path / "target", embedder="fake") as target:
        assert target.stats().ledger.drawers == 0


def test_the_import_command_reports_each_bad_record_and_files_the_rest(
    tmp_path: Path, fake_cli: None
) -> None:
    path = tmp_path / "in.jsonl"
    body = [HEADER, json.dumps(good_drawer("d_1")), '{"type": "drawer", "id": "d_2", "te']
    path.write_bytes("\n".join([*body, _with(MEMORY, kind="opinion")]).encode() + b"\n\xff\xff\n")
    result = _cli(tmp_path / "target", str(path))
    assert result.exit_code == 1
    assert result.stdout.startswith("imported 1 drawers, 0 memories")
    assert result.stderr.splitlines() == [
        "error: line 3: not JSON: Unterminated string starting at (column 33)",
        "error: line 4: the memory record 'm_bad' is skipped: 'kind' is 'opinion', not one "
        "of: fact, preference, decision, summary, event",
        "error: line 5: not UTF-8 text (byte 1)",
    ]
    as_json = _cli(tmp_path / "target", "-", "--json", input=path.read_bytes())
    assert as_json.exit_code == 1
    assert len(json.loads(as_json.stdout)["rejected"]) == 3
    assert json.loads(as_json.stdout)["unchanged"] == 1


# -- fuzzing ------------------------------------------------------------------------------

_marks = itertools.count()

#: Any JSON value, with NaN and infinities, huge numbers and lone surrogates among them.
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from(["", " ", "bob", "alice", "\ud800", "2026-02-30", "header", "x" * 20_000])
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


def good_records(mark: str) -> list[dict[str, Any]]:
    """One good record of each type, alice's, with ids no other example uses."""
    event = {"event": "delete", "at": T, "user_id": "alice", "old_text": mark}
    return [
        good_drawer(f"d_{mark}", text=f"drawer {mark}"),
        good_memory(f"m_{mark}", source_ids=[f"d_{mark}"]),
        history(f"m_gone_{mark}", event),
        {**TRIPLE, "id": f"kg_{mark}", "object": mark, "user_id": "alice"},
    ]


@st.composite
def mutated_lines(draw: st.DrawFn) -> bytes:
    """A record of some type with one thing wrong, or not a record at all."""
    record = draw(st.sampled_from(good_records(f"mut{draw(st.integers(0, 9999)):04d}")))
    how = draw(st.sampled_from(["set", "set", "drop", "cut", "bytes", "value"]))
    if how == "set":
        name = draw(st.sampled_from(sorted(record)))
        record = {**record, name: draw(json_values)}
    elif how == "drop":
        name = draw(st.sampled_from(sorted(record)))
        record = {k: v for k, v in record.items() if k != name}
    elif how == "value":
        return json.dumps(draw(json_values), allow_nan=True).encode("utf-8", "surrogatepass")
    text = json.dumps(record, allow_nan=True).encode("utf-8", "surrogatepass")
    if how == "cut":
        return text[: draw(st.integers(0, max(len(text) - 1, 0)))]
    if how == "bytes":
        at = draw(st.integers(0, len(text)))
        return text[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80"])) + text[at:]
    return text


def fuzz(n: int) -> settings:
    """``n`` examples (times ``HYPOTHESIS_EXAMPLES_FACTOR``), no deadline."""
    return settings(
        max_examples=n * int(os.environ.get("HYPOTHESIS_EXAMPLES_FACTOR", "1")),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )


@fuzz(30)
@given(mutated=st.lists(mutated_lines(), min_size=1, max_size=6), data=st.data())
def test_fuzzed_imports_never_crash_lose_or_cross_owners(
    fake_palace: Palace, mutated: list[bytes], data: st.DataObject
) -> None:
    """Good records, then mutated ones, then records that try to take bob's: import
    raises nothing; every rejected line is a mutated one, reported once on one line
    naming it; every good record is filed; every attempt on bob's is a conflict; bob's
    records are as they were. (FAKE embedder, real SQLite: this is about robustness.)"""
    if not fake_palace.get(["d_bob"], user_id="bob"):
        fake_palace.add_texts(["Bob's bank PIN is 4321"], ids=["d_bob"], user_id="bob")
        fake_palace.remember("Bob's PIN is 4321", user_id="bob")
    (bobs,) = fake_palace.memories(user_id="bob")
    ids = {"drawer": "d_bob", "memory": bobs.id, "gone": bobs.id}
    before = bobs_view(fake_palace, ids)
    mark = f"good{next(_marks)}"
    good = good_records(mark)
    forged = {"event": "update", "at": T, "user_id": "alice", "new_text": "PIN 0000"}
    attacks = [
        good_drawer("d_bob", text="PIN 0000"),
        good_memory(bobs.id, text="PIN 0000"),
        good_memory(f"m_takes_{mark}", source_ids=["d_bob"]),
        history(bobs.id, forged),
    ]
    attacks = data.draw(st.permutations(attacks))
    lines = [HEADER.encode(), *(json.dumps(r).encode() for r in good), *mutated]
    lines += [json.dumps(r).encode() for r in attacks]
    first_mutated, first_attack = 2 + len(good), 2 + len(good) + len(mutated)

    report = import_jsonl(fake_palace, lines)

    numbers = [int(r.split(":")[0].removeprefix("line ")) for r in report.rejected]
    assert all(r.startswith("line ") and "\n" not in r for r in report.rejected)
    assert numbers == sorted(set(numbers))
    assert all(first_mutated <= n < first_attack for n in numbers), report.rejected
    assert {a.get("id", a.get("memory_id")) for a in attacks} <= set(report.conflicts)
    assert bobs_view(fake_palace, ids) == before
    (drawer,) = fake_palace.get([f"d_{mark}"], user_id="alice")
    assert drawer.text == f"drawer {mark}"
    assert fake_palace.memory(f"m_{mark}", user_id="alice").source_ids == (f"d_{mark}",)
    assert fake_palace.history(f"m_gone_{mark}", user_id="alice")[0].old_text == mark
    assert [t.object for t in fake_palace.kg.query("A", user_id="alice") if t.object == mark]
