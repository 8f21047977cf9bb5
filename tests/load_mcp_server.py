"""``palace`` (the real command line) with the FAKE embedder plugin registered.

Run as ``python tests/load_mcp_server.py --palace P mcp --http ...``: exactly the
``palace`` command, in its own process, except that ``Palace.open`` also registers the
FAKE hashing embedder of ``tests/fakes.py``, so that a palace built with it can be served
without loading the real model (the load tests are about bookkeeping, not meaning).
"""

from __future__ import annotations

from typing import Any

from fakes import FAKE_PLUGIN  # this file's folder is on sys.path: it is run as a script

from palace_retrievers import Palace
from palace_retrievers.cli import cli

_original = Palace.open.__func__  # type: ignore[attr-defined]


def _open_with_fake(cls: type[Palace], /, path: Any = None, **kwargs: Any) -> Palace:
    kwargs["plugins"] = [FAKE_PLUGIN, *kwargs.get("plugins", ())]
    palace: Palace = _original(cls, path, **kwargs)
    return palace


if __name__ == "__main__":
    Palace.open = classmethod(_open_with_fake)  # type: ignore[method-assign,assignment]
    cli(prog_name="palace")
