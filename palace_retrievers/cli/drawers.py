"""Commands on the palace and its drawers: init, mine, sync, search, status, plugins, reindex."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import click

from palace_plugins.manager import PluginManager
from palace_retrievers.cli import output
from palace_retrievers.cli.app import (
    MOST_HITS,
    at_most,
    check_place,
    cli,
    emit_json,
    fail,
    json_option,
    not_nan,
    opened,
    user_option,
)
from palace_retrievers.cli.output import echo, one_line, table
from palace_retrievers.config import CONFIG_FILE, load, render
from palace_retrievers.errors import PalaceError
from palace_retrievers.ids import split_source_key
from palace_retrievers.ingest.syncing import EVERY_OWNER, Owner
from palace_retrievers.records import Hit


@cli.command()
@click.option("--backend", help="Vector index backend plugin (default: chroma).")
@click.option("--embedder", help="Embedder plugin (default: sentence-transformers).")
@click.option("--model", help="Embedding model (default: the embedder's own).")
@json_option
@click.pass_context
def init(
    ctx: click.Context,
    backend: str | None,
    embedder: str | None,
    model: str | None,
    as_json: bool,
) -> None:
    """Create a palace (its ledger, indexes and palace.toml)."""
    path: Path = ctx.obj["path"]
    check_place(path)
    if (path / CONFIG_FILE).exists() and any(v is not None for v in (backend, embedder, model)):
        fail(f"{path} already has a {CONFIG_FILE}; edit it instead")
    if not (path / CONFIG_FILE).exists():
        path.mkdir(parents=True, exist_ok=True)
        overrides = {
            k: v
            for k, v in (("backend", backend), ("embedder", embedder), ("model", model))
            if v is not None
        }
        config = load(path, overrides=overrides)
        (path / CONFIG_FILE).write_text(render(config), encoding="utf-8")
    with opened(ctx, create=True) as palace:
        ready = {
            "path": str(palace.path),
            "backend": palace.config.backend,
            "embedder": palace.config.embedder,
            "model": palace.embedder.model_name,
        }
    if as_json:
        emit_json(ready)
        return
    echo(f"palace ready at {ready['path']} (backend {ready['backend']}, embedder {ready['model']})")


@cli.command()
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--wing", help="Wing to file into (default: the folder's name).")
@click.option("--room", help="Put every drawer in this room (default: by folder).")
@click.option("--source", default="files", show_default=True, help="Source plugin.")
@click.option("--user", "user_id", help="Owner of the mined drawers.")
@click.option(
    "--wait",
    type=click.FloatRange(min=0),
    default=0,
    callback=not_nan,
    help="Seconds to wait for another mine of this palace to finish (default: fail at once).",
)
@json_option
@click.pass_context
def mine(
    ctx: click.Context,
    path: Path,
    wing: str | None,
    room: str | None,
    source: str,
    user_id: str | None,
    wait: float,
    as_json: bool,
) -> None:
    """Mine PATH into the palace (only what changed since the last mine).

    Safe to run again, and to re-run after it was interrupted: it finishes the job.
    One mine runs on a palace at a time; a second one stops with an error naming the
    first's pid (or waits, with --wait).
    """
    with opened(ctx, create=True) as palace:
        report = palace.mine(path, wing=wing, room=room, source=source, user_id=user_id, wait=wait)
    if as_json:
        emit_json(dataclasses.asdict(report))
        return
    echo(
        f"mined {report.mined} of {report.seen} sources into wing {report.wing!r}: "
        f"{report.drawers_added} drawers filed, {report.drawers_removed} removed, "
        f"{report.unchanged} unchanged, {len(report.skipped)} skipped"
    )
    if not report.seen and not report.skipped:
        echo(f"  found nothing to mine in {report.path}")
    for skipped in report.skipped:
        echo(f"  skipped {skipped.location}: {skipped.reason}")
    if report.gone:
        echo(
            f"  {report.gone} sources mined from {report.path} before are no longer there; "
            "`palace sync` removes their drawers"
        )


@cli.command()
@click.argument("path", required=False, type=click.Path(path_type=Path))
@click.option("--dry-run", is_flag=True, help="Only tell what would be removed.")
@click.option(
    "--user",
    "user_id",
    help="Only this user's sources, mined with `palace mine --user` (default: every user's "
    "and the unowned ones).",
)
@json_option
@click.pass_context
def sync(
    ctx: click.Context, path: Path | None, dry_run: bool, user_id: str | None, as_json: bool
) -> None:
    """Remove the drawers of deleted or newly ignored files.

    Every path mined before (or only those at, under or above PATH) is listed again;
    the drawers and closets of sources no longer there are removed. A mined path that
    no longer exists at all is kept unless PATH names it. With --user, only the paths
    that user mined are checked, and only that user's drawers are removed.
    """
    with opened(ctx) as palace:
        owner: Owner = EVERY_OWNER if user_id is None else user_id
        report = palace.sync(path, dry_run=dry_run, user_id=owner)
    if as_json:
        emit_json({**dataclasses.asdict(report), "sources_removed": report.sources_removed})
        return
    verb = "would remove" if dry_run else "removed"
    echo(
        f"{verb} {report.drawers_removed} drawers of {report.sources_removed} sources "
        f"no longer found ({len(report.roots)} mined paths checked)"
    )
    for root in report.roots:
        for recorded in root.gone:
            owner, key = split_source_key(recorded)
            whose = f" (user {owner})" if owner else ""
            echo(f"  {'gone' if dry_run else 'removed'} {root.wing}: {key}{whose}")
        if root.note:
            echo(f"  kept {root.root} ({root.wing}): {root.note}")


def _where(hit: Hit) -> str:
    d = hit.drawer
    lines = f":{d.line_start}-{d.line_end}" if d.line_start is not None else ""
    return f"{d.source}{lines}"


def _place(hit: Hit) -> str:
    """``wing/room`` of a drawer; ``memory, <status>`` of a memory."""
    if hit.memory is not None:
        return f"memory, {hit.memory.status}"
    return f"{hit.wing}/{hit.room}"


def _show_hits(hits: list[Hit]) -> None:
    if not hits:
        echo("no hits")
        return
    if output.is_terminal():
        rows = [
            (
                rank,
                f"{hit.score:.3f}",
                _where(hit),
                _place(hit),
                hit.drawer.kind,
                one_line(hit.text, 160),
            )
            for rank, hit in enumerate(hits, 1)
        ]
        table(["#", "score", "source", "where", "kind", "text"], rows)
        return
    for rank, hit in enumerate(hits, 1):
        d = hit.drawer
        parts = " ".join(f"{name}={value:.3f}" for name, value in hit.scores.items())
        echo(f"{rank}. [{hit.score:.3f}] {_where(hit)}  ({_place(hit)})  {parts}")
        echo(f"   {one_line(d.text, 241)}")


#: A one-shot search scans a collection of fewer vectors exactly, from the ledger, instead
#: of opening its index: the scan is exact, and below this many vectors (about 0.9 ms
#: per 100 vectors read on two cores) it answers before an embedded Chroma has opened.
#: A status leaves such an index unopened too, and reads its health from its files when
#: the backend can (:meth:`~palace_retrievers.index.VectorIndex.disk_health`).
ONE_SHOT_EXACT_BELOW = 50_000


def one_shot_exact_below(ctx: click.Context) -> int:
    """The ``exact_below`` of a one-shot search or status: :data:`ONE_SHOT_EXACT_BELOW`
    when the ledger is the palace's SQLite file, 0 (open the index) with PostgreSQL,
    whose vectors would cross the network at every command."""
    try:
        local = load(ctx.find_root().obj["path"]).ledger == "sqlite"
    except PalaceError:
        return 0  # opening the palace says what is wrong
    return ONE_SHOT_EXACT_BELOW if local else 0


@cli.command()
@click.argument("query")
@click.option(
    "-k",
    "--k",
    "k",
    default=5,
    show_default=True,
    type=int,
    callback=at_most(MOST_HITS),
    help="How many hits.",
)
@click.option("--wing", help="Only this wing.")
@click.option("--room", help="Only this room.")
@user_option
@click.option("--kind", help="Only records of this kind.")
@click.option("--since", help="Only records dated at or after (ISO-8601).")
@click.option("--until", help="Only records dated at or before (ISO-8601).")
@click.option(
    "--memories/--no-memories",
    default=True,
    show_default=True,
    help="Search the memories along with the drawers.",
)
@click.option("--history", is_flag=True, help="Also return the memories a current one superseded.")
@json_option
@click.pass_context
def search(
    ctx: click.Context,
    query: str,
    k: int,
    wing: str | None,
    room: str | None,
    user_id: str | None,
    kind: str | None,
    since: str | None,
    until: str | None,
    memories: bool,
    history: bool,
    as_json: bool,
) -> None:
    """Search the palace for QUERY (drawers and memories together)."""
    with opened(ctx, exact_below=one_shot_exact_below(ctx)) as palace:
        hits = palace.search(
            query,
            k=k,
            wing=wing,
            room=room,
            user_id=user_id,
            kind=kind,
            since=since,
            until=until,
            memories=memories,
            include_history=history,
        )
    if as_json:
        emit_json([h.as_dict() for h in hits])
        return
    _show_hits(hits)


@cli.command()
@json_option
@click.pass_context
def status(ctx: click.Context, as_json: bool) -> None:
    """Show what the palace holds and whether its indexes are healthy."""
    with opened(ctx, exact_below=one_shot_exact_below(ctx)) as palace:  # read, not opened
        stats = palace.stats()
        read_only = palace.read_only
    if as_json:
        emit_json({**dataclasses.asdict(stats), "read_only": read_only})
        return
    ledger = stats.ledger
    echo(f"palace   {stats.path} (schema {stats.schema_version})")
    if read_only:
        echo("         read-only: it can be searched and read, not written")
    echo(f"model    {stats.model} ({stats.dimension or '?'} dimensions)")
    echo(f"drawers  {ledger.drawers} from {ledger.sources} sources; {ledger.closets} closets")
    if ledger.memories:
        shown = ", ".join(f"{count} {status}" for status, count in ledger.memories.items())
        echo(f"memories {shown}")
    for index in stats.indexes:
        state = "ok" if index.ok else "DEGRADED (run `palace reindex`)"
        echo(
            f"index    {index.backend}/{index.collection}: {state}, "
            f"{index.count} of {index.ledger_count} vectors; {index.detail}"
        )
    for wing, rooms in ledger.wings.items():
        shown = ", ".join(f"{room} {count}" for room, count in rooms.items())
        echo(f"wing     {wing}: {shown}")
    for failure in stats.plugin_failures:
        echo(f"plugin   failed to load: {failure}")


@cli.command()
@json_option
def plugins(as_json: bool) -> None:
    """List installed plugins: distribution, version and hooks."""
    infos = list(PluginManager().plugins())
    if as_json:
        emit_json([dataclasses.asdict(info) for info in infos])
        return
    if output.is_terminal():
        rows = [
            (
                info.name,
                info.distribution or "?",
                info.version or "",
                f"FAILED TO LOAD: {info.error}" if info.error else ", ".join(info.hooks),
            )
            for info in infos
        ]
        table(["plugin", "distribution", "version", "hooks"], rows)
        return
    for info in infos:
        origin = f"{info.distribution or '?'} {info.version or ''}".strip()
        if info.error:
            echo(f"{info.name}  ({origin})  FAILED TO LOAD: {info.error}")
        else:
            echo(f"{info.name}  ({origin})  hooks: {', '.join(info.hooks)}")


@cli.command()
@json_option
@click.pass_context
def reindex(ctx: click.Context, as_json: bool) -> None:
    """Rebuild the vector indexes from the ledger (re-embedding if the model changed)."""
    with opened(ctx, check_model=False) as palace:
        count = palace.reindex()
        degraded = palace.indexes.degraded
    if degraded:
        fail(f"reindexed {count} vectors but the index is still degraded: {degraded}")
    if as_json:
        emit_json({"vectors": count, "backend": palace.config.backend})
        return
    echo(f"reindexed {count} vectors into {palace.config.backend}")
