"""The ``chroma`` backend: embedded Chroma (``PersistentClient``) or a Chroma server.

By default the index is embedded: a ``PersistentClient`` over ``<palace>/index/chroma``,
with collections ``palace_drawers``, ``palace_closets`` and ``palace_memories``.

With a server (``chroma run``, or any Chroma server) the palace talks to it through an
``HttpClient``. Options (``[backends.chroma]`` in ``palace.toml``): ``url``
(``http://host:8000``; ``https`` turns TLS on), or ``host`` and ``port``; ``headers`` (a
table, e.g. an ``Authorization`` token); ``tenant`` and ``database``; and ``namespace``,
the prefix of this palace's collections on the server (see
:mod:`palace_plugins.builtin.backends.server_names`).

Either way the collections are HNSW in cosine space (``ef_search``, ``ef_construction``
and ``max_neighbors`` are options). Chroma never embeds anything here: every upsert and
query passes vectors, and the collections are created with no embedding function, so
Chroma never tries to download its default model. Telemetry is off.

Filters. Embedded, the backend keeps a copy of the collection's vectors and filter fields
in memory (:mod:`palace_plugins.builtin.backends.vector_catalog`, kept in step with Chroma's own
write counter): a filter passing at most ``exact_below`` records (default 20,000) is
answered by an exact scan of just those; a broader one by asking Chroma for the nearest
neighbours unfiltered, a few more than the share passing calls for, and keeping those that
pass. ``exact_below = 0`` turns the copy off (and its memory: 164 MB for 100,000 drawers
of 384 dimensions). Without the copy (a server, or while it is being brought up to
date) the neighbours' filter fields come from a cache
(:mod:`palace_plugins.builtin.backends.filter_fields`). When too few neighbours pass, the backend
hands Chroma the filter as a ``where`` clause, applied inside the HNSW query.

Rebuilds. ``palace reindex`` (:meth:`ChromaIndex.rebuild`) never empties the collection a
reader is using: it fills a new collection, ``<name>.<8 hex digits>``, then points to it
from the metadata of an empty collection ``<name>.active`` (key ``palace_active``), then
deletes the collection it replaced. The pointer lives in Chroma itself, so every reader of
the same folder or server, on any machine, finds it; a palace whose pointer collection
does not exist (one never rebuilt since) uses ``<name>`` itself. Embedded, every
operation reads the pointer first (one indexed read of Chroma's SQLite file) and a query
reads it again when it is done: an answer from a collection that stopped being the active
one meanwhile (and may be deleted under it) is not given, the query is asked again of the
new one. On a server the pointer is read again at most every :data:`FOLLOW_EVERY`
seconds, and whenever an operation fails (a deleted collection fails every request): the
operation is then asked of the collection pointed to, if that changed, and so is a query
whose answer is short of ``k``; the collection a rebuild replaced is deleted
:data:`RETIRE_AFTER` seconds later (in the background; closing the index waits for it),
once every reader has moved. A rebuild deletes
what an interrupted rebuild left behind (collections ``<name>.*`` other than the active one
and the pointer) before it starts; two rebuilds of one palace on one server at once are
not supported (the second may delete the collection the first is filling, which then
fails and is run again).

About 800 lines: one :class:`ChromaIndex` over both kinds of Chroma (embedded and a
server), whose queries, filters, rebuild swap and health checks share its client and
collections; what stands alone is beside it (``filter_fields``, ``hnsw_files``,
``server_names``, ``vector_catalog``).
"""

from __future__ import annotations

import logging
import math
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import numpy as np
import numpy.typing as npt

from palace_plugins.builtin.backends.filter_fields import FieldCache, Fields
from palace_plugins.builtin.backends.hnsw_files import hnsw_problem
from palace_plugins.builtin.backends.server_names import namespace
from palace_plugins.builtin.backends.vector_catalog import VectorCatalog
from palace_retrievers.embedder import options_check
from palace_retrievers.errors import ConfigError, IndexUnavailableError
from palace_retrievers.index import (
    BackendContext,
    Capabilities,
    Health,
    IndexEntry,
    VectorIndex,
    VectorMatch,
)
from palace_retrievers.records import Filter

log = logging.getLogger(__name__)
T = TypeVar("T")

DEFAULTS: dict[str, int] = {"ef_search": 200, "ef_construction": 200, "max_neighbors": 32}
#: Nearest neighbours a query asks for unfiltered, at most, before it hands Chroma the
#: filter; before that, a first probe of ``max(3k, 30)`` when only the owner is asked for
#: (nearly every neighbour passes), or ``max(3k, 300)`` with a wing, room, kind or time
#: (a tenth of the drawers passing leaves some 30).
PROBE = 1000
FIRST_PROBE = 30
FIRST_PROBE_NARROW = 300
#: Filters passing at most this many records are answered by an exact scan of them.
EXACT_BELOW = 20_000
#: What embedded Chroma says of a collection whose HNSW segment it has not loaded since
#: another process wrote to it (:meth:`ChromaIndex._reload_segment`).
UNLOADED = "Nothing found on disk"
#: An id no record has (palace ids have no spaces), deleted to make Chroma load a segment.
NO_SUCH_ID = "palace reload probe"
#: The metadata key of the pointer collection naming the active collection.
POINTER_KEY = "palace_active"
#: Seconds a reader of a Chroma server goes on using the collection it found active before
#: it reads the pointer again (embedded, it reads it at every operation).
FOLLOW_EVERY = 1.0
#: Seconds a rebuild on a server waits, once the pointer names the new collection, before
#: it deletes the old one: every reader has read the pointer again by then (a query on a
#: collection the server is deleting can come back empty instead of failing).
RETIRE_AFTER = 2.5 * FOLLOW_EVERY
#: Times a query is asked again when the active collection changed under it.
FOLLOW_TRIES = 3
#: The options that select and reach a Chroma server (none of them: embedded).
SERVER_OPTIONS = {"url", "host", "port", "ssl", "headers", "tenant", "database", "namespace"}


def chroma_where(where: Filter) -> dict[str, Any]:
    """The Chroma ``where`` clause for a palace filter."""
    clauses: list[dict[str, Any]] = [{"user_id": {"$eq": where.owner}}]
    for field in ("wing", "room", "kind"):
        value = getattr(where, field)
        if value is not None:
            clauses.append({field: {"$eq": value}})
    if where.since is not None:
        clauses.append({"ts": {"$gte": where.since.timestamp()}})
    if where.until is not None:
        clauses.append({"ts": {"$lte": where.until.timestamp()}})
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


def server_address(options: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ``HttpClient`` arguments the options ask for, or ``None`` for embedded Chroma.

    Raises:
        ConfigError: ``url`` is not an http(s) URL, or is given with ``host``/``port``.
    """
    if not any(options.get(name) not in (None, "") for name in ("url", "host", "port")):
        for name in SERVER_OPTIONS & set(options):
            raise ConfigError(f"backend 'chroma': {name} applies to a server; set url as well")
        return None
    headers = options.get("headers") or {}
    if not isinstance(headers, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
    ):
        raise ConfigError("backend 'chroma': headers must be a table of strings")
    address: dict[str, Any] = {"ssl": bool(options.get("ssl", False)), "headers": dict(headers)}
    url = options.get("url") or ""
    if url:
        if options.get("host") or options.get("port"):
            raise ConfigError("backend 'chroma': give either url or host and port, not both")
        parts = urlsplit(str(url))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"backend 'chroma': url must be http(s)://host[:port], got {url!r}")
        address["host"] = parts.hostname
        address["port"] = parts.port or (443 if parts.scheme == "https" else 8000)
        address["ssl"] = parts.scheme == "https"
    else:
        address["host"] = str(options.get("host") or "localhost")
        port = options.get("port", 8000)
        if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
            raise ConfigError(f"backend 'chroma': port must be a port number, got {port!r}")
        address["port"] = port
    for name in ("tenant", "database"):
        if options.get(name):
            address[name] = str(options[name])
    return address


class ChromaIndex(VectorIndex):
    """One Chroma collection per palace collection: embedded under ``<palace>/index/chroma``,
    or on a Chroma server."""

    capabilities = Capabilities(exact=False, persistent=True, atomic_rebuild=True)

    def __init__(self, context: BackendContext) -> None:
        options_check(
            "backend", "chroma", context.options, set(DEFAULTS) | SERVER_OPTIONS | {"exact_below"}
        )
        import chromadb  # imported here: it is slow to import and only this backend needs it
        from chromadb.api.collection_configuration import (
            CreateCollectionConfiguration,
            CreateHNSWConfiguration,
        )
        from chromadb.config import Settings

        hnsw = {**DEFAULTS, **{k: v for k, v in context.options.items() if k in DEFAULTS}}
        address = server_address(context.options)
        path = context.palace_dir / "index" / "chroma"
        self._server = address is not None
        if address is None:
            self._name = f"palace_{context.collection}"
            self._where = f"embedded Chroma at {path}"
        else:
            prefix = namespace(
                context.palace_dir, context.options.get("namespace"), backend="chroma"
            )
            self._name = f"{prefix}_{context.collection}"
            scheme = "https" if address["ssl"] else "http"
            self._where = f"Chroma server {scheme}://{address['host']}:{address['port']}"
        #: The collection's own name, the name of its pointer collection, and the name of
        #: the collection in use (the one the pointer names, or the own name).
        self._base = self._name
        self._pointer = f"{self._base}.active"
        self._followed_at = time.monotonic()
        self._follow_lock = threading.Lock()
        self._retiring: dict[str, threading.Timer] = {}
        self._configuration = CreateCollectionConfiguration(
            hnsw=CreateHNSWConfiguration(
                space="cosine",
                ef_search=hnsw["ef_search"],
                ef_construction=hnsw["ef_construction"],
                max_neighbors=hnsw["max_neighbors"],
            )
        )
        self._client: Any = None
        self._dimension = context.dimension
        self._counter: sqlite3.Connection | None = None
        self._counter_lock = threading.Lock()
        try:
            if address is None:
                path.mkdir(parents=True, exist_ok=True)
                self._client = chromadb.PersistentClient(
                    path=str(path), settings=Settings(anonymized_telemetry=False)
                )
            else:
                self._client = chromadb.HttpClient(
                    **address, settings=Settings(anonymized_telemetry=False)
                )
            self._name = self._pointed_to()
            self._collection = self._open_collection()
        except Exception as exc:
            self.close()
            if address is None:
                _forget_failed_system(str(path))
            raise IndexUnavailableError(
                f"cannot open the Chroma index {self._name} ({self._where}; "
                f"{type(exc).__name__}: {exc}); run `palace reindex` to rebuild it from the "
                "ledger"
            ) from exc
        self._batch = max(1, min(5000, self._client.get_max_batch_size()))
        self._fields = FieldCache(context.ledger, self._fetch_fields)
        exact_below = context.options.get("exact_below", EXACT_BELOW)
        if isinstance(exact_below, bool) or not isinstance(exact_below, int) or exact_below < 0:
            self.close()
            raise ConfigError(
                f"backend 'chroma': exact_below must be a whole number >= 0, got {exact_below!r}"
            )
        self._exact_below = exact_below
        self._catalog: VectorCatalog | None = None
        self._counted: tuple[tuple[str, int | None], int] | None = None
        self._path = path if address is None else None
        if address is None:
            self._counter = _open_counter(path)
        if self._counter is not None and exact_below > 0:
            self._catalog = VectorCatalog(
                ledger=context.ledger,
                collection=context.collection,
                version=self._version,
                dimension=context.dimension,
                empty=self._empty(),
                changes=self._changes,
                all_ids=self._all_ids,
            )

    def _empty(self) -> bool:
        """Whether the collection was never written to, read from Chroma's SQLite file
        (not by counting: that loads the HNSW graph, which may be damaged)."""
        state = self._state()
        return state is not None and state[1] is None

    def _open_collection(self, name: str | None = None) -> Any:
        """The collection ``name`` (the one in use by default): created if it is the
        index's own name, else one a rebuild created (never created here, so that a
        collection a rebuild has just deleted does not come back empty)."""
        name = self._name if name is None else name
        if name != self._base:
            return self._client.get_collection(name, embedding_function=None)
        return self._client.get_or_create_collection(
            name=name, embedding_function=None, configuration=self._configuration
        )

    # -- the active collection ----------------------------------------------------------

    def _pointed_to(self) -> str:
        """The name of the active collection, as the pointer says (embedded: read from
        Chroma's SQLite file when it can be; else asked of Chroma)."""
        if self._counter is not None:
            with self._counter_lock:
                try:
                    row = self._counter.execute(_POINTER_SQL, (self._pointer,)).fetchone()
                except sqlite3.Error:
                    row = ()
            if row is None:
                return self._base
            if row and row[0]:
                return str(row[0])
        return active_collection(self._client, self._base)

    def _follow(self, *, now: bool = False) -> str:
        """Use the collection the pointer names (read now when embedded or ``now``; on a
        server at most every :data:`FOLLOW_EVERY` seconds); returns its name."""
        recently = time.monotonic() - self._followed_at < FOLLOW_EVERY
        if not now and self._counter is None and recently:
            return str(self._name)
        active = self._pointed_to()
        self._followed_at = time.monotonic()
        if active == self._name:
            return active
        with self._follow_lock:
            if active != self._name:
                log.info("the Chroma index %s is now %s (rebuilt)", self._base, active)
                self._collection, self._name = self._open_collection(active), active
                self._forget()
        return active

    def _forget(self) -> None:
        """Drop what was known of the collection in use before it was replaced."""
        self._counted = None
        self._fields.forget()
        if self._catalog is not None:
            self._catalog.forget()

    def _moved(self, name: str) -> bool:
        """Whether the pointer names another collection than ``name`` now (``False`` when
        that cannot be told)."""
        try:
            return self._pointed_to() != name
        except Exception as exc:
            log.debug("reading the pointer of %s failed: %s", self._base, exc)
            return False

    def _retrying(self, operation: Callable[[], T]) -> T:
        """Run ``operation`` on the active collection; when it fails and the pointer has
        moved meanwhile (a rebuild), run it again on the new collection."""
        for attempt in range(FOLLOW_TRIES - 1):
            name = self._follow(now=attempt > 0)
            try:
                return operation()
            except Exception:
                if not self._moved(name):
                    raise
        self._follow(now=True)
        return operation()

    @contextmanager
    def _server_write(self) -> Iterator[None]:
        """A server that fails a write raises :class:`IndexUnavailableError`: the ledger
        already holds the write, and its journal replays it on the next one."""
        if not self._server:
            yield
            return
        try:
            yield
        except Exception as exc:
            raise IndexUnavailableError(
                f"the {self._where} failed a write to {self._name} ({type(exc).__name__}: "
                f"{exc}); the ledger keeps it, and the next write or `palace reindex` brings "
                "the index up to date"
            ) from exc

    def upsert(self, *, entries: Sequence[IndexEntry]) -> None:
        if self._catalog is not None:
            self._follow()
            self._catalog.put(lambda: self._upsert(entries), entries)
            return
        with self._server_write():  # a server down while following is a failed write too
            self._retrying(lambda: self._upsert(entries))

    def _upsert(self, entries: Sequence[IndexEntry], collection: Any = None) -> None:
        into = self._collection if collection is None else collection
        for start in range(0, len(entries), self._batch):
            batch = entries[start : start + self._batch]
            into.upsert(
                ids=[e.id for e in batch],
                embeddings=np.stack([e.vector for e in batch]).astype(np.float32),
                metadatas=[
                    {
                        "wing": e.wing,
                        "room": e.room,
                        "user_id": e.user_id,
                        "kind": e.kind,
                        "ts": float(e.timestamp),
                        "source": e.source,
                    }
                    for e in batch
                ],
            )
            self._fields.learn(batch)

    def delete(self, *, ids: Sequence[str]) -> None:
        if self._catalog is not None:
            self._follow()
            self._catalog.drop(lambda: self._delete(ids), ids)
        else:
            with self._server_write():
                self._retrying(lambda: self._delete(ids))
        self._fields.forget(ids)

    def _delete(self, ids: Sequence[str]) -> None:
        for start in range(0, len(ids), self._batch):
            self._collection.delete(ids=list(ids[start : start + self._batch]))

    def query(self, *, vector: npt.NDArray[np.float32], k: int, where: Filter) -> list[VectorMatch]:
        """The nearest neighbours, from the active collection: an answer from one that a
        rebuild replaced meanwhile is not given (see the module's docstring)."""
        if k <= 0:
            return []
        for attempt in range(FOLLOW_TRIES):
            name = self._follow(now=attempt > 0)
            try:
                found = self._query(vector, k, where)
            except Exception:
                if not self._moved(name):
                    raise
                continue
            # Embedded, the pointer is read again after every query (one SQLite read); on a
            # server only after an answer short of k, which a collection being deleted
            # gives: a full answer from the old collection is a right one.
            if (self._counter is None and len(found) >= k) or not self._moved(name):
                return found
        raise IndexUnavailableError(
            f"the Chroma index {self._base} was replaced {FOLLOW_TRIES} times during a query"
        )

    def _query(self, vector: npt.NDArray[np.float32], k: int, where: Filter) -> list[VectorMatch]:
        total = self._query_count()
        if total == 0:
            return []
        query = np.asarray(vector, dtype=np.float32).reshape(1, -1)
        share: float | None = None
        if self._catalog is not None:
            found = self._catalog.nearest(query[0], k, where, exact_below=self._exact_below)
            if isinstance(found, list):
                return found
            share = found
        # The nearest neighbours unfiltered, then filtered here: enough of them pass unless
        # the filter is selective. A probe that got fewer neighbours than it asked for saw
        # the whole collection.
        if share is not None:
            # Twice what the share passing calls for, and ten more.
            first = max(k, math.ceil(2 * k / max(share, 1e-9)) + 10)
        else:
            narrow = any(
                getattr(where, name) is not None
                for name in ("wing", "room", "kind", "since", "until")
            )
            first = max(3 * k, FIRST_PROBE_NARROW if narrow else FIRST_PROBE)
        for probe in sorted({min(total, first), min(total, max(k, first, PROBE))}):
            nearest = self._nearest(query, probe, None)
            verdicts = self._passing(nearest, where)
            passing = [n for n, ok in zip(nearest, verdicts, strict=True) if ok]
            if len(passing) >= k or len(nearest) < probe:
                return _matches(passing)[:k]
        return _matches(self._nearest(query, min(k, total), chroma_where(where)))

    def _query_count(self) -> int:
        """How many records the collection holds, for sizing a query's probes.

        Chroma's ``count()`` costs a round trip through its engine (about half of a
        search's time outside the query embedding, measured under load), so embedded it
        is kept per write-counter state (:meth:`_state`, one indexed read of Chroma's
        SQLite file), which every write, by any process, moves.
        """
        state = self._state() if self._counter is not None else None
        if state is None:
            return int(self._collection.count())
        cached = self._counted
        if cached is None or cached[0] != state:
            cached = (state, int(self._collection.count()))
            self._counted = cached
        return cached[1]

    def _passing(self, nearest: Sequence[tuple[str, float]], where: Filter) -> list[bool]:
        ids = [i for i, _ in nearest]
        if self._catalog is not None:
            known = self._catalog.passing(ids, where)
            if known is not None:
                return known
        fields = self._fields.lookup(ids)
        return [i in fields and fields[i].passes(where) for i in ids]

    def _version(self) -> Hashable | None:
        """Chroma's write counter for this collection (its id and the last sequence number
        its metadata segment applied), read from Chroma's SQLite file; ``None`` when it
        cannot be read."""
        return self._state()

    def _state(self) -> tuple[str, int | None] | None:
        """The collection's id in Chroma and the last write sequence number it applied
        (``None`` if it was never written to); ``None`` if that cannot be read."""
        row = self._read_chroma(_COUNTER_SQL)
        return None if row is None else (str(row[0]), None if row[1] is None else int(row[1]))

    def _changes(self, seen: Hashable) -> tuple[list[str], int] | None:
        """The ids written to the collection since version ``seen`` (their sequence number
        in Chroma's metadata segment is later) and how many records it holds now."""
        if not isinstance(seen, tuple) or self._counter is None:
            return None
        state = self._state()
        if state is None or state[0] != seen[0]:
            return None  # another collection by that name now (cleared, recreated)
        with self._counter_lock:
            try:
                changed = self._counter.execute(_CHANGED_SQL, (seen[0], seen[1] or 0)).fetchall()
                ((total,),) = self._counter.execute(_COUNT_SQL, (seen[0],)).fetchall()
            except sqlite3.Error:
                return None
        return [str(r[0]) for r in changed], int(total)

    def _all_ids(self) -> list[str] | None:
        """Every id the collection holds, from Chroma's metadata segment."""
        state = self._state()
        if state is None or self._counter is None:
            return None
        with self._counter_lock:
            try:
                rows = self._counter.execute(_IDS_SQL, (state[0],)).fetchall()
            except sqlite3.Error:
                return None
        return [str(r[0]) for r in rows]

    def _read_chroma(self, sql: str) -> tuple[Any, ...] | None:
        """The row a query on embedded Chroma's SQLite file about this collection (its name
        the one parameter) finds; ``None`` if none, if the file cannot be read, or if
        Chroma is a server."""
        if self._counter is None:
            return None
        with self._counter_lock:
            try:
                row: tuple[Any, ...] | None = self._counter.execute(sql, (self._name,)).fetchone()
            except sqlite3.Error:
                return None
        return row

    def _nearest(
        self, query: npt.NDArray[np.float32], n: int, where: dict[str, Any] | None
    ) -> list[tuple[str, float]]:
        try:
            result = self._collection.query(
                query_embeddings=query, n_results=n, where=where, include=["distances"]
            )
        except Exception as exc:
            if self._server or UNLOADED not in str(exc):
                raise
            self._reload_segment(exc)
            result = self._collection.query(
                query_embeddings=query, n_results=n, where=where, include=["distances"]
            )
        distances = (result["distances"] or [[]])[0]
        return list(zip(result["ids"][0], (float(d) for d in distances), strict=True))

    def _reload_segment(self, exc: Exception) -> None:
        """Make embedded Chroma load this collection's HNSW segment again.

        Chroma remembers, per process, a collection it looked at while it was empty (the
        health check at open counts it); once another process has written to it, every
        query fails with "Nothing found on disk" until this process writes to it. A new
        handle does not help (Chroma shares its engine between the clients of a path,
        and keeps it while any is open), a write does: deleting an id that no record
        has, which changes nothing.
        """
        log.info("reloading the Chroma segment of %s after %s", self._name, exc)
        self._collection = self._open_collection()
        self._collection.delete(ids=[NO_SUCH_ID])

    def _fetch_fields(self, ids: Sequence[str]) -> list[tuple[str, Fields]]:
        got = self._collection.get(ids=list(ids), include=["metadatas"])
        return [
            (i, Fields.from_metadata(m or {}))
            for i, m in zip(got["ids"], got["metadatas"] or [], strict=True)
        ]

    def count(self) -> int:
        return self._retrying(lambda: int(self._collection.count()))

    def rebuild(self, *, batches: Iterable[Sequence[IndexEntry]]) -> None:
        """Fill a new collection with ``batches``, point to it, then delete the one it
        replaces (see the module's docstring)."""
        previous = self._follow(now=True)
        self._drop_leftovers(keep=previous)
        fresh = f"{self._base}.{secrets.token_hex(4)}"
        collection = self._client.create_collection(
            name=fresh, embedding_function=None, configuration=self._configuration
        )
        try:
            for batch in batches:
                self._upsert(batch, collection)
        except BaseException:
            self._drop(fresh)
            raise
        self._point_to(fresh)
        with self._follow_lock:
            self._collection, self._name = collection, fresh
            self._forget()
        self._followed_at = time.monotonic()
        self._retire(previous)

    def _retire(self, name: str) -> None:
        """Delete the collection a rebuild replaced: embedded at once (a reader checks the
        pointer after each query); on a server :data:`RETIRE_AFTER` seconds later, in the
        background (:meth:`close` waits for it)."""
        if self._counter is not None:
            self._drop(name)
            return
        timer = threading.Timer(RETIRE_AFTER, self._retired, args=(name,))
        timer.daemon = True
        self._retiring[name] = timer
        timer.start()

    def _retired(self, name: str) -> None:
        if self._client is not None:
            self._drop(name)
        self._retiring.pop(name, None)

    def _point_to(self, name: str) -> None:
        """Make ``name`` the active collection, for every reader at once."""
        pointer = self._client.get_or_create_collection(
            name=self._pointer, embedding_function=None, metadata={POINTER_KEY: name}
        )
        if (pointer.metadata or {}).get(POINTER_KEY) != name:
            pointer.modify(metadata={POINTER_KEY: name})
        if self._pointed_to() != name:
            raise IndexUnavailableError(
                f"the pointer {self._pointer} of {self._where} did not take {name}"
            )

    def _drop_leftovers(self, *, keep: str) -> None:
        """Delete the collections of this index that are neither active nor the pointer
        (left by an interrupted rebuild, or replaced and not deleted)."""
        for collection in self._client.list_collections():
            name = collection if isinstance(collection, str) else collection.name
            if name in (keep, self._pointer) or name in self._retiring:
                continue
            if name == self._base or name.startswith(self._base + "."):
                self._drop(name)

    def _drop(self, name: str) -> None:
        try:
            self._client.delete_collection(name)
        except Exception as exc:  # deleted already, or left for the next rebuild
            log.info("deleting the Chroma collection %s failed: %s", name, exc)

    def clear(self) -> None:
        self._follow(now=True)
        if self._catalog is not None:
            self._catalog.reset(self._clear, self._dimension)
        else:
            self._clear()
        self._fields.forget()

    def _clear(self) -> None:
        # Dropping the collection (rather than deleting its ids) also forgets its
        # dimension, so that a reindex with another embedding model can fill it again.
        self._client.delete_collection(self._name)
        self._collection = self._client.get_or_create_collection(
            name=self._name, embedding_function=None, configuration=self._configuration
        )

    def health(self) -> Health:
        """Embedded, the HNSW files are checked on disk first (:mod:`hnsw_files`), and
        Chroma is not asked anything more when they are damaged: counting loads the graph,
        and Chroma answers from some damaged files without an error and crashes on others."""
        try:
            self._follow(now=True)
        except Exception as exc:
            return Health(ok=False, count=None, detail=f"{type(exc).__name__}: {exc}")
        problem = self._hnsw_problem()
        if problem is not None:
            return Health(ok=False, count=None, detail=problem)
        try:
            count = self.count()
        except Exception as exc:
            return Health(ok=False, count=None, detail=f"{type(exc).__name__}: {exc}")
        return Health(ok=True, count=count, detail=f"{self._where}, {self._name}")

    @classmethod
    def disk_health(cls, context: BackendContext) -> Health | None:
        """Embedded, what Chroma's files say, read without Chroma (which takes a second or
        more to import and start, while a status reads a few rows): the active collection's
        record count from its SQLite file, and its HNSW files checked as :meth:`health`
        checks them. ``None`` for a server, or when the files do not tell (no Chroma
        folder or collection yet: opening creates them)."""
        if set(context.options) & SERVER_OPTIONS:
            return None
        path = context.palace_dir / "index" / "chroma"
        if not (path / "chroma.sqlite3").is_file():
            return None
        connection = _open_counter(path)
        if connection is None:
            return None
        base = f"palace_{context.collection}"
        try:
            name = str(_scalar(connection, _POINTER_SQL, f"{base}.active") or base)
            collection_id = _scalar(connection, "SELECT id FROM collections WHERE name = ?", name)
            if collection_id is None:
                return None
            count = int(_scalar(connection, _COUNT_SQL, collection_id) or 0)
            segment = _scalar(connection, _SEGMENT_SQL, name)
        except sqlite3.Error:
            return None
        finally:
            connection.close()
        if count and segment is not None:
            folder = path / str(segment)
            if not folder.is_dir():
                return Health(False, None, f"the HNSW folder {folder} of {name} is missing")
            problem = hnsw_problem(folder)
            if problem is not None:
                return Health(False, None, problem)
        return Health(True, count, f"embedded Chroma at {path}, {name}")

    def _hnsw_problem(self) -> str | None:
        """What is wrong with this collection's HNSW files (embedded only), or ``None``."""
        state = self._state()
        if state is None or state[1] is None:
            return None  # never written to: Chroma has no files for it yet
        row = self._read_chroma(_SEGMENT_SQL)
        if self._path is None or row is None:
            return None
        folder = self._path / str(row[0])
        if not folder.is_dir():
            return f"the HNSW folder {folder} of {self._name} is missing"
        return hnsw_problem(folder)

    def close(self) -> None:
        # Chroma shares one client system per path in the process and keeps it (with its
        # SQLite connection) until the last client is closed; without this, reopening a
        # directory that was deleted or rewritten would reuse the stale system.
        for timer in list(getattr(self, "_retiring", {}).values()):
            timer.join()  # a replaced collection on a server is deleted before closing
        client, self._client = self._client, None
        if client is not None:
            client.close()
        counter, self._counter = getattr(self, "_counter", None), None
        if counter is not None:
            counter.close()


def active_collection(client: Any, name: str) -> str:
    """The name of the collection that holds index ``name`` now, as its pointer
    ``<name>.active`` says (``name`` itself before its first rebuild); for tools and tests
    that open the Chroma folder or server themselves."""
    from chromadb.errors import NotFoundError

    try:
        pointer = client.get_collection(f"{name}.active", embedding_function=None)
    except NotFoundError:
        return name
    active = (pointer.metadata or {}).get(POINTER_KEY)
    return str(active) if active else name


def _matches(found: Sequence[tuple[str, float]]) -> list[VectorMatch]:
    matches = [VectorMatch(i, 1.0 - d) for i, d in found]
    return sorted(matches, key=lambda m: (-m.similarity, m.id))


#: Chroma's write counter for a collection, in its SQLite file (``chroma.sqlite3``).
_SEGMENT_SQL = (
    "SELECT s.id FROM segments s JOIN collections c ON c.id = s.collection "
    "WHERE c.name = ? AND s.scope = 'VECTOR'"
)
_RECORDS = (
    "FROM embeddings e JOIN segments s ON s.id = e.segment_id "
    "WHERE s.collection = ? AND s.scope = 'METADATA'"
)
_CHANGED_SQL = f"SELECT e.embedding_id {_RECORDS} AND e.seq_id > ?"
_COUNT_SQL = f"SELECT count(*) {_RECORDS}"
_IDS_SQL = f"SELECT e.embedding_id {_RECORDS}"
#: The active collection's name, in the metadata of the pointer collection.
_POINTER_SQL = (
    "SELECT m.str_value FROM collection_metadata m JOIN collections c ON c.id = m.collection_id "
    f"WHERE c.name = ? AND m.key = '{POINTER_KEY}'"
)
_COUNTER_SQL = (
    "SELECT c.id, max(m.seq_id) FROM collections c "
    "LEFT JOIN segments s ON s.collection = c.id "
    "LEFT JOIN max_seq_id m ON m.segment_id = s.id "
    "WHERE c.name = ? GROUP BY c.id"
)


def _scalar(connection: sqlite3.Connection, sql: str, parameter: object) -> Any:
    """The first column of the first row ``sql`` finds (``None`` if none)."""
    row = connection.execute(sql, (parameter,)).fetchone()
    return None if row is None else row[0]


def _open_counter(path: Path) -> sqlite3.Connection | None:
    """A read-only connection to embedded Chroma's SQLite file, for its write counter."""
    try:
        return sqlite3.connect(
            f"file:{path / 'chroma.sqlite3'}?mode=ro",
            uri=True,
            timeout=0.2,
            check_same_thread=False,
        )
    except sqlite3.Error:
        return None


def _forget_failed_system(path: str) -> None:
    """Drop a Chroma system that failed to start from Chroma's per-path cache.

    Chroma caches one system per path before starting it; when the start fails (a
    corrupt ``chroma.sqlite3``) the half-started system stays cached with no client
    holding it, and every later client for the path gets it back broken. A system no
    client holds is safe to drop; one that clients hold is left alone.
    """
    from chromadb.api.shared_system_client import SharedSystemClient

    with SharedSystemClient._refcount_lock:
        if not SharedSystemClient._identifier_to_refcount.get(path):
            SharedSystemClient._identifier_to_system.pop(path, None)
