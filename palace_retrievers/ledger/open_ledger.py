"""Which ledger a palace keeps its records in: :func:`open_ledger`.

``ledger`` in ``palace.toml`` names it, and ``[ledgers.<name>]`` holds its options:

- ``"sqlite"`` (the default): ``<palace>/ledger.sqlite3``, embedded; no options.
- ``"postgres"``: a schema of a PostgreSQL database, shared by every process and machine
  that opens the palace (:mod:`palace_retrievers.ledger.postgres`)::

      ledger = "postgres"

      [ledgers.postgres]
      url = "postgresql://palace@db.internal/palace"   # or PG* variables, ~/.pgpass
      schema = "team_palace"                             # the same on every machine

  The environment works as for every key: ``PALACE_LEDGER=postgres`` and
  ``PALACE_LEDGERS__POSTGRES__URL=postgresql://...``.

The palace's folder keeps ``palace.toml``, the writer lock and any embedded vector
index in either case.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from palace_retrievers.errors import ConfigError, PalaceNotFoundError
from palace_retrievers.ledger import Ledger
from palace_retrievers.ledger.sqlite import LEDGER_FILE, SQLiteLedger

#: The ledgers a palace can be kept in.
LEDGERS = ("sqlite", "postgres")


def ledger_exists(palace_dir: Path, name: str) -> bool:
    """Whether the palace at ``palace_dir`` can be opened without creating a ledger:
    its ledger file for ``sqlite``; for ``postgres``, its folder (the schema itself is
    checked when the ledger opens)."""
    if name == "sqlite":
        return (palace_dir / LEDGER_FILE).exists()
    return palace_dir.is_dir()


def open_ledger(
    palace_dir: Path,
    name: str = "sqlite",
    options: Mapping[str, Any] | None = None,
    *,
    create: bool = True,
) -> Ledger:
    """Open (or create) the ledger ``name`` of the palace at ``palace_dir``.

    Args:
        palace_dir: The palace's folder (it must exist for ``sqlite``).
        name: ``"sqlite"`` or ``"postgres"``.
        options: The ``[ledgers.<name>]`` table.
        create: Create the ledger when there is none (migrating it forward either way).

    Raises:
        ConfigError: ``name`` is not a ledger, or its options are invalid.
        PalaceNotFoundError: there is no ledger and ``create`` is false.
        SchemaError: the ledger was written by a newer version, or is not a ledger.
        LedgerUnavailableError: the PostgreSQL server cannot be reached.
    """
    options = dict(options or {})
    if name == "sqlite":
        if options:
            raise ConfigError(f"ledger 'sqlite' takes no options, got {', '.join(sorted(options))}")
        path = palace_dir / LEDGER_FILE
        if not create and not path.exists():
            raise PalaceNotFoundError(f"no palace ledger at {path}")
        return SQLiteLedger(path)
    if name == "postgres":
        from palace_retrievers.ledger.postgres import PostgresLedger

        return PostgresLedger(palace_dir, options, create=create)
    raise ConfigError(f"unknown ledger {name!r}; ledgers are: {', '.join(LEDGERS)}")
