"""The palace's vector indexes: the configured backend, checked against the ledger.

On open, each collection's index is asked for its health and its count is compared with
the ledger's. An index that cannot be opened, reports itself unhealthy, or disagrees with
the ledger is *degraded*: searches are answered by an exact scan of the ledger instead (so
nothing is missed), a warning is logged, and ``palace status`` says so until
``palace reindex`` rebuilds it.

A one-shot command may open the set with ``exact_below``: a collection whose ledger
holds fewer vectors is searched by the exact scan without opening its index (opening
an embedded index costs more than scanning a small palace, and the scan is exact), and
its index is opened only when it is written, checked or rebuilt.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from palace_retrievers.errors import ConfigError, PluginError
from palace_retrievers.index import (
    COLLECTIONS,
    BackendContext,
    Health,
    IndexEntry,
    VectorIndex,
    VectorMatch,
)
from palace_retrievers.ledger import Ledger
from palace_retrievers.records import Filter

log = logging.getLogger(__name__)

Progress = Callable[[int], None]
#: How long an index whose query failed is left aside before it is checked again.
QUERY_RETRY_SECONDS = 30.0


@dataclass(frozen=True, slots=True)
class IndexStatus:
    """How one collection's index is doing, for ``palace status``."""

    collection: str
    backend: str
    ok: bool
    count: int | None
    ledger_count: int
    detail: str


class IndexSet:
    """The index of every collection, with an exact fallback over the ledger.

    Args:
        backend: Name of the backend, for messages and its folder under ``index/``.
        factory: The backend plugin's factory.
        fallback: Factory of the exact scan used when the backend is degraded.
        palace_dir, ledger, dimension, options: Passed to the factories.
        exact_below: Search a collection holding fewer vectors by the exact scan,
            leaving its index unopened until it is written, checked or rebuilt.
    """

    def __init__(
        self,
        *,
        backend: str,
        factory: Callable[[BackendContext], VectorIndex],
        fallback: Callable[[BackendContext], VectorIndex],
        palace_dir: Path,
        ledger: Ledger,
        dimension: int,
        options: dict[str, Any],
        exact_below: int = 0,
    ) -> None:
        self.backend = backend
        self._factory = factory
        self._fallback_factory = fallback
        self._palace_dir = palace_dir
        self._ledger = ledger
        self._dimension = dimension
        self._options = options
        self._indexes: dict[str, VectorIndex | None] = {}
        self._fallbacks: dict[str, VectorIndex] = {}
        self._problems: dict[str, str] = {}
        self._failed_at: dict[str, float] = {}
        #: The ledger's vector count of each collection, at a ledger generation.
        self._counts: dict[str, tuple[int, int]] = {}
        #: Collections searched by the exact scan, their index not opened yet.
        self._unopened = {
            c for c in COLLECTIONS if exact_below > 0 and self._count(c) < exact_below
        }
        for collection in COLLECTIONS:
            if collection not in self._unopened:
                self._open(collection)

    def _opened(self, collection: str) -> VectorIndex | None:
        """The collection's index, opened now if it was left unopened."""
        if collection in self._unopened:
            self._unopened.discard(collection)
            self._open(collection)
        return self._indexes.get(collection)

    def _context(self, collection: str, options: dict[str, Any]) -> BackendContext:
        return BackendContext(
            palace_dir=self._palace_dir,
            collection=collection,
            dimension=self._dimension,
            ledger=self._ledger,
            options=options,
        )

    def _open(self, collection: str) -> None:
        try:
            self._indexes[collection] = self._factory(self._context(collection, self._options))
        except ConfigError:
            raise  # a wrong option is the user's to fix, not a broken index
        except Exception as exc:
            self._indexes[collection] = None
            self._problems[collection] = f"{type(exc).__name__}: {exc}"
            self._warn(collection)
            return
        self._check(collection)

    def _check(self, collection: str) -> None:
        """Compare the index with the ledger and record whether it can be trusted."""
        self._problems.pop(collection, None)
        index = self._indexes.get(collection)
        if index is None:
            self._problems[collection] = "the index could not be opened"
        else:
            expected = self._count(collection)
            problem = self._problem(collection, _safe_health(index), expected)
            if problem is not None:
                self._problems[collection] = problem
        if collection in self._problems:
            self._warn(collection)

    def _count(self, collection: str) -> int:
        """The ledger's vector count of ``collection`` (counted again once it changed:
        counting reads every row, and a one-shot command asks more than once)."""
        generation = self._ledger.generation()
        counted = self._counts.get(collection)
        if counted is None or counted[0] != generation:
            counted = self._counts[collection] = (
                generation,
                self._ledger.count_vectors(collection),
            )
        return counted[1]

    def _problem(self, collection: str, health: Health, expected: int) -> str | None:
        """Why an index in ``health`` cannot be trusted, the ledger holding ``expected``."""
        if not health.ok:
            return health.detail
        if health.count != expected and not self._journal_explains(
            collection, abs(expected - (health.count or 0))
        ):
            return f"the index holds {health.count} vectors but the ledger {expected}"
        return None

    def _disk_health(self, collection: str) -> Health | None:
        """What an unopened index's files say of it (see :meth:`VectorIndex.disk_health`)."""
        probe = getattr(self._factory, "disk_health", None)
        if collection not in self._unopened or not callable(probe):
            return None
        try:
            health = probe(self._context(collection, self._options))
        except ConfigError:
            raise
        except Exception as exc:
            return Health(False, None, f"{type(exc).__name__}: {exc}")
        return health if isinstance(health, Health) else None

    def _journal_explains(self, collection: str, difference: int) -> bool:
        """Whether the ledger's journal holds at least ``difference`` ids of the collection
        not yet applied to the index: a write in flight (another process's queued memory,
        a batch being filed), which the next replay applies, not a damaged index."""
        return len(self._ledger.pending_index(collection, limit=difference)) >= difference

    def _warn(self, collection: str) -> None:
        log.warning(
            "the %s index of %s is degraded (%s); searching by exact scan until "
            "`palace reindex` rebuilds it",
            self.backend,
            collection,
            self._problems[collection],
        )

    def _searcher(self, collection: str) -> VectorIndex:
        if collection in self._unopened:
            return self._fallback(collection)
        index = self._indexes.get(collection)
        failed = self._failed_at.get(collection)
        if failed is not None and time.monotonic() - failed > QUERY_RETRY_SECONDS:
            del self._failed_at[collection]  # a failed query is retried, now and then,
            self._reopen(collection)  # on a new handle: another process may have rebuilt it
            index = self._indexes.get(collection)
        if index is not None and collection not in self._problems:
            return index
        return self._fallback(collection)

    def _fallback(self, collection: str) -> VectorIndex:
        if collection not in self._fallbacks:
            self._fallbacks[collection] = self._fallback_factory(self._context(collection, {}))
        return self._fallbacks[collection]

    def _reopen(self, collection: str) -> None:
        """Open the collection's index again (and check it): a handle kept across another
        process's rebuild points at a collection that no longer exists."""
        index = self._indexes.get(collection)
        if index is not None:
            try:
                index.close()
            except Exception as exc:  # a broken handle is dropped all the same
                log.debug("closing the %s index failed: %s", collection, exc)
        self._open(collection)

    # -- the index interface, per collection ------------------------------------------

    def query(
        self, collection: str, *, vector: npt.NDArray[np.float32], k: int, where: Filter
    ) -> list[VectorMatch]:
        """Nearest neighbours; an index that raises is marked degraded and the exact scan
        answers instead (e.g. files another process is rewriting), until the index,
        checked again :data:`QUERY_RETRY_SECONDS` later, agrees with the ledger."""
        searcher = self._searcher(collection)
        try:
            return searcher.query(vector=vector, k=k, where=where)
        except Exception as exc:
            if searcher is self._fallbacks.get(collection):
                raise
            self._problems[collection] = f"a query failed: {type(exc).__name__}: {exc}"
            self._failed_at[collection] = time.monotonic()
            self._warn(collection)
            return self._searcher(collection).query(vector=vector, k=k, where=where)

    def upsert(self, collection: str, entries: Sequence[IndexEntry]) -> None:
        index = self._opened(collection)
        if index is not None and entries:
            index.upsert(entries=entries)
        if collection in self._fallbacks:
            self._fallbacks[collection].upsert(entries=entries)

    def delete(self, collection: str, ids: Sequence[str]) -> None:
        index = self._opened(collection)
        if index is not None and ids:
            index.delete(ids=ids)
        if collection in self._fallbacks:
            self._fallbacks[collection].delete(ids=ids)

    def status(self) -> list[IndexStatus]:
        out = []
        for collection in COLLECTIONS:
            ledger_count = self._count(collection)
            health = self._disk_health(collection)
            if health is not None:  # its files tell: the index is left unopened
                problem = self._problem(collection, health, ledger_count)
            else:
                index = self._opened(collection)
                health = _safe_health(index) if index is not None else Health(False, None, "")
                problem = self._problems.get(collection)
            out.append(
                IndexStatus(
                    collection=collection,
                    backend=self.backend,
                    ok=problem is None and health.ok,
                    count=health.count,
                    ledger_count=ledger_count,
                    detail=problem or health.detail,
                )
            )
        return out

    def check(self) -> dict[str, str]:
        """Compare every index with the ledger again; returns the degraded collections."""
        for collection in COLLECTIONS:
            if collection not in self._unopened:  # else opening it checks it
                self._check(collection)
            self._opened(collection)
        return self.degraded

    @property
    def degraded(self) -> dict[str, str]:
        """Collections whose index is not trusted, with the reason."""
        return dict(self._problems)

    # -- rebuilding ---------------------------------------------------------------------

    def rebuild(self, *, progress: Progress | None = None) -> int:
        """Fill every index again from the ledger; returns vectors indexed.

        Each collection's index is given the ledger's entries through
        :meth:`VectorIndex.rebuild`: a backend with ``capabilities.atomic_rebuild`` builds
        the new index beside the old one and swaps it in, so that a reader on any machine
        sees the old index or the new one, never part of one; the others are cleared and
        filled. An index that cannot be opened, or whose rebuild fails (missing or corrupt
        files), is deleted with its folder and every index is created anew and filled.
        A failure to read the ledger is raised as it is.
        """
        recreated = False
        if any(self._opened(collection) is None for collection in COLLECTIONS):
            self._recreate()
            recreated = True
        reported = 0  # progress already reported, by a pass that failed too
        while True:
            source = _Source(self._ledger, progress, skip=reported)
            try:
                for collection in COLLECTIONS:
                    index = self._indexes[collection]
                    assert index is not None  # _recreate guarantees it
                    index.rebuild(batches=source.batches(collection))
                    self._fallbacks.pop(collection, None)
                    self._check(collection)
                return source.total
            except ConfigError:
                raise
            except Exception as exc:
                if recreated or source.failed:
                    raise
                log.warning(
                    "rebuilding the %s index failed (%s: %s); recreating it",
                    self.backend,
                    type(exc).__name__,
                    exc,
                )
                reported = max(reported, source.total)
                self._recreate()
                recreated = True

    def _recreate(self) -> None:
        """Delete the backend's folder and open every collection's index from scratch."""
        self.close()
        shutil.rmtree(self._palace_dir / "index" / self.backend, ignore_errors=True)
        self._indexes = {}
        self._unopened.clear()
        for collection in COLLECTIONS:
            self._open(collection)
            if self._indexes.get(collection) is None:
                raise PluginError(
                    f"the {self.backend} backend cannot be opened even from scratch: "
                    f"{self._problems.get(collection)}"
                )

    def close(self) -> None:
        for index in (*self._indexes.values(), *self._fallbacks.values()):
            if index is not None:
                index.close()


class _Source:
    """The ledger's entries of each collection, in batches, for one pass of a rebuild:
    counts them, reports them to ``progress`` (beyond the first ``skip``, which a failed
    pass already reported), and tells a failure of the ledger from one of the index."""

    def __init__(self, ledger: Ledger, progress: Progress | None, *, skip: int) -> None:
        self._ledger = ledger
        self._progress = progress
        self._skip = skip
        self.total = 0
        self.failed = False

    def batches(self, collection: str) -> Iterator[list[IndexEntry]]:
        entries = self._ledger.iter_entries(collection)
        while True:
            try:
                batch = next(entries)
            except StopIteration:
                return
            except Exception:
                self.failed = True
                raise
            yield batch
            before, self.total = self.total, self.total + len(batch)
            if self._progress is not None and self.total > self._skip:
                self._progress(self.total - max(before, self._skip))


def _safe_health(index: VectorIndex) -> Health:
    try:
        return index.health()
    except Exception as exc:
        return Health(ok=False, count=None, detail=f"{type(exc).__name__}: {exc}")
