"""The ``documents`` source: PDF, Word, PowerPoint, Excel and HTML files, through markitdown.

``palace mine ~/Documents --source documents`` walks a folder (or takes one file) and
files every document it can read as markdown: headings, lists and tables kept, as
markitdown converts them. The walk is sorted and does not follow symlinks; it leaves out
hidden files and folders, and every file that is not one of :data:`FORMATS` (mine those
with the palace's ``files`` source). A file over ``max_file_bytes`` is skipped unread.

Each page of a PDF, slide of a deck and sheet of a workbook is cut into drawers of its
own, which carry its number or name in their metadata (``page``, ``slide``, ``sheet``),
so a hit says where in the document it lies. Every drawer also carries ``file_name`` and
``format``, and ``title`` when the document has one. The room of a document is the first
folder of its path under the mined root (``general`` at the top), as with ``files``.

A file that cannot be converted (corrupt, encrypted, or a scanned PDF with no text layer)
raises :class:`~palace_retrievers.errors.SourceError` when read: the miner notes it and
goes on with the others.

Options (the palace passes its own settings): ``max_file_bytes``, ``chunk_size``,
``chunk_overlap``.
"""

from __future__ import annotations

import io
import os
import threading
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from markitdown import MarkItDown, MarkItDownException, StreamInfo
from markitdown.converters import (
    DocxConverter,
    HtmlConverter,
    PdfConverter,
    PptxConverter,
    XlsxConverter,
)
from palace_retrievers.embedder import options_check
from palace_retrievers.errors import ConfigError, SourceError
from palace_retrievers.ids import content_hash
from palace_retrievers.ingest.chunking import chunk_text
from palace_retrievers.sources import Segment, Skipped, Source, SourceDocument, SourceEntry

from palace_markitdown.parts import split

#: The file suffixes the source reads, and the format each one is.
FORMATS = {
    ".pdf": "pdf",
    ".docx": "docx",
    ".pptx": "pptx",
    ".xlsx": "xlsx",
    ".html": "html",
    ".htm": "html",
}
MIME_TYPES = {
    "pdf": "application/pdf",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "html": "text/html",
}
DEFAULT_ROOM = "general"
OPTIONS = {"max_file_bytes", "chunk_size", "chunk_overlap"}


def _integer(options: Mapping[str, Any], name: str, default: int) -> int:
    value = options.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"source 'documents': {name} must be an integer, not {value!r}")
    return value


class DocumentsSource(Source):
    """Documents under a path, converted by markitdown (see the module docstring).

    Args:
        options: ``max_file_bytes`` (default 50,000,000), ``chunk_size`` (800) and
            ``chunk_overlap`` (100).

    Raises:
        ConfigError: an option is unknown or out of range.
    """

    palace_settings = frozenset(OPTIONS)

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        options = dict(options or {})
        options_check("source", "documents", options, OPTIONS)
        self._limit = _integer(options, "max_file_bytes", 50_000_000)
        self._size = _integer(options, "chunk_size", 800)
        self._overlap = _integer(options, "chunk_overlap", 100)
        if self._limit < 1:
            raise ConfigError("source 'documents': max_file_bytes must be positive")
        if self._size < 50 or not 0 <= self._overlap < self._size // 2:
            raise ConfigError(
                "source 'documents': chunk_size must be at least 50 and chunk_overlap "
                f"in [0, chunk_size / 2), not {self._size} and {self._overlap}"
            )
        self._converter: MarkItDown | None = None
        self._lock = threading.Lock()

    # -- listing ------------------------------------------------------------------------

    def scan(self, path: Path) -> Iterator[SourceEntry | Skipped]:
        path = path.expanduser()
        if not path.exists():
            raise SourceError(f"nothing to mine at {path}: no such file or directory")
        path = path.resolve()
        if path.is_file():
            if path.suffix.lower() not in FORMATS:
                raise SourceError(
                    f"{path} is not a document the 'documents' source reads "
                    f"({', '.join(sorted(FORMATS))}); mine it with the 'files' source"
                )
            if not os.access(path, os.R_OK):
                raise SourceError(f"cannot read {path}: permission denied")
            yield self._entry(path, path.name, DEFAULT_ROOM)
            return
        if not path.is_dir():
            raise SourceError(f"cannot mine {path}: not a regular file or a directory")
        for found in _walk(path):
            if isinstance(found, Skipped):
                yield found
                continue
            rel = found.relative_to(path).as_posix()
            parts = rel.split("/")
            yield self._entry(found, rel, parts[0] if len(parts) > 1 else DEFAULT_ROOM)

    def _entry(self, path: Path, key: str, room: str) -> SourceEntry | Skipped:
        stat = path.stat()
        if stat.st_size > self._limit:
            return Skipped(str(path), f"{stat.st_size} bytes, over the {self._limit}-byte limit")
        return SourceEntry(
            key=key,
            location=str(path),
            mtime=stat.st_mtime,
            read=lambda: self.read(path, room=room),
        )

    # -- reading ------------------------------------------------------------------------

    def read(self, path: Path, *, room: str = DEFAULT_ROOM) -> SourceDocument:
        """The document at ``path``, converted and cut into segments.

        Raises:
            SourceError: the file cannot be read or converted, or holds no text.
        """
        kind = FORMATS.get(path.suffix.lower())
        if kind is None:
            raise SourceError(f"{path} is not one of {', '.join(sorted(FORMATS))}")
        data = self._bytes(path)
        markdown, title = self._convert(data, path, kind)
        text, parts = split(kind, markdown)
        segments: list[Segment] = []
        for part in parts:
            body = text[part.start : part.end]
            first_line = text.count("\n", 0, part.start)
            for chunk in chunk_text(body, size=self._size, overlap=self._overlap):
                segments.append(
                    Segment(
                        text=chunk.text,
                        line_start=first_line + chunk.line_start,
                        line_end=first_line + chunk.line_end,
                        metadata=dict(part.label),
                    )
                )
        if not segments:
            hint = " (a scanned PDF needs OCR first)" if kind == "pdf" else ""
            raise SourceError(f"no text found in {path}{hint}")
        metadata: dict[str, Any] = {"file_name": path.name, "format": kind}
        if title and title.strip():
            metadata["title"] = title.strip()
        return SourceDocument(
            text=text,
            content_hash=content_hash(data),
            room=room,
            content_date=datetime.fromtimestamp(path.stat().st_mtime, UTC),
            metadata=metadata,
            segments=tuple(segments),
        )

    def _bytes(self, path: Path) -> bytes:
        try:
            with path.open("rb") as stream:
                data = stream.read(self._limit + 1)
        except OSError as exc:
            raise SourceError(f"cannot read {path}: {exc.strerror or exc}") from None
        if len(data) > self._limit:
            raise SourceError(f"{path} is over the {self._limit}-byte limit")
        return data

    def _convert(self, data: bytes, path: Path, kind: str) -> tuple[str, str | None]:
        info = StreamInfo(
            extension=path.suffix.lower(), filename=path.name, mimetype=MIME_TYPES[kind]
        )
        try:
            result = self.converter.convert_stream(io.BytesIO(data), stream_info=info)
        except MarkItDownException as exc:
            reason = str(exc).strip().splitlines()
            detail = " ".join(line.strip(" -") for line in reason[1:2]) or (
                reason[0] if reason else type(exc).__name__
            )
            raise SourceError(f"cannot convert {path} ({kind}): {detail}") from None
        return result.markdown, result.title

    @property
    def converter(self) -> MarkItDown:
        """markitdown with only the converters of :data:`FORMATS` (built on first use).

        Nothing else is enabled: no markitdown plugin, no plain-text fallback, so that a
        corrupt file is an error rather than its raw bytes filed as text.
        """
        with self._lock:
            if self._converter is None:
                converter = MarkItDown(enable_builtins=False, enable_plugins=False)
                # Three of markitdown's converter constructors are not annotated.
                for each in (
                    PdfConverter(),
                    DocxConverter(),  # type: ignore[no-untyped-call]
                    PptxConverter(),  # type: ignore[no-untyped-call]
                    XlsxConverter(),  # type: ignore[no-untyped-call]
                    HtmlConverter(),
                ):
                    converter.register_converter(each)
                self._converter = converter
            return self._converter


def _walk(root: Path) -> Iterator[Path | Skipped]:
    """The documents under ``root``, sorted; hidden files and folders and Office lock
    files (``~$report.docx``) left out."""
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if name.startswith((".", "~$")) or Path(name).suffix.lower() not in FORMATS:
                continue
            file = Path(folder) / name
            if file.is_symlink() or not file.is_file():
                yield Skipped(str(file), "not a regular file")
            else:
                yield file
