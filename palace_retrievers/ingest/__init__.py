"""Ingest: the write path, from a source's entries to drawers in the ledger.

- :mod:`.mining`: :class:`~.mining.Miner` scans a source (a plugin's
  :class:`~palace_retrievers.sources.Source`), skips what is unchanged, reads, chunks and
  files each entry's drawers, resumably; :class:`~.mining.MineReport` says what it did.
- :mod:`.chunking`: verbatim chunks of a text by size, on line boundaries, with overlap
  (sources that cut their own segments may reuse :func:`~.chunking.chunk_text`).
- :mod:`.syncing`: what a sync removes: the sources gone from a mined root, per owner.
- :mod:`.placing`: where texts filed directly (``add_texts``) sit: their source and their
  position in it, for the search's neighbour stages.

Embedding, closets and the memories drawn from new drawers are the facade's steps around
the miner (:meth:`Palace.mine <palace_retrievers.palace.Palace.mine>`). Imports go down:
the facade imports this package; it imports the ledger, the plugin contracts, the ids and
the records, never search, memory or the facade.
"""
