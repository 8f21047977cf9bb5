"""The hooks a palace plugin can implement. Each receives a ``register`` callable."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pluggy

hookspec = pluggy.HookspecMarker("palace")
hookimpl = pluggy.HookimplMarker("palace")

Register = Callable[[str, Any], None]


@hookspec
def palace_register_backends(register: Register) -> None:
    """Register vector index backends: ``register(name, factory(BackendContext) -> index)``."""


@hookspec
def palace_register_sources(register: Register) -> None:
    """Register source adapters: ``register(name, factory(options) -> Source)``."""


@hookspec
def palace_register_closet_extractors(register: Register) -> None:
    """Register closet extractors: ``register(name, factory(options) -> ClosetExtractor)``."""


@hookspec
def palace_register_memory_extractors(register: Register) -> None:
    """Register memory extractors: ``register(name, factory(options) -> MemoryExtractor)``."""


@hookspec
def palace_register_embedders(register: Register) -> None:
    """Register embedders: ``register(name, factory(*, model, options) -> Embedder)``."""


@hookspec
def palace_register_memory_judges(register: Register) -> None:
    """Register memory judges: ``register(name, factory(options) -> MemoryJudge)``."""
