"""The hooks a palace plugin can implement. Each receives a ``register`` callable, which
takes a name and its factory, or ``"module:attribute"`` to import it on first use."""

from __future__ import annotations

import pluggy

from palace_plugins.factories import (
    BackendFactory,
    ClosetExtractorFactory,
    EmbedderFactory,
    MemoryExtractorFactory,
    MemoryJudgeFactory,
    Register,
    SourceFactory,
)

hookspec = pluggy.HookspecMarker("palace")
hookimpl = pluggy.HookimplMarker("palace")


@hookspec
def palace_register_backends(register: Register[BackendFactory]) -> None:
    """Register vector index backends: ``register(name, factory(BackendContext) -> index)``."""


@hookspec
def palace_register_sources(register: Register[SourceFactory]) -> None:
    """Register source adapters: ``register(name, factory(options) -> Source)``."""


@hookspec
def palace_register_closet_extractors(register: Register[ClosetExtractorFactory]) -> None:
    """Register closet extractors: ``register(name, factory(options) -> ClosetExtractor)``."""


@hookspec
def palace_register_memory_extractors(register: Register[MemoryExtractorFactory]) -> None:
    """Register memory extractors: ``register(name, factory(options) -> MemoryExtractor)``."""


@hookspec
def palace_register_embedders(register: Register[EmbedderFactory]) -> None:
    """Register embedders: ``register(name, factory(*, model, options) -> Embedder)``."""


@hookspec
def palace_register_memory_judges(register: Register[MemoryJudgeFactory]) -> None:
    """Register memory judges: ``register(name, factory(options) -> MemoryJudge)``."""
