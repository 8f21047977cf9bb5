"""A LangGraph store over a palace: ``from langgraph.store.palace import PalaceStore``."""

from langgraph.store.palace.base import PalaceStore

__all__ = ["PalaceStore"]
