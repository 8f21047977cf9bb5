"""How the commands print rows: a rich table on a terminal, plain lines otherwise.

Plain lines are what a pipe, a file or a script gets: one record a line, fields separated
by two spaces, nothing wrapped or coloured. ``--json`` is for programs.

Everything printed here may hold stored text (a memory, a file name, a wing), which must
show as text and never act on the terminal: :func:`clean` shows control characters (ESC,
BEL, C1 codes, bidi overrides, lone surrogates) as ``\\xNN`` / ``\\uNNNN`` escapes, and
rich is handed :class:`rich.text.Text` objects, so that ``[/bold]`` or
``[link=...]`` in a memory prints as those characters instead of being read as markup.
Every command prints through :func:`table`, :func:`fields` and :func:`echo` for that
reason.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import click

#: Code points that act on a terminal or reorder what it shows, rather than print: C0
#: controls, DEL, C1 controls (U+009B is a CSI of its own), the bidi marks, embeddings,
#: overrides and isolates, the Unicode line and paragraph separators, and lone
#: surrogates (which cannot even be written as UTF-8).
HIDDEN = (
    *range(0x00, 0x20),
    0x7F,
    *range(0x80, 0xA0),
    0x061C,
    0x200E,
    0x200F,
    *range(0x202A, 0x202F),
    *range(0x2066, 0x206A),
    0x2028,
    0x2029,
    *range(0xD800, 0xE000),
)
_NAMED = {0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r"}


def _shown(code: int) -> str:
    if code in _NAMED:
        return _NAMED[code]
    if 0xDC80 <= code <= 0xDCFF:  # an undecodable byte of a file name (surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


_ONE_LINE = {code: _shown(code) for code in HIDDEN if code != 0x09}
_LINES = {code: text for code, text in _ONE_LINE.items() if code != 0x0A}


def clean(text: str, *, lines: bool = False) -> str:
    """``text`` safe to print: every control character shown as an escape, not obeyed.

    A tab is kept; a newline is kept only with ``lines`` (a CRLF becoming a newline), and
    otherwise shown as ``\\n`` so that one record stays one line.
    """
    if lines:
        return text.replace("\r\n", "\n").translate(_LINES)
    return text.translate(_ONE_LINE)


def echo(message: str, *, err: bool = False, lines: bool = False) -> None:
    """``click.echo`` of a line that may hold stored text, :func:`clean` first.

    A newline in ``message`` shows as ``\\n`` (a file name cannot forge a second line)
    unless ``lines`` says the message is several lines on purpose.
    """
    click.echo(clean(message, lines=lines), err=err)


def is_terminal() -> bool:
    """True when standard output is a terminal (and rich tables are worth drawing)."""
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False


def cell(value: Any, *, lines: bool = False) -> str:
    """A value as one table cell: times as ``YYYY-MM-DD HH:MM``, lists comma-joined.

    The text is :func:`clean`: a newline shows as ``\\n`` unless ``lines``.
    """
    if value is None:
        return ""
    if isinstance(value, datetime):
        text = value.strftime("%Y-%m-%d %H:%M")
    elif isinstance(value, float):
        text = f"{value:.3f}"
    elif isinstance(value, list | tuple | set | frozenset):
        text = ", ".join(str(v) for v in value)
    else:
        text = str(value)
    return clean(text, lines=lines)


def record(value: Any) -> dict[str, Any]:
    """A memory, event, triple or report as a JSON-ready dict."""
    as_dict = getattr(value, "as_dict", None)
    if callable(as_dict):
        out: dict[str, Any] = as_dict()
        return out
    out = dataclasses.asdict(value)
    return {k: v.isoformat() if isinstance(v, datetime) else v for k, v in out.items()}


def one_line(text: str, width: int = 100) -> str:
    """``text`` with its whitespace collapsed, cut to ``width`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _console() -> Any:
    """A rich console that reads nothing it prints as markup, emoji codes or highlights."""
    from rich.console import Console

    return Console(markup=False, emoji=False, highlight=False)


def table(
    columns: Sequence[str], rows: Sequence[Sequence[Any]], *, title: str | None = None
) -> None:
    """Print ``rows`` under ``columns``: a rich table on a terminal, else plain lines."""
    cells = [[cell(v) for v in row] for row in rows]
    if is_terminal():
        from rich.table import Table
        from rich.text import Text

        grid = Table(
            title=Text(clean(title)) if title else None, show_lines=False, header_style="bold"
        )
        for column in columns:
            grid.add_column(Text(clean(column)), overflow="fold")
        for row in cells:
            grid.add_row(*(Text(value) for value in row))
        _console().print(grid)
        return
    if title:
        click.echo(clean(title))
    for row in cells:
        click.echo("  ".join(row).rstrip())


def fields(pairs: Sequence[tuple[str, Any]]) -> None:
    """Print ``name  value`` lines for one record (a two-column table on a terminal)."""
    if is_terminal():
        from rich.table import Table
        from rich.text import Text

        grid = Table(show_header=False, box=None, pad_edge=False)
        grid.add_column(style="bold")
        grid.add_column(overflow="fold")
        for name, value in pairs:
            grid.add_row(Text(clean(name)), Text(cell(value, lines=True)))
        _console().print(grid)
        return
    width = max((len(name) for name, _ in pairs), default=0)
    for name, value in pairs:
        click.echo(f"{clean(name).ljust(width)}  {cell(value)}".rstrip())
