"""Filing drawers: their closets built, everything embedded, written in one transaction.

What a mine and ``add_texts`` share after the drawers are cut: the closet extractor
plugin reads each run of drawers, the embedder embeds drawers and closets in one call,
the ledger files them (and journals them for the indexes) in one transaction, the
writer brings the indexes up to it, and the memory extractor reads the new drawers.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from functools import partial

from palace_retrievers.closets import Closet, build_closets
from palace_retrievers.config import Config
from palace_retrievers.embedder import Vectors
from palace_retrievers.errors import PluginError, PluginNotFoundError
from palace_retrievers.facade.model import Model
from palace_retrievers.facade.selected import SelectedPlugins
from palace_retrievers.facade.writer import Writer
from palace_retrievers.ledger import Ledger, SourceState
from palace_retrievers.records import Drawer

log = logging.getLogger(__name__)

#: A batch of sources and their drawers, as the miner hands it over.
Batch = list[tuple[SourceState, list[Drawer]]]


class Filing:
    """Files drawers and their closets.

    Args:
        config: The ``[closets]`` and ``[memory]`` settings.
        ledger: Where they are filed.
        model: Embeds them.
        writer: Brings the indexes up to the ledger after each filing.
        selected: The closet extractor.
        extract_memories: Remembers what the memory extractor finds in new drawers.
    """

    def __init__(
        self,
        *,
        config: Config,
        ledger: Ledger,
        model: Model,
        writer: Writer,
        selected: SelectedPlugins,
        extract_memories: Callable[[Sequence[Drawer]], int],
    ) -> None:
        self._config = config
        self._ledger = ledger
        self._model = model
        self._writer = writer
        self._selected = selected
        self._extract_memories = extract_memories

    def file_sources(self, batch: Batch) -> list[str]:
        """Embed a batch of sources' drawers and closets in one call, file them in one
        ledger transaction, bring the indexes up to the ledger, then remember what the
        memory extractor finds in the drawers that are new."""
        return self.embed_sources(batch)()

    def embed_sources(self, batch: Batch) -> Callable[[], list[str]]:
        """The first step of :meth:`file_sources`, which a mine runs in a background
        thread for the next batch while the one before is filed: build the closets and
        embed drawers and closets. Returns the second step, which files them (in the
        thread holding the writer lock)."""
        drawers = [d for _, ds in batch for d in ds]
        closets = self.build_closets(drawers)
        vectors = self._model.embed([*(d.text for d in drawers), *(c.text for c in closets)])
        return partial(self._write_sources, batch, drawers, closets, vectors)

    def _write_sources(
        self, batch: Batch, drawers: list[Drawer], closets: list[Closet], vectors: Vectors
    ) -> list[str]:
        """The second step of :meth:`file_sources`: file, index, extract memories."""
        known: set[str] = set()
        if self._config.memory.extractor and drawers:
            known = {d.id for d in self._ledger.get_drawers([d.id for d in drawers])}
        self._model.claim()
        removed = self._ledger.file_sources(
            batch,
            vectors[: len(drawers)],
            closets,
            vectors[len(drawers) :],
            model=self._model.name,
        )
        self._writer.sync_index()
        self._extract_memories([d for d in drawers if d.id not in known])
        return removed

    def file_closets(self, drawers: Sequence[Drawer], gone: Sequence[str]) -> None:
        """Build, embed and file the closets of ``drawers`` (replacing their old ones)."""
        closets = self.build_closets(drawers)
        vectors = self._model.embed([c.text for c in closets])
        self._ledger.replace_closets(
            closets,
            vectors,
            model=self._model.name,
            drawer_ids=[*(d.id for d in drawers), *gone],
        )
        self._writer.sync_index()

    def build_closets(self, drawers: Sequence[Drawer]) -> list[Closet]:
        """The closets of ``drawers``.

        Closets are a signal: an extractor that fails is logged and the drawers are
        filed without closets.
        """
        closets: list[Closet] = []
        cfg = self._config.closets
        if cfg.extractor and drawers:
            try:
                extractor = self._selected.closet_extractor()
                assert extractor is not None
                closets = build_closets(
                    drawers,
                    extractor=extractor,
                    extractor_name=cfg.extractor,
                    drawers_per_closet=cfg.drawers_per_closet,
                    max_chars=cfg.max_chars,
                )
            except (PluginError, PluginNotFoundError) as exc:
                log.warning("no closets were built for %d drawers: %s", len(drawers), exc)
        return closets
