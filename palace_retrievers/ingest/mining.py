"""Mining: turn what a source offers into drawers, embedded and filed.

A source entry is read only when it may have changed (its mtime, the pipeline's version,
the mined root or the source plugin differs from the ledger's record), and re-filed only
when its content hash or the chunking settings changed. Its old drawers and closets are
replaced in one ledger transaction, so a search never sees half of a source. Embedding is
batched across entries (``mining.batch_size`` drawers at a time); when the palace offers
its write path in two steps (``embed_drawers``), the next batch is embedded in a
background thread while the caller's thread files the one before (the model releases the
GIL while it computes), the filing staying in the thread that holds the writer lock. The
ledger's records of the mined wing are read once, up front, so that a mine of an
unchanged tree costs a directory walk and a dictionary lookup per file. An owner's
sources are recorded under keys naming the owner and their drawers' ids name the owner
too (see :mod:`palace_retrievers.ids`), so a mine by one user never replaces, takes over
or counts as gone another user's drawers of the same path.

A wing remembers, per owner, the roots it was mined from (each source records its root).
The first root keeps the keys its source gives (paths relative to the root), and so does
every later mine of that same root. A root new to a wing that holds another root's
sources is first compared with them: when at least half of the entries it shares a key
with have the same content (and one does at least), it is that tree moved or copied
and takes their records over, as a mine of a moved folder always did; otherwise it is
another tree, and its keys start with its own label
(:func:`~palace_retrievers.ids.root_label`, ``"b-1a2b3c4d/todo.md"``), so that its
``todo.md`` and the first root's are two sources and neither replaces the other. A mine
of one root never touches another root's sources, and ``palace sync`` finds each root's
own by its prefix (:func:`~palace_retrievers.ids.root_prefix`). A source whose keys are
ids (:attr:`~palace_retrievers.sources.Source.keys_are_ids`: a conversation's id names
that conversation wherever the export lies) is never compared: a new root keeps plain
keys and takes over the records of the keys it lists, however much they grew (a fresh
export saved at a new path), and a root labelled before its source said so is mined
under plain keys again (its labelled records are then gone, and ``palace sync`` removes
them).

Whatever a source hands over is made storable first: a lone surrogate (from a file name
that is not UTF-8, or a JSON ``\\ud800`` escape) cannot be written as UTF-8, so a file
name's undecodable byte becomes ``\\xNN`` and any other lone surrogate U+FFFD (see
:func:`storable`). A source that fails on one entry with anything but a
:class:`~palace_retrievers.errors.SourceError` costs that entry (a skipped note naming the
error), never the mine. A disk that fills up (``ENOSPC``, SQLite's "database or disk is
full") stops the mine with :class:`StorageFullError`: the batch being filed is rolled
back whole, what was filed before is kept, and the next mine goes on from there.

About 550 lines: the miner's one pass (scan, skip, read, chunk, key, file in batches,
embed ahead) and the helpers only it uses (text a ledger can store, a full disk).
"""

from __future__ import annotations

import errno
import logging
import re
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from palace_retrievers.config import Config
from palace_retrievers.errors import SourceError, StorageFullError
from palace_retrievers.ids import (
    digest,
    drawer_id,
    root_label,
    root_prefix,
    source_key,
    split_source_key,
)
from palace_retrievers.ingest.chunking import NORMALIZE_VERSION, chunk_text
from palace_retrievers.ledger import SourceState
from palace_retrievers.records import Drawer
from palace_retrievers.sources import Skipped, Source, SourceDocument, SourceEntry

log = logging.getLogger(__name__)

_T = TypeVar("_T")
_SURROGATE = re.compile("[\ud800-\udfff]")
_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
_FULL_MESSAGES = ("database or disk is full", "no space left on device", "disk quota exceeded")


def storable(text: str) -> str:
    """``text`` without lone surrogates, which UTF-8 (and so SQLite) cannot hold.

    A surrogate that stands for an undecodable byte of a file name (Python's
    ``surrogateescape``) becomes ``\\xNN``; any other becomes U+FFFD. Text with none is
    returned as is.
    """
    if _SURROGATE.search(text) is None:
        return text

    def one(match: re.Match[str]) -> str:
        code = ord(match.group())
        return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else "\ufffd"

    return _SURROGATE.sub(one, text)


def _storable_value(value: Any) -> Any:
    """:func:`storable` applied to every string in a metadata value."""
    if isinstance(value, str):
        return storable(value)
    if isinstance(value, dict):
        return {storable(str(k)): _storable_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_storable_value(v) for v in value]
    return value


def _disk_full(exc: BaseException) -> BaseException | None:
    """The error in ``exc``'s chain (itself, its cause or context) saying the disk is full.

    Looked for down the chain because the error raised last may be another one (SQLite
    rolls a transaction back on ``SQLITE_FULL``, and the ``ROLLBACK`` that follows then
    fails with "no transaction is active").
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, StorageFullError) and current.__cause__ is not None:
            current = current.__cause__  # the ledger's own report: name what it names
            continue
        if isinstance(current, OSError) and current.errno in _FULL_ERRNOS:
            return current
        if any(words in str(current).lower() for words in _FULL_MESSAGES):
            return current
        current = current.__cause__ or current.__context__
    return None


def _writing(what: str, call: Callable[[], _T]) -> _T:
    """``call()``, with a full disk reported as :class:`StorageFullError`."""
    try:
        return call()
    except Exception as exc:
        full = _disk_full(exc)
        if full is None:
            raise
        raise StorageFullError(
            f"the disk is full: {what} could not be written ({type(full).__name__}: {full}); "
            "what was filed before is kept and nothing was filed half-way; free some space "
            "and mine again to go on from there"
        ) from exc


def resolve_root(path: Path) -> Path:
    """``path`` made absolute, symlinks resolved: how a mined root is recorded.

    Raises:
        SourceError: ``path`` is (or goes through) a symlink loop.
    """
    try:
        return path.expanduser().resolve()
    except RuntimeError:  # what Python < 3.13 raises on a loop
        raise SourceError(f"cannot mine {path}: it is a symlink loop") from None
    except OSError as exc:
        raise SourceError(f"cannot mine {path}: {exc.strerror or exc}") from None


@dataclass(slots=True)
class MineReport:
    """What a mine did.

    Attributes:
        path: What was mined.
        wing: The wing it was filed in.
        seen: Source entries found.
        mined: Entries (re)filed because they were new or changed.
        unchanged: Entries left alone because nothing changed.
        drawers_added: Drawers written (new or replaced).
        drawers_removed: Drawers of changed entries that no longer exist.
        skipped: Entries passed over, with the reason.
        gone: Sources mined from this path before that it no longer lists (deleted or
            now ignored); ``palace sync`` removes their drawers.
    """

    path: str
    wing: str
    seen: int = 0
    mined: int = 0
    unchanged: int = 0
    drawers_added: int = 0
    drawers_removed: int = 0
    skipped: list[Skipped] = field(default_factory=list)
    gone: int = 0


@dataclass(slots=True)
class _Pending:
    state: SourceState
    drawers: list[Drawer]


Batch = list[tuple[SourceState, list[Drawer]]]
FileDrawers = Callable[[Batch], list[str]]
"""Embeds and files a batch of sources' drawers; returns the ids removed."""
EmbedDrawers = Callable[[Batch], Callable[[], list[str]]]
"""Embeds a batch of sources' drawers (any thread); returns what files them (the caller's
thread), which returns the ids removed."""


class _EmbeddingAhead:
    """Embeds the next batch in a background thread while the caller files the one before.

    One worker thread, so batches are embedded in order and at most one embeds while
    one is filed (two batches of vectors in memory at most). Filing stays in the
    caller's thread, which holds the palace's writer lock (re-entrant in that thread
    only, as the memory extractor's writes need it), one ledger transaction per batch as
    before. An error in the worker is raised in the caller by :meth:`push` or
    :meth:`finish`; leaving the ``with`` block (normally or not) waits for the worker
    and drops what was not filed: the next mine files it.
    """

    def __init__(self, embed: EmbedDrawers, file: Callable[[Callable[[], list[str]]], None]):
        self._embed = embed
        self._file = file
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="palace-embed")
        self._embedding: Future[Callable[[], list[str]]] | None = None

    def __enter__(self) -> _EmbeddingAhead:
        return self

    def __exit__(self, *exc: object) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)

    def push(self, batch: Batch) -> None:
        """Start embedding ``batch``, then file the batch before it meanwhile."""
        embedding = self._executor.submit(self._embed, batch)
        self.finish()
        self._embedding = embedding

    def finish(self) -> None:
        """File the batch being embedded, once it is."""
        if self._embedding is not None:
            embedding, self._embedding = self._embedding, None
            self._file(embedding.result())


#: Entries a root new to a wing compares with the records of the same keys, at most.
_COMPARED = 50


class Miner:
    """Mines one path with one source into one wing.

    Args:
        config: Chunking and batching settings.
        source: The source adapter.
        file_drawers: Embeds and files pending sources (the palace's write path).
        get_states: The ledger's records of a wing's sources, by key.
        touch: Records a new mtime (and root) for an unchanged source.
        plugin: The source plugin's name, recorded with each source.
        embed_drawers: The same write path in two steps, if the palace offers them: the
            embedding (run in a background thread, on the next batch while the caller
            files the one before) and the filing it returns (run in the caller's
            thread). ``file_drawers`` is not used when it is given.
    """

    def __init__(
        self,
        *,
        config: Config,
        source: Source,
        file_drawers: FileDrawers,
        get_states: Callable[[str], dict[str, SourceState]],
        touch: Callable[[SourceState], None],
        plugin: str = "files",
        embed_drawers: EmbedDrawers | None = None,
    ) -> None:
        self._config = config
        self._source = source
        self._file = file_drawers
        self._embed = embed_drawers
        self._get_states = get_states
        self._touch = touch
        self._plugin = plugin

    def _pipeline_hash(self, document: SourceDocument) -> str:
        chunking = self._config.chunking
        return digest(document.content_hash, str(chunking.size), str(chunking.overlap), length=64)

    def _drawers(
        self,
        entry: SourceEntry,
        document: SourceDocument,
        *,
        wing: str,
        room: str | None,
        user_id: str | None,
        prefix: str,
    ) -> list[Drawer]:
        if document.segments is not None:
            pieces = [
                (s.text, s.line_start, s.line_end, s.content_date, dict(s.metadata))
                for s in document.segments
            ]
        else:
            chunking = self._config.chunking
            pieces = [
                (c.text, c.line_start, c.line_end, None, {})
                for c in chunk_text(document.text, size=chunking.size, overlap=chunking.overlap)
            ]
        key, location = prefix + storable(entry.key), storable(entry.location)
        base = _storable_value(dict(document.metadata))
        pieces = [
            (storable(text), first, last, when, meta) for text, first, last, when, meta in pieces
        ]
        return [
            Drawer(
                id=drawer_id(
                    wing=wing, source_key=key, chunk_index=index, text=text, user_id=user_id
                ),
                text=text,
                wing=wing,
                room=storable(room or document.room or "general"),
                source=location,
                chunk_index=index,
                line_start=line_start,
                line_end=line_end,
                source_mtime=entry.mtime,
                normalize_version=NORMALIZE_VERSION,
                content_date=date or document.content_date,
                user_id=user_id,
                metadata={**base, **_storable_value(extra)},
            )
            for index, (text, line_start, line_end, date, extra) in enumerate(pieces)
        ]

    def _fingerprint(self, entry: SourceEntry) -> str | None:
        """The content fingerprint of ``entry`` (``None`` when it cannot be read)."""
        try:
            return self._pipeline_hash(entry.read())
        except Exception:  # the mine itself reads it again and says why it failed
            return None

    def _keys_are_ids(self, path: Path) -> bool:
        """Whether the source's keys for ``path`` are ids (``False`` for a source that
        does not say: one written before :class:`Source` asked)."""
        ask = getattr(self._source, "keys_are_ids_for", None)
        return bool(ask(path)) if callable(ask) else False

    def _key_prefix(
        self,
        path: Path,
        root: str,
        known: dict[str, SourceState],
        entries: Iterable[SourceEntry | Skipped],
        user_id: str | None,
    ) -> tuple[str, dict[str, str], Iterable[SourceEntry | Skipped]]:
        """What the keys of ``root``'s sources start with in this wing, for this owner.

        Returns the prefix (``""`` or ``root_label(root) + "/"``), the fingerprints read
        to decide (by recorded key, so that the mine does not read those entries again)
        and the entries, listed up front when they had to be compared. The source is
        asked whether its keys are ids only when the answer matters (a prefix it would
        otherwise get), as ``auto`` looks at ``path`` again to answer.
        """
        own = [split_source_key(key)[1] for key, state in known.items() if state.root == root]
        if own:
            prefix = root_prefix(root, own)
            if prefix and self._keys_are_ids(path):
                log.info("%s was labelled, but its keys are ids: plain keys from now on", root)
                return "", {}, entries
            return prefix, {}, entries
        if all(state.root is None for state in known.values()):
            return "", {}, entries  # the first root mined into this wing
        if self._keys_are_ids(path):
            return "", {}, entries  # the same conversations, wherever the export lies
        listed = list(entries)
        shared = [
            (entry, recorded, state)
            for entry in listed
            if isinstance(entry, SourceEntry)
            and (state := known.get(recorded := source_key(storable(entry.key), user_id)))
            is not None
        ]
        shared = shared[:_COMPARED]
        need = (len(shared) + 1) // 2
        same = other = 0
        checked: dict[str, str] = {}
        for entry, recorded, state in shared:
            if same >= need or len(shared) - other < need:
                break
            if state.location == storable(entry.location):
                same += 1  # the very file filed before (a file of the tree mined on its own)
                continue
            fingerprint = self._fingerprint(entry)
            if fingerprint is not None:
                checked[recorded] = fingerprint
            if fingerprint == state.content_hash:
                same += 1
            else:
                other += 1
        if shared and same >= need:
            return "", checked, listed  # the same tree, moved or copied
        prefix = root_label(root) + "/"
        log.info(
            "%s is another tree than the one filed in this wing: its keys start with %r",
            root,
            prefix,
        )
        return prefix, {}, listed

    def mine(
        self,
        path: Path,
        *,
        wing: str,
        room: str | None = None,
        user_id: str | None = None,
        progress: Callable[[Iterable[SourceEntry | Skipped]], Iterable[SourceEntry | Skipped]]
        | None = None,
        on_filed: Callable[[MineReport], None] | None = None,
    ) -> MineReport:
        """Mine ``path``; see the module docstring for what is skipped.

        Args:
            progress: Wraps the source's entries (e.g. in a progress bar).
            on_filed: Called with the report so far after each batch is filed.

        Raises:
            SourceError: ``path`` cannot be mined at all.
            StorageFullError: the disk filled up while a batch was being filed.
        """
        wing = storable(wing)
        user_id = storable(user_id) if user_id else None  # "" is unowned, as stored
        report = MineReport(path=storable(str(path)), wing=wing)
        root = storable(str(resolve_root(path)))
        # Only this owner's sources: another's of the same key are recorded apart.
        known = {
            key: state
            for key, state in self._get_states(wing).items()
            if split_source_key(key)[0] == user_id
        }
        seen: set[str] = set()
        pending: list[_Pending] = []
        waiting = 0

        def filed(removed: list[str]) -> None:
            report.drawers_removed += len(removed)
            if on_filed is not None:
                on_filed(report)

        def file_ahead(write: Callable[[], list[str]]) -> None:
            filed(_writing("a batch of drawers", write))

        stack = ExitStack()
        ahead = (
            stack.enter_context(_EmbeddingAhead(self._embed, file_ahead))
            if self._embed is not None
            else None
        )

        def file_pending() -> None:
            batch = [(p.state, p.drawers) for p in pending]
            if ahead is not None:
                ahead.push(batch)
            else:
                filed(_writing("a batch of drawers", partial(self._file, batch)))

        def skip(location: str, reason: str) -> None:
            # A reason names the file, and a file name may hold a line break: one line.
            one_line = reason.replace("\r", "\\r").replace("\n", "\\n")
            report.skipped.append(Skipped(storable(location), storable(one_line)))

        with stack:  # the thread embedding ahead, if any, ends with the loop
            entries: Iterable[SourceEntry | Skipped] = self._source.scan(path)
            prefix, checked, entries = self._key_prefix(path, root, known, entries, user_id)
            if progress is not None:
                entries = progress(entries)
            for entry in entries:
                if isinstance(entry, Skipped):
                    skip(entry.location, entry.reason)
                    continue
                location = storable(entry.location)
                recorded = source_key(prefix + storable(entry.key), user_id)
                report.seen += 1
                seen.add(recorded)
                state = known.get(recorded)
                if (
                    state is not None
                    and state.mtime == entry.mtime
                    and state.normalize_version == NORMALIZE_VERSION
                    and state.root == root
                    and state.plugin == self._plugin
                ):
                    report.unchanged += 1
                    continue
                fingerprint = checked.get(recorded)  # read already if compared up front
                document: SourceDocument | None = None
                if (
                    fingerprint is None
                    or state is None
                    or fingerprint != state.content_hash
                    or state.normalize_version != NORMALIZE_VERSION
                ):
                    try:
                        document = entry.read()
                    except SourceError as exc:
                        skip(location, str(exc))
                        continue
                    except Exception as exc:  # a source's bug costs this entry, not the mine
                        log.warning(
                            "the %r source failed on %s", self._plugin, location, exc_info=True
                        )
                        skip(
                            location,
                            f"the {self._plugin!r} source failed on it: "
                            f"{type(exc).__name__}: {exc}",
                        )
                        continue
                    fingerprint = self._pipeline_hash(document)
                new_state = SourceState(
                    wing=wing,
                    key=recorded,
                    location=location,
                    content_hash=fingerprint,
                    mtime=entry.mtime,
                    normalize_version=NORMALIZE_VERSION,
                    root=root,
                    plugin=self._plugin,
                )
                if (
                    state is not None
                    and state.content_hash == fingerprint
                    and state.normalize_version == NORMALIZE_VERSION
                ):
                    _writing("a source's new mtime", partial(self._touch, new_state))
                    report.unchanged += 1
                    continue
                assert document is not None  # read above unless it is unchanged
                drawers = self._drawers(
                    entry, document, wing=wing, room=room, user_id=user_id, prefix=prefix
                )
                if not drawers:  # still filed: an emptied source must lose its old drawers
                    skip(location, "no text to file: it is empty")
                pending.append(_Pending(new_state, drawers))
                waiting += len(drawers)
                report.mined += 1
                report.drawers_added += len(drawers)
                if waiting >= self._config.mining.batch_size:
                    file_pending()
                    pending, waiting = [], 0
            if pending:
                file_pending()
            if ahead is not None:
                ahead.finish()
        report.gone = sum(
            1 for key, state in known.items() if state.root == root and key not in seen
        )
        for skipped in report.skipped:
            log.info("skipped %s: %s", skipped.location, skipped.reason)
        return report
