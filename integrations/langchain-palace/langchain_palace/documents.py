"""Drawers and hits as LangChain ``Document`` objects.

Two shapes, for two audiences:

- :func:`hit_document` (retriever and tool): everything a reader may want to cite or
  rank by: the drawer's fields (wing, room, source, dates, lines), its metadata, and the
  hit's ``score`` and per-stage ``scores``.
- :func:`stored_document` (vector store): the metadata as it was added, so that what a
  ``VectorStore`` user writes is what they read back. A palace field (``wing``, ``room``,
  ``source``, ``kind``, ``user_id``, ``content_date``) is added only when it differs from
  the store's default, e.g. the ``source`` path of a mined drawer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.documents import Document
from palace_retrievers import Drawer, Hit
from palace_retrievers.ingest.placing import is_call_source


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


def hit_document(hit: Hit) -> Document:
    """A hit as a ``Document``: id, verbatim text, drawer fields, metadata and scores."""
    metadata = {
        **drawer_fields(hit.drawer),
        **dict(hit.drawer.metadata),
        "score": hit.score,
        "scores": dict(hit.scores),
    }
    return Document(id=hit.id, page_content=hit.text, metadata=metadata)


def stored_document(drawer: Drawer, defaults: Mapping[str, Any]) -> Document:
    """A drawer as a vector store returns it: its metadata as added (see module doc)."""
    metadata = dict(drawer.metadata)
    current = {
        "wing": drawer.wing,
        "room": drawer.room,
        "source": drawer.source,
        "kind": drawer.kind,
        "user_id": drawer.user_id,
        "content_date": drawer.content_date.isoformat() if drawer.content_date else None,
    }
    for key, value in current.items():
        if key == "source" and is_call_source(drawer.source):
            continue
        if value is not None and value != defaults.get(key):
            metadata[key] = value
    return Document(id=drawer.id, page_content=drawer.text, metadata=metadata)
