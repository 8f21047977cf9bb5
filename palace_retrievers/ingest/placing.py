"""Where the texts filed by one call sit: their source, and their position in it.

A search reads a drawer's neighbours, and the other chunks of its source, through the
drawer's ``source`` and ``chunk_index`` (neighbour smoothing, BM25 context, the source's
share of a hit's score). Mined drawers have both. Texts filed directly
(:meth:`Palace.add_texts <palace_retrievers.palace.Palace.add_texts>`, and through it
the LangChain and LlamaIndex stores) have them only when the caller says so; the
integrations first map their ecosystem's own conventions onto the two keys with
:func:`positions` (their READMEs say which keys they read), and the palace fills in what
is still missing (:func:`place`):

- **Source.** A text whose metadata names no ``source`` belongs to the source of its call:
  :data:`TEXT_SOURCE` (``"text"``) when it is the only such text of the call (a text on
  its own has nothing to be ordered with), else ``"text#<digest of their ids>"``
  (:func:`call_source`), so that adding the same texts again files them in the same source.
- **Position.** A text whose metadata has no ``chunk_index`` gets its rank, in the order
  of the call, among the texts of the call in the same wing and source that have none.

Positions are ranks within one call: texts of one source added by two calls both start at
0, so add a document's chunks in one call (as ``add_documents`` and ``from_documents`` do),
or give ``chunk_index``.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from palace_retrievers.ids import digest

#: The source of a text filed on its own, with no source named.
TEXT_SOURCE = "text"

_CALL_SOURCE = re.compile(r"text#[0-9a-f]{16}")


def call_source(ids: Sequence[str]) -> str:
    """The source of the texts of one call that name none (see the module docstring)."""
    if len(ids) <= 1:
        return TEXT_SOURCE
    return f"{TEXT_SOURCE}#{digest(*ids, length=16)}"


def is_call_source(source: str) -> bool:
    """Whether ``source`` is one :func:`call_source` makes, not one a caller or miner named."""
    return source == TEXT_SOURCE or _CALL_SOURCE.fullmatch(source) is not None


def positions(
    groups: Sequence[Hashable], keys: Sequence[tuple[float, ...]] | None = None
) -> list[int]:
    """Each item's position, from 0, among the items of its group.

    Args:
        groups: The group of each item (e.g. its wing and source).
        keys: A sort key of each item (all of one length); equal keys, or none given,
            keep the items' order.
    """
    if keys is not None and len(keys) != len(groups):
        raise ValueError("positions needs one key for each item")
    order = sorted(range(len(groups)), key=lambda n: keys[n] if keys is not None else ())
    taken: dict[Hashable, int] = {}
    out = [0] * len(groups)
    for n in order:
        out[n] = taken.get(groups[n], 0)
        taken[groups[n]] = out[n] + 1
    return out


def place(
    metadatas: Sequence[Mapping[str, Any]], ids: Sequence[str], wings: Sequence[str]
) -> list[tuple[str, int]]:
    """The ``(source, chunk_index)`` of each text of one call (see the module docstring).

    Args:
        metadatas: Each text's metadata; its ``source`` and ``chunk_index`` win when set.
        ids: Each text's drawer id.
        wings: Each text's wing.
    """
    unnamed = [i for meta, i in zip(metadatas, ids, strict=True) if meta.get("source") is None]
    own = call_source(unnamed)
    sources = [own if m.get("source") is None else str(m["source"]) for m in metadatas]
    given = [m.get("chunk_index") for m in metadatas]
    ranks = positions(
        [(w, s) if g is None else None for w, s, g in zip(wings, sources, given, strict=True)]
    )
    return [
        (source, rank if index is None else int(index))
        for source, rank, index in zip(sources, ranks, given, strict=True)
    ]
