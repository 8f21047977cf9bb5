"""The ``palace`` group and what its commands share: opening the palace, errors, options.

Exit codes: 0 on success, 1 on a user error (one line on stderr, no traceback), 2 on bad
usage. The palace is ``~/.palace/default`` unless ``--palace PATH`` or ``PALACE_PATH``
says otherwise.
"""

from __future__ import annotations

import errno
import json
import logging
import math
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from palace_retrievers.cli.output import HIDDEN, clean
from palace_retrievers.errors import (
    PalaceError,
    PalaceNotFoundError,
    PalaceReadOnlyError,
    StorageFullError,
)
from palace_retrievers.palace import Palace, default_path

F = TypeVar("F", bound=Callable[..., Any])

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
#: What :func:`emit_json` writes as ``\\uNNNN``: the characters :func:`~.output.clean`
#: shows as escapes that ``json.dumps`` leaves as they are (it escapes C0 itself).
JSON_ESCAPES = {code: f"\\u{code:04x}" for code in HIDDEN if code >= 0x20}


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
    click.echo(text.translate(JSON_ESCAPES))


def os_error(exc: OSError) -> PalaceError:
    """The :class:`PalaceError` an ``OSError`` that got this far stands for.

    What the palace reads and writes is checked where it is read and written; this
    is the last word for what slips through (a lock file in a read-only folder, a
    disk that fills up under a plugin), so that the user still gets one line.
    """
    where = f" {exc.filename}" if exc.filename else ""
    what = exc.strerror or str(exc)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return StorageFullError(
            f"the disk is full: cannot write{where} ({what}); free some space and try again"
        )
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return PalaceReadOnlyError(
            f"cannot write{where} ({what}): the palace or its folder is read-only to you"
        )
    return PalaceError(f"{what}:{where}" if where else what)


class _CleanFormatter(logging.Formatter):
    """Log lines (which may name stored text, a file or a wing) with their control
    characters shown as escapes, as everything else the command line prints."""

    def format(self, record: logging.LogRecord) -> str:
        return clean(super().format(record), lines=True)


class PalaceGroup(click.Group):
    """A group that turns every :class:`PalaceError` into one line on stderr and exit 1
    (and an ``OSError`` too, through :func:`os_error`; ``--verbose`` logs its trace)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except PalaceError as exc:
            fail(str(exc))
        except OSError as exc:
            logging.getLogger(__name__).info("%s", type(exc).__name__, exc_info=True)
            fail(str(os_error(exc)))


def check_place(path: Path) -> None:
    """Raise :class:`PalaceNotFoundError` if ``path``, or a folder above it, is a file.

    Creating a palace there fails deep down with NotADirectoryError; this says why.
    """
    for place in (path, *path.parents):
        if place.exists():
            if not place.is_dir():
                raise PalaceNotFoundError(
                    f"there can be no palace at {path}: {place} is a file, not a folder"
                )
            return


@contextmanager
def opened(ctx: click.Context, *, create: bool = False, **kwargs: Any) -> Iterator[Palace]:
    """Open the palace the command line names, and close it afterwards."""
    check_place(ctx.find_root().obj["path"])
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


#: The most rows SQLite can be asked for or told to skip (its 64-bit integers).
MOST_ROWS = 2**63 - 1
#: The most hits or tokens a command asks for: more than any palace holds, and small
#: enough that what a search derives from it (k times the overfetch) stays a 64-bit
#: integer.
MOST_HITS = 2**31 - 1


def at_most(most: int) -> Callable[[click.Context, click.Parameter, int | None], int | None]:
    """An option callback taking an integer above ``most`` as ``most``.

    A count beyond what anything holds (``--limit 100000000000000000000``) means "all of
    them"; passed on as is, it is an OverflowError in SQLite.
    """

    def clamp(ctx: click.Context, param: click.Parameter, value: int | None) -> int | None:
        return value if value is None else min(value, most)

    return clamp


def not_nan(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """An option callback refusing ``nan``, which passes every range check."""
    if value is not None and math.isnan(value):
        raise click.BadParameter("nan is not a number of seconds")
    return value


def parse_duration(value: str) -> timedelta:
    """``"90"`` (seconds), ``"45m"``, ``"12h"``, ``"30d"`` or ``"2w"`` as a timedelta.

    Raises:
        click.BadParameter: ``value`` is not such a duration, is zero, or is too long.
    """
    match = _DURATION.match(value)
    if not match or float(match.group(1)) <= 0:
        raise click.BadParameter(
            f"{value!r} is not a duration; use e.g. 3600, 45m, 12h, 30d or 2w", param_hint="--ttl"
        )
    try:
        duration = timedelta(seconds=float(match.group(1)) * _UNIT_SECONDS[match.group(2)])
        datetime.now(UTC) + duration + timedelta(days=366)  # its expiry is a date
        return duration
    except OverflowError:  # beyond the year 9999, or than a timedelta holds
        raise click.BadParameter(
            f"{value!r} is longer than any duration a memory can keep", param_hint="--ttl"
        ) from None


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
    for handler in logging.getLogger().handlers:  # the one basicConfig made, if it did
        if (
            isinstance(handler, logging.StreamHandler)
            and handler.stream is sys.stderr
            and type(handler.formatter) is logging.Formatter
        ):
            handler.setFormatter(_CleanFormatter(handler.formatter._fmt))
    ctx.obj = {"path": (palace_path or default_path()).expanduser()}
