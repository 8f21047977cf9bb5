"""Cut a text into overlapping chunks that keep every character, verbatim.

Each chunk is a slice ``text[start:end]`` of the source. Chunks cover the whole text in
order; consecutive chunks overlap by about ``overlap`` characters. A cut prefers, in
order, a markdown heading, a blank line, a line end, a sentence end, then a space, as
long as the chunk stays at least half of ``size``; a text with none of them is cut hard.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Bumped whenever chunking or normalisation changes, so that every source is re-mined.
NORMALIZE_VERSION = 1

# Boundaries, best first. Each pattern's match end is where the chunk may end.
_BOUNDARIES = (
    re.compile(r"\n(?=#{1,6} )"),  # before a markdown heading
    re.compile(r"\n[ \t]*\n"),  # a blank line
    re.compile(r"\n"),  # a line end
    re.compile(r"[.!?](?:[\"')\]]*)\s|[。！？]"),  # a sentence end (CJK: no space follows)
    re.compile(r"\s"),  # any space
)


@dataclass(frozen=True, slots=True)
class Chunk:
    """A slice of a text: ``text == source[start:end]``; lines are 1-based, inclusive."""

    index: int
    start: int
    end: int
    text: str
    line_start: int
    line_end: int


def _cut(text: str, start: int, size: int) -> int:
    """Where the chunk that starts at ``start`` should end."""
    limit = start + size
    if limit >= len(text):
        return len(text)
    floor = start + size // 2
    window = text[floor:limit]
    for pattern in _BOUNDARIES:
        ends = [m.end() for m in pattern.finditer(window)]
        if ends:
            return floor + ends[-1]
    return limit


def _next_start(text: str, end: int, overlap: int, start: int) -> int:
    """Where the next chunk starts: ``overlap`` back from ``end``, moved to a word start."""
    if overlap <= 0:
        return end
    candidate = max(end - overlap, start + 1)
    space = re.compile(r"\s+").search(text, candidate, end)
    if space is not None and space.end() < end:
        return space.end()
    return candidate


def chunk_text(text: str, *, size: int = 800, overlap: int = 100) -> list[Chunk]:
    """Split ``text`` into chunks of at most ``size`` characters.

    Chunks made only of white space are dropped; every other character of ``text`` is
    in at least one chunk, and the chunks come in source order.

    Args:
        text: The source text.
        size: Largest chunk, in characters.
        overlap: How many characters consecutive chunks share (less than ``size // 2``).

    Raises:
        ValueError: ``size`` or ``overlap`` is out of range.
    """
    if size < 2:
        raise ValueError(f"chunk size must be at least 2, not {size}")
    if not 0 <= overlap < size // 2:
        raise ValueError(f"chunk overlap must be in [0, size // 2), not {overlap}")
    chunks: list[Chunk] = []
    start = 0
    while start < len(text):
        end = _cut(text, start, size)
        piece = text[start:end]
        if piece.strip():
            line_start = text.count("\n", 0, start) + 1
            line_end = line_start + piece.rstrip("\n").count("\n")
            chunks.append(Chunk(len(chunks), start, end, piece, line_start, line_end))
        if end >= len(text):
            break
        start = _next_start(text, end, overlap, start)
    return chunks
