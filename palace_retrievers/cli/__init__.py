"""The ``palace`` command line.

Exit codes: 0 on success, 1 on a user error (one line on stderr, no traceback), 2 on bad
usage. The palace is ``~/.palace/default`` unless ``--palace PATH`` or ``PALACE_PATH``
says otherwise. Every command that prints data takes ``--json``; on a terminal, lists are
drawn as tables, and piped they are plain lines.

The commands live by subject: :mod:`.drawers` (init, mine, sync, search, status, plugins,
reindex), :mod:`.memories` (remember, forget, memories, restore, gc, context), :mod:`.graph`
(kg), :mod:`.transfer` (export, import) and :mod:`.servers` (serve, mcp).
"""

from __future__ import annotations

from palace_retrievers.cli import drawers as drawers
from palace_retrievers.cli import graph as graph
from palace_retrievers.cli import memories as memories
from palace_retrievers.cli import servers as servers
from palace_retrievers.cli import transfer as transfer
from palace_retrievers.cli.app import cli


def main() -> None:
    """Entry point of the ``palace`` console script."""
    cli(prog_name="palace")


__all__ = ["cli", "main"]
