"""The ledger's part for the palace's own facts: its schema version and its meta keys
(the embedding model, the generation caches watch)."""

from __future__ import annotations

from abc import ABC, abstractmethod


class MetaStore(ABC):
    """The schema version and palace-wide facts. Implemented by the ledger."""

    @property
    @abstractmethod
    def schema_version(self) -> int:
        """The schema version the ledger is at."""

    @abstractmethod
    def get_meta(self, key: str) -> str | None:
        """A palace-wide fact (e.g. ``embedding_model``), or ``None``."""

    @abstractmethod
    def set_meta(self, key: str, value: str) -> None:
        """Record a palace-wide fact."""

    @abstractmethod
    def generation(self) -> int:
        """A number that changes whenever drawers or closets change (for caches)."""
