"""Deterministic ids: the same source and chunk give the same id on every machine.

An id is a short hex digest of the fields that make a drawer what it is, joined with the
ASCII unit separator, so ``("a|b", "c")`` and ``("a", "b|c")`` differ. A field may hold
the separator itself (a file name or a chunk of text can): then every field is escaped and
the join gets a leading marker field, so that no two different field lists of one length
ever give the same digest. Fields without the separator hash as they always did, so the
ids of every palace already mined stay what they were. Lone surrogates (from file names
that are not UTF-8) are hashed as their code points rather than refused.
Paths enter in POSIX form relative to the mined root, never as absolute paths.
"""

from __future__ import annotations

import hashlib

_SEP = "\x1f"  # ASCII unit separator
_ESC = "\x1b"  # escapes the separator (and itself) in a field that holds it


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


def drawer_id(*, wing: str, source_key: str, chunk_index: int, text: str) -> str:
    """The id of a mined chunk.

    Args:
        wing: The wing the chunk is filed in.
        source_key: The source's machine-independent key (e.g. a path relative to the
            mined root, in POSIX form).
        chunk_index: Position of the chunk in its source.
        text: The chunk's verbatim text.
    """
    return "d_" + digest(wing, source_key, str(chunk_index), text)


def text_id(*, text: str, wing: str, user_id: str | None) -> str:
    """The id of a text added directly with no id of its own: same text, same id."""
    return "t_" + digest(wing, user_id or "", text)


def content_hash(data: bytes) -> str:
    """Full sha256 of a source's bytes, to tell whether it changed since the last mine."""
    return hashlib.sha256(data).hexdigest()
