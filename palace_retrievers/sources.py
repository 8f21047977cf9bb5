"""The source adapter contract: what a source plugin offers to be mined.

A source plugin registers a factory (``palace_register_sources``) that takes its options
and returns a :class:`Source`. ``Source.scan(path)`` lists what there is to mine as
:class:`SourceEntry` items (cheap: a key, a location, an mtime) and :class:`Skipped`
notes; the miner calls ``entry.read()`` only for entries that changed since the last mine.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar


@dataclass(frozen=True, slots=True)
class Segment:
    """A chunk a source cuts itself (e.g. one exchange of a conversation)."""

    text: str
    line_start: int | None = None
    line_end: int | None = None
    content_date: datetime | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SourceDocument:
    """The content of one source entry.

    Attributes:
        text: The whole text, verbatim (decoded; undecodable bytes replaced).
        content_hash: Hash of the raw content, to tell whether it changed.
        room: The room the source suggests, if any.
        content_date: When the content was written, if known.
        metadata: Fields to attach to every drawer of this source.
        segments: Chunks cut by the source itself; ``None`` to let the palace chunk
            ``text`` by size.
    """

    text: str
    content_hash: str
    room: str | None = None
    content_date: datetime | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    segments: tuple[Segment, ...] | None = None


@dataclass(frozen=True, slots=True)
class SourceEntry:
    """One thing to mine.

    Attributes:
        key: A machine-independent key (e.g. the path relative to the mined root, in
            POSIX form); drawer ids are derived from it.
        location: What a user sees as the drawer's source (e.g. the absolute path).
        mtime: Modification time, if the source has one (lets the miner skip reading).
        read: Returns the content; raises :class:`~palace_retrievers.errors.SourceError`
            when it cannot be read.
    """

    key: str
    location: str
    mtime: float | None
    read: Callable[[], SourceDocument]


@dataclass(frozen=True, slots=True)
class Skipped:
    """Something a source passed over, and why (binary, too large, unreadable...)."""

    location: str
    reason: str


#: The palace's own settings a source can ask for (see :attr:`Source.palace_settings`).
PALACE_SETTINGS = frozenset({"max_file_bytes", "chunk_size", "chunk_overlap"})


class Source(ABC):
    """Lists and reads what there is to mine under a path.

    Attributes:
        palace_settings: Which of the palace's settings (``max_file_bytes`` from
            ``[mining]``, ``chunk_size`` and ``chunk_overlap`` from ``[chunking]``) the
            palace passes in the source's options. The default is none.
        keys_are_ids: The entry keys name the same thing wherever the root lies (a
            conversation's or a session's own id, not a path under the root): a new root
            mined into a wing never gets a prefix and takes over the records of the same
            keys, however much their content changed (a fresh export saved at a new
            path). ``False`` by default: a new root whose entries mostly differ from
            those filed under the same keys is another tree, and its keys get its label
            (see :mod:`palace_retrievers.ingest.mining`).
    """

    palace_settings: ClassVar[frozenset[str]] = frozenset()
    keys_are_ids: ClassVar[bool] = False

    def keys_are_ids_for(self, path: Path) -> bool:
        """Whether the keys :meth:`scan` gives for ``path`` are ids (:attr:`keys_are_ids`).

        A source that hands ``path`` to another one it picks (``auto``) answers for the
        one it picks; the others answer with their class attribute.
        """
        return self.keys_are_ids

    @abstractmethod
    def scan(self, path: Path) -> Iterator[SourceEntry | Skipped]:
        """Every entry under ``path`` (a file or a directory), in a stable order.

        Raises:
            SourceError: ``path`` cannot be mined at all (missing, or a single file that
                is binary or unreadable).
        """
