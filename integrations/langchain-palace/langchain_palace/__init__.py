"""LangChain integration of palace-retrievers: retriever, vector store, memory tools and
chat message history."""

from langchain_palace.chat_message_histories import PalaceChatMessageHistory
from langchain_palace.embeddings import LangChainEmbedder, PalaceEmbeddings
from langchain_palace.retrievers import PalaceRetriever
from langchain_palace.tools import PalaceMemoryTool, PalaceRememberTool
from langchain_palace.vectorstores import PalaceVectorStore

__all__ = [
    "LangChainEmbedder",
    "PalaceChatMessageHistory",
    "PalaceEmbeddings",
    "PalaceMemoryTool",
    "PalaceRememberTool",
    "PalaceRetriever",
    "PalaceVectorStore",
]
