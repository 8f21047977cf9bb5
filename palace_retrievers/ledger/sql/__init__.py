"""The one SQL core of the SQLite and PostgreSQL ledgers.

Every query the two ledgers share, and the mapping between records and rows, is written
here once, with ``?`` placeholders, and run through a small :class:`Dialect` that says
what differs: how a statement's placeholders are written, how a time is stored, how a
list of ids is matched, the few functions whose names differ, and the full-text cells a
row carries (PostgreSQL's words and grams, SQLite's character pairs). Each ledger keeps
only what is its own: its connection and transactions, its DDL for the one schema, how
it searches full text (``_full_text``), its vector-index journal and how a memory's
access is counted without waiting.

- :mod:`.store`: :class:`SQLStore`, the base of the parts below (a dialect, reads and
  transactions), and :class:`Dialect`, what a dialect says (the SQLite and PostgreSQL
  dialects are in :mod:`palace_retrievers.ledger.sqlite` and
  :mod:`palace_retrievers.ledger.postgres`, beside what else is each database's own).
- :mod:`.drawers` (with :mod:`.closets`), :mod:`.vectors`, :mod:`.memories`,
  :mod:`.graph`: the record kinds, with :mod:`.memory_rows` and :mod:`.graph_rows`,
  their records as rows; :mod:`.filters`: search filters as SQL; :mod:`.full_text`: the
  trigrams and added-up scores both dialects' full-text searches share.
- :mod:`.ledger`: :class:`~.ledger.SQLLedger`, the parts composed, with the palace's
  facts, the export walk and the counts.
- :mod:`.tables`: the schema, described once (tables, columns with portable types,
  indexes, checks, full text, the journal's triggers) in the words of :mod:`.ddl`, which
  each dialect renders as its migrations.
"""
