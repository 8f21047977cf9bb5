"""The ``palace`` group and what its commands share: opening the palace, errors, options.

Exit codes: 0 on success, 1 on a user error (one line on stderr, no traceback), 2 on bad
usage. The palace is ``~/.palace/default`` unless ``--palace PATH`` or ``PALACE_PATH``
says otherwise.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from palace_retrievers.cli.output import HIDDEN, clean
from palace_retrievers.errors import PalaceError
from palace_retrievers.palace import Palace, default_path

F = TypeVar("F", bound=Callable[..., Any])

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
#: What :func:`emit_json` writes as ``\\uNNNN``: the characters :func:`~.output.clean`
#: shows as escapes that ``json.dumps`` leaves as they are (it escapes C0 itself).
_JSON_ESCAPES = {code: f"\\u{code:04x}" for code in HIDDEN if code >= 0x20}


def fail(message: str) -> NoReturn:
    """Print ``error: message`` on stderr, as one line, and exit with code 1.

    The message may name stored text (a file, a memory id): its control characters, a
    newline included, are shown as escapes (:func:`~.output.clean`).
    """
    click.echo(f"error: {clean(message)}", err=True)
    sys.exit(1)


def emit_json(data: Any) -> None:
    """Print ``data`` as indented JSON (times and other objects as strings).

    JSON escapes C0 controls itself; the other characters a terminal would obey or that
    reorder what it shows (DEL, C1 controls, bidi overrides, lone surrogates) are written
    as ``\\uNNNN`` escapes too, which decode to the same strings.
    """
    text = json.dumps(data, ensure_ascii=False, indent=2, default=str)
    click.echo(text.translate(_JSON_ESCAPES))


class PalaceGroup(click.Group):
    """A group that turns every :class:`PalaceError` into one line on stderr and exit 1."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except PalaceError as exc:
            fail(str(exc))


@contextmanager
def opened(ctx: click.Context, *, create: bool = False, **kwargs: Any) -> Iterator[Palace]:
    """Open the palace the command line names, and close it afterwards."""
    palace = Palace.open(ctx.find_root().obj["path"], create=create, **kwargs)
    try:
        yield palace
    finally:
        palace.close()


def json_option(func: F) -> F:
    """``--json``: print the command's data as JSON."""
    return click.option("--json", "as_json", is_flag=True, help="Print JSON.")(func)


def user_option(func: F) -> F:
    """``--user``: the user whose records the command sees (default: unowned records)."""
    return click.option(
        "--user",
        "user_id",
        help="Only this user's records (default: records that belong to no user).",
    )(func)


def parse_duration(value: str) -> timedelta:
    """``"90"`` (seconds), ``"45m"``, ``"12h"``, ``"30d"`` or ``"2w"`` as a timedelta.

    Raises:
        click.BadParameter: ``value`` is not such a duration, or is zero.
    """
    match = _DURATION.match(value)
    if not match or float(match.group(1)) <= 0:
        raise click.BadParameter(
            f"{value!r} is not a duration; use e.g. 3600, 45m, 12h, 30d or 2w", param_hint="--ttl"
        )
    return timedelta(seconds=float(match.group(1)) * _UNIT_SECONDS[match.group(2)])


@click.group(cls=PalaceGroup)
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
    """A local-first memory palace: mine sources, search them, keep them.

    \b
    Shell completion (bash; zsh_source and fish_source for the others):
      eval "$(_PALACE_COMPLETE=bash_source palace)"
    """
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    ctx.obj = {"path": (palace_path or default_path()).expanduser()}
