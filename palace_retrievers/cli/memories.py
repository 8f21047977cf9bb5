"""Memory commands: remember, forget, memories (list/show/edit/delete), restore, gc, context."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import click

from palace_retrievers.cli.app import (
    MOST_HITS,
    MOST_ROWS,
    at_most,
    cli,
    emit_json,
    fail,
    json_option,
    opened,
    parse_duration,
    user_option,
)
from palace_retrievers.cli.output import clean, echo, fields, one_line, record, table
from palace_retrievers.ingest.syncing import EVERY_OWNER, Owner
from palace_retrievers.records import utc
from palace_retrievers.records.memories import MEMORY_KINDS, MEMORY_STATUSES

#: ``--status all`` lists memories of every status.
ALL_STATUSES = "all"


def _date(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d") if value else ""


def _memory_rows(memories: Sequence[Any]) -> list[tuple[Any, ...]]:
    return [
        (m.id, _date(m.created_at), m.kind, m.status, f"{m.importance:.2f}", one_line(m.text))
        for m in memories
    ]


MEMORY_COLUMNS = ["id", "date", "kind", "status", "importance", "text"]


@cli.command()
@click.argument("text")
@click.option("--kind", type=click.Choice(MEMORY_KINDS), default="fact", show_default=True)
@click.option(
    "--importance",
    type=click.FloatRange(0, 1),
    default=1.0,
    show_default=True,
    help="How much the memory matters (0-1).",
)
@click.option("--tag", "tags", multiple=True, help="A tag (repeat for several).")
@click.option("--ttl", help="Forget it after this long: 3600, 45m, 12h, 30d, 2w.")
@user_option
@click.option("--agent", "agent_id", help="The agent it belongs to.")
@click.option("--session", "session_id", help="The session it came from.")
@click.option("--source", "source_ids", multiple=True, help="A drawer id it came from (repeat).")
@click.option("--wing", default="", help="The wing it belongs to.")
@click.option("--pending", is_flag=True, help="File it as pending (to be confirmed), not active.")
@json_option
@click.pass_context
def remember(
    ctx: click.Context,
    text: str,
    kind: str,
    importance: float,
    tags: tuple[str, ...],
    ttl: str | None,
    user_id: str | None,
    agent_id: str | None,
    session_id: str | None,
    source_ids: tuple[str, ...],
    wing: str,
    pending: bool,
    as_json: bool,
) -> None:
    """Remember TEXT (a duplicate is merged; a changed value supersedes the old one)."""
    with opened(ctx, create=True) as palace:
        result = palace.remember(
            text,
            kind=kind,
            importance=importance,
            tags=tags,
            ttl=parse_duration(ttl) if ttl else None,
            user_id=user_id,
            agent_id=agent_id,
            session_id=session_id,
            source_ids=source_ids,
            wing=wing,
            status="pending" if pending else "active",
        )
    previous = result.previous
    if as_json:
        emit_json(
            {
                "action": result.action,
                "memory": record(result.memory),
                "previous": record(previous) if previous is not None else None,
            }
        )
        return
    memory = result.memory
    if result.action == "duplicate":
        echo(f"already remembered as {memory.id} ({memory.kind}); importance raised")
    elif result.action == "updated" and previous is not None:
        echo(f"remembered {memory.id} ({memory.kind}); it supersedes {previous.id}")
        echo(f"  was: {one_line(previous.text)}")
    else:
        echo(f"remembered {memory.id} ({memory.kind}, {memory.status})")


@cli.command()
@click.argument("memory_ids", nargs=-1)
@user_option
@click.option("--yes", is_flag=True, help="Do not ask before forgetting everything of --user.")
@json_option
@click.pass_context
def forget(
    ctx: click.Context,
    memory_ids: tuple[str, ...],
    user_id: str | None,
    yes: bool,
    as_json: bool,
) -> None:
    """Delete memories for good, or everything a user has in the palace.

    With MEMORY_IDS, those memories (of --user) are deleted; their history keeps a
    'delete' event. Without, --user is required and EVERYTHING of that user is deleted:
    drawers, memories, closets and triples, from the ledger and from every index.
    (`palace memories delete` archives a memory instead, which `palace restore` undoes.)
    """
    if not memory_ids:
        if not user_id:
            fail("name the memory ids to forget, or --user to forget everything of a user")
        with opened(ctx) as palace:
            if not yes:
                click.confirm(
                    clean(
                        f"Forget everything of user {user_id!r} in {palace.path}? "
                        "This cannot be undone"
                    ),
                    abort=True,
                    err=True,
                )
            report = palace.forget(user_id=user_id)
        if as_json:
            emit_json(record(report))
            return
        counts = ", ".join(
            f"{value} {name}"
            for name, value in record(report).items()
            if isinstance(value, int) and not isinstance(value, bool)
        )
        echo(f"forgot everything of user {user_id!r}: {counts}")
        return
    with opened(ctx) as palace:
        count = palace.forget_memories(list(memory_ids), user_id=user_id)
    if as_json:
        emit_json({"deleted": count})
        return
    echo(f"forgot {count} of {len(memory_ids)} memories")
    if count < len(memory_ids):
        echo("  the others are not memories of this user (see --user)")


@cli.group()
def memories() -> None:
    """List, show, edit and delete memories."""


@memories.command("list")
@user_option
@click.option("--kind", type=click.Choice(MEMORY_KINDS), help="Only memories of this kind.")
@click.option(
    "--status",
    default="active",
    show_default=True,
    type=click.Choice([*MEMORY_STATUSES, ALL_STATUSES]),
    help="Only memories in this state.",
)
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    callback=at_most(MOST_ROWS),
)
@click.option(
    "--offset",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    callback=at_most(MOST_ROWS),
)
@json_option
@click.pass_context
def list_memories(
    ctx: click.Context,
    user_id: str | None,
    kind: str | None,
    status: str,
    limit: int,
    offset: int,
    as_json: bool,
) -> None:
    """List memories, newest first."""
    with opened(ctx) as palace:
        found = palace.memories(
            user_id=user_id,
            kind=kind,
            status=None if status == ALL_STATUSES else status,
            limit=limit,
            offset=offset,
        )
    if as_json:
        emit_json([record(m) for m in found])
        return
    if not found:
        echo("no memories")
        return
    table(MEMORY_COLUMNS, _memory_rows(found))


@memories.command("show")
@click.argument("memory_id")
@user_option
@json_option
@click.pass_context
def show_memory(ctx: click.Context, memory_id: str, user_id: str | None, as_json: bool) -> None:
    """Show a memory, its history and its supersede chain."""
    with opened(ctx) as palace:
        memory = palace.memory(memory_id, user_id=user_id)
        events = palace.history(memory_id, user_id=user_id)
        chain = palace.chain(memory_id, user_id=user_id)
    if as_json:
        emit_json(
            {
                **record(memory),
                "history": [record(e) for e in events],
                "chain": [record(m) for m in chain],
            }
        )
        return
    fields([(name, value) for name, value in record(memory).items() if name != "embedding"])
    if events:
        echo("")
        table(
            ["when", "event", "detail"],
            [(e.at, e.event, one_line(_event_detail(e))) for e in events],
            title="history",
        )
    if len(chain) > 1:
        echo("")
        table(MEMORY_COLUMNS, _memory_rows(chain), title="supersede chain (oldest first)")


def _event_detail(event: Any) -> str:
    parts = []
    for name in ("old_text", "new_text", "text", "detail", "reason"):
        value = getattr(event, name, None)
        if value:
            parts.append(f"{name}: {value}")
    return "; ".join(parts)


@memories.command("edit")
@click.argument("memory_id")
@user_option
@click.option("--text", help="The new text (re-embedded).")
@click.option("--importance", type=click.FloatRange(0, 1), help="The new importance (0-1).")
@click.option("--tag", "tags", multiple=True, help="Replace the tags (repeat for several).")
@click.option("--clear-tags", is_flag=True, help="Remove every tag.")
@click.option("--kind", type=click.Choice(MEMORY_KINDS), help="The new kind.")
@click.option("--pin", is_flag=True, help="Pin it: importance 1.0.")
@json_option
@click.pass_context
def edit_memory(
    ctx: click.Context,
    memory_id: str,
    user_id: str | None,
    text: str | None,
    importance: float | None,
    tags: tuple[str, ...],
    clear_tags: bool,
    kind: str | None,
    pin: bool,
    as_json: bool,
) -> None:
    """Change a memory's text, importance, tags or kind (each edit is in its history)."""
    if tags and clear_tags:
        fail("--tag and --clear-tags contradict each other")
    new_tags: tuple[str, ...] | None = () if clear_tags else (tags or None)
    if text is None and importance is None and new_tags is None and kind is None and not pin:
        fail("nothing to change: give --text, --importance, --tag, --clear-tags, --kind or --pin")
    with opened(ctx) as palace:
        memory = None
        if text is not None or importance is not None or new_tags is not None or kind is not None:
            memory = palace.edit_memory(
                memory_id,
                user_id=user_id,
                text=text,
                importance=importance,
                tags=new_tags,
                kind=kind,
            )
        if pin:
            memory = palace.pin(memory_id, user_id=user_id)
    assert memory is not None
    if as_json:
        emit_json(record(memory))
        return
    echo(f"edited {memory.id}: {one_line(memory.text)}")


@memories.command("delete")
@click.argument("memory_ids", nargs=-1, required=True)
@user_option
@json_option
@click.pass_context
def delete_memories(
    ctx: click.Context, memory_ids: tuple[str, ...], user_id: str | None, as_json: bool
) -> None:
    """Archive memories (search skips them; `palace restore` brings them back)."""
    with opened(ctx) as palace:
        archived = [palace.archive_memory(i, user_id=user_id) for i in memory_ids]
    if as_json:
        emit_json([record(m) for m in archived])
        return
    for memory in archived:
        echo(f"archived {memory.id}: {one_line(memory.text)}")


@cli.command()
@click.argument("memory_ids", nargs=-1, required=True)
@user_option
@json_option
@click.pass_context
def restore(
    ctx: click.Context, memory_ids: tuple[str, ...], user_id: str | None, as_json: bool
) -> None:
    """Bring archived memories back (active again)."""
    with opened(ctx) as palace:
        restored = [palace.restore(i, user_id=user_id) for i in memory_ids]
    if as_json:
        emit_json([record(m) for m in restored])
        return
    for memory in restored:
        echo(f"restored {memory.id}: {one_line(memory.text)}")


@cli.command()
@click.option("--dry-run", is_flag=True, help="Only count what would be archived.")
@click.option("--now", help="Act as if it were this time (ISO-8601).")
@click.option(
    "--user",
    "user_id",
    help="Only this user's memories (--user '': the unowned ones; default: every user's "
    "and the unowned ones).",
)
@json_option
@click.pass_context
def gc(
    ctx: click.Context, dry_run: bool, now: str | None, user_id: str | None, as_json: bool
) -> None:
    """Archive expired, long-superseded and long-unused unimportant memories.

    The rules and their ages are in palace.toml; archived memories are skipped by
    search and brought back by `palace restore`. Without --user, every user's memories
    are collected (a palace-wide chore, like `palace sync`).
    """
    owner: Owner = EVERY_OWNER if user_id is None else user_id
    with opened(ctx) as palace:
        report = palace.gc(now=utc(now) if now else None, dry_run=dry_run, user_id=owner)
    if as_json:
        emit_json(record(report))
        return
    verb = "would archive" if dry_run else "archived"
    counts = ", ".join(f"{count} {reason}" for reason, count in report.counts.items())
    echo(f"{verb} {report.total} memories ({counts})")
    for reason, ids in report.ids.items():
        for memory_id in ids:
            echo(f"  {reason}: {memory_id}")


@cli.command()
@click.argument("query")
@user_option
@click.option(
    "-k",
    "--k",
    "k",
    default=10,
    show_default=True,
    type=int,
    callback=at_most(MOST_HITS),
    help="At most this many.",
)
@click.option(
    "--max-tokens",
    default=800,
    show_default=True,
    type=int,
    callback=at_most(MOST_HITS),
    help="Token budget.",
)
@click.option("--wing", help="Only this wing.")
@json_option
@click.pass_context
def context(
    ctx: click.Context,
    query: str,
    user_id: str | None,
    k: int,
    max_tokens: int,
    wing: str | None,
    as_json: bool,
) -> None:
    """Print the memory block an assistant's prompt needs for QUERY."""
    with opened(ctx) as palace:
        block = palace.context(query, user_id=user_id, k=k, max_tokens=max_tokens, wing=wing)
    if as_json:
        emit_json({"context": block})
        return
    echo(block, lines=True)
