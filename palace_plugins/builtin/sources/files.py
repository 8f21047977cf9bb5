"""The ``files`` source: plain text, markdown and code files, one file or a whole tree.

A tree is walked as :func:`palace_plugins.builtin.sources.tree.walk` does: sorted, without
following symlinks, leaving out hidden files and folders, the usual dependency and build
folders, and whatever the root's or a nested ``.gitignore`` names. A file with a NUL byte
in its first 8 KiB is binary and skipped, as is a file over ``max_file_bytes`` (checked
before reading, and again while reading, so a file that grows meanwhile is never loaded
whole). Text is decoded as UTF-8 with undecodable bytes replaced. The
room of a file is the first folder of its path under the root (``general`` at the top).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from palace_plugins.builtin.sources.tree import walk
from palace_retrievers.embedder import options_check
from palace_retrievers.errors import SourceError
from palace_retrievers.ids import content_hash
from palace_retrievers.sources import Skipped, Source, SourceDocument, SourceEntry

_BINARY_TYPES = (
    "png jpg jpeg gif webp ico pdf zip gz tgz bz2 xz 7z tar jar whl so dylib dll exe "
    "bin o a pyc class mp3 mp4 wav mov avi sqlite sqlite3 db woff woff2 ttf otf "
    "parquet npy pt safetensors"
)
BINARY_SUFFIXES = frozenset(f".{ext}" for ext in _BINARY_TYPES.split())
DEFAULT_ROOM = "general"


def _read_file(path: Path, *, limit: int, room: str) -> SourceDocument:
    try:
        size = path.stat().st_size
        if size > limit:
            raise SourceError(f"{path} is {size} bytes, over the {limit}-byte limit")
        with path.open("rb") as stream:
            data = stream.read(limit + 1)
        if len(data) > limit:
            raise SourceError(f"{path} grew over the {limit}-byte limit while being read")
    except OSError as exc:
        raise SourceError(f"cannot read {path}: {exc.strerror or exc}") from None
    if b"\x00" in data[:8192]:
        raise SourceError(f"{path} is a binary file, not text")
    mtime = path.stat().st_mtime
    return SourceDocument(
        text=data.decode("utf-8", errors="replace"),
        content_hash=content_hash(data),
        room=room,
        content_date=datetime.fromtimestamp(mtime, UTC),
        metadata={"file_name": path.name},
    )


class FilesSource(Source):
    """Files under a path. Options: ``max_file_bytes``."""

    palace_settings = frozenset({"max_file_bytes"})

    def __init__(self, options: Mapping[str, Any]) -> None:
        options_check("source", "files", options, {"max_file_bytes"})
        self._limit = int(options.get("max_file_bytes", 5_000_000))

    def _entry(self, path: Path, key: str, room: str) -> SourceEntry:
        limit = self._limit
        return SourceEntry(
            key=key,
            location=str(path),
            mtime=path.stat().st_mtime,
            read=lambda: _read_file(path, limit=limit, room=room),
        )

    def scan(self, path: Path) -> Iterator[SourceEntry | Skipped]:
        path = path.expanduser()
        if not path.exists():
            raise SourceError(f"nothing to mine at {path}: no such file or directory")
        path = path.resolve()
        if path.is_file():
            if not os.access(path, os.R_OK):
                raise SourceError(f"cannot read {path}: permission denied")
            _read_file(path, limit=self._limit, room=DEFAULT_ROOM)  # fail early, clearly
            yield self._entry(path, path.name, DEFAULT_ROOM)
            return
        if not path.is_dir():
            raise SourceError(f"cannot mine {path}: not a regular file or a directory")
        for found in walk(path):
            if isinstance(found, Skipped):
                yield found
                continue
            rel = found.relative_to(path).as_posix()
            if found.suffix.lower() in BINARY_SUFFIXES:
                yield Skipped(str(found), "binary file type")
            else:
                parts = Path(rel).parts
                yield self._entry(found, rel, parts[0] if len(parts) > 1 else DEFAULT_ROOM)
