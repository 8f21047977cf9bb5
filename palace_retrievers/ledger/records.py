"""The ledger's own records: what it remembers of sources, and what it reports."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt


@dataclass(frozen=True, slots=True)
class SourceState:
    """What the ledger remembers of a mined source, to tell whether it changed.

    ``root`` is the path that was mined (absolute) and ``plugin`` the source plugin that
    read it, so that ``palace sync`` can look again for what is gone.
    """

    wing: str
    key: str
    location: str
    content_hash: str
    mtime: float | None
    normalize_version: int
    drawer_count: int = 0
    root: str | None = None
    plugin: str | None = None


@dataclass(frozen=True, slots=True)
class MinedRoot:
    """A path mined into a wing with a source plugin, and how many sources it gave."""

    wing: str
    root: str
    plugin: str
    sources: int
    drawers: int


@dataclass(frozen=True, slots=True)
class VectorTable:
    """All vectors of a collection with the fields filters look at, as numpy columns."""

    ids: list[str]
    matrix: npt.NDArray[np.float32]
    wing: npt.NDArray[np.str_]
    room: npt.NDArray[np.str_]
    user_id: npt.NDArray[np.str_]
    kind: npt.NDArray[np.str_]
    timestamp: npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class LedgerStats:
    """Counts for ``palace status``."""

    drawers: int
    sources: int
    closets: int
    embedded: int
    wings: dict[str, dict[str, int]] = field(default_factory=dict)
    memories: dict[str, int] = field(default_factory=dict)
