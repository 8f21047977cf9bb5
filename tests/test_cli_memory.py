"""The memory and graph commands: remember, memories, restore, forget, gc, context, kg.

These test the command line's plumbing (options, output, exit codes, user isolation), not
the quality of memory decisions, so they run on the FAKE hashing embedder (registered
into the CLI's ``Palace.open`` by the ``fake_cli`` fixture) and the exact sqlite backend.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from fakes import FAKE_PLUGIN

from palace_retrievers import Palace
from palace_retrievers.cli import cli

Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def fake_cli(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every ``Palace.open`` of the CLI also registers the FAKE embedder plugin."""
    original = Palace.open.__func__  # type: ignore[attr-defined]

    def open_with_fake(cls: type[Palace], path: Any = None, **kwargs: Any) -> Palace:
        kwargs["plugins"] = [FAKE_PLUGIN, *kwargs.get("plugins", ())]
        palace: Palace = original(cls, path, **kwargs)
        return palace

    monkeypatch.setattr(Palace, "open", classmethod(open_with_fake))


@pytest.fixture
def run(tmp_path: Path, fake_cli: None) -> Run:
    """``run(*args, input=None)``: the CLI on a fresh FAKE-embedder palace."""
    palace = tmp_path / "palace"

    def run_(*args: str, input: str | None = None) -> tuple[int, str, str]:
        result = CliRunner().invoke(cli, ["--palace", str(palace), *args], input=input)
        return result.exit_code, result.stdout, result.stderr

    code, out, err = run_("init", "--embedder", "fake", "--backend", "sqlite", "--json")
    assert code == 0, err
    assert json.loads(out)["model"] == "fake/hashing-bag-of-words-64"
    return run_


def ok(run: Run, *args: str) -> str:
    code, out, err = run(*args)
    assert code == 0, f"{args}: {err or out}"
    return out


def data(run: Run, *args: str) -> Any:
    return json.loads(ok(run, *args, "--json"))


def test_remember_list_show_edit_delete_restore_forget(run: Run) -> None:
    made = data(run, "remember", "I prefer green tea in the morning", "--kind", "preference")
    assert made["action"] == "added"
    memory = made["memory"]
    assert memory["kind"] == "preference"
    assert memory["importance"] == 1.0
    memory_id = memory["id"]

    again = data(run, "remember", "I prefer green tea in the morning", "--kind", "preference")
    assert again["action"] == "duplicate"
    assert again["memory"]["id"] == memory_id

    listed = data(run, "memories", "list")
    assert [m["id"] for m in listed] == [memory_id]
    assert memory_id in ok(run, "memories", "list")  # plain lines when piped

    shown = data(run, "memories", "show", memory_id)
    assert shown["text"] == "I prefer green tea in the morning"
    assert [e["event"] for e in shown["history"]][:2] == ["add", "duplicate"]
    assert [m["id"] for m in shown["chain"]] == [memory_id]
    plain = ok(run, "memories", "show", memory_id)
    assert "history" in plain
    assert "duplicate" in plain

    edited = data(run, "memories", "edit", memory_id, "--importance", "0.4", "--tag", "drinks")
    assert edited["importance"] == 0.4
    assert edited["tags"] == ["drinks"]
    pinned = data(run, "memories", "edit", memory_id, "--pin")
    assert pinned["importance"] == 1.0

    archived = data(run, "memories", "delete", memory_id)
    assert archived[0]["status"] == "archived"
    assert data(run, "memories", "list") == []
    assert [m["id"] for m in data(run, "memories", "list", "--status", "archived")] == [memory_id]
    assert "archived" in ok(run, "memories", "list", "--status", "all")

    restored = data(run, "restore", memory_id)
    assert restored[0]["status"] == "active"
    assert [m["id"] for m in data(run, "memories", "list")] == [memory_id]

    assert data(run, "reindex") == {"vectors": 1, "backend": "sqlite"}  # the active memory
    assert data(run, "forget", memory_id) == {"deleted": 1}
    assert data(run, "memories", "list", "--status", "all") == []
    code, _, err = run("memories", "show", memory_id)
    assert code == 1
    assert err.startswith("error: ")


def test_memories_are_isolated_by_user(run: Run) -> None:
    mine = data(run, "remember", "My locker code is 4417", "--user", "u1")["memory"]["id"]
    data(run, "remember", "The office closes at six", "--user", "u2")

    assert [m["id"] for m in data(run, "memories", "list", "--user", "u1")] == [mine]
    assert data(run, "memories", "list") == []  # no --user: only unowned memories
    assert "4417" not in ok(run, "memories", "list", "--user", "u2")
    code, _, err = run("memories", "show", mine, "--user", "u2")
    assert code == 1
    assert err.count("\n") == 1
    code, _, _ = run("memories", "delete", mine, "--user", "u2")
    assert code == 1
    assert data(run, "forget", mine, "--user", "u2") == {"deleted": 0}

    hits = data(run, "search", "locker code", "--user", "u2")
    assert all("4417" not in h["text"] for h in hits)
    hits = data(run, "search", "locker code", "--user", "u1")
    assert hits[0]["source"] == f"memory:{mine}"
    assert data(run, "search", "locker code", "--user", "u1", "--no-memories") == []


def test_forget_a_user_asks_first_and_removes_everything(run: Run, tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.txt").write_text("Bob keeps bees on the roof of the depot.\n")
    ok(run, "mine", str(notes), "--user", "bob")
    data(run, "remember", "Bob is allergic to peanuts", "--user", "bob")
    data(run, "kg", "add", "Bob", "works at", "Depot", "--user", "bob")
    data(run, "remember", "The depot opens at 7", "--user", "ann")

    code, _, err = run("forget")
    assert code == 1
    assert "--user" in err

    # The explicit memory, and whatever the memory extractor drew from the note.
    memories = len(data(run, "memories", "list", "--user", "bob", "--status", "all"))
    assert memories >= 1
    code, _, _ = run("forget", "--user", "bob", input="n\n")
    assert code == 1  # aborted
    assert len(data(run, "memories", "list", "--user", "bob", "--status", "all")) == memories

    report = data(run, "forget", "--user", "bob", "--yes")
    assert report["drawers"] == 1
    assert report["memories"] == memories
    assert report["triples"] >= 1  # the explicit one, and any the extractor filed
    assert data(run, "memories", "list", "--user", "bob", "--status", "all") == []
    assert data(run, "search", "bees on the roof", "--user", "bob") == []
    assert data(run, "kg", "timeline", "Bob", "--user", "bob") == []
    assert len(data(run, "memories", "list", "--user", "ann")) == 1  # others untouched


def test_gc_archives_what_expired(run: Run) -> None:
    memory_id = data(run, "remember", "The parking permit is valid", "--ttl", "1h")["memory"]["id"]
    assert data(run, "memories", "show", memory_id)["expires_at"]

    preview = data(run, "gc", "--dry-run", "--now", "2999-01-01")
    assert preview["expired"] == 1
    assert preview["dry_run"] is True
    assert [m["id"] for m in data(run, "memories", "list")] == [memory_id]

    out = ok(run, "gc", "--now", "2999-01-01")
    assert "archived 1 memories (1 expired, 0 superseded, 0 unused)" in out
    assert data(run, "memories", "list") == []
    assert data(run, "memories", "list", "--status", "archived")[0]["id"] == memory_id


def test_gc_user_archives_only_that_users_memories(run: Run) -> None:
    ann = data(run, "remember", "Ann's parking permit", "--ttl", "1h", "--user", "ann")
    bob = data(run, "remember", "Bob's parking permit", "--ttl", "1h", "--user", "bob")

    out = ok(run, "gc", "--user", "ann", "--now", "2999-01-01")
    assert "archived 1 memories (1 expired, 0 superseded, 0 unused)" in out
    assert ann["memory"]["id"] in out
    assert data(run, "memories", "list", "--user", "ann") == []
    assert [m["id"] for m in data(run, "memories", "list", "--user", "bob")] == [
        bob["memory"]["id"]
    ]
    nobodys = data(run, "remember", "The shared parking permit", "--ttl", "1h")["memory"]["id"]
    unowned = data(run, "gc", "--user", "", "--dry-run", "--now", "2999-01-01")
    assert unowned["ids"]["expired"] == [nobodys]


def test_context_block(run: Run) -> None:
    data(run, "remember", "We deploy on Thursdays", "--kind", "decision", "--user", "u1")
    block = ok(run, "context", "when do we deploy", "--user", "u1")
    assert "(decision) We deploy on Thursdays" in block
    assert data(run, "context", "when do we deploy", "--user", "u1")["context"] == block.rstrip(
        "\n"
    )
    assert "Thursdays" not in ok(run, "context", "when do we deploy")  # another owner's


def test_knowledge_graph_commands(run: Run) -> None:
    first = data(run, "kg", "add", "Alice", "lives in", "Lisbon", "--valid-from", "2020-01-01")
    assert first["predicate"] == "lives_in"
    data(run, "kg", "add", "Alice", "lives in", "Porto", "--valid-from", "2024-06-01")
    data(run, "kg", "add", "Alice", "likes", "jazz", "--user", "u1", "--valid-from", "2020-01-01")

    now = data(run, "kg", "query", "alice")
    assert [t["object"] for t in now] == ["Porto"]
    then = data(run, "kg", "query", "Alice", "--as-of", "2021-01-01")
    assert [t["object"] for t in then] == ["Lisbon"]
    timeline = data(run, "kg", "timeline", "Alice")
    assert [(t["object"], t["valid_to"] is None) for t in timeline] == [
        ("Lisbon", False),
        ("Porto", True),
    ]
    assert "Porto" in ok(run, "kg", "timeline", "Alice")
    assert [t["object"] for t in data(run, "kg", "query", "Alice", "--user", "u1")] == ["jazz"]

    assert data(run, "kg", "invalidate", "Alice", "lives in", "--ended", "2025-01-01") == {
        "invalidated": 1
    }
    assert data(run, "kg", "query", "Alice") == []
    assert "nothing known about 'Alice'" in ok(run, "kg", "query", "Alice")
    assert data(run, "kg", "stats")["triples"] == 2

    code, _, err = run(
        "kg", "invalidate", "Alice", "likes", "--ended", "1999-01-01", "--user", "u1"
    )
    assert code == 1
    assert err.startswith("error: ")


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["remember", "   "], 1, "error: "),
        (["remember", "x", "--importance", "2"], 2, "--importance"),
        (["remember", "x", "--ttl", "soon"], 2, "not a duration"),
        (["remember", "x", "--kind", "rumour"], 2, "--kind"),
        (["memories", "edit", "m_nope"], 1, "nothing to change"),
        (["memories", "edit", "m_nope", "--text", "y"], 1, "error: "),
        (["memories", "list", "--status", "lost"], 2, "--status"),
        (["gc", "--now", "tomorrow"], 1, "not an ISO-8601 time"),
        (["kg", "query", "Alice", "--as-of", "someday"], 1, "error: "),
        (["context", ""], 1, "error: "),
    ],
)
def test_bad_input(run: Run, args: list[str], code: int, message: str) -> None:
    got, _, err = run(*args)
    assert got == code, err
    assert message in err
    if code == 1:
        assert err.count("\n") == 1
        assert "Traceback" not in err


def test_tables_on_a_terminal_plain_lines_in_a_pipe(
    run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory_id = data(run, "remember", "Standup is at nine", "--tag", "team")["memory"]["id"]
    data(run, "kg", "add", "Standup", "starts at", "9:00")

    piped = ok(run, "memories", "list")
    assert piped.splitlines()[0].startswith(f"{memory_id}  ")
    assert "│" not in piped

    from palace_retrievers.cli import output

    monkeypatch.setattr(output, "is_terminal", lambda: True)
    drawn = ok(run, "memories", "list")
    assert "│" in drawn or "┃" in drawn
    for header in ("id", "date", "kind", "status", "importance", "text"):
        assert header in drawn
    assert "Standup" in drawn
    assert "nine" in drawn
    timeline = ok(run, "kg", "timeline", "standup")
    assert "predicate" in timeline
    assert "starts_at" in timeline
    shown = ok(run, "memories", "show", memory_id)
    assert "history" in shown
    assert "team" in shown
    hits = ok(run, "search", "standup nine")
    assert "score" in hits
    assert "memory, active" in hits
    assert "hooks" in ok(run, "plugins")


def test_a_new_value_supersedes_and_history_shows_the_chain(run: Run) -> None:
    old = data(run, "remember", "I live in Lisbon", "--user", "u1")["memory"]["id"]
    out = ok(run, "remember", "I live in Porto now", "--user", "u1")
    assert f"supersedes {old}" in out
    assert "was: I live in Lisbon" in out
    current = data(run, "memories", "list", "--user", "u1")[0]["id"]

    plain = [h["id"] for h in data(run, "search", "where do I live", "--user", "u1")]
    assert current in plain
    assert old not in plain
    with_history = data(run, "search", "where do I live", "--user", "u1", "--history")
    assert [h["id"] for h in with_history][:2] == [current, old]
    assert with_history[1]["metadata"]["status"] == "superseded"

    chain = data(run, "memories", "show", current, "--user", "u1")["chain"]
    assert [m["text"] for m in chain] == ["I live in Lisbon", "I live in Porto now"]
    assert "supersede chain" in ok(run, "memories", "show", current, "--user", "u1")
