"""The plugin module the ``palace`` entry point names: it registers the ``documents`` source.

It names the source by reference, so that markitdown (a second and more to import) is
imported only when a palace mines with ``documents``, not whenever a palace opens.
"""

from __future__ import annotations

from palace_plugins.factories import Register, SourceFactory
from palace_plugins.hookspecs import hookimpl


@hookimpl
def palace_register_sources(register: Register[SourceFactory]) -> None:
    """Register :class:`~palace_markitdown.documents.DocumentsSource` as ``documents``."""
    register("documents", "palace_markitdown.documents:DocumentsSource")
