"""LlamaIndex memory block over a palace-retrievers palace."""

from llama_index.memory.palace.base import PalaceMemoryBlock

__all__ = ["PalaceMemoryBlock"]
