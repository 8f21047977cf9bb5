"""The plugin module the ``palace`` entry point names: it registers the ``documents`` source."""

from __future__ import annotations

from palace_plugins.hookspecs import Register, hookimpl

from palace_markitdown.documents import DocumentsSource


@hookimpl
def palace_register_sources(register: Register) -> None:
    """Register :class:`~palace_markitdown.documents.DocumentsSource` as ``documents``."""
    register("documents", DocumentsSource)
