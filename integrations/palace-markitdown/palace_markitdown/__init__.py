"""A palace source plugin: PDF, Word, PowerPoint, Excel and HTML documents via markitdown.

What it exports is imported on first use: the ``palace`` entry point loads
:mod:`palace_markitdown.plugin`, and that must not import markitdown.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from palace_markitdown.documents import FORMATS, DocumentsSource

__all__ = ["FORMATS", "DocumentsSource"]


def __getattr__(name: str) -> object:
    if name in __all__:
        return getattr(importlib.import_module("palace_markitdown.documents"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
