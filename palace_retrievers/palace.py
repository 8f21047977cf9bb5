"""The :class:`Palace`: one palace's ledger, vector indexes, embedder and plugins.

The facade is thin: it wires the parts together at :meth:`Palace.open` and delegates.
Nothing here is global; two palaces with different backends live in one process.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from palace_plugins.manager import PluginManager
from palace_retrievers import config as config_module
from palace_retrievers.closets import Closet, ClosetExtractor, build_closets
from palace_retrievers.config import Config
from palace_retrievers.embedder import Embedder, Vectors, unit_rows
from palace_retrievers.errors import (
    EmbedderMismatchError,
    InvalidQueryError,
    PalaceBusyError,
    PalaceError,
    PalaceNotFoundError,
    PluginError,
    PluginNotFoundError,
)
from palace_retrievers.graph.knowledge_graph import KnowledgeGraph
from palace_retrievers.ids import text_id
from palace_retrievers.index import COLLECTIONS
from palace_retrievers.ingest.mining import Miner, MineReport, resolve_root, storable
from palace_retrievers.ingest.syncing import EVERY_OWNER, Owner, SyncReport, find_gone
from palace_retrievers.ledger import Ledger, LedgerStats, SourceState
from palace_retrievers.ledger.open_ledger import ledger_exists, open_ledger
from palace_retrievers.memory.extraction import MemoryExtractor
from palace_retrievers.memory.judges import MemoryJudge
from palace_retrievers.memory.recall import Recall, merge
from palace_retrievers.memory.remembering import Remembering
from palace_retrievers.palace_memories import PalaceMemories
from palace_retrievers.records import DRAWER_KIND, Drawer, Filter, Hit, utc
from palace_retrievers.search import SearchPipeline, check_query
from palace_retrievers.search.indexes import IndexSet, IndexStatus, Progress
from palace_retrievers.sources import PALACE_SETTINGS
from palace_retrievers.writer_lock import LONG_WRITES

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


class Palace(PalaceMemories):
    """A palace on disk. Open one with :meth:`Palace.open`; close it (or use ``with``).

    The memory methods (``remember``, ``memories``, ``gc``, ``context``, ``forget``, …)
    are documented in :class:`~palace_retrievers.palace_memories.PalaceMemories`.
    """

    def __init__(
        self,
        *,
        path: Path,
        config: Config,
        ledger: Ledger,
        embedder: Embedder,
        plugins: PluginManager,
        indexes: IndexSet,
    ) -> None:
        self.path = path
        self.config = config
        self.ledger = ledger
        self.embedder = embedder
        self.plugins = plugins
        self.indexes = indexes
        self._extractor: ClosetExtractor | None = None
        self._memory_extractor: MemoryExtractor | None = None
        self._memory_judge: MemoryJudge | None = None
        self._writer = ledger.writer_lock(path)
        # What searches ask of an owner, per ledger generation (see _owner_state).
        self._state_generation = -1
        self._owner_states: dict[tuple[str, str | None], bool] = {}
        # The full-text stage of a search runs here while the query is embedded.
        self._aside: ThreadPoolExecutor | None = None
        self._aside_lock = threading.Lock()
        self._pipeline = SearchPipeline(
            ledger=ledger, indexes=indexes, embed_query=self._embed_query, config=config.search
        )
        self._recall = Recall(
            ledger=ledger, indexes=indexes, config=config.memory, search=config.search
        )
        self.kg = KnowledgeGraph(ledger, single_valued=config.graph.single_valued)
        """The temporal knowledge graph (see :class:`~palace_retrievers.graph.KnowledgeGraph`)."""
        self._remembering = Remembering(
            ledger=ledger,
            config=config,
            embed=self._embed,
            model=embedder.model_name,
            writing=partial(self.writing, queue=True),
            sync_index=self._sync_held,
            claim_model=self._claim_model,
            judge=self.memory_judge,
            nearest=self._nearest_memories,
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
        if palace_dir.exists() and not palace_dir.is_dir():
            raise PalaceNotFoundError(f"{palace_dir} is a file, not a palace directory")
        if isinstance(config, Config):
            overrides: dict[str, Any] = config_module.to_dict(config)
        else:
            overrides = dict(config or {})
        named = embedder if isinstance(embedder, str) else None
        for key, value in (("backend", backend), ("embedder", named), ("model", model)):
            if value is not None:
                overrides[key] = value
        cfg = config_module.load(palace_dir, overrides=overrides)
        if not ledger_exists(palace_dir, cfg.ledger):
            if not create:
                raise PalaceNotFoundError(
                    f"no palace at {palace_dir}; create one with `palace init` "
                    "(or pass --palace / set PALACE_PATH)"
                )
            palace_dir.mkdir(parents=True, exist_ok=True)
        manager = PluginManager(plugins=plugins)
        if isinstance(embedder, Embedder):
            emb: Any = embedder
        else:
            emb = manager.embedder(cfg.embedder)(model=cfg.model, options=cfg.embedder_options())
        backend_factory = manager.backend(cfg.backend)
        fallback_factory = manager.backend("sqlite")
        if not isinstance(emb, Embedder):
            raise PluginError(f"embedder plugin {cfg.embedder!r} did not return an Embedder")
        ledger = open_ledger(palace_dir, cfg.ledger, cfg.ledger_options(), create=create)
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
        with self._aside_lock:
            if self._aside is not None:
                self._aside.shutdown(wait=True)
                self._aside = None
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

    @contextmanager
    def writing(
        self, operation: str, *, timeout: float | None = None, queue: bool = False
    ) -> Iterator[None]:
        """Hold the palace-wide writer lock for ``operation`` (re-entrant in a thread).

        Every write goes through here. On first entry, whatever a killed writer left
        half-done in the vector indexes is replayed from the ledger (see
        :meth:`_sync_index`). ``timeout`` is how long to wait for another writer
        (default ``mining.lock_timeout``); see :mod:`palace_retrievers.writer_lock`.

        A short write made with ``queue=True`` (the memory writes) while another process
        runs a long one (a mine, a sync, a reindex) does not wait for it: it is a
        *queued write*. It commits to the ledger, which journals every change for the
        vector indexes in the same transaction, and leaves the indexes to the lock's
        holder, which applies the journal after each of its batches and once more after
        it lets the lock go (:meth:`_sync_after_release`). Until then the queued write
        is found by full text and by the ledger, not yet by vector.

        Raises:
            PalaceBusyError: another process still writes after ``timeout`` seconds.
        """
        first = not self._writer.held
        wait = self.config.mining.lock_timeout if timeout is None else timeout
        if first and queue and self._long_write_elsewhere():
            yield  # the ledger is written, the index left to the lock's holder
            self._sync_after_release(operation)
            return
        with self._writer.hold(operation, timeout=wait):
            if first:
                self._repair_lexical()
                self._sync_index()
            yield
        if first:
            self._sync_after_release(operation)

    def _long_write_elsewhere(self) -> bool:
        """Whether another process holds the writer lock for a long write."""
        holder = self._writer.holder()
        if holder is None or holder.is_this_process or holder.operation not in LONG_WRITES:
            return False
        try:
            with self._writer.hold("check", timeout=0.0):
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
        if self._writer.held or not self._index_lags():
            return
        try:
            with self._writer.hold(operation, timeout=0.0):
                self._sync_index()
        except PalaceBusyError:
            pass  # the holder replays the journal when it starts and after each batch
        except PalaceError as exc:  # an index that is down: the journal keeps the ids
            log.warning("the vector index was not brought up to the ledger (%s)", exc)

    def _index_lags(self) -> bool:
        """Whether the ledger's journal holds ids not yet applied to an index."""
        return any(self.ledger.pending_index(c, limit=1) for c in COLLECTIONS)

    def _sync_held(self) -> int:
        """:meth:`_sync_index` when this thread holds the writer lock (a queued write
        leaves the journal to the holder)."""
        return self._sync_index() if self._writer.held else 0

    def _nearest_memories(
        self, vector: Vectors, user_id: str | None, k: int
    ) -> list[tuple[str, float]]:
        """The owner's active memories nearest ``vector`` (a new memory's dedupe
        candidates): the vector index's ``k`` best, and, scored exactly, those the journal
        still holds for the index (filed by another process's queued write, or by a write
        whose index update failed), so that a duplicate of either is still noticed."""
        query = np.asarray(vector, dtype=np.float32).reshape(-1)
        found = {
            m.id: m.similarity
            for m in self.indexes.query(
                "memories", vector=query, k=k, where=Filter(user_id=user_id)
            )
        }
        waiting = self.ledger.pending_index("memories", limit=4096)
        for memory_id, stored in self.ledger.memory_vectors(waiting).items():
            if stored.shape == query.shape:
                found[memory_id] = float(stored @ query)
        return sorted(found.items(), key=lambda pair: (-pair[1], pair[0]))

    def _repair_lexical(self) -> None:
        """Rebuild the full-text index when it is missing or disagrees with the ledger
        (a dropped or emptied table), before anything is written through it."""
        problem = self.ledger.lexical_problem()
        if problem is not None:
            log.warning("rebuilding the full-text index: %s", problem)
            self.ledger.rebuild_lexical()

    def _sync_index(self) -> int:
        """Bring the vector indexes up to the ledger; returns how many ids were applied.

        The ledger journals every drawer and closet id it changes, in the same transaction
        as the change (``index_pending``). Here each journalled id is upserted into its
        index from the ledger, or deleted from it when the ledger no longer holds it,
        and then struck from the journal. Every write ends with this, and every writer
        starts with it, so a writer killed between its ledger commit and its index
        update leaves nothing behind that the next one does not repair.
        """
        applied = 0
        for collection in COLLECTIONS:
            while ids := self.ledger.pending_index(collection, limit=2048):
                entries = self.ledger.index_entries(collection, ids)
                present = {e.id for e in entries}
                self.indexes.delete(collection, [i for i in ids if i not in present])
                self.indexes.upsert(collection, entries)
                self.ledger.clear_pending(collection, ids)
                applied += len(ids)
        return applied

    def _recover(self) -> None:
        """Start of a long write: replay the journal, then rebuild any index that still
        disagrees with the ledger (lost or damaged files), so that what is mined next
        lands in an index that can be trusted."""
        if self._sync_index():
            log.info("replayed the index journal left by an interrupted write")
        degraded = self.indexes.check()
        for _ in range(3):
            # A memory write queued by another process between the replay and the check
            # reads as a count that disagrees: replay what it journalled and look again.
            if not degraded or not self._sync_index():
                break
            degraded = self.indexes.check()
        if degraded:
            log.warning("rebuilding the vector indexes from the ledger: %s", degraded)
            self.indexes.rebuild()
            # What the journal still holds was applied by the rebuild, unless a queued
            # write journalled it meanwhile: applying it again is cheap and exact.
            self._sync_index()

    def _file_sources(self, batch: list[tuple[SourceState, list[Drawer]]]) -> list[str]:
        """Embed a batch of sources' drawers and closets in one call, file them in one
        ledger transaction, bring the indexes up to the ledger, then remember what the
        memory extractor finds in the drawers that are new (see ``_extract_memories``)."""
        return self._embed_sources(batch)()

    def _embed_sources(
        self, batch: list[tuple[SourceState, list[Drawer]]]
    ) -> Callable[[], list[str]]:
        """The first step of :meth:`_file_sources`, which a mine runs in a background
        thread for the next batch while the one before is filed: build the closets and
        embed drawers and closets. Returns the second step, which files them (in the
        thread holding the writer lock)."""
        drawers = [d for _, ds in batch for d in ds]
        closets = self._build_closets(drawers)
        vectors = self._embed([*(d.text for d in drawers), *(c.text for c in closets)])
        return partial(self._write_sources, batch, drawers, closets, vectors)

    def _write_sources(
        self,
        batch: list[tuple[SourceState, list[Drawer]]],
        drawers: list[Drawer],
        closets: list[Closet],
        vectors: Vectors,
    ) -> list[str]:
        """The second step of :meth:`_file_sources`: file, index, extract memories."""
        known: set[str] = set()
        if self.config.memory.extractor and drawers:
            known = {d.id for d in self.ledger.get_drawers([d.id for d in drawers])}
        self._claim_model()
        removed = self.ledger.file_sources(
            batch,
            vectors[: len(drawers)],
            closets,
            vectors[len(drawers) :],
            model=self.embedder.model_name,
        )
        self._sync_index()
        self._extract_memories([d for d in drawers if d.id not in known])
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
            self._extractor = self._extractor_plugin(
                "closet extractor",
                self.plugins.closet_extractor,
                name,
                self.config.extractor_options(),
                ClosetExtractor,
            )
        return self._extractor

    def _file_closets(self, drawers: Sequence[Drawer], gone: Sequence[str]) -> None:
        """Build, embed and file the closets of ``drawers`` (replacing their old ones)."""
        closets = self._build_closets(drawers)
        vectors = self._embed([c.text for c in closets])
        self.ledger.replace_closets(
            closets,
            vectors,
            model=self.embedder.model_name,
            drawer_ids=[*(d.id for d in drawers), *gone],
        )
        self._sync_index()

    def _build_closets(self, drawers: Sequence[Drawer]) -> list[Closet]:
        """The closets of ``drawers``.

        Closets are a signal: an extractor that fails is logged and the drawers are
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
        return closets

    def add_texts(
        self,
        texts: Sequence[str],
        metadatas: Sequence[Mapping[str, Any]] | None = None,
        ids: Sequence[str] | None = None,
        *,
        wing: str = "default",
        room: str = "general",
        user_id: str | None = None,
        vectors: Sequence[Sequence[float]] | Vectors | None = None,
    ) -> list[str]:
        """File texts as drawers directly (an upsert by id); returns their ids.

        A metadata key among ``wing``, ``room``, ``source``, ``user_id``, ``content_date``
        and ``kind`` sets that field of its drawer; every other key is kept as metadata.
        A text with no id gets a deterministic one from its wing, user and text.

        An id that already names a drawer of another owner (another ``user_id``, or
        none) is refused, so no caller can overwrite, or take over, another user's drawer.

        ``vectors``, when given, are the texts' vectors made by this palace's own embedder
        (:attr:`embedder`), which the caller has already computed (a LlamaIndex index that
        embeds with the palace's model): they are stored (normalised) instead of
        embedding the texts again. The caller vouches for the model; only their number
        and length are checked.

        Raises:
            InvalidQueryError: lengths differ, a text is empty, an id repeats, an id
                belongs to a drawer of another owner, or ``vectors`` do not fit.
        """
        texts = list(texts)
        metadatas = list(metadatas) if metadatas is not None else [{} for _ in texts]
        if len(metadatas) != len(texts) or (ids is not None and len(ids) != len(texts)):
            raise InvalidQueryError("texts, metadatas and ids must have the same length")
        drawers = []
        for index, (text, meta) in enumerate(zip(texts, metadatas, strict=True)):
            if not isinstance(text, str) or not text.strip():
                raise InvalidQueryError(f"text {index} is empty: a drawer needs some text")
            text = texts[index] = storable(text)  # lone surrogates cannot be stored
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
        owners = {d.id: d.user_id for d in drawers}
        for existing in self.ledger.get_drawers(list(owners)):
            if existing.user_id != owners[existing.id]:
                raise InvalidQueryError(
                    f"id {existing.id!r} is taken by a drawer of another owner; "
                    "choose another id (a drawer never changes hands)"
                )
        if vectors is None:
            vectors = self._embed(texts)
        else:
            vectors = self._given_vectors(vectors, len(texts))
        with self.writing("add_texts"):
            self._claim_model()
            self.ledger.upsert_drawers(drawers, vectors, model=self.embedder.model_name)
            self._file_closets(drawers, [])
        return [d.id for d in drawers]

    def _given_vectors(self, vectors: Sequence[Sequence[float]] | Vectors, count: int) -> Vectors:
        """``vectors`` as unit rows, checked to be ``count`` of the embedder's dimension."""
        dimension = self.embedder.dimension
        try:
            array = np.asarray(vectors, dtype=np.float32)
        except ValueError:
            array = np.zeros((0, 0), dtype=np.float32)
        if array.shape != (count, dimension) or not np.all(np.isfinite(array)):
            raise InvalidQueryError(
                f"vectors must be {count} rows of {dimension} finite numbers (this palace's "
                f"embedder, {self.embedder.model_name}), not an array of shape {array.shape}"
            )
        return unit_rows(array, dimension=dimension, count=count)

    def _source(self, name: str) -> Any:
        """A fresh instance of the ``name`` source plugin, with the palace's options."""
        factory = self.plugins.source(name)
        settings = {
            "max_file_bytes": self.config.mining.max_file_bytes,
            "chunk_size": self.config.chunking.size,
            "chunk_overlap": self.config.chunking.overlap,
        }
        wanted: frozenset[str] = getattr(factory, "palace_settings", frozenset()) & PALACE_SETTINGS
        return factory({name: settings[name] for name in sorted(wanted)})

    def mine(
        self,
        path: str | os.PathLike[str],
        *,
        wing: str | None = None,
        source: str = "files",
        room: str | None = None,
        user_id: str | None = None,
        progress: bool | None = None,
        wait: float = 0.0,
    ) -> MineReport:
        """Mine ``path`` with the ``source`` plugin into ``wing``; safe to run again.

        Only what changed since the last mine is read and embedded. A mine that was
        killed (even by SIGKILL) is finished by running it again: every batch of sources
        is filed in one ledger transaction, and the vector indexes are brought up to the
        ledger from its journal when the next write starts. One process mines a palace
        at a time (see :mod:`palace_retrievers.writer_lock`).

        Args:
            path: A file or directory (or whatever the source plugin reads).
            wing: The wing to file into (default: the path's name).
            source: The source plugin (``"files"`` by default).
            room: Put every drawer in this room (default: the source's choice).
            user_id: Owner of the drawers (``None``: unowned).
            progress: Show a progress bar (``None``: only on a terminal, after a second).
            wait: Seconds to wait for another process's write to finish (default: none).

        Raises:
            SourceError: ``path`` is missing, unreadable or binary.
            PluginNotFoundError: no plugin provides ``source``.
            PalaceBusyError: another process is mining (or otherwise writing) this palace.
        """
        target = Path(path).expanduser()
        miner = Miner(
            config=self.config,
            source=self._source(source),
            file_drawers=self._file_sources,
            embed_drawers=self._embed_sources,
            get_states=self.ledger.source_states,
            touch=self.ledger.touch_source,
            plugin=source,
        )
        from tqdm import tqdm

        with self.writing("mine", timeout=wait):
            self._recover()
            started = time.perf_counter()
            with tqdm(
                desc=f"mining {target.name}",
                unit=" files",
                delay=1.0,
                disable=None if progress is None else not progress,
            ) as bar:

                def counted(items: Iterable[Any]) -> Iterator[Any]:
                    for item in items:
                        bar.update(1)
                        yield item

                def filed(report: MineReport) -> None:
                    rate = report.drawers_added / max(time.perf_counter() - started, 1e-9)
                    bar.set_postfix_str(f"{report.drawers_added} drawers, {rate:.1f} drawers/s")

                return miner.mine(
                    target,
                    wing=wing or resolve_root(target).name or "default",
                    room=room,
                    user_id=user_id,
                    progress=counted,
                    on_filed=filed,
                )

    def sync(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        dry_run: bool = False,
        user_id: Owner = EVERY_OWNER,
    ) -> SyncReport:
        """Remove the drawers of sources that are gone from the paths they were mined from.

        Every root recorded by :meth:`mine` (or only those at, under or above ``path``) is
        listed again by the source plugin that mined it; a source it no longer lists
        (deleted, or now ignored by ``.gitignore``) loses its drawers and closets, in one
        transaction per root. A root that no longer exists at all is left alone (it may
        be an unmounted disk) unless ``path`` names it or a folder above it.

        ``user_id`` means what it means to :meth:`mine`: a user's sources, or with
        ``None`` the unowned ones; a sync for one owner checks only the roots that owner
        mined and never removes another owner's drawers, even of a tree both mined. Left
        out, it is :data:`~palace_retrievers.ingest.syncing.EVERY_OWNER`: every owner's roots
        (what an operator's ``palace sync`` does), which is not the same as ``None``.

        Args:
            path: Only sources under this path (default: every mined root).
            dry_run: Count what would be removed, remove nothing.
            user_id: Only this owner's sources (``None``: the unowned ones; default:
                every owner's).

        Raises:
            PalaceBusyError: another process is mining (or otherwise writing) this palace.
            InvalidQueryError: ``user_id`` is not a string, ``None`` or ``EVERY_OWNER``.
        """
        if not (user_id is None or user_id is EVERY_OWNER or isinstance(user_id, str)):
            raise InvalidQueryError(f"user_id must be a string or None, not {user_id!r}")
        target = resolve_root(Path(path)) if path is not None else None
        with self.writing("sync", timeout=0.0):
            self._recover()
            report = find_gone(
                self.ledger, target, source=self._source, dry_run=dry_run, user_id=user_id
            )
            if not dry_run:
                for root in report.roots:
                    if root.gone:
                        report.drawers_removed += self.ledger.delete_sources(
                            root.wing, list(root.gone)
                        )
                self._sync_index()
            return report

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
        memories: bool = True,
        include_history: bool = False,
    ) -> list[Hit]:
        """The ``k`` drawers and memories that best answer ``query``, best first.

        Only records of ``user_id`` are searched (unowned ones when it is ``None``).
        Drawers go through the search pipeline (:mod:`palace_retrievers.search`); the
        owner's active memories are found and scored apart and merged in by score
        (:mod:`palace_retrievers.memory.recall`), which leaves the drawers' own ranking as it
        is. A memory hit has ``hit.memory`` set (``hit.is_memory``) and a drawer view of
        the memory as ``hit.drawer``; memories returned count as recalled.

        Args:
            query: What to search for.
            k: How many hits.
            wing, room: Only drawers of this wing or room (memories: of it, or of none).
            user_id: Whose records.
            kind: Only this kind: ``"drawer"`` for drawers only, a memory kind
                (``"fact"``, ``"preference"``, …) for memories of that kind.
            since, until: Only records dated in this range (a memory's date is when it
                was stated).
            memories: Search memories too (and ``memory.search`` is on).
            include_history: After each memory hit, the memories it superseded (their
                ``scores`` have ``superseded = 1``); they do not count towards ``k``.

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
        check_query(query, k, max_chars=self.config.search.max_query_chars)
        lexical = self._lexical_aside(query, where)
        vector = self._embed_query(query)
        signals = self._graph_signals(query, where)
        hits = self._pipeline.run(
            query, k=k, where=where, vector=vector, signals=signals, lexical=lexical.result
        )
        if not memories or not self._wants_memories(where):
            return hits
        now = datetime.now(UTC)
        query_terms = self._recall.terms(query)
        candidates = self._recall.candidates(query, vector, where, now, query_terms, k=k)
        if not candidates:
            return hits
        best = self._recall.best_drawer_match(hits, query_terms)
        hits = merge(hits, self._recall.hits(candidates, best=best, now=now), k)
        self._touch_memories(hits, now)
        return self._recall.with_history(hits) if include_history else hits

    def _lexical_aside(self, query: str, where: Filter) -> Future[list[str]]:
        """The full-text candidates, asked in a thread of their own while the query is
        embedded: both spend their time outside the GIL (SQLite's FTS5 and the model), so
        on two cores a search waits for the slower of the two, not for their sum. On one
        core they are asked here and now. Searches from several threads at once get as
        many workers as there are cores (each with its own SQLite connection), so their
        full-text queries do not queue behind one another."""
        cores = os.cpu_count() or 1
        if cores < 2:
            done: Future[list[str]] = Future()
            done.set_result(self._pipeline.lexical(query, where))
            return done
        with self._aside_lock:
            if self._aside is None:
                self._aside = ThreadPoolExecutor(max_workers=cores, thread_name_prefix="palace-fts")
            return self._aside.submit(self._pipeline.lexical, query, where)

    def _owner_state(self, key: tuple[str, str | None], read: Callable[[], bool]) -> bool:
        """``read()``, remembered until the ledger changes (its generation moves, in
        this process or another): what a search asks of an owner on every query (does
        the owner have memories, triples) costs one look-up per change, not per query."""
        generation = self.ledger.generation()
        if generation != self._state_generation:
            self._state_generation = generation
            self._owner_states.clear()
        known = self._owner_states.get(key)
        if known is None:
            known = self._owner_states[key] = read()
        return known

    def _wants_memories(self, where: Filter) -> bool:
        """Whether a search with ``where`` looks at memories (:meth:`Recall.wanted`),
        remembered per owner and filter until the ledger changes."""
        if not self.config.memory.search:
            return False
        return self._owner_state(
            (f"memories:{where.kind}", where.user_id), lambda: self._recall.wanted(where)
        )

    def _graph_signals(self, query: str, where: Filter) -> dict[str, float]:
        """``graph.boost`` for each drawer a current triple of an entity the query names
        came from. A signal, not a gate: a graph that fails is logged and adds nothing.
        An owner with no triples (remembered until the ledger changes) is not looked up."""
        boost = self.config.graph.boost
        if boost <= 0:
            return {}
        try:
            owner = where.user_id or None
            if not self._owner_state(
                ("triples", owner), lambda: self.ledger.graph_stats(user_id=owner).triples > 0
            ):
                return {}
            return self.kg.drawer_boosts(query, user_id=where.user_id, boost=boost)
        except Exception as exc:
            log.warning("the graph stage failed and was skipped (%s: %s)", type(exc).__name__, exc)
            return {}

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

    def drawer_ids(
        self,
        *,
        user_id: str | None = None,
        wing: str | None = None,
        room: str | None = None,
        kind: str | None = None,
        since: datetime | date | str | None = None,
        until: datetime | date | str | None = None,
    ) -> list[str]:
        """The ids of ``user_id``'s drawers (unowned ones when ``None``) that pass these
        filters, as :meth:`search` applies them; memories are not drawers.

        Raises:
            InvalidQueryError: a bad filter value.
        """
        where = Filter(
            wing=wing,
            room=room,
            user_id=user_id,
            kind=kind,
            since=utc(since) if since is not None else None,
            until=utc(until) if until is not None else None,
        )
        return self.ledger.drawer_ids(where)

    def source_drawers(self, source: str, *, wing: str, user_id: str | None = None) -> list[Drawer]:
        """The drawers of one source (a mined file or conversation) of ``wing`` that
        belong to ``user_id``, in chunk order: a chunk and its neighbours."""
        where = Filter(wing=wing, user_id=user_id)
        return self.ledger.source_drawers(wing=wing, source=source, where=where)

    def delete(self, ids: Sequence[str], *, user_id: str | None = None) -> int:
        """Delete the drawers with these ids that belong to ``user_id``; returns how many."""
        with self.writing("delete"):
            mine = [d.id for d in self.get(ids, user_id=user_id)]
            deleted = self.ledger.delete_drawers(mine)
            self.ledger.prune_closets()
            self._sync_index()
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

        When the configured embedding model differs from the palace's, every drawer,
        closet and memory (of every status) is re-embedded with the configured one first.

        Raises:
            PalaceBusyError: another process is mining (or otherwise writing) this palace.
        """
        with self._writer.hold("reindex", timeout=0.0):
            return self._reindex(progress=progress)

    def _reindex(self, *, progress: Progress | None) -> int:
        self.ledger.rebuild_lexical()  # a repair: full text is derived from the ledger too
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
            for memories in self.ledger.iter_memories(batch_size=self.config.mining.batch_size):
                vectors = self._embed([m.text for m in memories])
                self.ledger.save_memories(
                    memories,
                    vectors={m.id: v for m, v in zip(memories, vectors, strict=True)},
                    model=self.embedder.model_name,
                )
            self.ledger.set_meta("embedding_model", self.embedder.model_name)
            self.ledger.set_meta("embedding_dimension", str(self.embedder.dimension))
        count = self.indexes.rebuild(progress=progress)
        for collection in COLLECTIONS:
            self.ledger.clear_pending(collection)  # the rebuild applied everything
        return count


def _check_model(ledger: Ledger, embedder: Embedder) -> None:
    stored = ledger.get_meta("embedding_model")
    if stored is None or stored == embedder.model_name:
        return
    if not ledger.count_vectors("drawers") and not sum(ledger.count_memories().values()):
        return  # nothing embedded yet: the first vectors will claim the palace
    raise EmbedderMismatchError(
        f"this palace was embedded with {stored!r} but {embedder.model_name!r} is configured; "
        f"run `palace reindex` to re-embed it with {embedder.model_name!r}, "
        f"or configure {stored!r} again"
    )
