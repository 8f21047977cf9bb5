"""The :class:`Palace`: one palace's ledger, vector indexes, embedder and plugins.

The facade is thin: it wires the parts together at :meth:`Palace.open` and delegates.
Nothing here is global; two palaces with different backends live in one process.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any

import numpy as np

# The module, not the class: palace_plugins.manager imports this package while it loads,
# so importing palace_plugins first must find the module here half-initialised.
from palace_plugins import manager as plugin_manager
from palace_retrievers import config as config_module
from palace_retrievers.closets import Closet, ClosetExtractor, build_closets
from palace_retrievers.config import Config
from palace_retrievers.embedder import Embedder, Vectors, unit_rows
from palace_retrievers.errors import (
    EmbedderMismatchError,
    InvalidQueryError,
    PalaceNotFoundError,
    PluginError,
    PluginNotFoundError,
)
from palace_retrievers.ids import text_id
from palace_retrievers.index import IndexEntry
from palace_retrievers.indexes import IndexSet, IndexStatus, Progress
from palace_retrievers.ledger import Ledger, LedgerStats, SourceState
from palace_retrievers.ledger.sqlite import LEDGER_FILE, SQLiteLedger
from palace_retrievers.mining import Miner, MineReport
from palace_retrievers.records import DRAWER_KIND, Drawer, Filter, Hit, utc
from palace_retrievers.search import SearchPipeline

log = logging.getLogger(__name__)

DEFAULT_PATH = Path("~/.palace/default")
#: Metadata keys of :meth:`Palace.add_texts` that fill drawer fields instead of metadata.
DRAWER_FIELDS = ("wing", "room", "source", "user_id", "content_date", "kind", "chunk_index")


def default_path() -> Path:
    """``$PALACE_PATH`` if set, else ``~/.palace/default``."""
    return Path(os.environ.get("PALACE_PATH") or DEFAULT_PATH).expanduser()


@dataclass(frozen=True, slots=True)
class PalaceStats:
    """What ``palace status`` shows."""

    path: str
    schema_version: int
    backend: str
    embedder: str
    model: str | None
    dimension: int | None
    ledger: LedgerStats
    indexes: list[IndexStatus]
    plugin_failures: list[str]


def _entry(drawer: Drawer, vector: Any) -> IndexEntry:
    return IndexEntry(
        id=drawer.id,
        vector=vector,
        wing=drawer.wing,
        room=drawer.room,
        user_id=drawer.user_id or "",
        kind=drawer.kind,
        timestamp=drawer.timestamp,
        source=drawer.source,
    )


def _closet_entry(closet: Closet, vector: Any) -> IndexEntry:
    return IndexEntry(
        id=closet.id,
        vector=vector,
        wing=closet.wing,
        room=closet.room,
        user_id=closet.user_id or "",
        kind="closet",
        timestamp=0.0,
        source=closet.source,
    )


class Palace:
    """A palace on disk. Open one with :meth:`Palace.open`; close it (or use ``with``)."""

    def __init__(
        self,
        *,
        path: Path,
        config: Config,
        ledger: Ledger,
        embedder: Embedder,
        plugins: plugin_manager.PluginManager,
        indexes: IndexSet,
    ) -> None:
        self.path = path
        self.config = config
        self.ledger = ledger
        self.embedder = embedder
        self.plugins = plugins
        self.indexes = indexes
        self._extractor: ClosetExtractor | None = None
        self._pipeline = SearchPipeline(
            ledger=ledger, indexes=indexes, embed_query=self._embed_query, config=config.search
        )

    # -- opening ------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str] | None = None,
        *,
        backend: str | None = None,
        embedder: str | Embedder | None = None,
        model: str | None = None,
        config: Config | Mapping[str, Any] | None = None,
        plugins: Iterable[object] = (),
        create: bool = True,
        check_model: bool = True,
    ) -> Palace:
        """Open (or create) the palace at ``path``.

        Args:
            path: The palace's directory (default: ``$PALACE_PATH`` or ``~/.palace/default``).
            backend: Vector index backend plugin, overriding the configuration.
            embedder: Embedder plugin, overriding the configuration; or an :class:`Embedder`
                instance, used as is (e.g. one that wraps a LangChain ``Embeddings``).
            model: Embedding model, overriding the configuration.
            config: A :class:`Config`, or a mapping of overrides shaped like ``palace.toml``.
            plugins: Extra plugin objects to register (besides installed entry points).
            create: Create the palace when the directory holds none.
            check_model: Refuse a palace built with another embedding model (turned off
                only by :meth:`reindex`, which re-embeds).

        Raises:
            PalaceNotFoundError: no palace at ``path`` and ``create`` is false.
            ConfigError: the configuration is invalid.
            SchemaError: the ledger is from a newer version or not a ledger.
            EmbedderMismatchError: the palace was built with another model.
            PluginNotFoundError: the backend or embedder is not installed.
        """
        palace_dir = Path(path).expanduser() if path is not None else default_path()
        ledger_file = palace_dir / LEDGER_FILE
        if not ledger_file.exists():
            if not create:
                raise PalaceNotFoundError(
                    f"no palace at {palace_dir}; create one with `palace init` "
                    "(or pass --palace / set PALACE_PATH)"
                )
            if palace_dir.exists() and not palace_dir.is_dir():
                raise PalaceNotFoundError(f"{palace_dir} is a file, not a palace directory")
            palace_dir.mkdir(parents=True, exist_ok=True)
        if isinstance(config, Config):
            overrides: dict[str, Any] = config_module.to_dict(config)
        else:
            overrides = dict(config or {})
        named = embedder if isinstance(embedder, str) else None
        for key, value in (("backend", backend), ("embedder", named), ("model", model)):
            if value is not None:
                overrides[key] = value
        cfg = config_module.load(palace_dir, overrides=overrides)
        manager = plugin_manager.PluginManager(plugins=plugins)
        if isinstance(embedder, Embedder):
            emb: Any = embedder
        else:
            emb = manager.embedder(cfg.embedder)(model=cfg.model, options=cfg.embedder_options())
        backend_factory = manager.backend(cfg.backend)
        fallback_factory = manager.backend("sqlite")
        if not isinstance(emb, Embedder):
            raise PluginError(f"embedder plugin {cfg.embedder!r} did not return an Embedder")
        ledger = SQLiteLedger(ledger_file)
        try:
            if not (palace_dir / config_module.CONFIG_FILE).exists():
                (palace_dir / config_module.CONFIG_FILE).write_text(
                    config_module.render(cfg), encoding="utf-8"
                )
            if check_model:
                _check_model(ledger, emb)
            indexes = IndexSet(
                backend=cfg.backend,
                factory=backend_factory,
                fallback=fallback_factory,
                palace_dir=palace_dir,
                ledger=ledger,
                dimension=emb.dimension,
                options=cfg.backend_options(),
            )
        except BaseException:
            ledger.close()
            raise
        return cls(
            path=palace_dir,
            config=cfg,
            ledger=ledger,
            embedder=emb,
            plugins=manager,
            indexes=indexes,
        )

    def close(self) -> None:
        """Close the indexes and the ledger."""
        self.indexes.close()
        self.ledger.close()

    def __enter__(self) -> Palace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing ------------------------------------------------------------------------

    def _embed(self, texts: Sequence[str]) -> Vectors:
        vectors = self.embedder.embed_documents(list(texts))
        return unit_rows(vectors, dimension=self.embedder.dimension, count=len(texts))

    def _embed_query(self, text: str) -> Vectors:
        vector = self.embedder.embed_query(text)
        unit: Vectors = unit_rows(vector, dimension=self.embedder.dimension, count=1)[0]
        return unit

    def _claim_model(self) -> None:
        """Record the embedding model when the palace gets its first vectors."""
        if self.ledger.get_meta("embedding_model") != self.embedder.model_name:
            self.ledger.set_meta("embedding_model", self.embedder.model_name)
            self.ledger.set_meta("embedding_dimension", str(self.embedder.dimension))

    def _file_sources(self, batch: list[tuple[SourceState, list[Drawer]]]) -> list[str]:
        texts = [d.text for _, drawers in batch for d in drawers]
        vectors = self._embed(texts) if texts else self._embed([])
        self._claim_model()
        removed: list[str] = []
        offset = 0
        for state, drawers in batch:
            part = vectors[offset : offset + len(drawers)]
            offset += len(drawers)
            gone = self.ledger.replace_source(state, drawers, part, model=self.embedder.model_name)
            self.indexes.delete("drawers", gone)
            self.indexes.upsert(
                "drawers", [_entry(d, v) for d, v in zip(drawers, part, strict=True)]
            )
            removed.extend(gone)
        self._file_closets([d for _, drawers in batch for d in drawers], removed)
        return removed

    # -- closets ------------------------------------------------------------------------

    def closet_extractor(self) -> ClosetExtractor | None:
        """The configured closet extractor (``None`` when ``closets.extractor`` is empty).

        Raises:
            PluginNotFoundError: no installed plugin provides the extractor.
            PluginError: its factory did not return a ``ClosetExtractor``.
        """
        name = self.config.closets.extractor
        if not name:
            return None
        if self._extractor is None:
            factory = self.plugins.closet_extractor(name)
            extractor = factory(self.config.extractor_options())
            if not isinstance(extractor, ClosetExtractor):
                raise PluginError(f"closet extractor plugin {name!r} did not return one")
            self._extractor = extractor
        return self._extractor

    def _file_closets(self, drawers: Sequence[Drawer], gone: Sequence[str]) -> None:
        """Build, embed and file the closets of ``drawers`` (replacing their old ones).

        Closets are a signal: an extractor that fails is logged and the drawers stay
        filed without closets.
        """
        closets: list[Closet] = []
        if self.config.closets.extractor and drawers:
            try:
                extractor = self.closet_extractor()
                assert extractor is not None
                closets = build_closets(
                    drawers,
                    extractor=extractor,
                    extractor_name=self.config.closets.extractor,
                    drawers_per_closet=self.config.closets.drawers_per_closet,
                    max_chars=self.config.closets.max_chars,
                )
            except (PluginError, PluginNotFoundError) as exc:
                log.warning("no closets were built for %d drawers: %s", len(drawers), exc)
        vectors = self._embed([c.text for c in closets])
        removed = self.ledger.replace_closets(
            closets,
            vectors,
            model=self.embedder.model_name,
            drawer_ids=[*(d.id for d in drawers), *gone],
        )
        self.indexes.delete("closets", removed)
        self.indexes.upsert(
            "closets", [_closet_entry(c, v) for c, v in zip(closets, vectors, strict=True)]
        )

    def add_texts(
        self,
        texts: Sequence[str],
        metadatas: Sequence[Mapping[str, Any]] | None = None,
        ids: Sequence[str] | None = None,
        *,
        wing: str = "default",
        room: str = "general",
        user_id: str | None = None,
    ) -> list[str]:
        """File texts as drawers directly (an upsert by id); returns their ids.

        A metadata key among ``wing``, ``room``, ``source``, ``user_id``, ``content_date``
        and ``kind`` sets that field of its drawer; every other key is kept as metadata.
        A text with no id gets a deterministic one from its wing, user and text.

        Raises:
            InvalidQueryError: lengths differ, a text is empty, or an id repeats.
        """
        texts = list(texts)
        metadatas = list(metadatas) if metadatas is not None else [{} for _ in texts]
        if len(metadatas) != len(texts) or (ids is not None and len(ids) != len(texts)):
            raise InvalidQueryError("texts, metadatas and ids must have the same length")
        drawers = []
        for index, (text, meta) in enumerate(zip(texts, metadatas, strict=True)):
            if not isinstance(text, str) or not text.strip():
                raise InvalidQueryError(f"text {index} is empty: a drawer needs some text")
            fields = {k: meta[k] for k in DRAWER_FIELDS if meta.get(k) is not None}
            owner = fields.get("user_id", user_id)
            drawer_wing = str(fields.get("wing", wing))
            drawers.append(
                Drawer(
                    id=ids[index]
                    if ids is not None
                    else text_id(text=text, wing=drawer_wing, user_id=owner),
                    text=text,
                    wing=drawer_wing,
                    room=str(fields.get("room", room)),
                    source=str(fields.get("source", "text")),
                    content_date=utc(fields["content_date"]) if "content_date" in fields else None,
                    user_id=owner,
                    kind=str(fields.get("kind", DRAWER_KIND)),
                    chunk_index=int(fields.get("chunk_index", 0)),
                    metadata={k: v for k, v in meta.items() if k not in DRAWER_FIELDS},
                )
            )
        if len({d.id for d in drawers}) != len(drawers):
            raise InvalidQueryError("the same id is given to two texts in one call")
        if not drawers:
            return []
        vectors = self._embed(texts)
        self._claim_model()
        self.ledger.upsert_drawers(drawers, vectors, model=self.embedder.model_name)
        self.indexes.upsert(
            "drawers", [_entry(d, v) for d, v in zip(drawers, vectors, strict=True)]
        )
        self._file_closets(drawers, [])
        return [d.id for d in drawers]

    def mine(
        self,
        path: str | os.PathLike[str],
        *,
        wing: str | None = None,
        source: str = "files",
        room: str | None = None,
        user_id: str | None = None,
        progress: bool | None = None,
    ) -> MineReport:
        """Mine ``path`` with the ``source`` plugin into ``wing``; safe to run again.

        Args:
            path: A file or directory (or whatever the source plugin reads).
            wing: The wing to file into (default: the path's name).
            source: The source plugin (``"files"`` by default).
            room: Put every drawer in this room (default: the source's choice).
            user_id: Owner of the drawers (``None``: unowned).
            progress: Show a progress bar (``None``: only on a terminal).

        Raises:
            SourceError: ``path`` is missing, unreadable or binary.
            PluginNotFoundError: no plugin provides ``source``.
        """
        target = Path(path).expanduser()
        source_factory = self.plugins.source(source)
        options = {"max_file_bytes": self.config.mining.max_file_bytes} if source == "files" else {}
        miner = Miner(
            config=self.config,
            source=source_factory(options),
            file_drawers=self._file_sources,
            get_state=self.ledger.source_state,
            touch=self.ledger.touch_source,
        )

        def bar(items: Iterable[Any]) -> Iterable[Any]:
            from tqdm import tqdm

            return tqdm(
                items,
                desc=f"mining {target.name}",
                unit="file",
                disable=None if progress is None else not progress,
            )

        return miner.mine(
            target,
            wing=wing or target.resolve().name or "default",
            room=room,
            user_id=user_id,
            progress=bar,
        )

    # -- reading ------------------------------------------------------------------------

    def search(
        self,
        query: str,
        k: int = 5,
        *,
        wing: str | None = None,
        room: str | None = None,
        user_id: str | None = None,
        kind: str | None = None,
        since: datetime | date | str | None = None,
        until: datetime | date | str | None = None,
    ) -> list[Hit]:
        """The ``k`` drawers that best answer ``query``, best first.

        Only records of ``user_id`` are searched (unowned ones when it is ``None``).

        Raises:
            InvalidQueryError: empty or over-long query, ``k <= 0``, or a bad filter value.
        """
        where = Filter(
            wing=wing,
            room=room,
            user_id=user_id,
            kind=kind,
            since=utc(since) if since is not None else None,
            until=utc(until) if until is not None else None,
        )
        return self._pipeline.run(query, k=k, where=where)

    def search_by_vector(
        self,
        vector: Sequence[float] | Vectors,
        k: int = 5,
        *,
        wing: str | None = None,
        room: str | None = None,
        user_id: str | None = None,
        kind: str | None = None,
        since: datetime | date | str | None = None,
        until: datetime | date | str | None = None,
    ) -> list[Hit]:
        """The ``k`` drawers nearest ``vector`` by cosine similarity, best first.

        Only the vector floor of :meth:`search`: for callers that embed the query
        themselves (a LangChain or LlamaIndex vector store). The filters, and the
        ``user_id`` partition, are applied exactly as in :meth:`search`.

        Raises:
            InvalidQueryError: ``k <= 0``, a bad filter value, or a vector whose length is
                not the embedder's dimension.
        """
        if isinstance(k, bool) or not isinstance(k, int) or k <= 0:
            raise InvalidQueryError(f"k must be a positive integer, not {k!r}")
        array = np.asarray(vector, dtype=np.float32).reshape(-1)
        if array.shape != (self.embedder.dimension,):
            raise InvalidQueryError(
                f"the vector has {array.size} dimensions but this palace's embedder "
                f"({self.embedder.model_name}) makes {self.embedder.dimension}"
            )
        unit = unit_rows(array, dimension=self.embedder.dimension, count=1)[0]
        where = Filter(
            wing=wing,
            room=room,
            user_id=user_id,
            kind=kind,
            since=utc(since) if since is not None else None,
            until=utc(until) if until is not None else None,
        )
        matches = self.indexes.query("drawers", vector=unit, k=k, where=where)
        drawers = {d.id: d for d in self.ledger.get_drawers([m.id for m in matches])}
        hits = []
        for match in matches:
            drawer = drawers.get(match.id)
            if drawer is None or not where.matches(drawer):
                continue  # an index entry the ledger no longer holds: never shown
            scores = {"vector": match.similarity, "final": match.similarity}
            hits.append(Hit(drawer=drawer, score=match.similarity, scores=scores))
        hits.sort(key=lambda h: (-h.score, h.id))
        return hits

    def get(self, ids: Sequence[str], *, user_id: str | None = None) -> list[Drawer]:
        """The drawers with these ids that belong to ``user_id``, in the order asked."""
        owner = user_id or None
        return [d for d in self.ledger.get_drawers(list(ids)) if d.user_id == owner]

    def delete(self, ids: Sequence[str], *, user_id: str | None = None) -> int:
        """Delete the drawers with these ids that belong to ``user_id``; returns how many."""
        mine = [d.id for d in self.get(ids, user_id=user_id)]
        deleted = self.ledger.delete_drawers(mine)
        self.indexes.delete("drawers", deleted)
        self.indexes.delete("closets", self.ledger.prune_closets())
        return len(deleted)

    def stats(self) -> PalaceStats:
        """Counts, the model, and each index's health."""
        dimension = self.ledger.get_meta("embedding_dimension")
        return PalaceStats(
            path=str(self.path),
            schema_version=self.ledger.schema_version,
            backend=self.indexes.backend,
            embedder=self.config.embedder,
            model=self.ledger.get_meta("embedding_model") or self.embedder.model_name,
            dimension=int(dimension) if dimension else None,
            ledger=self.ledger.stats(),
            indexes=self.indexes.status(),
            plugin_failures=[f"{f.name}: {f.error}" for f in self.plugins.failures],
        )

    # -- repair -------------------------------------------------------------------------

    def reindex(self, *, progress: Progress | None = None) -> int:
        """Rebuild the vector indexes from the ledger; returns the vectors indexed.

        When the configured embedding model differs from the palace's, every drawer is
        re-embedded with the configured one first.
        """
        if self.ledger.get_meta("embedding_model") not in (None, self.embedder.model_name):
            for batch in self.ledger.iter_drawers(batch_size=self.config.mining.batch_size):
                vectors = self._embed([d.text for d in batch])
                self.ledger.set_vectors(
                    [d.id for d in batch], vectors, model=self.embedder.model_name
                )
            for closets in self.ledger.iter_closets(batch_size=self.config.mining.batch_size):
                vectors = self._embed([c.text for c in closets])
                self.ledger.set_closet_vectors(
                    [c.id for c in closets], vectors, model=self.embedder.model_name
                )
            self.ledger.set_meta("embedding_model", self.embedder.model_name)
            self.ledger.set_meta("embedding_dimension", str(self.embedder.dimension))
        return self.indexes.rebuild(progress=progress)


def _check_model(ledger: Ledger, embedder: Embedder) -> None:
    stored = ledger.get_meta("embedding_model")
    if stored is None or stored == embedder.model_name:
        return
    if ledger.count_vectors("drawers") == 0:
        return  # nothing embedded yet: the first vectors will claim the palace
    raise EmbedderMismatchError(
        f"this palace was embedded with {stored!r} but {embedder.model_name!r} is configured; "
        f"run `palace reindex` to re-embed it with {embedder.model_name!r}, "
        f"or configure {stored!r} again"
    )
