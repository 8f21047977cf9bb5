"""A palace in a child process, for the tests that need real processes (not a test file).

The FAKE embedder from ``fakes.py`` is installed in every plugin manager of the process,
so the child opens the same palaces as the tests do::

    python palace_driver.py mine PALACE CORPUS [--backend B] [--kill-at POINT:N] [--slow S]
    python palace_driver.py cli ARGS...        # the `palace` command line itself

``--kill-at POINT:N`` sends SIGKILL to the process itself at the N-th time it reaches
POINT, where POINT is one of:

- ``embed``: inside an embedding call, before it returns (nothing of the batch filed);
- ``commit``: just after a batch's ledger transaction committed, before the vector
  indexes hear of it (the ledger is ahead of the index);
- ``upsert``: just after a vector-index upsert (drawers in the index, closets maybe not,
  the journal not yet cleared);
- ``clear``: just before the journal is cleared (the index is up to date);
- ``write``: just after any ledger transaction commits.

``--slow S`` makes each embedding call take S seconds longer (a mine that lasts).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fakes import FAKE_PLUGIN, HashingEmbedder

from palace_plugins import manager
from palace_retrievers import Palace
from palace_retrievers.ledger.sqlite import SQLiteLedger
from palace_retrievers.search.indexes import IndexSet

#: Settings of the palaces the process tests mine: small drawers, small batches, so that
#: a small corpus gives many batches to be killed in.
CONFIG = {"chunking": {"size": 120, "overlap": 20}, "mining": {"batch_size": 8}}


def install_fake_embedder() -> None:
    """Make every plugin manager of this process offer the FAKE ``"fake"`` embedder."""
    original = manager.PluginManager.__init__

    def init(self: manager.PluginManager, **kwargs: Any) -> None:
        kwargs["plugins"] = [FAKE_PLUGIN, *kwargs.get("plugins", ())]
        original(self, **kwargs)

    manager.PluginManager.__init__ = init  # type: ignore[method-assign]


def _wrap(owner: type, name: str, *, before: Callable[[], None] | None = None,
          after: Callable[[], None] | None = None) -> None:  # fmt: skip
    original = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if before is not None:
            before()
        result = original(*args, **kwargs)
        if after is not None:
            after()
        return result

    setattr(owner, name, wrapper)


def arm(point: str, nth: int) -> None:
    """SIGKILL this process the ``nth`` time it reaches ``point``."""
    reached = 0

    def hit() -> None:
        nonlocal reached
        reached += 1
        if reached == nth:
            os.kill(os.getpid(), signal.SIGKILL)

    if point == "embed":
        _wrap(HashingEmbedder, "embed_documents", before=hit)
    elif point == "commit":
        _wrap(SQLiteLedger, "file_sources", after=hit)
    elif point == "upsert":
        _wrap(IndexSet, "upsert", after=hit)
    elif point == "clear":
        _wrap(SQLiteLedger, "clear_pending", before=hit)
    elif point == "write":
        original = SQLiteLedger._write

        def write(self: SQLiteLedger, **kwargs: Any) -> Any:
            context = original(self, **kwargs)

            class Killing:
                def __enter__(self) -> Any:
                    return context.__enter__()

                def __exit__(self, *exc: Any) -> Any:
                    out = context.__exit__(*exc)
                    hit()
                    return out

            return Killing()

        SQLiteLedger._write = write  # type: ignore[method-assign]
    else:
        raise SystemExit(f"unknown kill point {point!r}")


def slow_down(seconds: float) -> None:
    _wrap(HashingEmbedder, "embed_documents", before=lambda: time.sleep(seconds))


def main() -> None:
    install_fake_embedder()
    if sys.argv[1:2] == ["cli"]:
        from palace_retrievers.cli import cli

        cli.main(args=sys.argv[2:], prog_name="palace")
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["mine"])
    parser.add_argument("palace", type=Path)
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--backend", default="chroma")
    parser.add_argument("--wing", default="corpus")
    parser.add_argument("--kill-at")
    parser.add_argument("--slow", type=float, default=0.0)
    args = parser.parse_args()
    if args.kill_at:
        point, _, nth = args.kill_at.partition(":")
        arm(point, int(nth))
    if args.slow:
        slow_down(args.slow)
    with Palace.open(args.palace, backend=args.backend, embedder="fake", config=CONFIG) as p:
        report = p.mine(args.corpus, wing=args.wing, progress=False)
    print(f"mined {report.mined} of {report.seen}, {report.drawers_added} drawers", flush=True)


if __name__ == "__main__":
    main()
