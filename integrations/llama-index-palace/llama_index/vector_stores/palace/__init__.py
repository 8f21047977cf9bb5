"""LlamaIndex vector store over a palace-retrievers palace."""

from llama_index.vector_stores.palace.base import PalaceVectorStore
from llama_index.vector_stores.palace.embeddings import PalaceEmbedding

__all__ = ["PalaceEmbedding", "PalaceVectorStore"]
