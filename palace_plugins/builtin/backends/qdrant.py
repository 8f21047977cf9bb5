"""The ``qdrant`` backend: ``qdrant-client``, on disk by default or a Qdrant server by URL.

Options (``[backends.qdrant]`` in ``palace.toml``):

- ``url``: a Qdrant server (``http://localhost:6333``). Empty (the default): Qdrant's
  *local mode*, files under ``<palace>/index/qdrant``, no server at all. Local mode is
  qdrant-client's own embedded engine: an exact scan in numpy with the filter checked
  point by point, meant for development and small palaces (Qdrant advises a server past
  some 20,000 points); one process at a time may open a local folder (another gets the
  exact fallback over the ledger).
- ``api_key``: the server's API key, if it wants one.
- ``namespace``: the prefix of this palace's collections on a server (see
  :mod:`palace_plugins.builtin.backends.server_names`).
- ``ef_search`` (default 200), ``m`` (16), ``ef_construction`` (128): the server's HNSW
  search breadth, links per node and build breadth (local mode is exact and ignores them).
- ``timeout`` (default 10 s): how long a request to the server may take.

Each palace collection is a Qdrant collection with cosine distance. Qdrant point ids are
integers or UUIDs, so a record's id becomes a UUID (version 5, from the id) and the id
itself is kept in the payload beside the filter fields; on a server each filter field has
a payload index (keyword, or float for the time). Filters become a Qdrant filter passed
inside the query.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from palace_plugins.builtin.backends._options import hnsw, merged, number
from palace_plugins.builtin.backends.server_names import namespace
from palace_retrievers.errors import IndexUnavailableError
from palace_retrievers.index import (
    BackendContext,
    Capabilities,
    Health,
    IndexEntry,
    VectorIndex,
    VectorMatch,
)
from palace_retrievers.records import Filter

DEFAULTS: dict[str, Any] = {
    "url": "",
    "api_key": "",
    "namespace": "",
    "ef_search": 200,
    "m": 16,
    "ef_construction": 128,
    "timeout": 10,
}
#: The payload fields a filter looks at, and their payload index type on a server.
FILTER_FIELDS = {"wing": "keyword", "room": "keyword", "user_id": "keyword", "kind": "keyword"}
#: Points an upsert sends a request.
BATCH = 512
log = logging.getLogger(__name__)
_ID_NAMESPACE = uuid.UUID("6f1d2b1e-4c55-4b8e-9a4e-2f6d0c8a7b31")


def point_id(record_id: str) -> str:
    """The Qdrant point id of a record: a UUID derived from its id (the same every time)."""
    return str(uuid.uuid5(_ID_NAMESPACE, record_id))


class _LocalClients:
    """One local-mode client per folder in the process, shared by refcount, with its lock.

    Qdrant's local mode locks its folder, so the collections of one palace (and two
    palaces opened on the same folder) share one client; and the client is not safe
    for concurrent use, so every call holds the folder's lock.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._clients: dict[str, tuple[Any, threading.RLock, int]] = {}

    def acquire(self, path: Path) -> tuple[Any, threading.RLock]:
        from qdrant_client import QdrantClient

        key = str(path.resolve())
        with self._lock:
            if key in self._clients:
                client, lock, users = self._clients[key]
            else:
                path.mkdir(parents=True, exist_ok=True)
                client, lock, users = QdrantClient(path=key), threading.RLock(), 0
            self._clients[key] = (client, lock, users + 1)
            return client, lock

    def release(self, path: Path) -> None:
        key = str(path.resolve())
        with self._lock:
            client, lock, users = self._clients[key]
            if users > 1:
                self._clients[key] = (client, lock, users - 1)
                return
            del self._clients[key]
        with lock:
            client.close()


_LOCAL = _LocalClients()


def qdrant_filter(where: Filter) -> Any:
    """The Qdrant filter of a palace filter (every condition must hold)."""
    from qdrant_client import models

    must: list[Any] = [
        models.FieldCondition(key="user_id", match=models.MatchValue(value=where.owner))
    ]
    for field in ("wing", "room", "kind"):
        value = getattr(where, field)
        if value is not None:
            must.append(models.FieldCondition(key=field, match=models.MatchValue(value=value)))
    if where.since is not None or where.until is not None:
        since = where.since.timestamp() if where.since is not None else None
        until = where.until.timestamp() if where.until is not None else None
        must.append(models.FieldCondition(key="ts", range=models.Range(gte=since, lte=until)))
    return models.Filter(must=must)


class QdrantIndex(VectorIndex):
    """One Qdrant collection per palace collection, local (on disk) or on a server."""

    capabilities = Capabilities(exact=False, persistent=True)

    def __init__(self, context: BackendContext) -> None:
        options = merged("qdrant", context.options, DEFAULTS, strings=("url", "api_key"))
        self._ef_search, self._m, self._ef_construction = hnsw("qdrant", options, whole=False)
        timeout = number("qdrant", options, "timeout", minimum=0.1, whole=False)
        self._dimension = context.dimension
        self._url: str = options["url"]
        self._path = context.palace_dir / "index" / "qdrant"
        if self._url:
            prefix = namespace(context.palace_dir, options["namespace"], backend="qdrant")
            self._name = f"{prefix}_{context.collection}"
        else:
            self._name = f"palace_{context.collection}"
        self._client: Any = None
        self._local = not self._url
        self._guard: AbstractContextManager[Any] = nullcontext()  # the HTTP client is thread-safe
        try:
            if self._local:
                self._client, self._guard = _LOCAL.acquire(self._path)
            else:
                from qdrant_client import QdrantClient

                self._client = QdrantClient(
                    url=self._url, api_key=options["api_key"] or None, timeout=int(timeout)
                )
            with self._guard:
                if not self._client.collection_exists(self._name):
                    self._create()
                self._tune_local_storage()
        except Exception as exc:
            self.close()
            where = self._url or str(self._path)
            raise IndexUnavailableError(
                f"cannot open the Qdrant index {self._name} at {where} "
                f"({type(exc).__name__}: {exc}); run `palace reindex` to rebuild it"
            ) from exc

    def _create(self) -> None:
        from qdrant_client import models

        self._client.create_collection(
            collection_name=self._name,
            vectors_config=models.VectorParams(
                size=self._dimension, distance=models.Distance.COSINE
            ),
            hnsw_config=models.HnswConfigDiff(m=self._m, ef_construct=self._ef_construction),
        )
        if self._local:
            return  # local mode has no payload indexes: it checks every point anyway
        for field, kind in (*FILTER_FIELDS.items(), ("ts", "float")):
            self._client.create_payload_index(
                collection_name=self._name,
                field_name=field,
                field_schema=models.PayloadSchemaType(kind),
                wait=True,
            )

    @contextmanager
    def _server_write(self) -> Iterator[None]:
        """A server that fails a write raises :class:`IndexUnavailableError`: the ledger
        already holds the write, and its journal replays it on the next one."""
        if self._local:
            yield
            return
        try:
            yield
        except Exception as exc:
            raise IndexUnavailableError(
                f"the Qdrant server {self._url} failed a write to {self._name} "
                f"({type(exc).__name__}: {exc}); the ledger keeps it, and the next write or "
                "`palace reindex` brings the index up to date"
            ) from exc

    def _tune_local_storage(self) -> None:
        """Let local mode's SQLite file commit without waiting for the disk.

        Local mode commits every point on its own, and each commit waits for the disk
        (some 100 points a second); in WAL mode with ``synchronous=NORMAL`` a commit does
        not wait, and a crash can lose only the last commits, never corrupt the file. The
        index is derived data: a loss shows as a count below the ledger's, and the palace
        then answers by exact scan until ``palace reindex``. This reaches into
        qdrant-client's internals; if they change, local mode is only slower.
        """
        if not self._local:
            return
        try:
            storage = self._client._client.collections[self._name].storage.storage
            storage.execute("PRAGMA journal_mode=WAL")
            storage.execute("PRAGMA synchronous=NORMAL")
        except Exception as exc:  # a private structure: never worth failing over
            log.debug("could not tune Qdrant local storage (%s)", exc)

    # -- the contract -------------------------------------------------------------------

    def upsert(self, *, entries: Sequence[IndexEntry]) -> None:
        from qdrant_client import models

        for start in range(0, len(entries), BATCH):
            batch = entries[start : start + BATCH]
            points = [
                models.PointStruct(
                    id=point_id(e.id),
                    vector=np.asarray(e.vector, dtype=np.float32).tolist(),
                    payload={
                        "pid": e.id,
                        "wing": e.wing,
                        "room": e.room,
                        "user_id": e.user_id,
                        "kind": e.kind,
                        "ts": float(e.timestamp),
                        "source": e.source,
                    },
                )
                for e in batch
            ]
            with self._guard, self._server_write():
                self._client.upsert(collection_name=self._name, points=points, wait=True)

    def delete(self, *, ids: Sequence[str]) -> None:
        from qdrant_client import models

        for start in range(0, len(ids), BATCH):
            selector = models.PointIdsList(points=[point_id(i) for i in ids[start : start + BATCH]])
            with self._guard, self._server_write():
                self._client.delete(collection_name=self._name, points_selector=selector, wait=True)

    def query(self, *, vector: npt.NDArray[np.float32], k: int, where: Filter) -> list[VectorMatch]:
        if k <= 0:
            return []
        from qdrant_client import models

        params = None if self._local else models.SearchParams(hnsw_ef=max(self._ef_search, k))
        with self._guard:
            result = self._client.query_points(
                collection_name=self._name,
                query=np.asarray(vector, dtype=np.float32).tolist(),
                query_filter=qdrant_filter(where),
                limit=k,
                search_params=params,
                with_payload=["pid"],
            )
        matches = [VectorMatch(str(p.payload["pid"]), float(p.score)) for p in result.points]
        return sorted(matches, key=lambda m: (-m.similarity, m.id))

    def count(self) -> int:
        with self._guard:
            return int(self._client.count(collection_name=self._name, exact=True).count)

    def clear(self) -> None:
        # Dropping the collection (rather than deleting its points) also takes the
        # palace's current dimension, for a reindex after a change of model.
        with self._guard:
            self._client.delete_collection(collection_name=self._name)
            self._create()
            self._tune_local_storage()

    def health(self) -> Health:
        where = f"server {self._url}" if self._url else f"local files {self._path}"
        try:
            with self._guard:
                info = self._client.get_collection(collection_name=self._name)
            size = info.config.params.vectors.size
            count = self.count()
        except Exception as exc:
            return Health(ok=False, count=None, detail=f"{type(exc).__name__}: {exc}")
        detail = f"Qdrant collection {self._name}, {where}"
        if size != self._dimension:
            return Health(
                ok=False,
                count=count,
                detail=f"{detail} holds vectors of dimension {size}, "
                f"the palace's have {self._dimension}",
            )
        return Health(ok=True, count=count, detail=detail)

    def close(self) -> None:
        client, self._client = self._client, None
        if client is None:
            return
        if self._local:
            _LOCAL.release(self._path)
        else:
            client.close()
