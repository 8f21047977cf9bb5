"""Records: the frozen, typed values every part of the palace passes around.

- :mod:`.drawers`: :class:`Drawer` (one verbatim chunk), :class:`Hit` (a search result
  with its score parts), :class:`Filter` (what a query may see) and :func:`utc`.
- :mod:`.memories`: :class:`~.memories.Memory`, its history (:class:`~.memories.MemoryEvent`)
  and the reports of remember, gc and forget.
- :mod:`.triples`: :class:`~.triples.Triple` and :class:`~.triples.GraphStats` of the
  knowledge graph, and how entity names and predicates are normalised.

Imports go down: every package of the palace imports these; they import only
:mod:`palace_retrievers.errors`. Plugins take ``Drawer`` and ``Filter`` from here
(``from palace_retrievers.records import Drawer, Filter``).
"""

from palace_retrievers.records.drawers import DRAWER_KIND, Drawer, Filter, Hit, utc

__all__ = ["DRAWER_KIND", "Drawer", "Filter", "Hit", "utc"]
