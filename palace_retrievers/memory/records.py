"""Moved to :mod:`palace_retrievers.records.memories`.

This path stays only while ``palace_plugins`` moves its imports over.
"""

from palace_retrievers.records.memories import Memory, MemoryEvent

__all__ = ["Memory", "MemoryEvent"]
