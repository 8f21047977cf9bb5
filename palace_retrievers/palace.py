"""The :class:`Palace`: one palace's ledger, vector indexes, embedder and plugins.

The facade is thin: :meth:`Palace.open` wires the parts together, and each method
delegates to one of the collaborators a palace holds (:mod:`palace_retrievers.facade`):
its drawers, its searches, its memories (with
:class:`~palace_retrievers.memory.remembering.Remembering`, the memory lifecycle), its
knowledge graph (``palace.kg``) and its writer. Nothing here is global; two palaces with
different backends live in one process.

This module is longer than most (about 900 lines) because it is the public API: each
method's signature and documentation are here, and each body is one delegating call.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from palace_plugins.manager import PluginManager
from palace_retrievers import config as config_module
from palace_retrievers.closets import ClosetExtractor
from palace_retrievers.config import Config
from palace_retrievers.embedder import Embedder, Vectors
from palace_retrievers.errors import PalaceNotFoundError, PluginError
from palace_retrievers.facade.answers import ANSWERS_FILE, Answers
from palace_retrievers.facade.drawers import Drawers, where
from palace_retrievers.facade.filing import Filing
from palace_retrievers.facade.model import Model, check_embedder
from palace_retrievers.facade.selected import SelectedPlugins
from palace_retrievers.facade.transfer import Transfer
from palace_retrievers.facade.writer import Writer
from palace_retrievers.graph import KnowledgeGraph
from palace_retrievers.ingest.mining import MineReport
from palace_retrievers.ingest.syncing import EVERY_OWNER, Owner, SyncReport
from palace_retrievers.ledger import Ledger, LedgerStats
from palace_retrievers.ledger.open_ledger import ledger_exists, open_ledger
from palace_retrievers.records import Drawer, Hit
from palace_retrievers.records.memories import (
    ForgetReport,
    GcReport,
    Memory,
    MemoryEvent,
    Remembered,
)
from palace_retrievers.search import SearchPipeline
from palace_retrievers.search.indexes import IndexSet, IndexStatus, Progress
from palace_retrievers.transfer.export import EVERYONE
from palace_retrievers.transfer.importing import ImportReport

if TYPE_CHECKING:
    from palace_retrievers.facade.memories import Memories
    from palace_retrievers.facade.searching import Searching
    from palace_retrievers.memory.extraction import MemoryExtractor
    from palace_retrievers.memory.judges import MemoryJudge
    from palace_retrievers.memory.keeping import MemoryKeeping
    from palace_retrievers.memory.recall import Recall
    from palace_retrievers.memory.remembering import Remembering

DEFAULT_PATH = Path("~/.palace/default")

Time = datetime | date | str | float | int


def default_path() -> Path:
    """``$PALACE_PATH`` if set, else ``~/.palace/default``."""
    return Path(os.environ.get("PALACE_PATH") or DEFAULT_PATH).expanduser()


@dataclass(frozen=True, slots=True)
class _MemorySide:
    """What :meth:`Palace._built` makes on first use."""

    recall: Recall
    remembering: Remembering
    memories: Memories
    searching: Searching


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


class Palace:
    """A palace on disk. Open one with :meth:`Palace.open`; close it (or use ``with``).

    Names that mean three things are said plainly: :meth:`delete_drawers` removes
    drawers for good, :meth:`archive_memory` archives a memory (:meth:`restore` brings it
    back), :meth:`forget_memories` removes memories for good, and :meth:`forget` removes
    everything of a user. :meth:`delete` and :meth:`delete_memory` are their older names.
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
        self.kg = KnowledgeGraph(ledger, single_valued=config.graph.single_valued)
        """The temporal knowledge graph (see :class:`~palace_retrievers.graph.KnowledgeGraph`)."""
        self._model = Model(embedder=embedder, ledger=ledger)
        self._writer = Writer(
            path=path, ledger=ledger, indexes=indexes, lock_timeout=config.mining.lock_timeout
        )
        self._selected = SelectedPlugins(
            manager=plugins, config=config, answers=Answers(path / ANSWERS_FILE)
        )
        self._pipeline = SearchPipeline(
            ledger=ledger,
            indexes=indexes,
            embed_query=self._model.embed_query,
            config=config.search,
        )
        self._memory_side: _MemorySide | None = None
        self._making = threading.Lock()
        self._filing = Filing(
            config=config,
            ledger=ledger,
            model=self._model,
            writer=self._writer,
            selected=self._selected,
            extract_memories=lambda drawers: self._memories.extract(drawers),
        )
        self._drawers = Drawers(
            config=config,
            ledger=ledger,
            indexes=indexes,
            model=self._model,
            writer=self._writer,
            selected=self._selected,
            filing=self._filing,
        )
        self._transfer = Transfer(
            path=path, ledger=ledger, model=self._model, filing=self._filing, writer=self._writer
        )

    def _built(self) -> _MemorySide:
        """The memories' collaborators, and the searching that merges a search's memory
        hits with its drawer hits, made when first used: a one-shot command that neither
        searches nor reads a memory (``palace status``) does not import them."""
        side = self._memory_side
        if side is not None:
            return side
        with self._making:
            if self._memory_side is None:
                from palace_retrievers.facade.memories import Memories, nearest
                from palace_retrievers.facade.searching import Searching
                from palace_retrievers.memory.recall import Recall
                from palace_retrievers.memory.remembering import Remembering

                ledger, indexes, config = self.ledger, self.indexes, self.config
                recall = Recall(
                    ledger=ledger, indexes=indexes, config=config.memory, search=config.search
                )
                remembering = Remembering(
                    ledger=ledger,
                    config=config,
                    embed=self._model.embed,
                    model=self.embedder.model_name,
                    writing=partial(self._writer.writing, queue=True),
                    sync_index=self._writer.sync_held,
                    claim_model=self._model.claim,
                    judge=self._selected.memory_judge,
                    nearest=partial(nearest, ledger, indexes),
                )
                memories = Memories(
                    config=config,
                    ledger=ledger,
                    indexes=indexes,
                    kg=self.kg,
                    remembering=remembering,
                    recall=recall,
                    model=self._model,
                    writer=self._writer,
                    selected=self._selected,
                    search=self.search,
                )
                searching = Searching(
                    config=config,
                    ledger=ledger,
                    indexes=indexes,
                    model=self._model,
                    pipeline=self._pipeline,
                    recall=recall,
                    kg=self.kg,
                    touch=memories.touch,
                )
                self._memory_side = _MemorySide(recall, remembering, memories, searching)
            return self._memory_side

    @property
    def _recall(self) -> Recall:
        return self._built().recall

    @property
    def _remembering(self) -> Remembering:
        return self._built().remembering

    @property
    def _keeping(self) -> MemoryKeeping:
        return self._built().remembering.keeping

    @property
    def _memories(self) -> Memories:
        return self._built().memories

    @property
    def _searching(self) -> Searching:
        return self._built().searching

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
        exact_below: int = 0,
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
            exact_below: Search a collection (drawers, closets, memories) holding fewer
                vectors by an exact scan of the ledger, without opening its index until
                something writes it: what a one-shot command does, for which opening an
                embedded index costs more than scanning a small palace (0: never).

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
                check_embedder(ledger, emb)
            indexes = IndexSet(
                backend=cfg.backend,
                factory=backend_factory,
                fallback=fallback_factory,
                palace_dir=palace_dir,
                ledger=ledger,
                dimension=emb.dimension,
                options=cfg.backend_options(),
                exact_below=exact_below,
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
        if self._memory_side is not None:
            self._memory_side.searching.close()
        self.indexes.close()
        self.ledger.close()
        self._selected.answers.close()

    def __enter__(self) -> Palace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing -----------------------------------------------------------------

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
        with self._writer.writing(operation, timeout=timeout, queue=queue):
            yield

    def _embed(self, texts: Sequence[str]) -> Vectors:
        """Unit rows of ``texts`` by the palace's model (tests and benchmarks use it)."""
        return self._model.embed(texts)

    def _embed_query(self, text: str) -> Vectors:
        """The unit vector of a query by the palace's model."""
        return self._model.embed_query(text)

    # -- drawers -----------------------------------------------------------------

    def closet_extractor(self) -> ClosetExtractor | None:
        """The configured closet extractor (``None`` when ``closets.extractor`` is empty).

        Raises:
            PluginNotFoundError: no installed plugin provides the extractor.
            PluginError: its factory did not return a ``ClosetExtractor``.
        """
        return self._selected.closet_extractor()

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

        A metadata key among ``wing``, ``room``, ``source``, ``user_id``, ``content_date``,
        ``kind`` and ``chunk_index`` sets that field of its drawer; every other key is kept
        as metadata. A text with no id gets a deterministic one from its wing, user and
        text. A text with no ``source`` belongs to the source of its call (``"text"`` when
        it is the only one, else ``"text#<digest of their ids>"``), and one with no
        ``chunk_index`` gets its rank in the call among the texts of its wing and source,
        so that the search reads each text beside its neighbours
        (:mod:`palace_retrievers.ingest.placing`).

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
        return self._drawers.add_texts(
            texts, metadatas, ids, wing=wing, room=room, user_id=user_id, vectors=vectors
        )

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
        return self._drawers.mine(
            path,
            wing=wing,
            source=source,
            room=room,
            user_id=user_id,
            progress=progress,
            wait=wait,
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
        return self._drawers.sync(path, dry_run=dry_run, user_id=user_id)

    # -- reading -----------------------------------------------------------------

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
        selected = where(wing=wing, room=room, user_id=user_id, kind=kind, since=since, until=until)
        return self._searching.search(
            query, k, selected, memories=memories, include_history=include_history
        )

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
        return self._searching.by_vector(
            vector,
            k,
            partial(
                where, wing=wing, room=room, user_id=user_id, kind=kind, since=since, until=until
            ),
        )

    def get(self, ids: Sequence[str], *, user_id: str | None = None) -> list[Drawer]:
        """The drawers with these ids that belong to ``user_id``, in the order asked."""
        return self._drawers.get(ids, user_id=user_id)

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
        return self._drawers.ids(
            where(wing=wing, room=room, user_id=user_id, kind=kind, since=since, until=until)
        )

    def source_drawers(self, source: str, *, wing: str, user_id: str | None = None) -> list[Drawer]:
        """The drawers of one source (a mined file or conversation) of ``wing`` that
        belong to ``user_id``, in chunk order: a chunk and its neighbours."""
        return self._drawers.of_source(source, wing=wing, user_id=user_id)

    def wings(self, *, user_id: str | None = None) -> dict[str, dict[str, int]]:
        """Wing → room → number of drawers of ``user_id`` (``None``: unowned drawers)."""
        return self._drawers.wings(user_id=user_id)

    def delete_drawers(self, ids: Sequence[str], *, user_id: str | None = None) -> int:
        """Delete the drawers with these ids that belong to ``user_id``, for good; returns
        how many (their closets go with them)."""
        return self._drawers.delete(ids, user_id=user_id)

    def delete(self, ids: Sequence[str], *, user_id: str | None = None) -> int:
        """:meth:`delete_drawers`, by its older name (kept: callers use it)."""
        return self.delete_drawers(ids, user_id=user_id)

    @property
    def read_only(self) -> bool:
        """Whether the palace can be searched and read but not written (its ledger file
        opened read-only: the file or its folder is read-only to this user)."""
        return self.ledger.read_only

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

    def reindex(self, *, progress: Progress | None = None) -> int:
        """Rebuild the vector indexes from the ledger; returns the vectors indexed.

        When the configured embedding model differs from the palace's, every drawer,
        closet and memory (of every status) is re-embedded with the configured one first.

        Raises:
            PalaceBusyError: another process is mining (or otherwise writing) this palace.
        """
        return self._drawers.reindex(progress=progress)

    # -- moving ------------------------------------------------------------------

    def export_records(self, *, user_id: str | None = EVERYONE) -> Iterator[dict[str, Any]]:
        """Every record of the palace, verbatim, as JSON-ready dicts, header first: its
        drawers, its memories with their whole history, the histories of memories deleted
        since, and its triples (the format: :mod:`palace_retrievers.transfer`; write them
        with :func:`~palace_retrievers.transfer.write_jsonl` or
        :func:`~palace_retrievers.transfer.write_markdown`). Vectors are left out.

        Args:
            user_id: Only this owner's records (``None``: only unowned ones); by default,
                every owner's (:data:`~palace_retrievers.transfer.EVERYONE`): an export is
                the whole palace's, to move or to audit it.
        """
        return self._transfer.export_records(user_id=user_id)

    def import_jsonl(self, lines: Iterable[str | bytes], *, batch_size: int = 256) -> ImportReport:
        """File the records of a JSONL export into the palace, embedding with its model.

        ``lines``: the export's lines, as text or as UTF-8 bytes (a file opened ``"rb"``,
        whose lines are then decoded one by one, so that one bad byte costs one record).

        The whole input is read and checked before anything is written (see
        :mod:`palace_retrievers.transfer` for what is skipped, and why: a bad record, or
        one that would overwrite or point at another owner's records here). Safe to run
        twice: what is already here as exported is left alone.

        Raises:
            InvalidQueryError: the input is not a palace export (empty, its first line not
                a ``palace-export`` header of a known version) or cannot be read; nothing
                is written.
            PalaceBusyError: another process is writing to the palace.
        """
        return self._transfer.import_jsonl(lines, batch_size=batch_size)

    # -- memories ----------------------------------------------------------------

    def remember(
        self,
        text: str,
        *,
        kind: str = "fact",
        importance: float = 1.0,
        tags: Iterable[str] = (),
        ttl: timedelta | float | None = None,
        user_id: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
        source_ids: Iterable[str] = (),
        wing: str = "",
        status: str = "active",
        room: str = "",
        origin: str = "explicit",
        now: Time | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Remembered:
        """Remember ``text`` for ``user_id``: file it, or recognise a duplicate or an update.

        A statement that repeats a current memory raises that memory instead of filing a
        new one (``action == "duplicate"``); a new value of something remembered (the
        same subject and slot, another value) supersedes the old memory, which is kept
        with a link to the new one (``action == "updated"``); anything else is added.
        Nothing is deleted. See :mod:`palace_retrievers.memory.remembering`.

        Args:
            text: The statement, e.g. ``"We moved to PostgreSQL 15"``.
            kind: ``fact``, ``preference``, ``decision``, ``summary`` or ``event``.
            importance: 0 to 1 (1.0: the user asked for it to be remembered).
            tags: Free labels.
            ttl: Time to live (a timedelta or seconds): ``palace gc`` archives it then.
            user_id: Owner (``None``: unowned).
            agent_id: The agent that remembers it.
            session_id: The session it comes from.
            source_ids: Drawers that back it up.
            wing: The wing it belongs to (``""``: every wing of its owner).
            status: ``"active"``, or ``"pending"`` (kept, not recalled until confirmed).
            room: The room it belongs to (``""``: every room).
            origin: ``"explicit"`` or ``"extracted"`` (set by mining).
            now: When it was stated (default: now); a memory stated before the current
                value it updates is filed already superseded.
            metadata: Anything else to keep with it (JSON-serialisable).

        Raises:
            InvalidQueryError: empty text, unknown kind or status, importance outside
                [0, 1], a ttl that is not positive, or a bad argument type.
            PalaceBusyError: another process is writing to the palace.
        """
        return self._remembering.remember(
            text,
            kind=kind,
            importance=importance,
            tags=tags,
            ttl=ttl,
            user_id=user_id,
            agent_id=agent_id,
            session_id=session_id,
            source_ids=source_ids,
            wing=wing,
            room=room,
            status=status,
            origin=origin,
            now=now,
            metadata=metadata,
        )

    def memories(
        self,
        *,
        user_id: str | None = None,
        kind: str | None = None,
        status: str | None = "active",
        limit: int = 100,
        offset: int = 0,
    ) -> list[Memory]:
        """The memories of ``user_id``, newest first.

        Args:
            user_id: Owner (``None``: unowned memories).
            kind: Only this kind.
            status: Only this status (``None``: every status).
            limit: At most this many.
            offset: Skip this many first.

        Raises:
            InvalidQueryError: unknown kind or status, or a bad limit or offset.
        """
        return self._keeping.list_memories(
            user_id=user_id, kind=kind, status=status, limit=limit, offset=offset
        )

    def memory(self, memory_id: str, *, user_id: str | None = None) -> Memory:
        """One memory of ``user_id``.

        Raises:
            MemoryNotFoundError: no such memory, or it belongs to another owner.
        """
        return self._keeping.get(memory_id, user_id=user_id)

    def history(self, memory_id: str, *, user_id: str | None = None) -> list[MemoryEvent]:
        """Every event of a memory, oldest first: ``add``, ``update``, ``supersede``,
        ``duplicate``, ``delete``, ``archive``, ``restore`` (kept after a hard delete).

        Raises:
            MemoryNotFoundError: no history for that id and owner.
        """
        return self._keeping.history(memory_id, user_id=user_id)

    def chain(self, memory_id: str, *, user_id: str | None = None) -> list[Memory]:
        """The supersede chain through a memory (every value it had), oldest first.

        Raises:
            MemoryNotFoundError: no such memory for that owner.
        """
        return self._keeping.chain(memory_id, user_id=user_id)

    def context(
        self,
        query: str,
        *,
        user_id: str | None = None,
        k: int = 10,
        max_tokens: int | None = None,
        wing: str | None = None,
        drawers: bool = False,
    ) -> str:
        """The prompt block of the memories that best answer ``query``.

        A header tells the model to use only the memories that apply, then one line per
        memory, ``[YYYY-MM-DD] (kind) text``, best first, until ``max_tokens`` (a token
        counted as 4 characters) is spent. Empty when no memory is relevant. The
        memories listed count as recalled. See :mod:`palace_retrievers.memory.recall`.

        Args:
            query: The request the context is for.
            user_id: Whose memories (``None``: unowned ones).
            k: At most this many lines.
            max_tokens: Token budget (default ``memory.context_tokens``).
            wing: Only memories of this wing (or of no wing).
            drawers: Also list drawers (``(drawer)`` lines), merged by score as in
                :meth:`search`.

        Raises:
            InvalidQueryError: empty query, ``k`` or ``max_tokens`` not positive.
        """
        return self._memories.context(
            query, user_id=user_id, k=k, max_tokens=max_tokens, wing=wing, drawers=drawers
        )

    def edit_memory(
        self,
        memory_id: str,
        *,
        user_id: str | None = None,
        text: str | None = None,
        importance: float | None = None,
        tags: Iterable[str] | None = None,
        kind: str | None = None,
    ) -> Memory:
        """Change a memory in place (a new text is embedded again); history: ``update``.

        Raises:
            MemoryNotFoundError: no such memory for that owner.
            InvalidQueryError: empty text, unknown kind, importance outside [0, 1].
        """
        return self._keeping.edit(
            memory_id, user_id=user_id, text=text, importance=importance, tags=tags, kind=kind
        )

    def pin(self, memory_id: str, *, user_id: str | None = None) -> Memory:
        """Give a memory importance 1.0 (so ``gc`` never finds it unused).

        Raises:
            MemoryNotFoundError: no such memory for that owner.
        """
        return self._keeping.edit(
            memory_id, user_id=user_id, importance=1.0, detail={"pinned": True}
        )

    def archive_memory(self, memory_id: str, *, user_id: str | None = None) -> Memory:
        """Archive a memory (a soft delete) (search skips it; :meth:`restore`
        brings it back); history: ``delete``.

        Raises:
            MemoryNotFoundError: no such memory for that owner.
        """
        return self._keeping.delete(memory_id, user_id=user_id)

    def delete_memory(self, memory_id: str, *, user_id: str | None = None) -> Memory:
        """:meth:`archive_memory`, by its older name (kept: callers use it). It archives;
        :meth:`forget_memories` deletes for good."""
        return self.archive_memory(memory_id, user_id=user_id)

    def restore(self, memory_id: str, *, user_id: str | None = None) -> Memory:
        """Bring an archived memory back (``active``, or ``superseded`` again if it had
        been superseded), or confirm a ``pending`` one (it becomes active and supersedes
        the active memories it updates); history: ``restore``.

        Raises:
            MemoryNotFoundError: no such memory for that owner.
            InvalidQueryError: the memory is neither archived nor pending.
        """
        return self._keeping.restore(memory_id, user_id=user_id)

    def forget_memories(self, ids: Iterable[str], *, user_id: str | None = None) -> int:
        """Delete memories of ``user_id`` for good; returns how many. Their history is
        kept, with a ``delete`` event (``palace.forget`` removes it with the user)."""
        return self._keeping.forget(ids, user_id=user_id)

    def gc(
        self, *, now: Time | None = None, dry_run: bool = False, user_id: Owner = EVERY_OWNER
    ) -> GcReport:
        """Archive what the ``[memory]`` policy retires: expired memories, memories
        superseded for ``gc_superseded_days``, and memories unused for ``gc_unused_days``
        whose importance is below ``gc_unused_importance``.

        ``user_id`` means what it means to :meth:`sync`: one user's memories, or with
        ``None`` the unowned ones. Left out, it is
        :data:`~palace_retrievers.ingest.syncing.EVERY_OWNER`: every owner's memories (what an
        operator's ``palace gc`` does), which is not the same as ``None``.

        Args:
            now: The time to judge by (default: now).
            dry_run: Count, change nothing.
            user_id: Only this owner's memories (``None``: the unowned ones; default:
                every owner's).

        Raises:
            PalaceBusyError: another process is writing to the palace.
            InvalidQueryError: ``user_id`` is not a string, ``None`` or ``EVERY_OWNER``.
        """
        return self._memories.gc(now=now, dry_run=dry_run, user_id=user_id)

    def forget(self, *, user_id: str) -> ForgetReport:
        """Delete everything of ``user_id``, for good: drawers, the closets over them,
        the sources all of whose drawers were theirs, memories with their history, the
        triples and entities of their graph, every vector of these in the indexes, and
        the model answers kept for them (``answers.sqlite``).

        Raises:
            InvalidQueryError: ``user_id`` is missing or empty.
            PalaceBusyError: another process is writing to the palace.
            PalaceReadOnlyError: the kept model answers cannot be deleted.
        """
        return self._memories.forget(user_id=user_id)

    def memory_extractor(self) -> MemoryExtractor | None:
        """The configured memory extractor (``None`` when ``memory.extractor`` is empty).

        Raises:
            PluginNotFoundError: no installed plugin provides the extractor.
            PluginError: its factory did not return a ``MemoryExtractor``.
        """
        return self._selected.memory_extractor()

    def memory_judge(self) -> tuple[str, MemoryJudge]:
        """The configured memory judge (``memory.judge``) and its name, built on first
        use with ``[memory_judges.<name>]`` (see
        :meth:`~palace_retrievers.config.Config.memory_judge_options`).

        Raises:
            PluginNotFoundError: no installed plugin provides the judge.
            PluginError: its factory did not return a ``MemoryJudge``.
        """
        return self._selected.memory_judge()
