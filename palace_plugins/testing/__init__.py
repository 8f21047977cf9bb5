"""Conformance suites for palace plugins, as pytest base classes to subclass.

A plugin author proves a plugin keeps the palace's contracts by subclassing a suite and
providing its fixture, as with ``langchain-tests``::

    import pytest
    from palace_plugins.testing import BackendTests

    class TestMyBackend(BackendTests):
        @pytest.fixture
        def index_factory(self):
            return MyIndex  # callable(BackendContext) -> VectorIndex

- :class:`BackendTests`: ``index_factory``, ``factory(BackendContext) -> VectorIndex``.
- :class:`SourceTests`: ``source_factory``, ``factory(options) -> Source``, and
  ``sample_path``, a file or folder it mines into entries.
- :class:`ClosetExtractorTests`: ``extractor_factory``, ``factory(options) ->
  ClosetExtractor`` (and ``sample_drawers`` when the default sample does not suit it).
- :class:`EmbedderTests`: ``embedder``, the :class:`~palace_retrievers.embedder.Embedder`.
- :class:`JudgeTests`: ``judge_factory``, ``factory(options) -> MemoryJudge`` (and
  ``judge_options``, ``sample_pairs`` when it needs them).
- :class:`LedgerTests`: ``ledger``, an empty :class:`~palace_retrievers.ledger.Ledger`
  (and ``second_ledger``, another handle on the same store, when it can be opened twice).

The suites need ``pytest`` (a test dependency, not a runtime one). The built-in plugins
pass the same suites, in the palace's own ``tests/``; ``docs/plugins.md`` walks through
writing and testing a plugin. A failed ``assert`` in a suite is explained as in your own
tests: the suites' modules are registered for pytest's assertion rewriting.
"""

import pytest

pytest.register_assert_rewrite(
    "palace_plugins.testing.backends",
    "palace_plugins.testing.closets",
    "palace_plugins.testing.embedders",
    "palace_plugins.testing.judges",
    "palace_plugins.testing.ledger",
    "palace_plugins.testing.ledger_drawers",
    "palace_plugins.testing.ledger_graph",
    "palace_plugins.testing.ledger_memories",
    "palace_plugins.testing.ledger_sources",
    "palace_plugins.testing.sources",
)

from palace_plugins.testing.backends import (  # noqa: E402 - after the rewrite hook
    BackendTests,
    IndexFactory,
    brute_force,
    entry,
    passes,
    synthetic_vectors,
    unit,
)
from palace_plugins.testing.closets import ClosetExtractorTests  # noqa: E402
from palace_plugins.testing.embedders import EmbedderTests  # noqa: E402
from palace_plugins.testing.judges import JudgeTests  # noqa: E402
from palace_plugins.testing.ledger import LedgerTests  # noqa: E402
from palace_plugins.testing.sources import SourceTests  # noqa: E402

__all__ = [
    "BackendTests",
    "ClosetExtractorTests",
    "EmbedderTests",
    "IndexFactory",
    "JudgeTests",
    "LedgerTests",
    "SourceTests",
    "brute_force",
    "entry",
    "passes",
    "synthetic_vectors",
    "unit",
]
