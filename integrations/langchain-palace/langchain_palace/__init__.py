"""LangChain integration of palace-retrievers: retriever, vector store and memory tool."""

from langchain_palace.embeddings import LangChainEmbedder, PalaceEmbeddings
from langchain_palace.retrievers import PalaceRetriever
from langchain_palace.tools import PalaceMemoryTool
from langchain_palace.vectorstores import PalaceVectorStore

__all__ = [
    "LangChainEmbedder",
    "PalaceEmbeddings",
    "PalaceMemoryTool",
    "PalaceRetriever",
    "PalaceVectorStore",
]
