"""palace-retrievers: a local-first memory engine for LLM applications.

>>> from palace_retrievers import Palace
>>> palace = Palace.open("~/.palace/default")          # doctest: +SKIP
>>> palace.mine("~/notes", wing="notes")               # doctest: +SKIP
>>> palace.remember("We moved to PostgreSQL 15", kind="decision", user_id="u1")  # doctest: +SKIP
>>> hits = palace.search("which database do we use?", user_id="u1")  # doctest: +SKIP
"""

from palace_retrievers.config import Config
from palace_retrievers.errors import (
    BadRecordError,
    ConfigError,
    EmbedderMismatchError,
    IndexUnavailableError,
    InvalidQueryError,
    LedgerUnavailableError,
    MemoryConflictError,
    MemoryNotFoundError,
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

__version__ = "0.1.0"

__all__ = [
    "BadRecordError",
    "Config",
    "ConfigError",
    "Drawer",
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
