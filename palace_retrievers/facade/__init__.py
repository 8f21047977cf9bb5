"""The collaborators the :class:`~palace_retrievers.palace.Palace` facade holds.

``Palace`` wires these at :meth:`~palace_retrievers.palace.Palace.open` and each of its
methods delegates to one of them; they get what they need as arguments (no mixins, no
host they reach back into):

- :mod:`.writer`: :class:`~.writer.Writer`, one writer per palace and the index journal
  it replays (every write goes through it).
- :mod:`.model`: :class:`~.model.Model`, the embedder's output checked and normalised,
  and the model a palace was built with.
- :mod:`.selected`: :class:`~.selected.SelectedPlugins`, the plugins ``palace.toml``
  selects, built once on first use.
- :mod:`.filing`: :class:`~.filing.Filing`, drawers filed with their closets and vectors
  in one transaction, then the memories drawn from them.
- :mod:`.drawers`: :class:`~.drawers.Drawers`, mine, sync, add_texts, reads, deletes and
  reindex.
- :mod:`.searching`: :class:`~.searching.Searching`, the pipeline with the owner's
  memories merged in, the graph's signal and the full-text stage run aside.
- :mod:`.memories`: :class:`~.memories.Memories`, what the memory methods need beyond
  the lifecycle: the context block, gc, forgetting a user, memories drawn at mine time.
- :mod:`.transfer`: :class:`~.transfer.Transfer`, an export's records read from the
  ledger, and an import's filed into it (the format is :mod:`palace_retrievers.transfer`'s).
- :mod:`.answers`: :class:`~.answers.Answers`, the answers of a model a plugin asked
  (``answers.sqlite``), kept so that it is not asked again; the selected plugins hand it on.

Imports go down: the facade (``palace.py``) imports this package; it imports memory,
ingest, graph, search, transfer, the ledger and the records, never the facade or a surface.
"""
