"""The embedding model as a palace uses it: unit rows of its dimension, its name kept.

The ledger records the model that made a palace's vectors when the first ones are filed
(:meth:`Model.claim`); a palace opened with another model is refused
(:func:`check_embedder`) until ``palace reindex`` re-embeds it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from palace_retrievers.embedder import Embedder, Vectors, unit_rows
from palace_retrievers.errors import EmbedderMismatchError, InvalidQueryError
from palace_retrievers.ledger import Ledger


class Model:
    """The palace's embedder, its output checked and normalised.

    Args:
        embedder: The embedder plugin's instance.
        ledger: Where the model's name and dimension are recorded.
    """

    def __init__(self, *, embedder: Embedder, ledger: Ledger) -> None:
        self.embedder = embedder
        self._ledger = ledger

    @property
    def name(self) -> str:
        """The model's name (its vector space)."""
        return self.embedder.model_name

    @property
    def dimension(self) -> int:
        """The length of every vector."""
        return self.embedder.dimension

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Unit rows, one per text."""
        vectors = self.embedder.embed_documents(list(texts))
        return unit_rows(vectors, dimension=self.dimension, count=len(texts))

    def embed_query(self, text: str) -> Vectors:
        """The query's unit vector."""
        vector = self.embedder.embed_query(text)
        unit: Vectors = unit_rows(vector, dimension=self.dimension, count=1)[0]
        return unit

    def claim(self) -> None:
        """Record the embedding model when the palace gets its first vectors."""
        if self._ledger.get_meta("embedding_model") != self.name:
            self._ledger.set_meta("embedding_model", self.name)
            self._ledger.set_meta("embedding_dimension", str(self.dimension))

    def given(self, vectors: Sequence[Sequence[float]] | Vectors, count: int) -> Vectors:
        """``vectors`` a caller made with this model, as unit rows, checked to be
        ``count`` rows of the model's dimension.

        Raises:
            InvalidQueryError: another shape, or a number that is not finite.
        """
        try:
            array = np.asarray(vectors, dtype=np.float32)
        except ValueError:
            array = np.zeros((0, 0), dtype=np.float32)
        if array.shape != (count, self.dimension) or not np.all(np.isfinite(array)):
            raise InvalidQueryError(
                f"vectors must be {count} rows of {self.dimension} finite numbers (this "
                f"palace's embedder, {self.name}), not an array of shape {array.shape}"
            )
        return unit_rows(array, dimension=self.dimension, count=count)

    def unit(self, vector: Sequence[float] | Vectors) -> Vectors:
        """A caller's query vector, normalised.

        Raises:
            InvalidQueryError: its length is not the model's dimension.
        """
        array = np.asarray(vector, dtype=np.float32).reshape(-1)
        if array.shape != (self.dimension,):
            raise InvalidQueryError(
                f"the vector has {array.size} dimensions but this palace's embedder "
                f"({self.name}) makes {self.dimension}"
            )
        unit: Vectors = unit_rows(array, dimension=self.dimension, count=1)[0]
        return unit


def check_embedder(ledger: Ledger, embedder: Embedder) -> None:
    """Refuse an embedder whose model is not the one the palace's vectors were made with.

    Raises:
        EmbedderMismatchError: the palace holds vectors of another model.
    """
    stored = ledger.get_meta("embedding_model")
    if stored is None or stored == embedder.model_name:
        return
    if not ledger.count_vectors("drawers") and not sum(ledger.count_memories().values()):
        return  # nothing embedded yet: the first vectors will claim the palace
    raise EmbedderMismatchError(
        f"this palace was embedded with {stored!r} but {embedder.model_name!r} is configured; "
        f"run `palace reindex` to re-embed it with {embedder.model_name!r}, "
        f"or configure {stored!r} again"
    )
