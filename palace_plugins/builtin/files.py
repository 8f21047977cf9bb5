"""The ``files`` source: plain text, markdown and code files, one file or a whole tree.

A tree is walked in sorted order without following symlinks; hidden directories, the
usual dependency and build folders, and whatever the root's ``.gitignore`` names are
left out. A file with a NUL byte in its first 8 KiB is binary and skipped, as is a file
over ``max_file_bytes``. Text is decoded as UTF-8 with undecodable bytes replaced. The
room of a file is the first folder of its path under the root (``general`` at the top).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from palace_plugins.hookspecs import Register, hookimpl
from palace_retrievers.embedder import options_check
from palace_retrievers.errors import SourceError
from palace_retrievers.ids import content_hash
from palace_retrievers.sources import Skipped, Source, SourceDocument, SourceEntry

SKIP_DIRS = frozenset({"node_modules", "__pycache__", "venv", ".venv", "dist", "build"})
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
        data = path.read_bytes()
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
        ignored = _gitignore(path)
        for folder, dirs, files in os.walk(path, followlinks=False):
            here = Path(folder)
            dirs[:] = sorted(
                d
                for d in dirs
                if not d.startswith(".")
                and d not in SKIP_DIRS
                and not (
                    ignored and ignored.match_file((here / d).relative_to(path).as_posix() + "/")
                )
            )
            for name in sorted(files):
                file = here / name
                rel = file.relative_to(path).as_posix()
                if name.startswith(".") or (ignored and ignored.match_file(rel)):
                    continue
                if file.is_symlink() or not file.is_file():
                    yield Skipped(str(file), "not a regular file")
                elif file.suffix.lower() in BINARY_SUFFIXES:
                    yield Skipped(str(file), "binary file type")
                else:
                    parts = Path(rel).parts
                    yield self._entry(file, rel, parts[0] if len(parts) > 1 else DEFAULT_ROOM)


def _gitignore(root: Path) -> Any:
    """The root's ``.gitignore`` as a pathspec matcher, or ``None``."""
    ignore = root / ".gitignore"
    if not ignore.is_file():
        return None
    import pathspec

    lines = ignore.read_text(encoding="utf-8", errors="replace").splitlines()
    return pathspec.GitIgnoreSpec.from_lines(lines)


@hookimpl(trylast=True)
def palace_register_sources(register: Register) -> None:
    register("files", FilesSource)
