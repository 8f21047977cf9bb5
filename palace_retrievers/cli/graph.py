"""``palace kg``: the temporal knowledge graph (add, query, timeline, invalidate, stats)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from palace_retrievers.cli.app import cli as root
from palace_retrievers.cli.app import emit_json, json_option, opened, user_option
from palace_retrievers.cli.output import echo, fields, record, table

TRIPLE_COLUMNS = ["subject", "predicate", "object", "from", "to", "confidence"]


def _day(value: Any) -> str:
    return value.strftime("%Y-%m-%d") if value is not None else ""


def _triple_rows(triples: Sequence[Any]) -> list[tuple[Any, ...]]:
    return [
        (
            t.subject,
            t.predicate,
            t.object,
            _day(t.valid_from),
            _day(t.valid_to),
            f"{t.confidence:.2f}",
        )
        for t in triples
    ]


def _show(triples: Sequence[Any], as_json: bool, *, empty: str) -> None:
    if as_json:
        emit_json([record(t) for t in triples])
    elif not triples:
        echo(empty)
    else:
        table(TRIPLE_COLUMNS, _triple_rows(triples))


@root.group()
def kg() -> None:
    """The knowledge graph: facts with the time they held."""


@kg.command("add")
@click.argument("subject")
@click.argument("predicate")
@click.argument("object_", metavar="OBJECT")
@click.option("--valid-from", help="When it became true (ISO-8601; default: now).")
@click.option("--confidence", type=click.FloatRange(0, 1), default=1.0, show_default=True)
@click.option("--source-drawer", help="The drawer it was read from.")
@user_option
@json_option
@click.pass_context
def add(
    ctx: click.Context,
    subject: str,
    predicate: str,
    object_: str,
    valid_from: str | None,
    confidence: float,
    source_drawer: str | None,
    user_id: str | None,
    as_json: bool,
) -> None:
    """Add SUBJECT PREDICATE OBJECT (closing a contradicted single-valued fact)."""
    with opened(ctx, create=True) as palace:
        triple = palace.kg.add(
            subject,
            predicate,
            object_,
            valid_from=valid_from,
            confidence=confidence,
            source_drawer=source_drawer,
            user_id=user_id,
        )
    if as_json:
        emit_json(record(triple))
        return
    echo(
        f"added {triple.subject} {triple.predicate} {triple.object} "
        f"(from {_day(triple.valid_from) or 'always'})"
    )


@kg.command("query")
@click.argument("entity")
@click.option("--as-of", help="What held at this time (ISO-8601; default: now).")
@click.option("--predicate", help="Only this predicate.")
@user_option
@json_option
@click.pass_context
def query(
    ctx: click.Context,
    entity: str,
    as_of: str | None,
    predicate: str | None,
    user_id: str | None,
    as_json: bool,
) -> None:
    """The facts about ENTITY that hold now (or --as-of a time)."""
    with opened(ctx) as palace:
        triples = palace.kg.query(entity, as_of=as_of, predicate=predicate, user_id=user_id)
    _show(triples, as_json, empty=f"nothing known about {entity!r}")


@kg.command("timeline")
@click.argument("entity")
@user_option
@json_option
@click.pass_context
def timeline(ctx: click.Context, entity: str, user_id: str | None, as_json: bool) -> None:
    """Every fact about ENTITY, past and present, in time order."""
    with opened(ctx) as palace:
        triples = palace.kg.timeline(entity, user_id=user_id)
    _show(triples, as_json, empty=f"nothing known about {entity!r}")


@kg.command("invalidate")
@click.argument("subject")
@click.argument("predicate")
@click.argument("object_", metavar="[OBJECT]", required=False)
@click.option("--ended", help="When it stopped being true (ISO-8601; default: now).")
@user_option
@json_option
@click.pass_context
def invalidate(
    ctx: click.Context,
    subject: str,
    predicate: str,
    object_: str | None,
    ended: str | None,
    user_id: str | None,
    as_json: bool,
) -> None:
    """Mark SUBJECT PREDICATE [OBJECT] as no longer true (the history keeps it)."""
    with opened(ctx) as palace:
        count = palace.kg.invalidate(subject, predicate, object_, ended=ended, user_id=user_id)
    if as_json:
        emit_json({"invalidated": count})
        return
    echo(f"invalidated {count} facts")


@kg.command("stats")
@user_option
@json_option
@click.pass_context
def stats(ctx: click.Context, user_id: str | None, as_json: bool) -> None:
    """How many entities and facts the graph holds."""
    with opened(ctx) as palace:
        data = record(palace.kg.stats(user_id=user_id))
    if as_json:
        emit_json(data)
        return
    fields(list(data.items()))
