"""The memory subsystem: memories that stay right over time.

A memory is one fact, preference or decision about a user, kept verbatim with its
lifecycle (active, pending, superseded, archived), its history and its links. Its records
(``Memory``, ``MemoryEvent``, ``Remembered`` and the reports) are in
:mod:`palace_retrievers.records.memories`, below the ledger that stores them. What lives
here, from the bottom up:

- :mod:`.checks`: the argument checks every memory method shares.
- :mod:`.wording` and :mod:`.slots`: reading a memory's words (lemmas, numbers, times) and
  its slot (the subject and single-valued attribute it states a value of).
- :mod:`.candidates`: the gate: which of the owner's current memories a new one is
  compared with (nearest by vector, by full text, and in its slot).
- :mod:`.judges` and :mod:`.decide`: the memory judges (plugins over
  ``palace_register_memory_judges``: ``learned`` by default, ``llm`` optional) give their
  opinion of a pair; :func:`.decide.decide` turns it into one typed
  :class:`~.decide.Verdict` (duplicate, update, related or new) under the palace's policy.
- :mod:`.learned`: the default judge's parts (the structural matcher, the pair model and
  the pair reader).
- :mod:`.remembering` and :mod:`.keeping`: the lifecycle that acts on the verdicts
  (remember, edit, delete, restore, forget, gc), each decision written in one ledger
  transaction under the owner's memory mark.
- :mod:`.recall`, :mod:`.asof` and :mod:`.extraction`: memories in search (scoring, the
  context block, questions about the past) and memories drawn from mined conversations.

Imports go down: the palace facade and the surfaces import this package; it imports the
ledger, the records and the errors, never the facade.
"""
