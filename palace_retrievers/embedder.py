"""The embedder contract: text in, unit-length float32 vectors out.

An embedder plugin registers a factory under a name (``palace_register_embedders``); the
factory receives the model name (``None`` for its default) and its options table, and
returns an :class:`Embedder`. The embedder's :attr:`~Embedder.model_name` is stored in the
palace, so that a palace is never searched with vectors from another model.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from palace_retrievers.errors import PluginError

Vectors = npt.NDArray[np.float32]


class Embedder(ABC):
    """Turns texts into vectors of one fixed dimension, the same text always the same way."""

    @property
    @abstractmethod
    def model_name(self) -> str:
        """A name that identifies the model's vector space (stored in the palace)."""

    @property
    @abstractmethod
    def dimension(self) -> int:
        """Length of every vector."""

    @abstractmethod
    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        """Vectors for ``texts``, shape ``(len(texts), dimension)``, rows of unit length."""

    def embed_query(self, text: str) -> Vectors:
        """The vector of a query, shape ``(dimension,)``. Override for asymmetric models."""
        vector: Vectors = self.embed_documents([text])[0]
        return vector


def unit_rows(vectors: Any, *, dimension: int, count: int) -> Vectors:
    """Check an embedder's output and return it as unit-length float32 rows.

    Raises:
        PluginError: the shape is not ``(count, dimension)`` or a value is not finite.
    """
    array = np.asarray(vectors, dtype=np.float32)
    if array.ndim == 1 and count == 1:
        array = array.reshape(1, -1)
    if array.shape != (count, dimension):
        raise PluginError(
            f"the embedder returned vectors of shape {array.shape}, expected {(count, dimension)}"
        )
    if not np.all(np.isfinite(array)):
        raise PluginError("the embedder returned a vector with NaN or infinite values")
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    result: Vectors = (array / norms).astype(np.float32, copy=False)
    return result


def options_check(kind: str, name: str, options: Mapping[str, Any], known: set[str]) -> None:
    """Reject an option a plugin does not know, naming it (for plugin factories).

    Raises:
        ConfigError: ``options`` holds a key outside ``known``.
    """
    from palace_retrievers.errors import ConfigError

    unknown = sorted(set(options) - known)
    if unknown:
        allowed = ", ".join(sorted(known)) or "none"
        raise ConfigError(f"unknown option {unknown[0]!r} for {kind} {name!r}; known: {allowed}")
