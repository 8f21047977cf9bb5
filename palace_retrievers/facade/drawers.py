"""Drawers: filing them (mine, add_texts), reading them, removing them, re-indexing.

Each method is the body of the :class:`~palace_retrievers.palace.Palace` method of the
same name, which documents it. Every read is scoped to one owner; every write goes
through the :class:`~palace_retrievers.facade.writer.Writer`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import date, datetime
from pathlib import Path
from typing import Any

from palace_retrievers.config import Config
from palace_retrievers.embedder import Vectors
from palace_retrievers.errors import InvalidQueryError
from palace_retrievers.facade.filing import Filing
from palace_retrievers.facade.model import Model
from palace_retrievers.facade.selected import SelectedPlugins
from palace_retrievers.facade.writer import Writer
from palace_retrievers.ids import text_id
from palace_retrievers.index import COLLECTIONS
from palace_retrievers.ingest.mining import Miner, MineReport, resolve_root, storable
from palace_retrievers.ingest.placing import TEXT_SOURCE, place
from palace_retrievers.ingest.syncing import EVERY_OWNER, Owner, SyncReport, find_gone
from palace_retrievers.ledger import Ledger
from palace_retrievers.records import DRAWER_KIND, Drawer, Filter, utc
from palace_retrievers.search.indexes import IndexSet, Progress

#: Metadata keys of :meth:`Palace.add_texts` that fill drawer fields instead of metadata.
DRAWER_FIELDS = ("wing", "room", "source", "user_id", "content_date", "kind", "chunk_index")

When = datetime | date | str


def where(
    *,
    wing: str | None = None,
    room: str | None = None,
    user_id: str | None = None,
    kind: str | None = None,
    since: When | None = None,
    until: When | None = None,
) -> Filter:
    """The :class:`Filter` of a search's or a listing's keyword arguments."""
    return Filter(
        wing=wing,
        room=room,
        user_id=user_id,
        kind=kind,
        since=utc(since) if since is not None else None,
        until=utc(until) if until is not None else None,
    )


class Drawers:
    """A palace's drawers.

    Args:
        config: The palace's configuration.
        ledger: The system of record.
        indexes: The vector indexes.
        model: The embedder.
        writer: The writer lock and the index journal.
        selected: The source plugins.
        filing: Files drawers with their closets.
    """

    def __init__(
        self,
        *,
        config: Config,
        ledger: Ledger,
        indexes: IndexSet,
        model: Model,
        writer: Writer,
        selected: SelectedPlugins,
        filing: Filing,
    ) -> None:
        self._config = config
        self._ledger = ledger
        self._indexes = indexes
        self._model = model
        self._writer = writer
        self._selected = selected
        self._filing = filing

    # -- filing -------------------------------------------------------------------------

    def add_texts(
        self,
        texts: Sequence[str],
        metadatas: Sequence[Mapping[str, Any]] | None,
        ids: Sequence[str] | None,
        *,
        wing: str,
        room: str,
        user_id: str | None,
        vectors: Sequence[Sequence[float]] | Vectors | None,
    ) -> list[str]:
        """File texts as drawers directly (an upsert by id); returns their ids."""
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
                    source=TEXT_SOURCE,
                    content_date=utc(fields["content_date"]) if "content_date" in fields else None,
                    user_id=owner,
                    kind=str(fields.get("kind", DRAWER_KIND)),
                    metadata={k: v for k, v in meta.items() if k not in DRAWER_FIELDS},
                )
            )
        places = place(metadatas, [d.id for d in drawers], [d.wing for d in drawers])
        drawers = [
            replace(d, source=source, chunk_index=chunk)
            for d, (source, chunk) in zip(drawers, places, strict=True)
        ]
        if len({d.id for d in drawers}) != len(drawers):
            raise InvalidQueryError("the same id is given to two texts in one call")
        if not drawers:
            return []
        owners = {d.id: d.user_id for d in drawers}
        for existing in self._ledger.get_drawers(list(owners)):
            if existing.user_id != owners[existing.id]:
                raise InvalidQueryError(
                    f"id {existing.id!r} is taken by a drawer of another owner; "
                    "choose another id (a drawer never changes hands)"
                )
        if vectors is None:
            vectors = self._model.embed(texts)
        else:
            vectors = self._model.given(vectors, len(texts))
        with self._writer.writing("add_texts"):
            self._model.claim()
            self._ledger.upsert_drawers(drawers, vectors, model=self._model.name)
            self._filing.file_closets(drawers, [])
        return [d.id for d in drawers]

    def mine(
        self,
        path: str | os.PathLike[str],
        *,
        wing: str | None,
        source: str,
        room: str | None,
        user_id: str | None,
        progress: bool | None,
        wait: float,
    ) -> MineReport:
        """Mine ``path`` with the ``source`` plugin into ``wing``; safe to run again."""
        target = Path(path).expanduser()
        miner = Miner(
            config=self._config,
            source=self._selected.source(source),
            file_drawers=self._filing.file_sources,
            embed_drawers=self._filing.embed_sources,
            get_states=self._ledger.source_states,
            touch=self._ledger.touch_source,
            plugin=source,
        )
        from tqdm import tqdm

        with self._writer.writing("mine", timeout=wait):
            self._writer.recover()
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
        self, path: str | os.PathLike[str] | None, *, dry_run: bool, user_id: Owner
    ) -> SyncReport:
        """Remove the drawers of sources that are gone from the paths they were mined from."""
        if not (user_id is None or user_id is EVERY_OWNER or isinstance(user_id, str)):
            raise InvalidQueryError(f"user_id must be a string or None, not {user_id!r}")
        target = resolve_root(Path(path)) if path is not None else None
        with self._writer.writing("sync", timeout=0.0):
            self._writer.recover()
            report = find_gone(
                self._ledger,
                target,
                source=self._selected.source,
                dry_run=dry_run,
                user_id=user_id,
            )
            if not dry_run:
                for root in report.roots:
                    if root.gone:
                        report.drawers_removed += self._ledger.delete_sources(
                            root.wing, list(root.gone)
                        )
                self._writer.sync_index()
            return report

    # -- reading and removing -----------------------------------------------------------

    def get(self, ids: Sequence[str], *, user_id: str | None) -> list[Drawer]:
        """The drawers with these ids that belong to ``user_id``, in the order asked."""
        owner = user_id or None
        return [d for d in self._ledger.get_drawers(list(ids)) if d.user_id == owner]

    def ids(self, selected: Filter) -> list[str]:
        """The ids of the drawers that pass ``selected``."""
        return self._ledger.drawer_ids(selected)

    def of_source(self, source: str, *, wing: str, user_id: str | None) -> list[Drawer]:
        """The drawers of one source of ``wing`` that belong to ``user_id``, in order."""
        return self._ledger.source_drawers(
            wing=wing, source=source, where=Filter(wing=wing, user_id=user_id)
        )

    def wings(self, *, user_id: str | None) -> dict[str, dict[str, int]]:
        """Wing → room → number of drawers of ``user_id``."""
        if user_id is not None and not isinstance(user_id, str):
            raise InvalidQueryError(f"user_id must be a string, not {user_id!r}")
        return self._ledger.wing_counts(user_id=user_id or None)

    def delete(self, ids: Sequence[str], *, user_id: str | None) -> int:
        """Delete the drawers with these ids that belong to ``user_id``; returns how many."""
        with self._writer.writing("delete"):
            mine = [d.id for d in self.get(ids, user_id=user_id)]
            deleted = self._ledger.delete_drawers(mine)
            self._ledger.prune_closets()
            self._writer.sync_index()
        return len(deleted)

    # -- repair -------------------------------------------------------------------------

    def reindex(self, *, progress: Progress | None) -> int:
        """Rebuild the vector indexes from the ledger, re-embedding first when the
        configured model is not the palace's; returns the vectors indexed."""
        with self._writer.hold("reindex", timeout=0.0):
            return self._reindex(progress=progress)

    def _reindex(self, *, progress: Progress | None) -> int:
        ledger, model = self._ledger, self._model
        ledger.rebuild_lexical()  # a repair: full text is derived from the ledger too
        batch_size = self._config.mining.batch_size
        if ledger.get_meta("embedding_model") not in (None, model.name):
            for batch in ledger.iter_drawers(batch_size=batch_size):
                vectors = model.embed([d.text for d in batch])
                ledger.set_vectors([d.id for d in batch], vectors, model=model.name)
            for closets in ledger.iter_closets(batch_size=batch_size):
                vectors = model.embed([c.text for c in closets])
                ledger.set_closet_vectors([c.id for c in closets], vectors, model=model.name)
            for memories in ledger.iter_memories(batch_size=batch_size):
                vectors = model.embed([m.text for m in memories])
                ledger.save_memories(
                    memories,
                    vectors={m.id: v for m, v in zip(memories, vectors, strict=True)},
                    model=model.name,
                )
            ledger.set_meta("embedding_model", model.name)
            ledger.set_meta("embedding_dimension", str(model.dimension))
        count = self._indexes.rebuild(progress=progress)
        for collection in COLLECTIONS:
            ledger.clear_pending(collection)  # the rebuild applied everything
        return count
