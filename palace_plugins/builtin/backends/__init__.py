"""Built-in vector index backends: ``chroma`` (embedded or a server), ``sqlite`` (an exact
scan over the ledger, in :mod:`.exact`), ``qdrant`` and ``pgvector``, with what they share
(option checks, server namespaces, Chroma's filter fields, vector catalog and HNSW checks)."""
