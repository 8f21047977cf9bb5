"""How the commands print rows: a rich table on a terminal, plain lines otherwise.

Plain lines are what a pipe, a file or a script gets: one record a line, fields separated
by two spaces, nothing wrapped or coloured. ``--json`` is for programs.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import click


def is_terminal() -> bool:
    """True when standard output is a terminal (and rich tables are worth drawing)."""
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False


def cell(value: Any) -> str:
    """A value as one table cell: times as ``YYYY-MM-DD HH:MM``, lists comma-joined."""
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M")
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, list | tuple | set | frozenset):
        return ", ".join(str(v) for v in value)
    return str(value)


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


def table(
    columns: Sequence[str], rows: Sequence[Sequence[Any]], *, title: str | None = None
) -> None:
    """Print ``rows`` under ``columns``: a rich table on a terminal, else plain lines."""
    cells = [[cell(v) for v in row] for row in rows]
    if is_terminal():
        from rich.console import Console
        from rich.table import Table

        grid = Table(title=title, show_lines=False, header_style="bold")
        for column in columns:
            grid.add_column(column, overflow="fold")
        for row in cells:
            grid.add_row(*row)
        Console().print(grid)
        return
    if title:
        click.echo(title)
    for row in cells:
        click.echo("  ".join(row).rstrip())


def fields(pairs: Sequence[tuple[str, Any]]) -> None:
    """Print ``name  value`` lines for one record (a two-column table on a terminal)."""
    if is_terminal():
        from rich.console import Console
        from rich.table import Table

        grid = Table(show_header=False, box=None, pad_edge=False)
        grid.add_column(style="bold")
        grid.add_column(overflow="fold")
        for name, value in pairs:
            grid.add_row(name, cell(value))
        Console().print(grid)
        return
    width = max((len(name) for name, _ in pairs), default=0)
    for name, value in pairs:
        click.echo(f"{name.ljust(width)}  {cell(value)}".rstrip())
