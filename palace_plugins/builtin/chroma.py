"""The ``chroma`` backend: embedded Chroma (``PersistentClient``) or a Chroma server.

By default the index is embedded: a ``PersistentClient`` over ``<palace>/index/chroma``,
with collections ``palace_drawers``, ``palace_closets`` and ``palace_memories``.

With a server (``chroma run``, or any Chroma server) the palace talks to it through an
``HttpClient``. Options (``[backends.chroma]`` in ``palace.toml``): ``url``
(``http://host:8000``; ``https`` turns TLS on), or ``host`` and ``port``; ``headers`` (a
table, e.g. an ``Authorization`` token); ``tenant`` and ``database``; and ``namespace``,
the prefix of this palace's collections on the server (see
:mod:`palace_plugins.builtin.server_names`).

Either way the collections are HNSW in cosine space (``ef_search``, ``ef_construction``
and ``max_neighbors`` are options). Chroma never embeds anything here: every upsert and
query passes vectors, and the collections are created with no embedding function, so
Chroma never tries to download its default model. Telemetry is off.

Filters: a query first asks for the nearest neighbours unfiltered and keeps those whose
filter fields (cached, see :mod:`palace_plugins.builtin.filter_fields`) pass; when too few
pass, it hands Chroma the filter as a ``where`` clause, applied inside the HNSW query.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

import numpy as np
import numpy.typing as npt

from palace_plugins.builtin.filter_fields import FieldCache, Fields
from palace_plugins.builtin.server_names import namespace
from palace_plugins.hookspecs import Register, hookimpl
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

DEFAULTS: dict[str, int] = {"ef_search": 200, "ef_construction": 200, "max_neighbors": 32}
#: Nearest neighbours a query asks for unfiltered, at most, before it hands Chroma the
#: filter; before that, a first probe of ``max(3k, 30)`` when only the owner is asked for
#: (nearly every neighbour passes), or ``max(3k, 300)`` with a wing, room, kind or time
#: (a tenth of the drawers passing leaves some 30).
PROBE = 1000
FIRST_PROBE = 30
FIRST_PROBE_NARROW = 300
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

    capabilities = Capabilities(exact=False, persistent=True)

    def __init__(self, context: BackendContext) -> None:
        options_check("backend", "chroma", context.options, set(DEFAULTS) | SERVER_OPTIONS)
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
        self._configuration = CreateCollectionConfiguration(
            hnsw=CreateHNSWConfiguration(
                space="cosine",
                ef_search=hnsw["ef_search"],
                ef_construction=hnsw["ef_construction"],
                max_neighbors=hnsw["max_neighbors"],
            )
        )
        self._client: Any = None
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

    def _open_collection(self) -> Any:
        return self._client.get_or_create_collection(
            name=self._name, embedding_function=None, configuration=self._configuration
        )

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
        with self._server_write():
            self._upsert(entries)

    def _upsert(self, entries: Sequence[IndexEntry]) -> None:
        for start in range(0, len(entries), self._batch):
            batch = entries[start : start + self._batch]
            self._collection.upsert(
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
        with self._server_write():
            for start in range(0, len(ids), self._batch):
                self._collection.delete(ids=list(ids[start : start + self._batch]))
        self._fields.forget(ids)

    def query(self, *, vector: npt.NDArray[np.float32], k: int, where: Filter) -> list[VectorMatch]:
        if k <= 0:
            return []
        total = self._collection.count()
        if total == 0:
            return []
        query = np.asarray(vector, dtype=np.float32).reshape(1, -1)
        # The nearest neighbours unfiltered, then filtered here (see filter_fields): enough
        # of them pass unless the filter is selective. A probe that got fewer neighbours
        # than it asked for saw the whole collection.
        narrow = any(
            getattr(where, name) is not None for name in ("wing", "room", "kind", "since", "until")
        )
        first = max(3 * k, FIRST_PROBE_NARROW if narrow else FIRST_PROBE)
        for probe in sorted({min(total, first), min(total, max(k, PROBE))}):
            nearest = self._nearest(query, probe, None)
            fields = self._fields.lookup([i for i, _ in nearest])
            passing = [(i, d) for i, d in nearest if i in fields and fields[i].passes(where)]
            if len(passing) >= k or len(nearest) < probe:
                return _matches(passing)[:k]
        return _matches(self._nearest(query, min(k, total), chroma_where(where)))

    def _nearest(
        self, query: npt.NDArray[np.float32], n: int, where: dict[str, Any] | None
    ) -> list[tuple[str, float]]:
        result = self._collection.query(
            query_embeddings=query, n_results=n, where=where, include=["distances"]
        )
        distances = (result["distances"] or [[]])[0]
        return list(zip(result["ids"][0], (float(d) for d in distances), strict=True))

    def _fetch_fields(self, ids: Sequence[str]) -> list[tuple[str, Fields]]:
        got = self._collection.get(ids=list(ids), include=["metadatas"])
        return [
            (i, Fields.from_metadata(m or {}))
            for i, m in zip(got["ids"], got["metadatas"] or [], strict=True)
        ]

    def count(self) -> int:
        return int(self._collection.count())

    def clear(self) -> None:
        # Dropping the collection (rather than deleting its ids) also forgets its
        # dimension, so that a reindex with another embedding model can fill it again.
        self._client.delete_collection(self._name)
        self._collection = self._open_collection()
        self._fields.forget()

    def health(self) -> Health:
        try:
            return Health(ok=True, count=self.count(), detail=f"{self._where}, {self._name}")
        except Exception as exc:
            return Health(ok=False, count=None, detail=f"{type(exc).__name__}: {exc}")

    def close(self) -> None:
        # Chroma shares one client system per path in the process and keeps it (with its
        # SQLite connection) until the last client is closed; without this, reopening a
        # directory that was deleted or rewritten would reuse the stale system.
        client, self._client = self._client, None
        if client is not None:
            client.close()


def _matches(found: Sequence[tuple[str, float]]) -> list[VectorMatch]:
    matches = [VectorMatch(i, 1.0 - d) for i, d in found]
    return sorted(matches, key=lambda m: (-m.similarity, m.id))


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


@hookimpl(trylast=True)
def palace_register_backends(register: Register) -> None:
    register("chroma", ChromaIndex)
