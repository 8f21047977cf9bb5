"""Nodes in and out of a palace.

A node is filed as a drawer: its text verbatim, and as metadata its own metadata plus
LlamaIndex's usual serialised node (``_node_content``, ``doc_id``, ``ref_doc_id``), so
that it comes back as the node it was, relationships included. A drawer that did not
come from LlamaIndex (mined files, chats, LangChain texts) becomes a ``TextNode`` whose
metadata holds the drawer's fields and metadata.
"""

from __future__ import annotations

import logging
from typing import Any

from llama_index.core.schema import BaseNode, MetadataMode, TextNode
from llama_index.core.vector_stores.utils import metadata_dict_to_node, node_to_metadata_dict
from palace_retrievers import Drawer

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


def drawer_node(drawer: Drawer) -> BaseNode:
    """The node a drawer stands for (see the module docstring)."""
    metadata = dict(drawer.metadata)
    if "_node_content" in metadata:
        try:
            return metadata_dict_to_node(metadata, text=drawer.text)
        except Exception as exc:  # a damaged blob: fall back to the drawer itself
            log.warning("drawer %s holds an unreadable LlamaIndex node (%s)", drawer.id, exc)
    metadata = {k: v for k, v in metadata.items() if k not in NODE_KEYS}
    return TextNode(
        id_=drawer.id,
        text=drawer.text,
        metadata={**drawer_fields(drawer), **metadata},
        excluded_llm_metadata_keys=list(QUIET_KEYS),
        excluded_embed_metadata_keys=list(QUIET_KEYS),
    )


def ref_doc_id(drawer: Drawer) -> str | None:
    """The id of the document a node was parsed from, if it was filed by LlamaIndex."""
    value = drawer.metadata.get("ref_doc_id", drawer.metadata.get("doc_id"))
    return value if isinstance(value, str) and value != "None" else None
