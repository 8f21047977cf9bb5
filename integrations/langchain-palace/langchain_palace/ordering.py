"""Order and grouping read from LangChain's own metadata conventions.

A search reads a drawer's neighbours through its ``source`` and ``chunk_index``
(:mod:`palace_retrievers.ingest.placing`). LangChain's loaders and splitters say the same
with keys of their own, which :func:`with_positions` maps onto ``chunk_index``:

- ``source``: where a document came from (a path, a URL); it is the palace's own key
  too, so it groups as it is. Texts with none form the source of their call.
- ``page`` (PDF loaders, from 0), ``seq_num`` (JSON and JSONL loaders, from 1) and
  ``start_index`` (a text splitter's ``add_start_index=True``: the chunk's first
  character in its document): a text with no ``chunk_index`` is placed among the texts
  of its call with the same wing and source by ``(page, seq_num, start_index)``. A key a
  text lacks (or whose value is not a number) counts as before every value; ties keep the
  order of the call, which is therefore the order of texts that carry none of the keys.

A ``chunk_index`` the caller gives is kept as it is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from palace_retrievers.ingest.placing import positions

#: The loader keys that order the texts of one source, most significant first.
ORDER_KEYS = ("page", "seq_num", "start_index")


def order_key(metadata: Mapping[str, Any]) -> tuple[float, ...]:
    """The sort key of one text within its source (see the module docstring)."""
    out = []
    for name in ORDER_KEYS:
        value = metadata.get(name)
        if isinstance(value, int | float) and not isinstance(value, bool):
            out.append(float(value))
        else:
            out.append(float("-inf"))
    return tuple(out)


def with_positions(metadatas: Sequence[Mapping[str, Any]], wing: str) -> list[dict[str, Any]]:
    """Copies of ``metadatas``, each text without ``chunk_index`` given its position.

    Args:
        metadatas: The metadata of each text of one call.
        wing: The wing a text without a ``wing`` key is filed in.
    """
    out = [dict(m) for m in metadatas]
    unplaced = [m.get("chunk_index") is None for m in out]
    if not any(unplaced):
        return out
    groups = [
        (str(m.get("wing") or wing), m.get("source")) if free else None
        for m, free in zip(out, unplaced, strict=True)
    ]
    ranks = positions(groups, [order_key(m) for m in out])
    for meta, free, rank in zip(out, unplaced, ranks, strict=True):
        if free:
            meta["chunk_index"] = rank
    return out
