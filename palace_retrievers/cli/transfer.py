"""``palace export`` and ``palace import``: move a palace, or audit what it keeps."""

from __future__ import annotations

import dataclasses
from typing import IO, Any

import click

from palace_retrievers.cli.app import JSON_ESCAPES, cli, emit_json, json_option, opened
from palace_retrievers.cli.output import clean, echo
from palace_retrievers.errors import InvalidQueryError
from palace_retrievers.transfer import EVERYONE, write_jsonl, write_markdown


@cli.command("export")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["jsonl", "markdown"]),
    default="jsonl",
    show_default=True,
    help="jsonl to move the palace (`palace import` reads it), markdown to read it.",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, allow_dash=True),
    default="-",
    help="The file to write (default: standard output).",
)
@click.option(
    "--user",
    "user_id",
    help="Only this user's records (default: every user's; --user '' for unowned ones).",
)
@click.pass_context
def export(ctx: click.Context, fmt: str, output: str, user_id: str | None) -> None:
    """Export the palace verbatim: drawers, memories with their history, and triples.

    Vectors are left out: `palace import` embeds the texts with the target's model.
    """
    with opened(ctx) as palace, click.open_file(output, "w", encoding="utf-8") as out:
        records = palace.export_records(user_id=EVERYONE if user_id is None else user_id)
        if fmt == "jsonl":
            # C1 controls, DEL, bidi overrides and lone surrogates as \uNNNN escapes: the
            # same strings once read, and nothing a terminal would obey on the way.
            count = write_jsonl(records, _Translated(out, JSON_ESCAPES))
        elif output == "-":  # Markdown to read on the terminal: controls shown, not obeyed
            count = write_markdown(records, _Translated(out, None))
        else:
            count = write_markdown(records, out)
    if output != "-":
        echo(f"exported {count} records to {output}", err=True)


@cli.command("import")
@click.argument("path", type=click.Path(allow_dash=True))
@json_option
@click.pass_context
def import_(ctx: click.Context, path: str, as_json: bool) -> None:
    """Import a JSONL export (PATH, or - for standard input) into the palace.

    Texts are embedded with this palace's model; what is already here as exported is left
    alone, so importing the same file twice changes nothing. A record that would
    overwrite, or point at, another owner's records here is skipped and listed. The file
    is read whole first: a bad record (not JSON, a field missing or wrong, ...) is skipped
    with one line on stderr naming its line number, the good ones are imported, and the
    exit code is 1; a file that is not an export is refused with nothing imported.
    """
    try:
        stream = click.open_file(path, "rb")
    except OSError as exc:
        raise InvalidQueryError(f"cannot read {path}: {exc.strerror or exc}") from None
    with stream as lines, opened(ctx, create=True) as palace:
        report = palace.import_jsonl(lines)
    if as_json:
        emit_json(dataclasses.asdict(report))
    else:
        click.echo(
            f"imported {report.drawers} drawers, {report.memories} memories, "
            f"{report.events} history events and {report.triples} triples; "
            f"{report.unchanged} already here, {report.embedded} texts embedded"
        )
        if report.conflicts:
            echo(
                f"  skipped {len(report.conflicts)} records that would overwrite, or point "
                "at, another owner's records here: " + ", ".join(report.conflicts[:10])
            )
    for reason in report.rejected:
        echo(f"error: {reason}", err=True)
    if report.rejected:
        ctx.exit(1)


class _Translated:
    """A text stream that writes through ``table`` (``str.translate``), or through
    :func:`~palace_retrievers.cli.output.clean` keeping newlines when ``table`` is
    ``None``."""

    def __init__(self, out: IO[str], table: dict[int, str] | None) -> None:
        self._out = out
        self._table = table

    def write(self, text: str) -> Any:
        table = self._table
        shown = clean(text, lines=True) if table is None else text.translate(table)
        return self._out.write(shown)
