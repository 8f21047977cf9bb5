"""Export and import: a palace moved through JSONL comes out the same, and can be audited.

The palaces here use the FAKE hashing embedder (what is tested is bookkeeping: every field
carried over, nothing doubled, texts embedded with the target's model), with the exact
sqlite backend; one CLI test runs the commands end to end.
"""

from __future__ import annotations

import io
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
