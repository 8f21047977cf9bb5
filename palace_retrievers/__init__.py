"""palace-retrievers: a local-first memory engine for LLM applications.

>>> from palace_retrievers import Palace
>>> palace = Palace.open("~/.palace/default")          # doctest: +SKIP
>>> palace.mine("~/notes", wing="notes")               # doctest: +SKIP
>>> palace.remember("We moved to PostgreSQL 15", kind="decision", user_id="u1")  # doctest: +SKIP
>>> hits = palace.search("which database do we use?", user_id="u1")  # doctest: +SKIP

The package's names are imported when first used (the errors at once): importing one of
its modules, as the plugin manager imports :mod:`palace_retrievers.errors`, does not load
the engine, so that :mod:`palace_plugins` and the engine import each other in no cycle,
and a command loads only what it runs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from palace_retrievers.errors import (
    BadRecordError,
    ConfigError,
    E5UnavailableError,
    EmbedderMismatchError,
    IndexUnavailableError,
    InvalidQueryError,
    LedgerUnavailableError,
    MemoryConflictError,
    MemoryNotFoundError,
    ModelAnswerError,
    OnnxUnsupportedError,
    PageError,
    PalaceBusyError,
    PalaceError,
    PalaceNotFoundError,
    PalaceReadOnlyError,
    PluginError,
    PluginNotFoundError,
    SchemaError,
    SourceError,
    StorageFullError,
    UnsafeBindError,
)

if TYPE_CHECKING:
    from palace_retrievers.config import Config
    from palace_retrievers.ingest.mining import MineReport
    from palace_retrievers.ingest.syncing import SyncReport
    from palace_retrievers.palace import Palace, PalaceStats
    from palace_retrievers.records import Drawer, Filter, Hit
    from palace_retrievers.records.memories import (
        ForgetReport,
        GcReport,
        Memory,
        MemoryEvent,
        Remembered,
    )

#: Where each name that is imported on first use lives.
_LAZY = {
    "Config": "palace_retrievers.config",
    "MineReport": "palace_retrievers.ingest.mining",
    "SyncReport": "palace_retrievers.ingest.syncing",
    "Palace": "palace_retrievers.palace",
    "PalaceStats": "palace_retrievers.palace",
    "Drawer": "palace_retrievers.records",
    "Filter": "palace_retrievers.records",
    "Hit": "palace_retrievers.records",
    "ForgetReport": "palace_retrievers.records.memories",
    "GcReport": "palace_retrievers.records.memories",
    "Memory": "palace_retrievers.records.memories",
    "MemoryEvent": "palace_retrievers.records.memories",
    "Remembered": "palace_retrievers.records.memories",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__version__ = "0.1.0"

__all__ = [
    "BadRecordError",
    "Config",
    "ConfigError",
    "Drawer",
    "E5UnavailableError",
    "EmbedderMismatchError",
    "Filter",
    "ForgetReport",
    "GcReport",
    "Hit",
    "IndexUnavailableError",
    "InvalidQueryError",
    "LedgerUnavailableError",
    "Memory",
    "MemoryConflictError",
    "MemoryEvent",
    "MemoryNotFoundError",
    "MineReport",
    "ModelAnswerError",
    "OnnxUnsupportedError",
    "PageError",
    "Palace",
    "PalaceBusyError",
    "PalaceError",
    "PalaceNotFoundError",
    "PalaceReadOnlyError",
    "PalaceStats",
    "PluginError",
    "PluginNotFoundError",
    "Remembered",
    "SchemaError",
    "SourceError",
    "StorageFullError",
    "SyncReport",
    "UnsafeBindError",
    "__version__",
]
