"""A palace source plugin: PDF, Word, PowerPoint, Excel and HTML documents via markitdown."""

from palace_markitdown.documents import FORMATS, DocumentsSource

__all__ = ["FORMATS", "DocumentsSource"]
