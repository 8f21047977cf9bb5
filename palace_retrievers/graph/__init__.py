"""The graph: the temporal knowledge graph of who did what, and when it held.

- :mod:`.knowledge_graph`: :class:`KnowledgeGraph` (``palace.kg``): files triples, closes
  the open value of a single-valued predicate, answers "what held at t", and lends search
  a boost for the drawers a query's entities were read from (a signal, never a gate).

Its records (:class:`~palace_retrievers.records.triples.Triple`, the name keys) are in
:mod:`palace_retrievers.records.triples`, so the ledger that stores them sits below this
package. Imports go down: the facade imports this package; it imports the records, the
words of a text (:mod:`palace_retrievers.terms`) and, for its type only, the ledger's
graph store.
"""

from palace_retrievers.graph.knowledge_graph import KnowledgeGraph

__all__ = ["KnowledgeGraph"]
