"""Order and grouping read from LlamaIndex's own conventions.

A search reads a drawer's neighbours through its ``source`` and ``chunk_index``
(:mod:`palace_retrievers.ingest.placing`). LlamaIndex says the same with a node's
relationships, which :func:`placed_records` maps onto the two keys of the metadata a node
is filed with:

- **Source**: the node's ``source`` metadata when it has one, else its ``ref_doc_id``
  (its ``SOURCE`` relationship: the document it was parsed from). Nodes with neither
  form the source of their call.
- **Position**: among the nodes of one call with the same source, the order of their
  ``PREVIOUS`` / ``NEXT`` chains (a node parser links each node to the ones beside it),
  chains in the order their first nodes come in the call, and the call's own order for
  nodes without either relationship. When the first node of a source in the call has a
  ``PREVIOUS`` that is already filed in the same source (an index inserts in batches),
  the source continues after it.

A ``chunk_index`` or ``source`` in a node's own metadata is kept as it is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from llama_index.core.schema import BaseNode
from palace_retrievers import Drawer
from palace_retrievers.ingest.placing import positions


def chain_ranks(nodes: Sequence[BaseNode]) -> list[int]:
    """Each node's rank when the nodes are read along their ``PREVIOUS``/``NEXT`` chains
    (see the module docstring)."""
    where = {node.node_id: n for n, node in enumerate(nodes)}
    after: dict[int, int] = {}
    for n, node in enumerate(nodes):
        following, preceding = node.next_node, node.prev_node
        if following is not None and following.node_id in where:
            after.setdefault(n, where[following.node_id])
        if preceding is not None and preceding.node_id in where:
            after.setdefault(where[preceding.node_id], n)
    led = set(after.values())
    order: list[int] = []
    seen: set[int] = set()
    # Heads first, in the call's order; then whatever a cycle left unread.
    for start in [n for n in range(len(nodes)) if n not in led] + list(range(len(nodes))):
        at: int | None = start
        while at is not None and at not in seen:
            seen.add(at)
            order.append(at)
            at = after.get(at)
    rank = {n: r for r, n in enumerate(order)}
    return [rank[n] for n in range(len(nodes))]


def placed_records(
    nodes: Sequence[BaseNode],
    metadatas: Sequence[Mapping[str, Any]],
    *,
    wing: str,
    filed: Callable[[list[str]], Sequence[Drawer]],
) -> list[dict[str, Any]]:
    """Copies of the nodes' ``metadatas`` with ``source`` and ``chunk_index`` set.

    Args:
        nodes: The nodes of one call.
        metadatas: The metadata each is filed with (:func:`.nodes.node_record`).
        wing: The wing a node without a ``wing`` key is filed in.
        filed: The drawers with these ids already in the palace (the caller's own).
    """
    out = [dict(m) for m in metadatas]
    for node, meta in zip(nodes, out, strict=True):
        if meta.get("source") is None and node.ref_doc_id is not None:
            meta["source"] = node.ref_doc_id
    unplaced = [m.get("chunk_index") is None for m in out]
    groups = [
        (str(m.get("wing") or wing), m.get("source")) if free else None
        for m, free in zip(out, unplaced, strict=True)
    ]
    ranks = positions(groups, [(float(r),) for r in chain_ranks(nodes)])
    firsts = {
        group: n
        for n, (group, rank) in enumerate(zip(groups, ranks, strict=True))
        if group is not None and group[1] is not None and rank == 0
    }
    before = {n: prev.node_id for n in firsts.values() if (prev := nodes[n].prev_node) is not None}
    known = {d.id: d for d in filed(sorted(set(before.values())))} if before else {}
    offsets: dict[Any, int] = {}
    for first_group, n in firsts.items():
        earlier = known.get(before.get(n, ""))
        if earlier is not None and (earlier.wing, earlier.source) == first_group:
            offsets[first_group] = earlier.chunk_index + 1
    for meta, group, rank in zip(out, groups, ranks, strict=True):
        if group is not None:
            meta["chunk_index"] = rank + offsets.get(group, 0)
    return out
