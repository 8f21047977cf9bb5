"""LlamaIndex retriever over a palace-retrievers palace."""

from llama_index.retrievers.palace.base import PalaceRetriever

__all__ = ["PalaceRetriever"]
