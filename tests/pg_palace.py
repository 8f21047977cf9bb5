"""A palace whose ledger is in PostgreSQL, opened the way ``Palace.open`` opens one.

Used by the end-to-end tests of the PostgreSQL ledger, in the test process and in child
processes (``python tests/pg_palace.py ...``), which stand for other machines sharing the
palace: each has a folder of its own (its ``palace.toml``, its writer lock) and the same
PostgreSQL schema.

``open_postgres_palace`` is ``Palace.open`` with ``ledger = "postgres"`` and the
``[ledgers.postgres]`` options in the configuration it is given.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from palace_retrievers import Palace
from palace_retrievers.embedder import Embedder


def open_postgres_palace(
    path: Path,
    *,
    url: str,
    schema: str,
    embedder: Embedder,
    backend: str = "sqlite",
    backend_options: dict[str, Any] | None = None,
    plugins: tuple[object, ...] = (),
) -> Palace:
    """The palace in folder ``path`` with its ledger in ``schema`` at ``url``."""
    config: dict[str, Any] = {
        "ledger": "postgres",
        "ledgers": {"postgres": {"url": url, "schema": schema}},
        # What these tests decide is left to the structural matcher, as before the e5
        # reader (asked whatever the palace embeds with) shipped: they test the ledger.
        "memory": {"pair_model": False, "pair_reader": False},
    }
    if backend_options:
        config["backends"] = {backend: backend_options}
    return Palace.open(path, config=config, embedder=embedder, backend=backend, plugins=plugins)


def open_as_child(arguments: dict[str, Any]) -> Palace:
    """The shared palace a child process opens (``path``, ``url``, ``schema``,
    ``backend`` and optional ``backend_options`` in ``arguments``), with the FAKE
    embedder."""
    from fakes import FAKE_PLUGIN, HashingEmbedder

    return open_postgres_palace(
        Path(arguments["path"]),
        url=arguments["url"],
        schema=arguments["schema"],
        embedder=HashingEmbedder(),
        backend=arguments["backend"],
        backend_options=arguments.get("backend_options"),
        plugins=(FAKE_PLUGIN,),
    )


def _child(arguments: dict[str, Any]) -> None:
    """A second process: open the shared palace with the FAKE embedder, write, report."""
    palace = open_as_child(arguments)
    with palace:
        ids = palace.add_texts(arguments["texts"], wing="shared", user_id="u1")
        remembered = palace.remember(arguments["memory"], kind="decision", user_id="u1")
        palace.kg.add("project", "uses", "PostgreSQL 16", user_id="u1")
        seen = [h.id for h in palace.search(arguments["query"], k=20, user_id="u1")]
    print(json.dumps({"ids": ids, "memory": remembered.memory.id, "seen": seen}))


if __name__ == "__main__":
    _child(json.loads(sys.argv[1]))
