"""palace-retrievers: a local-first memory engine for LLM applications.

>>> from palace_retrievers import Palace
>>> palace = Palace.open("~/.palace/default")          # doctest: +SKIP
>>> palace.mine("~/notes", wing="notes")               # doctest: +SKIP
>>> hits = palace.search("which database do we use?")  # doctest: +SKIP
"""

from palace_retrievers.config import Config
from palace_retrievers.errors import (
    ConfigError,
    EmbedderMismatchError,
    IndexUnavailableError,
    InvalidQueryError,
    PalaceBusyError,
    PalaceError,
    PalaceNotFoundError,
    PluginError,
    PluginNotFoundError,
    SchemaError,
    SourceError,
)
from palace_retrievers.mining import MineReport
from palace_retrievers.palace import Palace, PalaceStats
from palace_retrievers.records import Drawer, Filter, Hit
from palace_retrievers.syncing import SyncReport

__version__ = "0.1.0"

__all__ = [
    "Config",
    "ConfigError",
    "Drawer",
    "EmbedderMismatchError",
    "Filter",
    "Hit",
    "IndexUnavailableError",
    "InvalidQueryError",
    "MineReport",
    "Palace",
    "PalaceBusyError",
    "PalaceError",
    "PalaceNotFoundError",
    "PalaceStats",
    "PluginError",
    "PluginNotFoundError",
    "SchemaError",
    "SourceError",
    "SyncReport",
    "__version__",
]
