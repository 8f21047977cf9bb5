"""The ``palace`` command line.

Exit codes: 0 on success, 1 on a user error (one line on stderr, no traceback), 2 on bad
usage. The palace is ``~/.palace/default`` unless ``--palace PATH`` or ``PALACE_PATH``
says otherwise. Every command that prints data takes ``--json``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from palace_plugins.manager import PluginManager
from palace_retrievers.config import CONFIG_FILE, Config, load, render
from palace_retrievers.errors import PalaceError
from palace_retrievers.palace import Palace, default_path
from palace_retrievers.records import Hit

F = TypeVar("F", bound=Callable[..., Any])


def _fail(message: str) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(1)


def _emit_json(data: Any) -> None:
    click.echo(json.dumps(data, ensure_ascii=False, indent=2, default=str))


class _Group(click.Group):
    """Turns every :class:`PalaceError` into one line on stderr and exit code 1."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except PalaceError as exc:
            _fail(str(exc))


@contextmanager
def _opened(ctx: click.Context, *, create: bool = False, **kwargs: Any) -> Iterator[Palace]:
    palace = Palace.open(ctx.obj["path"], create=create, **kwargs)
    try:
        yield palace
    finally:
        palace.close()


def _json_option(func: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON.")(func)


@click.group(cls=_Group)
@click.option(
    "--palace",
    "palace_path",
    type=click.Path(path_type=Path),
    envvar="PALACE_PATH",
    help="The palace directory (default: $PALACE_PATH or ~/.palace/default).",
)
@click.option("-v", "--verbose", is_flag=True, help="Log what the palace does to stderr.")
@click.version_option(package_name="palace-retrievers")
@click.pass_context
def cli(ctx: click.Context, palace_path: Path | None, verbose: bool) -> None:
    """A local-first memory palace: mine sources, search them, keep them."""
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    ctx.obj = {"path": (palace_path or default_path()).expanduser()}


@cli.command()
@click.option("--backend", help="Vector index backend plugin (default: chroma).")
@click.option("--embedder", help="Embedder plugin (default: sentence-transformers).")
@click.option("--model", help="Embedding model (default: the embedder's own).")
@click.pass_context
def init(ctx: click.Context, backend: str | None, embedder: str | None, model: str | None) -> None:
    """Create a palace (its ledger, indexes and palace.toml)."""
    path: Path = ctx.obj["path"]
    if (path / CONFIG_FILE).exists() and any(v is not None for v in (backend, embedder, model)):
        _fail(f"{path} already has a {CONFIG_FILE}; edit it instead")
    if not (path / CONFIG_FILE).exists():
        path.mkdir(parents=True, exist_ok=True)
        overrides = {
            k: v
            for k, v in (("backend", backend), ("embedder", embedder), ("model", model))
            if v is not None
        }
        config = load(path, overrides=overrides)
        (path / CONFIG_FILE).write_text(render(config), encoding="utf-8")
    with _opened(ctx, create=True) as palace:
        click.echo(
            f"palace ready at {palace.path} (backend {palace.config.backend}, "
            f"embedder {palace.embedder.model_name})"
        )


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
    help="Seconds to wait for another mine of this palace to finish (default: fail at once).",
)
@_json_option
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
    with _opened(ctx, create=True) as palace:
        report = palace.mine(path, wing=wing, room=room, source=source, user_id=user_id, wait=wait)
    if as_json:
        _emit_json(dataclasses.asdict(report))
        return
    click.echo(
        f"mined {report.mined} of {report.seen} sources into wing {report.wing!r}: "
        f"{report.drawers_added} drawers filed, {report.drawers_removed} removed, "
        f"{report.unchanged} unchanged, {len(report.skipped)} skipped"
    )
    if not report.seen and not report.skipped:
        click.echo(f"  found nothing to mine in {report.path}")
    for skipped in report.skipped:
        click.echo(f"  skipped {skipped.location}: {skipped.reason}")
    if report.gone:
        click.echo(
            f"  {report.gone} sources mined from {report.path} before are no longer there; "
            "`palace sync` removes their drawers"
        )


@cli.command()
@click.argument("path", required=False, type=click.Path(path_type=Path))
@click.option("--dry-run", is_flag=True, help="Only tell what would be removed.")
@_json_option
@click.pass_context
def sync(ctx: click.Context, path: Path | None, dry_run: bool, as_json: bool) -> None:
    """Remove the drawers of deleted or newly ignored files.

    Every path mined before (or only those at, under or above PATH) is listed again;
    the drawers and closets of sources no longer there are removed. A mined path that
    no longer exists at all is kept unless PATH names it.
    """
    with _opened(ctx) as palace:
        report = palace.sync(path, dry_run=dry_run)
    if as_json:
        _emit_json({**dataclasses.asdict(report), "sources_removed": report.sources_removed})
        return
    verb = "would remove" if dry_run else "removed"
    click.echo(
        f"{verb} {report.drawers_removed} drawers of {report.sources_removed} sources "
        f"no longer found ({len(report.roots)} mined paths checked)"
    )
    for root in report.roots:
        for key in root.gone:
            click.echo(f"  {'gone' if dry_run else 'removed'} {root.wing}: {key}")
        if root.note:
            click.echo(f"  kept {root.root} ({root.wing}): {root.note}")


def _show_hit(rank: int, hit: Hit) -> None:
    d = hit.drawer
    lines = f":{d.line_start}-{d.line_end}" if d.line_start is not None else ""
    parts = " ".join(f"{name}={value:.3f}" for name, value in hit.scores.items())
    click.echo(f"{rank}. [{hit.score:.3f}] {d.source}{lines}  ({d.wing}/{d.room})  {parts}")
    snippet = " ".join(d.text.split())
    click.echo(f"   {snippet[:240]}{'…' if len(snippet) > 240 else ''}")


@cli.command()
@click.argument("query")
@click.option("-k", "--k", "k", default=5, show_default=True, type=int, help="How many hits.")
@click.option("--wing", help="Only this wing.")
@click.option("--room", help="Only this room.")
@click.option("--user", "user_id", help="Only this user's drawers.")
@click.option("--kind", help="Only records of this kind.")
@click.option("--since", help="Only records dated at or after (ISO-8601).")
@click.option("--until", help="Only records dated at or before (ISO-8601).")
@_json_option
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
    as_json: bool,
) -> None:
    """Search the palace for QUERY."""
    with _opened(ctx) as palace:
        hits = palace.search(
            query, k=k, wing=wing, room=room, user_id=user_id, kind=kind, since=since, until=until
        )
    if as_json:
        _emit_json([h.as_dict() for h in hits])
        return
    if not hits:
        click.echo("no hits")
    for rank, hit in enumerate(hits, 1):
        _show_hit(rank, hit)


@cli.command()
@_json_option
@click.pass_context
def status(ctx: click.Context, as_json: bool) -> None:
    """Show what the palace holds and whether its indexes are healthy."""
    with _opened(ctx) as palace:
        stats = palace.stats()
    if as_json:
        _emit_json(dataclasses.asdict(stats))
        return
    ledger = stats.ledger
    click.echo(f"palace   {stats.path} (schema {stats.schema_version})")
    click.echo(f"model    {stats.model} ({stats.dimension or '?'} dimensions)")
    click.echo(f"drawers  {ledger.drawers} from {ledger.sources} sources; {ledger.closets} closets")
    for index in stats.indexes:
        state = "ok" if index.ok else "DEGRADED (run `palace reindex`)"
        click.echo(
            f"index    {index.backend}/{index.collection}: {state}, "
            f"{index.count} of {index.ledger_count} vectors; {index.detail}"
        )
    for wing, rooms in ledger.wings.items():
        shown = ", ".join(f"{room} {count}" for room, count in rooms.items())
        click.echo(f"wing     {wing}: {shown}")
    for failure in stats.plugin_failures:
        click.echo(f"plugin   failed to load: {failure}")


@cli.command()
@_json_option
def plugins(as_json: bool) -> None:
    """List installed plugins: distribution, version and hooks."""
    infos = list(PluginManager().plugins())
    if as_json:
        _emit_json([dataclasses.asdict(info) for info in infos])
        return
    for info in infos:
        origin = f"{info.distribution or '?'} {info.version or ''}".strip()
        if info.error:
            click.echo(f"{info.name}  ({origin})  FAILED TO LOAD: {info.error}")
        else:
            click.echo(f"{info.name}  ({origin})  hooks: {', '.join(info.hooks)}")


@cli.command()
@click.pass_context
def reindex(ctx: click.Context) -> None:
    """Rebuild the vector indexes from the ledger (re-embedding if the model changed)."""
    with _opened(ctx, check_model=False) as palace:
        count = palace.reindex()
        degraded = palace.indexes.degraded
    if degraded:
        _fail(f"reindexed {count} vectors but the index is still degraded: {degraded}")
    click.echo(f"reindexed {count} vectors into {palace.config.backend}")


def main() -> None:
    """Entry point of the ``palace`` console script."""
    cli(prog_name="palace")


__all__ = ["Config", "cli", "main"]


if __name__ == "__main__":
    main()
