"""What each hook registers: a typed factory per kind, and the ``register`` callable.

A plugin registers a name with its factory, or with a *reference* to it,
``"package.module:attribute"``, which the palace imports only when the name is first
used: a plugin whose factory pulls in a heavy library (a document converter, a database
client, a model runtime) costs a command that does not use it nothing but the import of
its small plugin module::

    @hookimpl
    def palace_register_sources(register: Register[SourceFactory]) -> None:
        register("documents", "my_package.documents:DocumentsSource")

The engine's types are imported for type checkers only, so that this module (and the
plugin manager) loads without the engine.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from palace_retrievers.closets import ClosetExtractor
    from palace_retrievers.embedder import Embedder
    from palace_retrievers.index import BackendContext, VectorIndex
    from palace_retrievers.memory.extraction import MemoryExtractor
    from palace_retrievers.memory.judges import MemoryJudge
    from palace_retrievers.sources import Source

F_contra = TypeVar("F_contra", contravariant=True)


class Register(Protocol[F_contra]):
    """``register(name, factory)``: what a hook is given; the factory or its reference."""

    def __call__(self, name: str, factory: F_contra | str, /) -> None: ...


class BackendFactory(Protocol):
    """``factory(context) -> VectorIndex``: one collection's vector index."""

    def __call__(self, context: BackendContext, /) -> VectorIndex: ...


class EmbedderFactory(Protocol):
    """``factory(model=..., options=...) -> Embedder`` (``model`` ``None``: its default)."""

    def __call__(self, *, model: str | None, options: Mapping[str, Any]) -> Embedder: ...


class SourceFactory(Protocol):
    """``factory(options) -> Source``; a ``palace_settings`` attribute, when it has one,
    names the palace's settings it wants in ``options`` (see :class:`Source`)."""

    def __call__(self, options: Mapping[str, Any], /) -> Source: ...


class ClosetExtractorFactory(Protocol):
    """``factory(options) -> ClosetExtractor``."""

    def __call__(self, options: Mapping[str, Any], /) -> ClosetExtractor: ...


class MemoryExtractorFactory(Protocol):
    """``factory(options) -> MemoryExtractor``."""

    def __call__(self, options: Mapping[str, Any], /) -> MemoryExtractor: ...


class MemoryJudgeFactory(Protocol):
    """``factory(options) -> MemoryJudge``."""

    def __call__(self, options: Mapping[str, Any], /) -> MemoryJudge: ...
