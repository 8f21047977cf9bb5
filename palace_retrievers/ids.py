"""Deterministic ids: the same source and chunk give the same id on every machine.

An id is a short hex digest of the fields that make a drawer what it is, joined with the
ASCII unit separator, so ``("a|b", "c")`` and ``("a", "b|c")`` differ. A field may hold
the separator itself (a file name or a chunk of text can): then every field is escaped and
the join gets a leading marker field, so that no two different field lists of one length
ever give the same digest. Fields without the separator hash as they always did, so the
ids of every palace already mined stay what they were. Lone surrogates (from file names
that are not UTF-8) are hashed as their code points rather than refused.
Paths enter in POSIX form relative to the mined root, never as absolute paths.

An owned drawer (one with a ``user_id``) also has its owner in its id, and its source is
recorded under a key that names the owner (:func:`source_key`), so two users mining the
same relative path into the same wing file two sources whose drawers never share an id.
Unowned drawers and sources keep the ids and keys they always had.

A wing may be mined from several roots (folders, exports). The first root an owner mines
into a wing keeps the bare keys its source gives. Another root, unless it is the same
tree moved or copied, has its keys start with a label of its own (:func:`root_label`,
``"b-1a2b3c4d/todo.md"``), so that ``todo.md`` from two folders are two sources whose
drawers never share an id; :func:`root_prefix` reads back which of the two a root's
recorded keys are. See :mod:`palace_retrievers.ingest.mining`.

A palace itself has a name derived from its folder (:func:`palace_name`), which its
tables take on a server that several palaces share: the PostgreSQL ledger's schema and a
server backend's namespace, unless they are set.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from pathlib import Path, PurePath

_SEP = "\x1f"  # ASCII unit separator
_ESC = "\x1b"  # escapes the separator (and itself) in a field that holds it
_OWNED = "\x1e"  # starts the recorded key of an owned source (ASCII record separator)


def palace_name(palace_dir: Path) -> str:
    """``palace_<folder>_<8 hex digits of the resolved path's hash>`` for a palace's
    folder (lower-case ASCII and ``_``): the same folder gives the same name."""
    resolved = str(Path(palace_dir).expanduser().resolve())
    digest = hashlib.sha256(resolved.encode("utf-8")).hexdigest()[:8]
    folder = re.sub(r"[^a-z0-9]+", "_", Path(resolved).name.lower()).strip("_")[:20]
    return f"palace_{folder}_{digest}" if folder else f"palace_{digest}"


def _joined(parts: tuple[str, ...]) -> str:
    """``parts`` joined so that the fields can always be told apart again."""
    if not any(_SEP in part for part in parts):
        return _SEP.join(parts)
    escaped = (part.replace(_ESC, _ESC * 2).replace(_SEP, _ESC + "_") for part in parts)
    return _SEP.join((_ESC, *escaped))


def digest(*parts: str, length: int = 24) -> str:
    """Hex sha256 of ``parts`` joined by the unit separator, cut to ``length`` characters."""
    data = _joined(parts).encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest()[:length]


def drawer_id(
    *, wing: str, source_key: str, chunk_index: int, text: str, user_id: str | None = None
) -> str:
    """The id of a mined chunk.

    The id of an unowned chunk is the digest of its four fields, as it always was. An
    owned chunk's digest has six fields (a tag and the owner before the four): a join of
    four fields holds three or four separators and one of six holds five or six, so an
    owned id never equals an unowned one, and two owners never share one.

    Args:
        wing: The wing the chunk is filed in.
        source_key: The source's machine-independent key as the source gives it (e.g. a
            path relative to the mined root, in POSIX form), not :func:`source_key`'s.
        chunk_index: Position of the chunk in its source.
        text: The chunk's verbatim text.
        user_id: The chunk's owner (``None`` or ``""``: unowned).
    """
    if not user_id:
        return "d_" + digest(wing, source_key, str(chunk_index), text)
    return "d_" + digest("owned", user_id, wing, source_key, str(chunk_index), text)


def source_key(key: str, user_id: str | None) -> str:
    """The key a source is recorded under in the ledger, for one owner.

    An unowned source keeps its own key (every palace mined before keeps its records).
    An owned one gets a marker, its owner's length and name before the key
    (``"\\x1e5:alicenotes/a.md"``), so that alice's ``notes/a.md`` and bob's are two
    sources. The rare unowned key that starts with the marker gets ``-`` after it, so
    that no unowned key is ever read as an owned one. :func:`split_source_key` undoes it.
    """
    if not user_id:
        return _OWNED + "-" + key if key.startswith(_OWNED) else key
    return f"{_OWNED}{len(user_id)}:{user_id}{key}"


def split_source_key(recorded: str) -> tuple[str | None, str]:
    """``(owner, key)`` of a key recorded by :func:`source_key` (owner ``None``: unowned).

    A recorded key that starts with the marker but does not parse (written before
    owners were recorded) is an unowned key, as it was written.
    """
    if not recorded.startswith(_OWNED):
        return None, recorded
    rest = recorded[1:]
    if rest.startswith("-"):
        return None, rest[1:]
    size, colon, tail = rest.partition(":")
    if not colon or not size.isascii() or not size.isdigit() or int(size) > len(tail):
        return None, recorded
    length = int(size)
    if length == 0:
        return None, recorded
    return tail[:length], tail[length:]


def root_label(root: str) -> str:
    """The label the keys of a root mined beside another start with (no ``/`` in it).

    The root's name (``"root"`` for ``/``) and 8 hex digits of its absolute path, so that
    two folders of one name are two labels: ``/home/me/b`` gives ``"b-1a2b3c4d"``.
    """
    return f"{PurePath(root).name or 'root'}-{digest(root, length=8)}"


def root_prefix(root: str, keys: Iterable[str]) -> str:
    """What every key recorded from ``root`` starts with: ``root_label(root) + "/"``, or
    ``""`` when they are bare (and when there are none).

    Args:
        root: The mined root, as recorded.
        keys: The keys of one owner's sources recorded from it, as the source gave them
            (owner taken off: :func:`split_source_key`).
    """
    prefix = root_label(root) + "/"
    found = False
    for key in keys:
        if not key.startswith(prefix):
            return ""
        found = True
    return prefix if found else ""


def text_id(*, text: str, wing: str, user_id: str | None) -> str:
    """The id of a text added directly with no id of its own: same text, same id."""
    return "t_" + digest(wing, user_id or "", text)


def content_hash(data: bytes) -> str:
    """Full sha256 of a source's bytes, to tell whether it changed since the last mine."""
    return hashlib.sha256(data).hexdigest()
