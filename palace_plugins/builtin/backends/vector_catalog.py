"""A copy in memory of an index's vectors and filter fields, for exact scans of a few rows.

An approximate index answers a selective filter badly: Chroma evaluates its ``where``
clause by listing every record each condition matches (the owner condition every palace
query carries matches nearly all of them), and asking for the nearest neighbours
unfiltered then dropping those that fail needs ever more neighbours as the filter
narrows (about 35 ms for a filter passing 2% of 100,000 drawers). With the filter fields
of every record at hand as numpy columns, counting the records a filter passes costs
well under a millisecond, and when there are few of them (``exact_below``) an exact
cosine scan of just their vectors is both faster and exact. When many pass, the backend
asks its index for a few more neighbours than the share passing calls for and keeps those
that pass (:meth:`VectorCatalog.passing`).

The catalog mirrors the index, so it must know when the index changed under it. The
backend gives it ``version``, a cheap reading of the index's own write counter: the
backend's own writes are applied to the catalog as they happen (the counter read before
and after each one), and any other change (another process, another handle on the same
folder) shows as a counter the catalog did not see, after which the catalog is rebuilt
from the ledger, which holds every vector the index was filled from: by the ids written
since (``changes``, with their entries read from the ledger by id, and deleted ids found by
count), or, when that cannot be told, by a rebuild. A rebuild reads the
whole collection (2.3–4.1 s for 50,000 vectors on a loaded 2-core machine, holding the
ledger's lock while it reads), so it waits for the ``BUILD_AFTER``-th query that needs
it (a one-shot search never pays for it) and is done at most once every
``REBUILD_EVERY`` seconds; in between, the backend answers as if there were no catalog.

Memory: the vectors as ``float32`` (1.5 KB a record at 384 dimensions) plus the ids,
four small integer columns and a float column: 164 MB resident for 100,000 records.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from palace_retrievers.index import IndexEntry, VectorMatch
from palace_retrievers.ledger import Ledger, VectorTable
from palace_retrievers.records import Filter

#: Seconds between two rebuilds from the ledger, at least.
REBUILD_EVERY = 30.0
#: Queries answered without the catalog before it is (re)built: a process that asks once
#: or twice (``palace search`` on the command line) never pays for a rebuild.
BUILD_AFTER = 3
_FIELDS = ("wing", "room", "user_id", "kind")
#: Rows of deleted records kept (their space reused by no one) before the table is
#: compacted, at least; compacted when they outnumber the live records too.
COMPACT_ABOVE = 4096

Version = Callable[[], Hashable | None]
#: ``changes(seen)``: the ids written to the index since version ``seen`` and how many
#: records it holds now; ``None`` when it cannot tell.
Changes = Callable[[Hashable], tuple[list[str], int] | None]
#: Every id the index holds; ``None`` when it cannot tell.
AllIds = Callable[[], list[str] | None]
#: More ids changed than this, and a rebuild is done instead of a refresh.
REFRESH_AT_MOST = 20_000


@dataclass
class _Table:
    """The rows: row ``i`` holds one record, or nothing once deleted (``live[i]`` false)."""

    dimension: int
    ids: list[str] = field(default_factory=list)
    rows: dict[str, int] = field(default_factory=dict)
    matrix: npt.NDArray[np.float32] = field(default_factory=lambda: np.zeros((0, 0), np.float32))
    codes: dict[str, npt.NDArray[np.int32]] = field(default_factory=dict)
    ts: npt.NDArray[np.float64] = field(default_factory=lambda: np.zeros(0, np.float64))
    live: npt.NDArray[np.bool_] = field(default_factory=lambda: np.zeros(0, np.bool_))
    words: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.matrix = np.zeros((0, self.dimension), np.float32)
        self.codes = {name: np.zeros(0, np.int32) for name in _FIELDS}

    @property
    def size(self) -> int:
        return len(self.rows)

    def _code(self, word: str) -> int:
        return self.words.setdefault(word, len(self.words))

    def _grow(self, needed: int) -> None:
        capacity = self.matrix.shape[0]
        if needed <= capacity:
            return
        grown = max(needed, capacity * 2, 1024)
        matrix = np.zeros((grown, self.dimension), np.float32)
        matrix[:capacity] = self.matrix
        self.matrix = matrix
        for name in _FIELDS:
            codes = np.full(grown, -1, np.int32)
            codes[:capacity] = self.codes[name]
            self.codes[name] = codes
        ts = np.zeros(grown, np.float64)
        ts[:capacity] = self.ts
        self.ts = ts
        live = np.zeros(grown, np.bool_)
        live[:capacity] = self.live
        self.live = live

    def put(self, entries: Sequence[IndexEntry]) -> None:
        fresh = [e.id for e in dict((e.id, e) for e in entries).values() if e.id not in self.rows]
        self._grow(len(self.ids) + len(fresh))
        for e in entries:
            row = self.rows.get(e.id)
            if row is None:
                row = self.rows[e.id] = len(self.ids)
                self.ids.append(e.id)
            vector = np.asarray(e.vector, dtype=np.float32).reshape(-1)
            norm = float(np.linalg.norm(vector))
            self.matrix[row] = vector / norm if norm > 0 else vector
            for name in _FIELDS:
                self.codes[name][row] = self._code(str(getattr(e, name)))
            self.ts[row] = float(e.timestamp)
            self.live[row] = True

    def load(self, vectors: VectorTable) -> None:
        """Fill an empty table with a whole collection at once."""
        count = len(vectors.ids)
        self._grow(count)
        self.ids = list(vectors.ids)
        self.rows = {i: r for r, i in enumerate(self.ids)}
        if len(self.rows) != count:  # an id twice (never from a ledger): the slow way
            self.ids, self.rows = [], {}
            self.put(_entries(vectors))
            return
        if count:
            matrix = np.asarray(vectors.matrix, dtype=np.float32)
            norms = np.linalg.norm(matrix, axis=1, keepdims=True)
            np.divide(matrix, norms, out=self.matrix[:count], where=norms > 0)
        for name in _FIELDS:
            column = np.asarray(getattr(vectors, name), dtype=np.str_)
            words, codes = np.unique(column, return_inverse=True)
            lookup = np.array([self._code(str(w)) for w in words], dtype=np.int32)
            self.codes[name][:count] = lookup[codes.reshape(-1)] if count else codes
        self.ts[:count] = vectors.timestamp
        self.live[:count] = True

    def drop(self, ids: Sequence[str]) -> None:
        for i in ids:
            row = self.rows.pop(i, None)
            if row is not None:
                self.live[row] = False
                for name in _FIELDS:
                    self.codes[name][row] = -1
        dead = len(self.ids) - len(self.rows)
        if dead > max(COMPACT_ABOVE, len(self.rows)):
            self._compact()

    def _compact(self) -> None:
        """Drop the rows of deleted records (new arrays: a reader's old ones stay valid)."""
        keep = np.flatnonzero(self.live[: len(self.ids)])
        self.ids = [self.ids[r] for r in keep]
        self.rows = {i: r for r, i in enumerate(self.ids)}
        self.matrix = self.matrix[keep]
        self.codes = {name: codes[keep] for name, codes in self.codes.items()}
        self.ts = self.ts[keep]
        self.live = self.live[keep]

    def mask(
        self, where: Filter, rows: npt.NDArray[np.intp] | None = None
    ) -> npt.NDArray[np.bool_]:
        """Which rows (all of them, or ``rows``) hold a live record passing ``where``."""
        end = len(self.ids)
        pick: slice | npt.NDArray[np.intp] = slice(0, end) if rows is None else rows
        mask = self.live[pick].copy()
        wanted = {name: getattr(where, name) for name in ("wing", "room", "kind")}
        wanted["user_id"] = where.owner
        for name, value in wanted.items():
            if value is None:
                continue
            code = self.words.get(value)
            if code is None:
                return np.zeros(mask.shape, np.bool_)
            mask &= self.codes[name][pick] == code
        if where.since is not None:
            mask &= self.ts[pick] >= where.since.timestamp()
        if where.until is not None:
            mask &= self.ts[pick] <= where.until.timestamp()
        return mask


class VectorCatalog:
    """The vectors and filter fields of one collection of an index, kept in step with it.

    Args:
        ledger: Where a rebuild reads the collection from.
        collection: ``"drawers"``, ``"closets"`` or ``"memories"``.
        version: Reads the index's write counter (``None`` when it cannot be read: the
            catalog is then not used for that query).
        dimension: The vectors' length.
        empty: The index is known to be empty now (no rebuild needed to start).
    """

    def __init__(
        self,
        *,
        ledger: Ledger,
        collection: str,
        version: Version,
        dimension: int,
        empty: bool,
        changes: Changes | None = None,
        all_ids: AllIds | None = None,
    ) -> None:
        self._ledger = ledger
        self._collection = collection
        self._version = version
        self._changes = changes
        self._all_ids = all_ids
        self._lock = threading.RLock()
        self._table: _Table | None = None
        self._seen: Hashable | None = None
        self._rebuilt_at = -REBUILD_EVERY
        self._writing = 0
        self._waiting = 0
        if empty:
            self._table = _Table(dimension)
            self._seen = version()

    # -- keeping in step ----------------------------------------------------------------

    def write(self, change: Callable[[], None], apply: Callable[[_Table], None]) -> None:
        """Run the backend's own write ``change``, then ``apply`` it to the catalog (which is
        then up to date if it was before; otherwise it is refreshed when next needed).
        Readers do not wait for the write: meanwhile they answer without the catalog."""
        with self._lock:
            before = self._version()
            self._writing += 1
        try:
            change()
        except BaseException:
            with self._lock:
                self._writing -= 1
                self._table, self._seen = None, None
            raise
        with self._lock:
            self._writing -= 1
            after = self._version()
            if self._table is None or before is None:
                self._table, self._seen = None, None
            else:
                apply(self._table)
                if before == self._seen:
                    self._seen = after
                # else someone else wrote before: the table stays behind, to be refreshed

    def put(self, change: Callable[[], None], entries: Sequence[IndexEntry]) -> None:
        """The backend's own upsert of ``entries`` (done by ``change``)."""
        self.write(change, lambda table: table.put(entries))

    def drop(self, change: Callable[[], None], ids: Sequence[str]) -> None:
        """The backend's own delete of ``ids`` (done by ``change``)."""
        self.write(change, lambda table: table.drop(ids))

    def reset(self, change: Callable[[], None], dimension: int) -> None:
        """The backend's own clear (the collection emptied, perhaps to another dimension)."""
        with self._lock:
            change()
            self._table = _Table(dimension)
            self._seen = self._version()

    def forget(self) -> None:
        """The index was replaced (rebuilt into another collection): the table is dropped,
        to be rebuilt from the ledger when next needed."""
        with self._lock:
            self._table, self._seen = None, None

    def _current(self, dimension: int) -> _Table | None:
        """The table, rebuilt first if the index changed since; ``None`` if unusable now.
        Call with the lock held."""
        version = self._version()
        if version is None:
            return None
        if self._table is not None and version == self._seen:
            return self._table if self._table.dimension == dimension else None
        if self._table is not None and not self._writing and self._refresh(version, dimension):
            return self._table
        self._waiting += 1
        if (
            self._writing
            or self._waiting < BUILD_AFTER
            or time.monotonic() - self._rebuilt_at < REBUILD_EVERY
        ):
            return None
        self._rebuilt_at = time.monotonic()
        self._waiting = 0
        vectors = self._ledger.vector_table(self._collection)
        if vectors.ids and vectors.matrix.shape[1] != dimension:
            self._table, self._seen = None, None
            return None
        table = _Table(dimension)
        table.load(vectors)
        self._table, self._seen = table, version
        return table

    def _refresh(self, version: Hashable, dimension: int) -> bool:
        """Bring the table up to ``version`` from what changed since (the changed ids'
        entries read from the ledger, deleted ids found by count); ``False`` if it cannot
        (then it waits for a rebuild). Call with the lock held."""
        table = self._table
        if table is None or table.dimension != dimension or self._changes is None:
            return False
        found = self._changes(self._seen) if self._seen is not None else None
        if found is None or len(found[0]) > REFRESH_AT_MOST:
            return False
        changed, total = found
        entries = self._ledger.index_entries(self._collection, changed)
        table.put(entries)
        filed = {e.id for e in entries}
        table.drop([i for i in changed if i not in filed])
        if len(table.rows) != total:
            held = self._all_ids() if self._all_ids is not None else None
            if held is None:
                return False
            kept = set(held)
            table.drop([i for i in table.rows if i not in kept])
        if len(table.rows) != total:
            self._table, self._seen = None, None
            return False
        self._seen = version
        return True

    # -- asking -------------------------------------------------------------------------

    def nearest(
        self, vector: npt.NDArray[np.float32], k: int, where: Filter, *, exact_below: int
    ) -> list[VectorMatch] | float | None:
        """The exact ``k`` nearest passing ``where`` when at most ``exact_below`` records
        pass; otherwise the share of the records that pass (for the backend to ask its
        index); ``None`` when the catalog cannot tell now."""
        query = np.asarray(vector, dtype=np.float32).reshape(-1)
        with self._lock:
            table = self._current(query.shape[0])
            if table is None:
                return None
            mask = table.mask(where)
            rows = np.flatnonzero(mask)
            if rows.size > exact_below:
                return rows.size / max(1, table.size)
            if rows.size == 0 or k <= 0:
                return []
            norm = float(np.linalg.norm(query))
            if norm > 0:
                query = query / norm
            # einsum rather than BLAS: a matrix-vector product this small is memory-bound,
            # and BLAS spreading it over threads on a busy machine made it 20-50x slower
            # (32 ms instead of 0.5 ms for 2,000 rows at a load of 15 on 2 cores).
            if rows.size * 2 > len(table.ids):
                sims = np.einsum("ij,j->i", table.matrix[: len(table.ids)], query)[rows]
            else:
                sims = np.einsum("ij,j->i", table.matrix[rows], query)
            ids = table.ids
        if rows.size > k:
            # Keep every row tied with the k-th best so that the id tie-break stays exact.
            kth = np.partition(sims, rows.size - k)[rows.size - k]
            keep = np.flatnonzero(sims >= kth)
            rows, sims = rows[keep], sims[keep]
        order = sorted(range(rows.size), key=lambda i: (-float(sims[i]), ids[rows[i]]))
        return [VectorMatch(ids[rows[i]], float(sims[i])) for i in order[:k]]

    def passing(self, ids: Sequence[str], where: Filter) -> list[bool] | None:
        """Which of ``ids`` pass ``where`` (an id the catalog does not hold fails);
        ``None`` when the catalog cannot tell now."""
        with self._lock:
            table = self._table
            if table is None or self._version() != self._seen:
                return None
            found = [table.rows.get(i, -1) for i in ids]
            rows = np.array([r if r >= 0 else 0 for r in found], dtype=np.intp)
            mask = table.mask(where, rows) if rows.size else np.zeros(0, np.bool_)
            return [bool(m) and r >= 0 for m, r in zip(mask, found, strict=True)]


def _entries(vectors: VectorTable) -> list[IndexEntry]:
    return [
        IndexEntry(
            id=vectors.ids[r],
            vector=vectors.matrix[r],
            wing=str(vectors.wing[r]),
            room=str(vectors.room[r]),
            user_id=str(vectors.user_id[r]),
            kind=str(vectors.kind[r]),
            timestamp=float(vectors.timestamp[r]),
            source="",
        )
        for r in range(len(vectors.ids))
    ]
