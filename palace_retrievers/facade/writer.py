"""The writer: one writer per palace, and the vector indexes kept up to the ledger.

Every write goes through :meth:`Writer.writing`. The ledger journals every id it changes
in the same transaction as the change; the writer applies that journal to the vector
indexes after each write and before the first one of a new writer, so a writer killed
between its ledger commit and its index update leaves nothing the next one does not
repair. A short write queued behind another process's long one (a mine, a sync, a
reindex) commits to the ledger and leaves the indexes to the lock's holder.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from palace_retrievers.errors import PalaceBusyError, PalaceError
from palace_retrievers.index import COLLECTIONS
from palace_retrievers.ledger import Ledger
from palace_retrievers.search.indexes import IndexSet
from palace_retrievers.writer_lock import LONG_WRITES

log = logging.getLogger(__name__)


class Writer:
    """The palace-wide writer lock and the index journal it replays.

    Args:
        path: The palace's folder (where a SQLite ledger keeps its lock file).
        ledger: The system of record, which journals what the indexes must catch up on.
        indexes: The vector indexes kept up to the ledger.
        lock_timeout: How long a write waits for another writer by default, in seconds.
    """

    def __init__(
        self, *, path: Path, ledger: Ledger, indexes: IndexSet, lock_timeout: float
    ) -> None:
        self._ledger = ledger
        self._indexes = indexes
        self._lock = ledger.writer_lock(path)
        self._timeout = lock_timeout

    @property
    def held(self) -> bool:
        """Whether this thread holds the writer lock."""
        return self._lock.held

    def hold(self, operation: str, *, timeout: float) -> AbstractContextManager[None]:
        """The bare writer lock, without the journal's replay (a reindex rebuilds)."""
        return self._lock.hold(operation, timeout=timeout)

    @contextmanager
    def writing(
        self, operation: str, *, timeout: float | None = None, queue: bool = False
    ) -> Iterator[None]:
        """Hold the writer lock for ``operation`` (see :meth:`Palace.writing
        <palace_retrievers.palace.Palace.writing>`).

        Raises:
            PalaceBusyError: another process still writes after ``timeout`` seconds.
        """
        first = not self._lock.held
        wait = self._timeout if timeout is None else timeout
        if first and queue and self._long_write_elsewhere():
            yield  # the ledger is written, the index left to the lock's holder
            self._sync_after_release(operation)
            return
        with self._lock.hold(operation, timeout=wait):
            if first:
                self.repair_lexical()
                self.sync_index()
            yield
        if first:
            self._sync_after_release(operation)

    def _long_write_elsewhere(self) -> bool:
        """Whether another process holds the writer lock for a long write."""
        holder = self._lock.holder()
        if holder is None or holder.is_this_process or holder.operation not in LONG_WRITES:
            return False
        try:
            with self._lock.hold("check", timeout=0.0):
                return False  # it had just finished
        except PalaceBusyError:
            return True

    def _sync_after_release(self, operation: str) -> None:
        """Apply what queued writes journalled while (or after) this process wrote.

        A queued write that finds the lock taken leaves its journal entries to the
        holder; the holder looks again here, after letting the lock go, so that an
        entry committed after its last batch is not left for the next writer. If the
        lock is taken by then, its new holder applies the journal when it starts.
        """
        if self._lock.held or not self._index_lags():
            return
        try:
            with self._lock.hold(operation, timeout=0.0):
                self.sync_index()
        except PalaceBusyError:
            pass  # the holder replays the journal when it starts and after each batch
        except PalaceError as exc:  # an index that is down: the journal keeps the ids
            log.warning("the vector index was not brought up to the ledger (%s)", exc)

    def _index_lags(self) -> bool:
        """Whether the ledger's journal holds ids not yet applied to an index."""
        return any(self._ledger.pending_index(c, limit=1) for c in COLLECTIONS)

    def sync_held(self) -> int:
        """:meth:`sync_index` when this thread holds the writer lock (a queued write
        leaves the journal to the holder)."""
        return self.sync_index() if self._lock.held else 0

    def repair_lexical(self) -> None:
        """Rebuild the full-text index when it is missing or disagrees with the ledger
        (a dropped or emptied table), before anything is written through it."""
        problem = self._ledger.lexical_problem()
        if problem is not None:
            log.warning("rebuilding the full-text index: %s", problem)
            self._ledger.rebuild_lexical()

    def sync_index(self) -> int:
        """Bring the vector indexes up to the ledger; returns how many ids were applied.

        Each journalled id (``index_pending``) is upserted into its index from the ledger,
        or deleted from it when the ledger no longer holds it, and then struck from the
        journal. Every write ends with this, and every writer starts with it.
        """
        applied = 0
        for collection in COLLECTIONS:
            while ids := self._ledger.pending_index(collection, limit=2048):
                entries = self._ledger.index_entries(collection, ids)
                present = {e.id for e in entries}
                self._indexes.delete(collection, [i for i in ids if i not in present])
                self._indexes.upsert(collection, entries)
                self._ledger.clear_pending(collection, ids)
                applied += len(ids)
        return applied

    def recover(self) -> None:
        """Start of a long write: replay the journal, then rebuild any index that still
        disagrees with the ledger (lost or damaged files), so that what is mined next
        lands in an index that can be trusted."""
        if self.sync_index():
            log.info("replayed the index journal left by an interrupted write")
        degraded = self._indexes.check()
        for _ in range(3):
            # A memory write queued by another process between the replay and the check
            # reads as a count that disagrees: replay what it journalled and look again.
            if not degraded or not self.sync_index():
                break
            degraded = self._indexes.check()
        if degraded:
            log.warning("rebuilding the vector indexes from the ledger: %s", degraded)
            self._indexes.rebuild()
            # What the journal still holds was applied by the rebuild, unless a queued
            # write journalled it meanwhile: applying it again is cheap and exact.
            self.sync_index()
