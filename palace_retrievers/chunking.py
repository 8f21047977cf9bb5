"""Moved to :mod:`palace_retrievers.ingest.chunking`.

This path stays only while ``palace_plugins`` moves its imports over.
"""

from palace_retrievers.ingest.chunking import NORMALIZE_VERSION, chunk_text

__all__ = ["NORMALIZE_VERSION", "chunk_text"]
