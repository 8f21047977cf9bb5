"""Moved: :mod:`palace_retrievers.graph` and :mod:`palace_retrievers.records.triples`.

This path stays only while ``palace_plugins`` moves its imports over.
"""

from palace_retrievers.graph.knowledge_graph import KnowledgeGraph
from palace_retrievers.records.triples import GraphStats, Triple, entity_key, entity_name

__all__ = ["GraphStats", "KnowledgeGraph", "Triple", "entity_key", "entity_name"]
