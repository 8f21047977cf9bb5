"""Nodes in and out of a palace.

A node is filed as a drawer: its text verbatim, and as metadata its own metadata plus
LlamaIndex's usual serialised node (``_node_content``, ``doc_id``, ``ref_doc_id``), so
that it comes back as the node it was, relationships included. A drawer that did not
come from LlamaIndex (mined files, chats, LangChain texts) becomes a ``TextNode`` whose
metadata holds the drawer's fields and metadata. When it was cut from a source (a mined
file or conversation: any ``source`` but ``"text"`` and a memory's), the node's
``SOURCE`` is that source (so ``ref_doc_id`` is the source, as LlamaIndex's readers make
it) and its ``PREVIOUS`` / ``NEXT`` are the chunks before and after it there.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from llama_index.core.schema import (
    BaseNode,
    MetadataMode,
    NodeRelationship,
    ObjectType,
    RelatedNodeInfo,
    TextNode,
)
from llama_index.core.vector_stores.utils import metadata_dict_to_node, node_to_metadata_dict
from palace_retrievers import Drawer, Palace

log = logging.getLogger(__name__)

#: Metadata LlamaIndex keeps for itself; never shown to an LLM or embedded.
NODE_KEYS = ("_node_content", "_node_type", "document_id", "doc_id", "ref_doc_id")
#: Palace fields added to a node's metadata that an LLM need not read.
QUIET_KEYS = ("filed_at", "kind", "line_start", "line_end", "scores", "user_id")


def node_record(node: BaseNode) -> tuple[str, dict[str, Any]]:
    """The text and metadata a node is filed with."""
    text = node.get_content(metadata_mode=MetadataMode.NONE)
    return text, node_to_metadata_dict(node, remove_text=True, flat_metadata=False)


def drawer_fields(drawer: Drawer) -> dict[str, Any]:
    """The palace's own fields of a drawer, JSON-ready (unset ones left out)."""
    fields: dict[str, Any] = {
        "wing": drawer.wing,
        "room": drawer.room,
        "source": drawer.source,
        "kind": drawer.kind,
        "filed_at": drawer.filed_at.isoformat(),
    }
    if drawer.user_id is not None:
        fields["user_id"] = drawer.user_id
    if drawer.content_date is not None:
        fields["content_date"] = drawer.content_date.isoformat()
    if drawer.line_start is not None:
        fields["line_start"] = drawer.line_start
        fields["line_end"] = drawer.line_end
    return fields


def from_llama_index(drawer: Drawer) -> bool:
    """True for a drawer filed from a LlamaIndex node."""
    return "_node_content" in drawer.metadata


def cut_from_source(drawer: Drawer) -> bool:
    """True for a chunk of a source (a mined file or conversation), not filed by LlamaIndex."""
    if from_llama_index(drawer) or drawer.source == "text":
        return False
    return not (drawer.metadata.get("memory") is True and drawer.source.startswith("memory:"))


Neighbours = Mapping[tuple[str, str], Mapping[int, str]]


def neighbours(palace: Palace, drawers: Iterable[Drawer], user_id: str | None) -> Neighbours:
    """For each source the chunks of ``drawers`` were cut from: chunk index → drawer id
    (one ledger query per source)."""
    out: dict[tuple[str, str], dict[int, str]] = {}
    for drawer in drawers:
        key = (drawer.wing, drawer.source)
        if key in out or not cut_from_source(drawer):
            continue
        chunks = palace.source_drawers(drawer.source, wing=drawer.wing, user_id=user_id)
        out[key] = {chunk.chunk_index: chunk.id for chunk in chunks}
    return out


def drawer_node(drawer: Drawer, around: Neighbours | None = None) -> BaseNode:
    """The node a drawer stands for (see the module docstring).

    Args:
        drawer: The drawer.
        around: :func:`neighbours` of the drawers asked together, for ``PREVIOUS`` and
            ``NEXT`` (left out when ``None``).
    """
    metadata = dict(drawer.metadata)
    if from_llama_index(drawer):
        try:
            return metadata_dict_to_node(metadata, text=drawer.text)
        except Exception as exc:  # a damaged blob: fall back to the drawer itself
            log.warning("drawer %s holds an unreadable LlamaIndex node (%s)", drawer.id, exc)
    metadata = {k: v for k, v in metadata.items() if k not in NODE_KEYS}
    relationships: dict[NodeRelationship, RelatedNodeInfo | list[RelatedNodeInfo]] = {}
    if cut_from_source(drawer):
        relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(
            node_id=drawer.source, node_type=ObjectType.DOCUMENT, metadata={"wing": drawer.wing}
        )
        chunks = (around or {}).get((drawer.wing, drawer.source), {})
        for relation, index in (
            (NodeRelationship.PREVIOUS, drawer.chunk_index - 1),
            (NodeRelationship.NEXT, drawer.chunk_index + 1),
        ):
            if index in chunks:
                relationships[relation] = RelatedNodeInfo(node_id=chunks[index])
    return TextNode(
        id_=drawer.id,
        text=drawer.text,
        metadata={**drawer_fields(drawer), **metadata},
        relationships=relationships,
        excluded_llm_metadata_keys=list(QUIET_KEYS),
        excluded_embed_metadata_keys=list(QUIET_KEYS),
    )


def drawer_nodes(palace: Palace, drawers: list[Drawer], user_id: str | None) -> list[BaseNode]:
    """The nodes of ``drawers``, linked to their neighbours in their sources."""
    around = neighbours(palace, drawers, user_id)
    return [drawer_node(drawer, around) for drawer in drawers]


def ref_doc_id(drawer: Drawer) -> str | None:
    """The id of the document a node was parsed from: the one LlamaIndex recorded, or
    the source a chunk was cut from (see the module docstring)."""
    value = drawer.metadata.get("ref_doc_id", drawer.metadata.get("doc_id"))
    if isinstance(value, str) and value != "None":
        return value
    return drawer.source if cut_from_source(drawer) else None
